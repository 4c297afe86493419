// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biopattern's output: libbpf-tools' columns (`DISK %RND %SEQ COUNT KBYTES`, with `TIME` first under -T), or
//! one JSON object per disk per report.

use std::io::Write;

use anyhow::Result;
use common::domain::blockdev::Disks;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

/// A disk's counts, cumulative or over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub random: u64,
    pub sequential: u64,
    pub bytes: u64,
}

impl Counts {
    /// What was added since `earlier`.
    pub fn since(self, earlier: Counts) -> Counts {
        Counts {
            random: self.random.saturating_sub(earlier.random),
            sequential: self.sequential.saturating_sub(earlier.sequential),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }

    pub fn total(&self) -> u64 {
        self.random + self.sequential
    }

    /// Whole percentages, each rounded down as libbpf-tools does (they may add up to 99).
    pub fn percents(&self) -> (u64, u64) {
        let total = self.total().max(1);
        (self.random * 100 / total, self.sequential * 100 / total)
    }
}

/// The banner and the column header.
pub fn write_header(out: &mut Output, timestamp: bool) -> Result<()> {
    writeln!(out, "Tracing block device I/O requested seeks... Hit Ctrl-C to end.")?;
    if timestamp {
        write!(out, "{:<9} ", "TIME")?;
    }
    writeln!(out, "{:<7} {:>5} {:>5} {:>8} {:>10}", "DISK", "%RND", "%SEQ", "COUNT", "KBYTES")?;
    out.flush()?;
    Ok(())
}

/// A disk's name; a device no longer in /sys/class/block is `Unknown`, as libbpf-tools prints it.
fn disk_name(disks: &Disks, dev: u32) -> String {
    match disks.name(dev) {
        "?" => "Unknown".to_string(),
        name => name.to_string(),
    }
}

/// One line in libbpf-tools' layout.
pub fn line(time: Option<&str>, disk: &str, c: &Counts) -> String {
    let (rnd, seq) = c.percents();
    let time = time.map(|t| format!("{t:<9} ")).unwrap_or_default();
    format!("{time}{disk:<7} {rnd:>5} {seq:>5} {:>8} {:>10}", c.total(), c.bytes / 1024)
}

#[derive(Serialize)]
struct JsonDisk<'a> {
    time: &'a str,
    disk: &'a str,
    major: u32,
    minor: u32,
    random: u64,
    sequential: u64,
    count: u64,
    bytes: u64,
}

/// One report: a line (or JSON object) per disk with completions in the interval.
pub fn write_rows(out: &mut Output, disks: &Disks, rows: &[(u32, Counts)], timestamp: bool, json: bool) -> Result<()> {
    if json {
        let now = clock_rfc3339();
        for (dev, c) in rows {
            out.json_line(&JsonDisk {
                time: &now,
                disk: &disk_name(disks, *dev),
                major: dev >> 20,
                minor: dev & 0xfffff,
                random: c.random,
                sequential: c.sequential,
                count: c.total(),
                bytes: c.bytes,
            })?;
        }
        return Ok(());
    }
    let time = timestamp.then(clock_hms);
    for (dev, c) in rows {
        writeln!(out, "{}", line(time.as_deref(), &disk_name(disks, *dev), c))?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libbpf_tools_columns() {
        let c = Counts { random: 10, sequential: 30, bytes: 160 * 1024 };
        assert_eq!(line(None, "loop3", &c), "loop3      25    75       40        160");
        assert_eq!(line(Some("10:11:12"), "vda", &c), "10:11:12  vda        25    75       40        160");
    }

    #[test]
    fn percents_round_down_each() {
        let c = Counts { random: 1, sequential: 2, bytes: 0 };
        assert_eq!(c.percents(), (33, 66));
        assert_eq!(Counts::default().percents(), (0, 0));
    }

    #[test]
    fn differences_never_underflow() {
        let a = Counts { random: 5, sequential: 7, bytes: 4096 };
        let b = Counts { random: 8, sequential: 7, bytes: 8192 };
        assert_eq!(b.since(a), Counts { random: 3, sequential: 0, bytes: 4096 });
        assert_eq!(a.since(b), Counts::default());
    }
}
