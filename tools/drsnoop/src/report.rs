// SPDX-License-Identifier: Apache-2.0 OR MIT
//! drsnoop's output: BCC's columns (`[TIME(s)] [UID] COMM PID|TID LAT(ms) PAGES [FREE(KB)]`, the layout of BCC's
//! `tools/drsnoop.py`) or JSON lines.

use std::io::{self, Write};

use common::attach::maps::from_bytes;
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::consts::KIND_MEMCG;
use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and a char array; the BPF side fills every byte.
unsafe impl plain::Plain for event {}

/// One reclaim, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reclaim {
    pub comm: Name,
    pub pid: u32,
    pub tid: u32,
    pub uid: u32,
    /// `direct` (the system ran short of memory) or `memcg` (the task's memory cgroup reached its limit).
    pub kind: &'static str,
    pub latency_ns: u64,
    /// Pages freed.
    pub pages: u64,
    /// The end of the reclaim, in CLOCK_MONOTONIC nanoseconds.
    pub end_ns: u64,
}

impl Reclaim {
    pub fn from_bytes(data: &[u8]) -> Reclaim {
        let e: event = from_bytes(data);
        Reclaim {
            comm: Name::from_c(&e.comm),
            pid: e.pid,
            tid: e.tid,
            uid: e.uid,
            kind: if e.kind == KIND_MEMCG as u32 { "memcg" } else { "direct" },
            latency_ns: e.end_ns.saturating_sub(e.start_ns),
            pages: e.nr_reclaimed,
            end_ns: e.end_ns,
        }
    }
}

/// The system's free memory in kB, from /proc/vmstat's nr_free_pages.
fn free_kb() -> Option<u64> {
    let vmstat = std::fs::read_to_string("/proc/vmstat").ok()?;
    let pages: u64 = vmstat.lines().find_map(|l| l.strip_prefix("nr_free_pages "))?.trim().parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(1) as u64 / 1024)
}

/// What to print besides the columns.
#[derive(Debug, Clone, Default)]
pub struct Style {
    pub json: bool,
    pub timestamp: bool,
    pub uid: bool,
    /// The ID column is TID (-t), else PID.
    pub tid: bool,
    pub free: bool,
}

#[derive(Serialize)]
struct JsonReclaim<'a> {
    time: String,
    #[serde(flatten)]
    reclaim: &'a Reclaim,
    #[serde(skip_serializing_if = "Option::is_none")]
    free_kb: Option<u64>,
}

pub struct Printer {
    style: Style,
    first_ns: Option<u64>,
}

impl Printer {
    pub fn new(style: Style) -> Printer {
        Printer { style, first_ns: None }
    }

    pub fn write_header(&mut self, out: &mut Output, duration: Option<u64>) -> io::Result<()> {
        let s = &self.style;
        if s.json {
            return Ok(());
        }
        match duration {
            Some(d) => writeln!(out, "Tracing direct reclaim events for {d} secs.")?,
            None => writeln!(out, "Tracing direct reclaim events... Hit Ctrl-C to end.")?,
        }
        writeln!(out, "{}", self.header())?;
        out.flush()
    }

    fn header(&self) -> String {
        let s = &self.style;
        let mut line = String::new();
        if s.timestamp {
            line += &format!("{:<14}", "TIME(s)");
        }
        if s.uid {
            line += &format!("{:<6}", "UID");
        }
        line += &format!("{:<14} {:<6} {:>8} {:>5}", "COMM", if s.tid { "TID" } else { "PID" }, "LAT(ms)", "PAGES");
        if s.free {
            line += &format!("{:>10}", "FREE(KB)");
        }
        line
    }

    pub fn write(&mut self, out: &mut Output, r: &Reclaim) -> io::Result<()> {
        let free = if self.style.free { free_kb() } else { None };
        if self.style.json {
            return out.json_line(&JsonReclaim { time: clock_rfc3339(), reclaim: r, free_kb: free });
        }
        let line = self.row(r, free.unwrap_or(0));
        writeln!(out, "{line}")?;
        out.flush()
    }

    fn row(&mut self, r: &Reclaim, free: u64) -> String {
        let s = &self.style;
        let first = *self.first_ns.get_or_insert(r.end_ns);
        let mut line = String::new();
        if s.timestamp {
            line += &format!("{:<14.9}", r.end_ns.saturating_sub(first) as f64 / 1e9);
        }
        if s.uid {
            line += &format!("{:<6}", r.uid);
        }
        let comm = &r.comm;
        let id = if s.tid { r.tid } else { r.pid };
        line += &format!("{comm:<14.14} {id:<6} {:>8.2} {:>5}", r.latency_ns as f64 / 1e6, r.pages);
        if s.free {
            line += &format!("{free:>10}");
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(comm: &mut [std::ffi::c_char], name: &[u8]) {
        for (c, b) in comm.iter_mut().zip(name) {
            *c = *b as std::ffi::c_char;
        }
    }

    #[test]
    fn bcc_columns() {
        let mut e = event {
            start_ns: 1_000_000,
            end_ns: 1_190_000,
            nr_reclaimed: 143,
            pid: 17678,
            tid: 17679,
            ..Default::default()
        };
        set(&mut e.comm, b"summond");
        // SAFETY: event is Plain.
        let r = Reclaim::from_bytes(unsafe { plain::as_bytes(&e) });
        let mut p = Printer::new(Style::default());
        assert_eq!(p.header(), "COMM           PID     LAT(ms) PAGES");
        assert_eq!(p.row(&r, 0), "summond        17678      0.19   143");
        let mut p = Printer::new(Style { timestamp: true, uid: true, tid: true, free: true, json: false });
        assert_eq!(p.header(), "TIME(s)       UID   COMM           TID     LAT(ms) PAGES  FREE(KB)");
        assert_eq!(p.row(&r, 1234), "0.000000000   0     summond        17679      0.19   143      1234");
        assert_eq!(r.kind, "direct");
    }
}
