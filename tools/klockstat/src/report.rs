// SPDX-License-Identifier: Apache-2.0 OR MIT
//! klockstat's output: libbpf-tools' two tables (waits, then holds) of callers or threads, sorted as -S says,
//! or one JSON line per caller or thread; and the parsing of -S and -L.
//!
//! The kernel keeps one entry per kernel stack; the caller is the first frame outside the lock functions and the
//! tracing machinery, and entries whose printed frames are the same (the caller, and -s more frames) are added
//! up into one row.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::OnceLock;

use anyhow::{bail, Result};
use common::attach::maps::hash_entries;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use common::process::symbols::{Batch, Symbolizer};
use common::stacks::tracing_frames::is_tracing_frame;
use common::stacks::{Collected, Stack, StackTraces};
use libbpf_rs::MapCore;
use serde::Serialize;

use crate::bpf::types::{lock_stat, lock_times};
use crate::bpf::BpfSkel;

// SAFETY: #[repr(C)] structs of integers and char arrays, generated from klockstat.h.
unsafe impl plain::Plain for lock_stat {}

/// What each table is sorted by (largest first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Field {
    #[default]
    Max,
    Total,
    Count,
}

/// -S: the wait table's and the hold table's order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sort {
    pub acq: Field,
    pub hld: Field,
}

/// -S acq_FIELD[,hld_FIELD] (either order, either alone).
pub fn parse_sort(s: &str) -> Result<Sort, String> {
    let mut sort = Sort::default();
    for part in s.split(',') {
        let (table, field) = part.split_once('_').ok_or_else(|| format!("bad sort field '{part}'"))?;
        let field = match field {
            "max" => Field::Max,
            "total" => Field::Total,
            "count" => Field::Count,
            _ => return Err(format!("bad sort field '{part}': acq_ or hld_ and max, total or count")),
        };
        match table {
            "acq" => sort.acq = field,
            "hld" => sort.hld = field,
            _ => return Err(format!("bad sort field '{part}': acq_ or hld_ and max, total or count")),
        }
    }
    Ok(sort)
}

/// The kernel's symbols by address (exact addresses only: a lock is a variable), read once.
fn kallsyms() -> &'static HashMap<u64, String> {
    static SYMS: OnceLock<HashMap<u64, String>> = OnceLock::new();
    SYMS.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let mut map = HashMap::new();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            if let (Some(addr), Some(_), Some(name)) = (it.next(), it.next(), it.next()) {
                if let Ok(addr) = u64::from_str_radix(addr, 16) {
                    if addr != 0 {
                        map.entry(addr).or_insert_with(|| name.to_string());
                    }
                }
            }
        }
        map
    })
}

/// -L LOCK: a kernel symbol's address, or an address given in hexadecimal (0x...).
pub fn resolve_lock(lock: &str) -> Result<u64> {
    if let Some(hex) = lock.strip_prefix("0x").or_else(|| lock.strip_prefix("0X")) {
        match u64::from_str_radix(hex, 16) {
            Ok(addr) if addr != 0 => return Ok(addr),
            _ => bail!("-L {lock}: not a kernel address"),
        }
    }
    match kallsyms().iter().find(|(_, name)| name.as_str() == lock) {
        Some((&addr, _)) => Ok(addr),
        // Kernel variables are in /proc/kallsyms only with CONFIG_KALLSYMS_ALL.
        None => bail!("-L {lock}: no such kernel symbol in /proc/kallsyms; give the lock's address (0x...) instead"),
    }
}

/// The function names of the lock primitives' own code: the caller is the first frame after them.
const LOCK_PREFIXES: [&str; 13] = [
    "mutex_lock",
    "__mutex_lock",
    "mutex_trylock",
    "__mutex_trylock",
    "mutex_optimistic_spin",
    "down_read",
    "down_write",
    "__down_read",
    "__down_write",
    "rwsem_down_",
    "__rwsem_",
    "rwsem_optimistic_spin",
    "__lock_contended",
];

fn is_lock_primitive(name: &str) -> bool {
    LOCK_PREFIXES.iter().any(|p| name.starts_with(p))
}

fn is_lock_frame(name: &str) -> bool {
    is_tracing_frame(name) || is_lock_primitive(name)
}

/// Where the caller is in a kernel stack (names, innermost first): the first frame after the innermost run of
/// lock primitives. Whatever is inside that run is the tracing machinery, named or not: an fentry program's
/// trampoline is rebuilt whenever another program attaches to the same lock function (a second klockstat, say),
/// so the trampoline address a stack kept may name no symbol, or a wrong one, by the time the stack is printed.
/// A stack without a lock primitive: its first frame that is neither the machinery's nor a lock's.
fn caller_at(names: &[&str]) -> usize {
    match names.iter().position(|n| is_lock_primitive(n)) {
        Some(first) => first + names[first..].iter().take_while(|n| is_lock_frame(n)).count(),
        None => names.iter().position(|n| !is_lock_frame(n)).unwrap_or(0),
    }
}

/// One side (waits or holds) of a row.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Times {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Who had the longest: process, thread, command and lock address.
    pub max_pid: u32,
    pub max_tid: u32,
    pub max_comm: Name,
    pub max_lock: String,
}

impl Times {
    fn add(&mut self, t: &lock_times) {
        self.count += t.count;
        self.total_ns += t.total_ns;
        if t.max_ns > self.max_ns || self.max_comm.is_empty() && t.count > 0 {
            self.max_ns = self.max_ns.max(t.max_ns);
            self.max_pid = (t.max_id >> 32) as u32;
            self.max_tid = t.max_id as u32;
            self.max_comm = Name::from_c(&t.max_comm);
            self.max_lock = format!("0x{:x}", t.max_lock);
        }
    }

    fn avg(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }

    fn key(&self, field: Field) -> u64 {
        match field {
            Field::Max => self.max_ns,
            Field::Total => self.total_ns,
            Field::Count => self.count,
        }
    }
}

/// A caller (its frames) or a thread, with its statistics.
#[derive(Debug, Clone, Default)]
struct Row {
    /// The caller (`function+0xoff`), or `[Missed Kernel Stack]`; with -P, empty.
    caller: String,
    /// The frames after the caller, up to -s in all.
    frames: Vec<String>,
    tid: u32,
    comm: Name,
    wait: Times,
    hold: Times,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    time: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    caller: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stack: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    comm: Option<&'a Name>,
    wait: &'a Times,
    /// None where hold times cannot be measured (the tracepoint paths).
    hold: Option<&'a Times>,
}

/// What every report needs: the options that shape it.
pub struct Report {
    pub sort: Sort,
    pub caller: Option<String>,
    pub locks: u64,
    pub stacks: usize,
    pub per_thread: bool,
    pub reset: bool,
    pub timestamp: bool,
    pub json: bool,
    /// Hold times are known (the lock functions are traced), or why not.
    pub holds: Result<(), String>,
    pub verbose: bool,
    /// Statistics entries whose stack was lost (the stack map was full).
    pub missing: u64,
}

impl Report {
    /// Reads the statistics, prints one report, and with -R removes what it read.
    pub fn write(&mut self, out: &mut Output, skel: &BpfSkel<'_>) -> Result<()> {
        let entries: Vec<(u32, lock_stat)> = hash_entries(&skel.maps.stats)?;
        let rows = if self.per_thread { thread_rows(&entries) } else { self.caller_rows(skel, &entries) };
        if self.reset {
            for (key, _) in &entries {
                let _ = skel.maps.stats.delete(&key.to_ne_bytes());
            }
        }
        let stamp = self.timestamp.then(clock_hms);
        if self.json {
            let time = clock_rfc3339();
            let mut rows = rows;
            rows.sort_by_key(|r| std::cmp::Reverse(r.wait.key(self.sort.acq)));
            for r in rows.iter().take(usize::try_from(self.locks).unwrap_or(usize::MAX)) {
                out.json_line(&JsonRow {
                    time: &time,
                    caller: (!self.per_thread).then_some(r.caller.as_str()),
                    stack: (!self.per_thread && self.stacks > 1).then_some(r.frames.as_slice()),
                    tid: self.per_thread.then_some(r.tid),
                    comm: self.per_thread.then_some(&r.comm),
                    wait: &r.wait,
                    hold: self.holds.is_ok().then_some(&r.hold),
                })?;
            }
            return Ok(());
        }
        writeln!(out)?;
        if let Some(stamp) = &stamp {
            writeln!(out, "{stamp:<8}")?;
        }
        self.write_table(out, &rows, true)?;
        match &self.holds {
            Ok(()) => self.write_table(out, &rows, false)?,
            Err(why) => writeln!(out, "\n{why}")?,
        }
        out.flush()?;
        Ok(())
    }

    fn write_table(&self, out: &mut Output, rows: &[Row], wait: bool) -> Result<()> {
        let times = |r: &Row| if wait { r.wait.clone() } else { r.hold.clone() };
        let field = if wait { self.sort.acq } else { self.sort.hld };
        let mut sorted: Vec<(&Row, Times)> = rows.iter().map(|r| (r, times(r))).filter(|(_, t)| t.count > 0).collect();
        sorted.sort_by_key(|(_, t)| std::cmp::Reverse(t.key(field)));
        let what = if wait { "Wait" } else { "Hold" };
        for (i, (row, t)) in sorted.iter().take(usize::try_from(self.locks).unwrap_or(usize::MAX)).enumerate() {
            if i == 0 || self.stacks > 1 {
                let who = if self.per_thread {
                    "\n                Tid              Comm"
                } else {
                    "\n                               Caller"
                };
                writeln!(out, "{who}  Avg {what}    Count   Max {what}   Total {what}")?;
            }
            let label = if self.per_thread { format!("{}  {:>16}", row.tid, row.comm) } else { row.caller.clone() };
            writeln!(
                out,
                "{label:>37} {:>9} {:>8} {:>10} {:>12}",
                human(t.avg()),
                t.count,
                human(t.max_ns),
                human(t.total_ns)
            )?;
            if !self.per_thread {
                for frame in &row.frames {
                    writeln!(out, "{frame:>37}")?;
                }
                if self.stacks > 1 {
                    let lock = u64::from_str_radix(t.max_lock.trim_start_matches("0x"), 16).unwrap_or(0);
                    let name = kallsyms().get(&lock).map_or("no-ksym", String::as_str);
                    writeln!(
                        out,
                        "                              Max PID {}, COMM {}, Lock {name} ({})",
                        t.max_pid, t.max_comm, t.max_lock
                    )?;
                }
            }
        }
        Ok(())
    }

    /// One row per caller: the stacks named, the caller found, and the entries that print the same added up.
    fn caller_rows(&mut self, skel: &BpfSkel<'_>, entries: &[(u32, lock_stat)]) -> Vec<Row> {
        let mut traces = StackTraces::new(&skel.maps.stackmap, Collected { user: false, kernel: true });
        let stacks: Vec<Stack<u64>> =
            entries.iter().map(|(k, _)| traces.task(0, 0, Name::default(), -1, *k as i32).kernel).collect();
        let mut batch = Batch::new();
        for stack in &stacks {
            if let Stack::Frames(addrs) = stack {
                batch.add_kernel(addrs.iter().enumerate().map(|(i, &a)| common::stacks::symbolize::lookup_addr(i, a)));
            }
        }
        common::process::kptr::warn_if_hidden();
        let resolved = batch.resolve(&Symbolizer::new());
        if self.verbose {
            resolved.report_unresolved();
        }
        let mut rows: BTreeMap<(String, Vec<String>), Row> = BTreeMap::new();
        let mut missing = 0;
        for ((_, ls), stack) in entries.iter().zip(&stacks) {
            let (caller, name, frames) = match stack {
                Stack::Frames(addrs) => {
                    let named: Vec<(String, String)> = addrs
                        .iter()
                        .enumerate()
                        .map(|(i, &a)| match resolved.kernel(common::stacks::symbolize::lookup_addr(i, a)) {
                            Some(sym) => {
                                let off = sym.offset + (a - common::stacks::symbolize::lookup_addr(i, a));
                                (sym.name.clone(), format!("{}+0x{off:x}", sym.name))
                            }
                            None => ("Unknown".to_string(), "Unknown".to_string()),
                        })
                        .collect();
                    let at = caller_at(&named.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>());
                    let Some((name, caller)) = named.get(at).cloned() else { continue };
                    let frames = named.iter().skip(at + 1).take(self.stacks - 1).map(|(_, f)| f.clone()).collect();
                    (caller, name, frames)
                }
                _ => {
                    missing += 1;
                    ("[Missed Kernel Stack]".to_string(), String::new(), Vec::new())
                }
            };
            if let Some(prefix) = &self.caller {
                if name != "Unknown" && !name.starts_with(prefix.as_str()) {
                    continue;
                }
            }
            let row = rows.entry((caller.clone(), frames.clone())).or_insert_with(|| Row {
                caller,
                frames,
                ..Row::default()
            });
            add(row, ls);
        }
        // Entries stay from report to report (unless -R): the most seen at once, not their sum.
        self.missing = if self.reset { self.missing + missing } else { self.missing.max(missing) };
        rows.into_values().collect()
    }

    /// `--prometheus`: the cumulative waits and holds per calling function (the offset dropped, so that one
    /// function's call sites add up and series stay the same across kernel builds), or per command with -P:
    /// `corebpf_klockstat_waits_total`, `corebpf_klockstat_wait_seconds_total`, and where hold times are known
    /// `corebpf_klockstat_holds_total`, `corebpf_klockstat_hold_seconds_total`.
    pub fn metrics(&mut self, s: &mut common::output::metrics::Snapshot, skel: &BpfSkel<'_>) -> Result<()> {
        let entries: Vec<(u32, lock_stat)> = hash_entries(&skel.maps.stats)?;
        let rows = if self.per_thread { thread_rows(&entries) } else { self.caller_rows(skel, &entries) };
        let labels: &[&'static str] = if self.per_thread { &["comm"] } else { &["caller"] };
        let sides: &[(&str, &str, bool)] = &[
            ("wait", "Waits for a kernel mutex or rw-semaphore", true),
            ("hold", "Times a kernel mutex or rw-semaphore was held", self.holds.is_ok()),
        ];
        for &(side, help, known) in sides.iter().filter(|(_, _, known)| *known) {
            let count_help = format!("{help}, counted");
            let time_help = format!("{help}: the time, summed");
            s.declare_counter(&format!("{side}s"), &count_help, labels);
            s.declare_counter_seconds(side, &time_help, labels);
            for row in rows.iter().filter(|_| known) {
                let t = if side == "wait" { &row.wait } else { &row.hold };
                let who = if self.per_thread {
                    row.comm.text().into_owned()
                } else {
                    row.caller.split_once("+0x").map_or(row.caller.as_str(), |(f, _)| f).to_string()
                };
                s.counter(&format!("{side}s"), &count_help, labels, vec![who.clone()], t.count);
                s.counter_seconds(side, &time_help, labels, vec![who], t.total_ns as f64 / 1e9);
            }
        }
        Ok(())
    }

    pub fn warn_missing(&self) {
        if self.missing > 0 {
            eprintln!("WARNING: {} stack traces lost and could not be displayed.", self.missing);
        }
    }
}

fn add(row: &mut Row, ls: &lock_stat) {
    row.wait.add(&ls.acq);
    row.hold.add(&ls.hld);
}

/// With -P, one row per thread (the kernel keys by TID; the command is the thread's when first seen).
fn thread_rows(entries: &[(u32, lock_stat)]) -> Vec<Row> {
    entries
        .iter()
        .map(|(tid, ls)| {
            let mut row = Row { tid: *tid, comm: Name::from_c(&ls.comm), ..Row::default() };
            add(&mut row, ls);
            row
        })
        .collect()
}

/// A time as libbpf-tools prints it: one decimal in the largest unit it reaches (h, m, s, ms, us), else ns.
pub fn human(ns: u64) -> String {
    const UNITS: [(f64, &str); 5] = [(3600e9, "h "), (60e9, "m "), (1e9, "s "), (1e6, "ms"), (1e3, "us")];
    for (base, unit) in UNITS {
        if ns as f64 >= base {
            return format!("{:.1} {unit}", ns as f64 / base);
        }
    }
    format!("{ns} ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_parse_in_any_order() {
        assert_eq!(parse_sort("acq_count,hld_total"), Ok(Sort { acq: Field::Count, hld: Field::Total }));
        assert_eq!(parse_sort("hld_count"), Ok(Sort { acq: Field::Max, hld: Field::Count }));
        assert!(parse_sort("acq_min").is_err());
        assert!(parse_sort("foo").is_err());
    }

    #[test]
    fn times_in_libbpf_units() {
        assert_eq!(human(999), "999 ns");
        assert_eq!(human(1500), "1.5 us");
        assert_eq!(human(2_000_000), "2.0 ms");
        assert_eq!(human(90_000_000_000), "1.5 m ");
    }

    #[test]
    fn lock_frames_are_skipped() {
        assert!(is_lock_frame("__mutex_lock.constprop.0"));
        assert!(is_lock_frame("rwsem_down_write_slowpath"));
        assert!(is_lock_frame("bpf_trampoline_6442"));
        assert!(!is_lock_frame("anon_pipe_write"));
    }

    #[test]
    fn the_caller_follows_the_innermost_lock_primitives() {
        // fentry: the program, its trampoline, the lock function's return address, the caller.
        assert_eq!(caller_at(&["bpf_prog_1_x", "bpf_trampoline_1", "mutex_lock", "pipe_write", "vfs_write"]), 3);
        // A trampoline rebuilt since the stack was taken: its old address names nothing, or some other function.
        assert_eq!(caller_at(&["Unknown", "mutex_lock", "anon_pipe_write", "vfs_write"]), 2);
        assert_eq!(caller_at(&["ext4_read_folio", "mutex_lock", "pipe_write"]), 2);
        // The contention tracepoint, inside the slow path.
        let tp =
            ["bpf_prog_1_x", "__bpf_trace_contention_begin", "__mutex_lock.constprop.0", "mutex_lock", "pipe_write"];
        assert_eq!(caller_at(&tp), 4);
        // No lock primitive in the stack: the first frame that is not the machinery's.
        assert_eq!(caller_at(&["bpf_trampoline_1", "pipe_write"]), 1);
    }
}
