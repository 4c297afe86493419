// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biotop's output: BCC's screen (the top of common::output::topscreen, then `PID COMM D MAJ MIN DISK I/O Kbytes
//! AVGms`, sorted, at most -r rows) or one JSON object per row per interval.

use common::domain::blockdev::{kernel_dev, Disks, RqOps};
use common::output::name::Name;
use common::output::stdout::Output;
use common::output::topscreen;
use serde::Serialize;

use crate::bpf::types::{io_key, io_stat};
use crate::Sort;

/// The kernel device number of a row's disk.
pub fn dev(k: &io_key) -> u32 {
    kernel_dev(k.major, k.minor)
}

/// One process's requests to one disk in one direction, over one interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub pid: u32,
    pub comm: Name,
    /// The request type: `R` or `W` as BCC's D column, or the type of a request that moves no data (`D`
    /// discard, `F` flush, `Z` write-zeroes, ...: common::domain::blockdev::RqOp::letter), kept out of R and W.
    pub rw: &'static str,
    pub major: u32,
    pub minor: u32,
    pub disk: String,
    pub io: u64,
    pub bytes: u64,
    /// Issue to completion, summed over the requests.
    pub time_ns: u64,
}

impl Row {
    /// The row of `key` with what was added since `earlier`.
    pub fn new(key: &io_key, now: &io_stat, earlier: &io_stat, disks: &Disks, ops: &RqOps) -> Row {
        Row {
            pid: key.pid,
            comm: Name::from_c(&key.comm),
            rw: ops.of(key.op as u64).letter(),
            major: key.major,
            minor: key.minor,
            disk: disks.name(dev(key)).to_string(),
            io: now.io.saturating_sub(earlier.io),
            bytes: now.bytes.saturating_sub(earlier.bytes),
            time_ns: now.ns.saturating_sub(earlier.ns),
        }
    }

    /// Average milliseconds from issue to completion.
    pub fn avg_ms(&self) -> f64 {
        if self.io == 0 {
            return 0.0;
        }
        self.time_ns as f64 / 1e6 / self.io as f64
    }

    fn sort_key(&self, sort: Sort) -> u64 {
        match sort {
            Sort::Io => self.io,
            Sort::Bytes => self.bytes,
            Sort::Time => self.time_ns,
            // libbpf-tools adds the three as they are (its time in microseconds).
            Sort::All => self.io + self.bytes + self.time_ns / 1000,
        }
    }
}

impl topscreen::TopRow for Row {
    type Sort = Sort;

    fn header() -> String {
        format!(
            "{:<7} {:<16} {:1} {:<3} {:<3} {:<8} {:>5} {:>7} {:>6}",
            "PID", "COMM", "D", "MAJ", "MIN", "DISK", "I/O", "Kbytes", "AVGms"
        )
    }

    fn line(&self) -> String {
        let r = self;
        format!(
            "{:<7} {:<16} {:1} {:<3} {:<3} {:<8} {:>5} {:>7} {:>6.2}",
            r.pid,
            r.comm,
            r.rw,
            r.major,
            r.minor,
            r.disk,
            r.io,
            r.bytes / 1024,
            r.avg_ms()
        )
    }

    /// Largest first by the sort key, then by PID and direction.
    fn order(&self, other: &Self, sort: Sort) -> std::cmp::Ordering {
        other.sort_key(sort).cmp(&self.sort_key(sort)).then(self.pid.cmp(&other.pid)).then(self.rw.cmp(other.rw))
    }
}

/// One JSON line per row with requests in the interval, with its average time.
pub fn write_json(out: &mut Output, rows: &[Row]) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct WithAverage<'a> {
        #[serde(flatten)]
        row: &'a Row,
        avg_ms: f64,
    }
    topscreen::write_json(out, rows.iter().map(|row| WithAverage { row, avg_ms: row.avg_ms() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::output::topscreen::Screen;

    fn row(pid: u32, rw: &'static str, io: u64, bytes: u64, time_ns: u64) -> Row {
        Row { pid, comm: "dd".into(), rw, major: 254, minor: 0, disk: "vda".into(), io, bytes, time_ns }
    }

    #[test]
    fn bcc_columns_by_bytes() {
        let screen = Screen { clear: false, sort: Sort::Bytes, rows: 20 };
        let t = screen.table(vec![row(7, "W", 3, 8192, 3_000_000), row(12345, "R", 1628, 13024 * 1024, 963_000_000)]);
        let want = "\
PID     COMM             D MAJ MIN DISK       I/O  Kbytes  AVGms
12345   dd               R 254 0   vda       1628   13024   0.59
7       dd               W 254 0   vda          3       8   1.00
";
        assert_eq!(t, want);
    }

    #[test]
    fn sort_orders_and_row_limit() {
        let rows = || vec![row(1, "R", 10, 4096, 1), row(2, "R", 1, 1 << 20, 2), row(3, "W", 2, 8192, 9_000_000_000)];
        let first = |sort, n| {
            let t = Screen { clear: false, sort, rows: n }.table(rows());
            let pids: Vec<String> =
                t.lines().skip(1).map(|l| l.split_whitespace().next().unwrap().to_string()).collect();
            pids.join(",")
        };
        assert_eq!(first(Sort::Io, 20), "1,3,2");
        assert_eq!(first(Sort::Bytes, 20), "2,3,1");
        assert_eq!(first(Sort::Time, 20), "3,2,1");
        assert_eq!(first(Sort::All, 20), "3,2,1");
        assert_eq!(first(Sort::Bytes, 1), "2");
    }
}
