// SPDX-License-Identifier: Apache-2.0 OR MIT
//! runqslower's output: BCC's columns (`TIME COMM TID LAT(us)`, with `-P` also `PREV COMM PREV TID`, the layout
//! of BCC's `tools/runqslower.py`) or one JSON object per wait.

use std::io::{self, Write};

use common::attach::maps::from_bytes;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and char arrays; the BPF side fills every byte.
unsafe impl plain::Plain for event {}

/// One wait for a CPU, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wait {
    pub comm: Name,
    pub tid: u32,
    /// The process of the thread (0 when the classic tracepoint path could not read it).
    pub pid: u32,
    pub lat_us: u64,
    pub lat_ns: u64,
    pub prev_comm: Name,
    pub prev_tid: u32,
    pub cpu: u32,
}

impl Wait {
    pub fn from_bytes(data: &[u8]) -> Wait {
        let e: event = from_bytes(data);
        Wait {
            comm: Name::from_c(&e.task),
            tid: e.pid,
            pid: e.tgid,
            lat_us: e.delta_ns / 1000,
            lat_ns: e.delta_ns,
            prev_comm: Name::from_c(&e.prev_task),
            prev_tid: e.prev_pid,
            cpu: e.cpu,
        }
    }
}

#[derive(Serialize)]
struct JsonWait<'a> {
    time: String,
    #[serde(flatten)]
    wait: &'a Wait,
}

pub struct Printer {
    json: bool,
    previous: bool,
}

impl Printer {
    pub fn new(json: bool, previous: bool) -> Printer {
        Printer { json, previous }
    }

    /// BCC's banner and column header (none for JSON).
    pub fn write_header(&mut self, out: &mut Output, min_us: u64) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        writeln!(out, "Tracing run queue latency higher than {min_us} us")?;
        if self.previous {
            writeln!(
                out,
                "{:<8} {:<16} {:<6} {:>14} {:<16} {:<6}",
                "TIME", "COMM", "TID", "LAT(us)", "PREV COMM", "PREV TID"
            )?;
        } else {
            writeln!(out, "{:<8} {:<16} {:<6} {:>14}", "TIME", "COMM", "TID", "LAT(us)")?;
        }
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, w: &Wait) -> io::Result<()> {
        if self.json {
            return out.json_line(&JsonWait { time: clock_rfc3339(), wait: w });
        }
        let time = clock_hms();
        if self.previous {
            writeln!(
                out,
                "{time:<8} {:<16} {:<6} {:>14} {:<16} {:<6}",
                w.comm, w.tid, w.lat_us, w.prev_comm, w.prev_tid
            )?;
        } else {
            writeln!(out, "{time:<8} {:<16} {:<6} {:>14}", w.comm, w.tid, w.lat_us)?;
        }
        out.flush()
    }
}
