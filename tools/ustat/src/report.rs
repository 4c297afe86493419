// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ustat's output: BCC's screen (the top of common::output::topscreen, then `PID CMDLINE METHOD/s GC/s OBJNEW/s
//! CLOAD/s EXC/s THR/s`, one row per traced process, by PID or by the `-S` column, at most `-r` rows), or one JSON
//! object per process per interval with the interval's exact counts.

use std::cmp::Ordering;
use std::time::Duration;

use common::output::topscreen::TopRow;
use serde::Serialize;

use crate::bpf::consts::{CAT_CLOAD, CAT_EXCP, CAT_GC, CAT_METHOD, CAT_OBJNEW, CAT_THREAD, NCATS};
use crate::targets::Target;
use crate::SortKey;

/// The number of columns of counts.
pub const COLUMNS: usize = NCATS;

/// One process over one interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub pid: u32,
    /// The process ended during the interval (or before the report): this is its last row.
    pub exited: bool,
    pub cmdline: String,
    pub language: &'static str,
    /// How long the interval lasted (the last one may be cut short by Ctrl-C).
    pub interval_ns: u64,
    pub method: u64,
    pub gc: u64,
    pub objnew: u64,
    pub cload: u64,
    pub excp: u64,
    pub thread: u64,
}

impl Row {
    /// The row of `target` with `delta`, its events in an interval of `length`.
    pub fn new(target: &Target, delta: [u64; COLUMNS], length: Duration, exited: bool) -> Row {
        let at = |column: usize| delta[column];
        Row {
            pid: target.pid,
            cmdline: target.cmdline.clone(),
            language: target.language.name(),
            interval_ns: u64::try_from(length.as_nanos()).unwrap_or(u64::MAX),
            method: at(CAT_METHOD),
            gc: at(CAT_GC),
            objnew: at(CAT_OBJNEW),
            cload: at(CAT_CLOAD),
            excp: at(CAT_EXCP),
            thread: at(CAT_THREAD),
            exited,
        }
    }

    /// `count` per second over the interval, cut to a whole number as BCC prints it.
    fn rate(&self, count: u64) -> u64 {
        if self.interval_ns == 0 {
            return count;
        }
        (u128::from(count) * 1_000_000_000 / u128::from(self.interval_ns)) as u64
    }

    fn column(&self, key: SortKey) -> u64 {
        match key {
            SortKey::Cload => self.cload,
            SortKey::Excp => self.excp,
            SortKey::Gc => self.gc,
            SortKey::Method => self.method,
            SortKey::Objnew => self.objnew,
            SortKey::Thread => self.thread,
        }
    }
}

impl TopRow for Row {
    type Sort = Option<SortKey>;

    fn header() -> String {
        format!(
            "{:<6} {:<20} {:<10} {:<6} {:<10} {:<8} {:<6} {:<6}",
            "PID", "CMDLINE", "METHOD/s", "GC/s", "OBJNEW/s", "CLOAD/s", "EXC/s", "THR/s"
        )
    }

    fn line(&self) -> String {
        // BCC shows the first 20 characters of the command line, NUL bytes turned to spaces (and so a trailing one).
        let cmdline: String = format!("{} ", self.cmdline).chars().take(20).collect();
        format!(
            "{:<6} {:<20} {:<10} {:<6} {:<10} {:<8} {:<6} {:<6}",
            self.pid,
            cmdline,
            self.rate(self.method),
            self.rate(self.gc),
            self.rate(self.objnew),
            self.rate(self.cload),
            self.rate(self.excp),
            self.rate(self.thread)
        )
    }

    /// By PID; with -S, by that column, largest first, ties by PID.
    fn order(&self, other: &Self, sort: Option<SortKey>) -> Ordering {
        let by_pid = self.pid.cmp(&other.pid);
        match sort {
            None => by_pid,
            Some(key) => other.column(key).cmp(&self.column(key)).then(by_pid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::output::topscreen::Screen;

    fn row(pid: u32, cmdline: &str, method: u64, gc: u64, interval_s: u64) -> Row {
        Row {
            pid,
            cmdline: cmdline.into(),
            language: "java",
            interval_ns: interval_s * 1_000_000_000,
            method,
            gc,
            objnew: 0,
            cload: 0,
            excp: 0,
            thread: 0,
            exited: false,
        }
    }

    #[test]
    fn bcc_columns_rates_and_cut_command_lines() {
        let screen = Screen { clear: false, sort: None, rows: 20 };
        let rows = vec![row(26439, "java -XX:+ExtendedDTraceProbes Main", 13880225, 0, 5), row(3018, "node", 0, 7, 2)];
        let want = "\
PID    CMDLINE              METHOD/s   GC/s   OBJNEW/s   CLOAD/s  EXC/s  THR/s 
3018   node                 0          3      0          0        0      0     
26439  java -XX:+ExtendedDT 2776045    0      0          0        0      0     
";
        assert_eq!(screen.table(rows), want);
    }

    #[test]
    fn sorted_by_a_column_then_pid_and_cut_to_maxrows() {
        let rows = || vec![row(3, "a", 5, 1, 1), row(1, "b", 9, 1, 1), row(2, "c", 5, 2, 1)];
        let pids = |sort, n| {
            let t = Screen { clear: false, sort, rows: n }.table(rows());
            t.lines().skip(1).map(|l| l.split_whitespace().next().unwrap().to_string()).collect::<Vec<_>>().join(",")
        };
        assert_eq!(pids(None, 20), "1,2,3");
        assert_eq!(pids(Some(SortKey::Method), 20), "1,2,3");
        assert_eq!(pids(Some(SortKey::Gc), 20), "2,1,3");
        assert_eq!(pids(Some(SortKey::Gc), 2), "2,1");
    }
}
