// SPDX-License-Identifier: Apache-2.0 OR MIT
//! vfsstat's output: BCC's header and per-second rows, or one JSON object per interval.

use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use common::attach::features::Attach;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::consts::S_MAXSTAT;

/// The column names, in BCC's order (the counters' keys).
pub const NAMES: [&str; S_MAXSTAT] = ["READ", "WRITE", "FSYNC", "OPEN", "CREATE", "UNLINK", "MKDIR", "RMDIR"];

/// BCC's header: `TIME` then ` %8s` of each `NAME/s`.
pub fn write_header(out: &mut Output) -> Result<()> {
    write!(out, "{:<8}  ", "TIME")?;
    for name in NAMES {
        write!(out, " {:>8}", format!("{name}/s"))?;
    }
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// One of BCC's rows: the wall-clock time, then each count divided by the interval's length (BCC's integer rate;
/// the length is the whole interval but for the last one when a signal cut it short: BCC prints no row for that
/// one, this prints it with its true length).
pub fn write_row(out: &mut Output, counts: &[u64; S_MAXSTAT], length: Duration) -> Result<()> {
    write!(out, "{:<8}: ", clock_hms())?;
    for &c in counts {
        write!(out, " {:>8}", per_second(c, length))?;
    }
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// `count` calls over `length`, per second, rounded down (whole seconds divide exactly, as BCC's `count / interval`).
fn per_second(count: u64, length: Duration) -> u64 {
    let ms = length.as_millis().max(1);
    (u128::from(count) * 1000 / ms).try_into().unwrap_or(u64::MAX)
}

#[derive(Serialize)]
struct Calls {
    read: u64,
    write: u64,
    fsync: u64,
    open: u64,
    create: u64,
    unlink: u64,
    mkdir: u64,
    rmdir: u64,
}

impl Calls {
    fn new(c: &[u64; S_MAXSTAT], rate: impl Fn(u64) -> u64) -> Self {
        Calls {
            read: rate(c[0]),
            write: rate(c[1]),
            fsync: rate(c[2]),
            open: rate(c[3]),
            create: rate(c[4]),
            unlink: rate(c[5]),
            mkdir: rate(c[6]),
            rmdir: rate(c[7]),
        }
    }
}

#[derive(Serialize)]
struct Record {
    time: String,
    interval_s: u64,
    /// The interval's true length in seconds: `interval_s`, or less for a last interval cut short by a signal.
    seconds: f64,
    /// What was counted: `vfs` (the kernel functions) or `syscalls` (the system calls that reach them).
    source: &'static str,
    /// The exact number of calls in the interval.
    counts: Calls,
    /// The counts divided by the interval's true length, as the text columns.
    per_second: Calls,
}

/// One JSON line for an interval.
pub fn write_json(
    out: &mut Output,
    counts: &[u64; S_MAXSTAT],
    interval: u64,
    length: Duration,
    mech: Attach,
) -> Result<()> {
    let source = match mech {
        Attach::Fentry | Attach::Kprobe => "vfs",
        _ => "syscalls",
    };
    out.json_line(&Record {
        time: clock_rfc3339(),
        interval_s: interval,
        seconds: length.as_millis() as f64 / 1000.0,
        source,
        counts: Calls::new(counts, |c| c),
        per_second: Calls::new(counts, |c| per_second(c, length)),
    })?;
    Ok(())
}

/// `--prometheus`: the cumulative counts as `corebpf_vfsstat_calls_total`, labelled `operation` (read, write,
/// fsync, open, create, unlink, mkdir, rmdir).
pub fn metrics(s: &mut common::output::metrics::Snapshot, totals: &[u64; S_MAXSTAT]) {
    const HELP: &str = "Calls of the main VFS operations";
    for (name, &total) in NAMES.iter().zip(totals) {
        s.counter("calls", HELP, &["operation"], vec![name.to_ascii_lowercase()], total);
    }
}
