// SPDX-License-Identifier: Apache-2.0 OR MIT
//! syscount's output: each interval's top syscalls (or processes, `-P`) in BCC's layout, or as JSON lines.
//!
//! The BPF side keeps cumulative counts; [`Report`] subtracts the previous read, so no call made between two
//! reads is lost, and prints the interval's entries sorted by count (by time with `-L`), the top `-T` of them,
//! as BCC's `tools/syscount.py` does after clearing its map.

use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;
use common::attach::maps::c_string;
use common::domain::container_names::PidContainers;
use common::domain::syscalls;
use common::output::stdout::{clock_hms, clock_rfc3339, printable, Output};
use serde::Serialize;

use crate::bpf::types::{proc_stat, sys_stat};

// SAFETY: plain #[repr(C)] structs of integers and bytes, valid for any bit pattern.
unsafe impl plain::Plain for proc_stat {}
unsafe impl plain::Plain for sys_stat {}

/// One read of the kernel's cumulative counts.
pub enum Totals {
    /// (syscall number, calls, total ns).
    Syscalls(Vec<(u32, u64, u64)>),
    /// (PID, its counts and name).
    Processes(Vec<(u32, proc_stat)>),
}

/// One row of an interval: a syscall or a process.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    key: u32,
    /// The syscall's name, or the process's comm.
    name: String,
    count: u64,
    total_ns: u64,
}

/// One interval as a JSON line.
#[derive(Serialize)]
struct JsonInterval {
    time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    syscalls: Option<Vec<JsonSyscall>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    processes: Option<Vec<JsonProcess>>,
}

#[derive(Serialize)]
struct JsonSyscall {
    syscall: String,
    id: u32,
    count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_ns: Option<u64>,
}

#[derive(Serialize)]
struct JsonProcess {
    pid: u32,
    comm: String,
    count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_ns: Option<u64>,
}

/// The interval-to-interval state of the report.
pub struct Report {
    by_process: bool,
    latency: bool,
    millis: bool,
    top: usize,
    json: bool,
    /// Cumulative (calls, ns) per key at the previous read.
    previous: HashMap<u32, (u64, u64)>,
}

impl Report {
    pub fn new(by_process: bool, latency: bool, millis: bool, top: usize, json: bool) -> Self {
        Report { by_process, latency, millis, top, json, previous: HashMap::new() }
    }

    /// This interval's rows from the cumulative `totals`, sorted as BCC sorts them, the top ones only; updates
    /// the previous read.
    fn interval(&mut self, totals: Totals) -> Vec<Row> {
        let rows: Vec<Row> = match totals {
            Totals::Syscalls(list) => list
                .into_iter()
                .map(|(nr, count, total_ns)| Row { key: nr, name: syscalls::display_name(nr), count, total_ns })
                .collect(),
            Totals::Processes(list) => list
                .into_iter()
                .map(|(pid, stat)| Row {
                    key: pid,
                    name: comm_of(pid, &stat),
                    count: stat.count,
                    total_ns: stat.total_ns,
                })
                .collect(),
        };
        let mut out = Vec::new();
        for row in rows {
            let (count, ns) = self.previous.insert(row.key, (row.count, row.total_ns)).unwrap_or((0, 0));
            let diff = Row { count: row.count.saturating_sub(count), total_ns: row.total_ns.saturating_sub(ns), ..row };
            if diff.count > 0 {
                out.push(diff);
            }
        }
        if self.latency {
            out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)).then(a.key.cmp(&b.key)));
        } else {
            out.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)).then(a.key.cmp(&b.key)));
        }
        out.truncate(self.top);
        out
    }

    /// `--prometheus`: the cumulative counts as `corebpf_syscount_syscalls_total` labelled `syscall` (or `pid` and
    /// `comm` with -P, and `container` with --container-label) and, with -L, their time as
    /// `corebpf_syscount_syscall_time_seconds_total`. With -P the exited processes stay in the map, so no counter
    /// goes back.
    pub fn metrics(
        &self,
        s: &mut common::output::metrics::Snapshot,
        totals: Totals,
        mut containers: Option<&mut PidContainers>,
    ) {
        const CALLS: &str = "System calls that returned";
        const TIME: &str = "Time spent in the system calls, from entry to return";
        let labels: &[&'static str] = match (self.by_process, containers.is_some()) {
            (true, true) => &["pid", "comm", PidContainers::LABEL],
            (true, false) => &["pid", "comm"],
            _ => &["syscall"],
        };
        s.declare_counter("syscalls", CALLS, labels);
        if self.latency {
            s.declare_counter_seconds("syscall_time", TIME, labels);
        }
        let rows: Vec<(Vec<String>, u64, u64)> = match totals {
            Totals::Syscalls(list) => {
                list.into_iter().map(|(nr, count, ns)| (vec![syscalls::display_name(nr)], count, ns)).collect()
            }
            Totals::Processes(list) => list
                .into_iter()
                .map(|(pid, stat)| {
                    let mut values = vec![pid.to_string(), comm_of(pid, &stat)];
                    values.extend(containers.as_deref_mut().map(|c| c.label(pid)));
                    (values, stat.count, stat.total_ns)
                })
                .collect(),
        };
        for (values, count, ns) in rows {
            s.counter("syscalls", CALLS, labels, values.clone(), count);
            if self.latency {
                s.counter_seconds("syscall_time", TIME, labels, values, ns as f64 / 1e9);
            }
        }
    }

    /// The PIDs counted so far whose process has exited (their counts are final and reported); forgotten here,
    /// for the caller to delete from the kernel map.
    pub fn exited(&mut self) -> Vec<u32> {
        let gone: Vec<u32> = self
            .previous
            .keys()
            .copied()
            .filter(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
            .collect();
        for pid in &gone {
            self.previous.remove(pid);
        }
        gone
    }

    /// Prints one interval given the cumulative `totals`; `last` adds BCC's `Detaching...`.
    pub fn write(&mut self, out: &mut Output, totals: Totals, last: bool) -> Result<()> {
        let rows = self.interval(totals);
        if self.json {
            return self.write_json(out, rows);
        }
        let agg = if self.by_process { "PID    COMM" } else { "SYSCALL" };
        writeln!(out, "[{}]", clock_hms())?;
        if self.latency {
            let unit = if self.millis { "TIME (ms)" } else { "TIME (us)" };
            writeln!(out, "{agg:<22} {:>8} {unit:>16}", "COUNT")?;
        } else {
            writeln!(out, "{agg:<22} {:>8}", "COUNT")?;
        }
        for row in &rows {
            let label = self.label(row);
            if !self.latency {
                writeln!(out, "{label:<22} {:>8}", row.count)?;
            } else if self.millis {
                writeln!(out, "{label:<22} {:>8} {:>16.6}", row.count, row.total_ns as f64 / 1e6)?;
            } else {
                writeln!(out, "{label:<22} {:>8} {:>16.3}", row.count, row.total_ns as f64 / 1e3)?;
            }
        }
        writeln!(out)?;
        if last {
            writeln!(out, "Detaching...")?;
        }
        out.flush()?;
        Ok(())
    }

    /// The first column: the syscall's name, or BCC's `PID    COMM` pair (the command escaped: [`printable`]).
    fn label(&self, row: &Row) -> String {
        if self.by_process {
            format!("{:<6} {:<15}", row.key, printable(row.name.as_bytes()))
        } else {
            row.name.clone()
        }
    }

    fn write_json(&self, out: &mut Output, rows: Vec<Row>) -> Result<()> {
        let total = |ns: u64| self.latency.then_some(ns);
        let mut line = JsonInterval { time: clock_rfc3339(), syscalls: None, processes: None };
        if self.by_process {
            line.processes = Some(
                rows.into_iter()
                    .map(|r| JsonProcess { pid: r.key, comm: r.name, count: r.count, total_ns: total(r.total_ns) })
                    .collect(),
            );
        } else {
            line.syscalls = Some(
                rows.into_iter()
                    .map(|r| JsonSyscall { syscall: r.name, id: r.key, count: r.count, total_ns: total(r.total_ns) })
                    .collect(),
            );
        }
        out.json_line(&line)?;
        Ok(())
    }
}

/// The process's name now (`/proc/PID/comm`, as BCC reads it), else the one the BPF side saw at its first call
/// or its last exec.
fn comm_of(pid: u32, stat: &proc_stat) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end_matches('\n').to_string())
        .unwrap_or_else(|_| c_string(&stat.comm))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_differences_sorted_by_count_then_top() {
        let mut r = Report::new(false, false, false, 2, false);
        let rows = r.interval(Totals::Syscalls(vec![(0, 5, 0), (1, 9, 0), (39, 1, 0)]));
        let names: Vec<(&str, u64)> = rows.iter().map(|r| (r.name.as_str(), r.count)).collect();
        #[cfg(target_arch = "x86_64")]
        assert_eq!(names, [("write", 9), ("read", 5)]);
        assert_eq!(names.len(), 2);
        let rows = r.interval(Totals::Syscalls(vec![(0, 5, 0), (1, 10, 0), (39, 4, 0)]));
        let counts: Vec<(u32, u64)> = rows.iter().map(|r| (r.key, r.count)).collect();
        assert_eq!(counts, [(39, 3), (1, 1)]);
    }

    #[test]
    fn latency_sorts_by_time() {
        let mut r = Report::new(false, true, false, 10, false);
        let rows = r.interval(Totals::Syscalls(vec![(0, 5, 100), (1, 1, 1000), (2000, 1, 1)]));
        let keys: Vec<u32> = rows.iter().map(|r| r.key).collect();
        assert_eq!(keys, [1, 0, 2000]);
        assert_eq!(rows[2].name, "[unknown: 2000]");
    }
}
