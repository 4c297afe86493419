//! vfsstat's output: BCC's header and per-second rows, or one JSON object per interval.

use std::io::Write;

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

/// One of BCC's rows: the wall-clock time, then each count divided by the interval (BCC's integer rate, over
/// the whole interval even for the last, partial one, as BCC does).
pub fn write_row(out: &mut Output, counts: &[u64; S_MAXSTAT], interval: u64) -> Result<()> {
    write!(out, "{:<8}: ", clock_hms())?;
    for c in counts {
        write!(out, " {:>8}", c / interval.max(1))?;
    }
    writeln!(out)?;
    out.flush()?;
    Ok(())
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
    fn new(c: &[u64; S_MAXSTAT], div: u64) -> Self {
        let d = div.max(1);
        Calls {
            read: c[0] / d,
            write: c[1] / d,
            fsync: c[2] / d,
            open: c[3] / d,
            create: c[4] / d,
            unlink: c[5] / d,
            mkdir: c[6] / d,
            rmdir: c[7] / d,
        }
    }
}

#[derive(Serialize)]
struct Record {
    time: String,
    interval_s: u64,
    /// What was counted: `vfs` (the kernel functions) or `syscalls` (the system calls that reach them).
    source: &'static str,
    /// The exact number of calls in the interval.
    counts: Calls,
    /// The counts divided by the interval, as the text columns.
    per_second: Calls,
}

/// One JSON line for an interval.
pub fn write_json(out: &mut Output, counts: &[u64; S_MAXSTAT], interval: u64, mech: Attach) -> Result<()> {
    let source = match mech {
        Attach::Fentry | Attach::Kprobe => "vfs",
        _ => "syscalls",
    };
    out.json_line(&Record {
        time: clock_rfc3339(),
        interval_s: interval,
        source,
        counts: Calls::new(counts, 1),
        per_second: Calls::new(counts, interval),
    })?;
    Ok(())
}
