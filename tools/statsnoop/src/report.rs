// SPDX-License-Identifier: Apache-2.0 OR MIT
//! statsnoop's output: BCC's columns (`[TIME(s)] PID COMM FD ERR [SYSCALL] PATH`, the format strings of BCC's
//! `tools/statsnoop.py`) or JSON lines with the errno's name, the syscall and the descriptor.

use std::io::{self, Write};

use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, Output, TraceStart};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and integer arrays; the BPF side fills every field it sends.
unsafe impl plain::Plain for event {}

/// The calls by their CALL_* number in statsnoop.h, named as BCC names them (the kernel's names).
const CALLS: [&str; 6] = ["statfs", "newstat", "newlstat", "statx", "newfstatat", "newfstat"];

/// One call, decoded from the BPF record.
#[derive(Debug, Clone, Serialize)]
pub struct Stat {
    #[serde(skip)]
    pub ts_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: Name,
    /// The return value when it is not an error (0), else -1, as BCC's FD column.
    pub fd: i32,
    /// The errno (0 on success).
    pub err: i32,
    pub errno: Option<String>,
    pub syscall: &'static str,
    /// fstat's descriptor, or the directory descriptor of statx and fstatat (-100 is AT_FDCWD); absent for the
    /// calls that take only a path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dirfd: Option<i32>,
    /// The path as given (empty for fstat and for the empty path of AT_EMPTY_PATH).
    pub path: Name,
}

impl Stat {
    pub fn from_bytes(data: &[u8]) -> Stat {
        let mut e = event::default();
        // SAFETY: event is Plain (any bytes are a valid value).
        let bytes = unsafe { plain::as_mut_bytes(&mut e) };
        let n = data.len().min(bytes.len());
        bytes[..n].copy_from_slice(&data[..n]);
        let (fd, err) = if e.ret >= 0 { (e.ret, 0) } else { (-1, -e.ret) };
        Stat {
            ts_ns: e.ts_ns,
            pid: e.pid,
            tid: e.tid,
            comm: Name::from_c(&e.comm),
            fd,
            err,
            errno: (err != 0).then(|| format!("{:?}", nix::errno::Errno::from_raw(err))),
            syscall: CALLS.get(e.call as usize).copied().unwrap_or("N/A"),
            dirfd: (e.fd != -1).then_some(e.fd),
            path: Name::from_c(&e.path),
        }
    }
}

/// Which columns to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    pub json: bool,
    /// `-t`: seconds since the first call printed.
    pub timestamp: bool,
    /// `-s`: the syscall's name.
    pub sysname: bool,
}

#[derive(Serialize)]
struct JsonStat<'a> {
    time: String,
    ts: f64,
    #[serde(flatten)]
    stat: &'a Stat,
}

pub struct Printer {
    style: Style,
    first_ns: Option<u64>,
    /// JSON's `ts` counts from it.
    start: TraceStart,
}

impl Printer {
    pub fn new(style: Style) -> Printer {
        Printer { style, first_ns: None, start: TraceStart::now() }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        let s = self.style;
        if s.json {
            return Ok(());
        }
        let mut line = String::new();
        if s.timestamp {
            line += &format!("{:<14}", "TIME(s)");
        }
        line += &format!("{:<7} {:<16} {:>4} {:>3}", "PID", "COMM", "FD", "ERR");
        if s.sysname {
            line += &format!(" {:<12}", "SYSCALL");
        }
        line += " PATH";
        writeln!(out, "{line}")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, st: &Stat) -> io::Result<()> {
        let s = self.style;
        let first = *self.first_ns.get_or_insert(st.ts_ns);
        let since = st.ts_ns.saturating_sub(first) as f64 / 1e9;
        if s.json {
            return out.json_line(&JsonStat { time: clock_rfc3339(), ts: self.start.secs(st.ts_ns), stat: st });
        }
        let mut line = String::new();
        if s.timestamp {
            line += &format!("{since:<14.9}");
        }
        line += &format!("{:<7} {:<16} {:>4} {:>3}", st.pid, st.comm, st.fd, st.err);
        if s.sysname {
            line += &format!(" {:<12}", st.syscall);
        }
        line += " ";
        line += &st.path.shown();
        writeln!(out, "{line}")?;
        out.flush()
    }
}
