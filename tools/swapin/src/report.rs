// SPDX-License-Identifier: Apache-2.0 OR MIT
//! swapin's output: each interval's swap-ins per process in BCC's table (or JSON lines), and the cumulative
//! counts per process name as Prometheus counters.
//!
//! The kernel's counts per (PID, task name) only grow; [`Report`] subtracts the previous read, so nothing counted
//! between two reads is lost, and keeps what the processes that exited had counted (their map entries are then
//! deleted), so that no exported counter ever goes back.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use anyhow::Result;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::swapin_key;

/// What BCC prints once attached.
pub fn write_banner(out: &mut Output) -> Result<()> {
    writeln!(out, "Counting swap ins. Ctrl-C to end.")?;
    out.flush()?;
    Ok(())
}

/// One process's swap-ins in one interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Row {
    pid: u32,
    comm: Name,
    /// Pages swapped in.
    count: u64,
}

#[derive(Serialize)]
struct JsonInterval<'a> {
    time: String,
    /// Pages swapped in by all the processes listed.
    total: u64,
    processes: &'a [Row],
}

/// The state kept from one read to the next.
pub struct Report {
    json: bool,
    clock: bool,
    /// Each (PID, name)'s count at the previous read.
    previous: HashMap<(u32, Name), u64>,
    /// Pages counted by processes that have exited (their entries deleted), per name, for the counters.
    retired: BTreeMap<Name, u64>,
}

impl Report {
    pub fn new(json: bool, clock: bool) -> Self {
        Report { json, clock, previous: HashMap::new(), retired: BTreeMap::new() }
    }

    /// This interval's rows, from the cumulative `totals`: the processes that gained, fewest pages first (BCC's
    /// order), then by PID and name.
    fn interval(&mut self, totals: &[(swapin_key, u64)]) -> Vec<Row> {
        let mut rows = Vec::new();
        for (key, total) in totals {
            let id = (key.pid, Name::from_c(&key.comm));
            let before = self.previous.insert(id.clone(), *total).unwrap_or(0);
            if *total > before {
                rows.push(Row { pid: id.0, comm: id.1, count: total - before });
            }
        }
        rows.sort_by(|a, b| a.count.cmp(&b.count).then(a.pid.cmp(&b.pid)).then(a.comm.cmp(&b.comm)));
        rows
    }

    /// Prints one interval given the cumulative `totals`; `last` adds BCC's `Detaching...`.
    pub fn write(&mut self, out: &mut Output, totals: &[(swapin_key, u64)], last: bool) -> Result<()> {
        let rows = self.interval(totals);
        if self.json {
            let total = rows.iter().map(|r| r.count).sum();
            out.json_line(&JsonInterval { time: clock_rfc3339(), total, processes: &rows })?;
            return Ok(());
        }
        if self.clock {
            writeln!(out, "{}", clock_hms())?;
        }
        writeln!(out, "{:<16} {:<7} COUNT", "COMM", "PID")?;
        for row in &rows {
            writeln!(out, "{:<16} {:<7} {}", row.comm, row.pid, row.count)?;
        }
        writeln!(out)?;
        if last {
            writeln!(out, "Detaching...")?;
        }
        out.flush()?;
        Ok(())
    }

    /// The keys of `totals` whose process has exited: their counts are final (already reported, and kept here
    /// for the counters), for the caller to delete from the kernel's map.
    pub fn exited(&mut self, totals: &[(swapin_key, u64)]) -> Vec<swapin_key> {
        let mut gone = Vec::new();
        for (key, total) in totals {
            if std::path::Path::new(&format!("/proc/{}", key.pid)).exists() {
                continue;
            }
            let comm = Name::from_c(&key.comm);
            self.previous.remove(&(key.pid, comm.clone()));
            *self.retired.entry(comm).or_default() += total;
            gone.push(*key);
        }
        gone
    }

    /// `--prometheus`: pages swapped in so far per process name, `corebpf_swapin_pages_total{comm}`, the live
    /// processes' counts plus those of the exited ones.
    pub fn metrics(&self, s: &mut common::output::metrics::Snapshot, totals: &[(swapin_key, u64)]) {
        const HELP: &str = "Pages swapped in, by the name of the task that needed them";
        s.declare_counter("pages", HELP, &["comm"]);
        let mut by_comm = self.retired.clone();
        for (key, total) in totals {
            *by_comm.entry(Name::from_c(&key.comm)).or_default() += total;
        }
        for (comm, pages) in by_comm {
            s.counter("pages", HELP, &["comm"], vec![comm.text().into_owned()], pages);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pid: u32, comm: &str) -> swapin_key {
        let mut k = swapin_key { pid, ..Default::default() };
        for (d, s) in k.comm.iter_mut().zip(comm.bytes()) {
            *d = s as _;
        }
        k
    }

    #[test]
    fn intervals_are_gains_fewest_first() {
        let mut r = Report::new(false, false);
        let rows = r.interval(&[(key(10, "a"), 5), (key(11, "b"), 2), (key(12, "c"), 0)]);
        let got: Vec<(u32, u64)> = rows.iter().map(|r| (r.pid, r.count)).collect();
        assert_eq!(got, [(11, 2), (10, 5)]);
        let rows = r.interval(&[(key(10, "a"), 5), (key(11, "b"), 9)]);
        let got: Vec<(u32, String, u64)> = rows.iter().map(|r| (r.pid, r.comm.shown(), r.count)).collect();
        assert_eq!(got, [(11, "b".to_string(), 7)]);
    }
}
