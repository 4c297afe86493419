// SPDX-License-Identifier: Apache-2.0 OR MIT
//! template's output: a line per call (`PID COMM RET PATH`) or a JSON object per call.
//!
//! Names from the traced system (the command name, the directory) are printed through
//! [`common::output::stdout::printable`], so a control byte in them cannot split a row or reach the terminal; JSON
//! escapes them itself.

use std::io::{self, Write};

use common::attach::maps::{c_bytes, c_string};
use common::output::stdout::{clock_rfc3339, monotonic_ns, printable, Output};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and integer arrays with an explicit padding field; the BPF side fills
// every field it sends.
unsafe impl plain::Plain for event {}

/// One call, decoded from the BPF record.
#[derive(Debug, Clone, Serialize)]
pub struct Chdir {
    #[serde(skip)]
    pub ts_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    #[serde(skip)]
    comm_bytes: Vec<u8>,
    /// 0, or -errno.
    pub ret: i32,
    /// The errno's name when the call failed (ENOENT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// The directory as given.
    pub path: String,
    #[serde(skip)]
    path_bytes: Vec<u8>,
}

impl Chdir {
    pub fn from_bytes(data: &[u8]) -> Chdir {
        let mut e = event::default();
        // SAFETY: event is Plain (any bytes are a valid value).
        let bytes = unsafe { plain::as_mut_bytes(&mut e) };
        let n = data.len().min(bytes.len());
        bytes[..n].copy_from_slice(&data[..n]);
        Chdir {
            ts_ns: e.ts_ns,
            pid: e.pid,
            tid: e.tid,
            comm: c_string(&e.comm),
            comm_bytes: c_bytes(&e.comm),
            ret: e.ret,
            errno: (e.ret < 0).then(|| format!("{:?}", nix::errno::Errno::from_raw(-e.ret))),
            path: c_string(&e.path),
            path_bytes: c_bytes(&e.path),
        }
    }
}

/// A JSON line: the call with the wall-clock time and the seconds since tracing started (docs/json.md).
#[derive(Serialize)]
struct JsonChdir<'a> {
    time: String,
    ts: f64,
    #[serde(flatten)]
    call: &'a Chdir,
}

/// Writes the calls as they come.
pub struct Printer {
    json: bool,
    /// When tracing started, on the clock of the BPF side's `ts_ns`.
    start_ns: u64,
}

impl Printer {
    pub fn new(json: bool) -> Printer {
        Printer { json, start_ns: monotonic_ns() }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        if !self.json {
            writeln!(out, "{:<7} {:<16} {:>4} PATH", "PID", "COMM", "RET")?;
        }
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, call: &Chdir) -> io::Result<()> {
        if self.json {
            let ts = call.ts_ns.saturating_sub(self.start_ns) as f64 / 1e9;
            return out.json_line(&JsonChdir { time: clock_rfc3339(), ts, call });
        }
        let (comm, path) = (printable(&call.comm_bytes), printable(&call.path_bytes));
        writeln!(out, "{:<7} {:<16} {:>4} {path}", call.pid, comm, call.ret)?;
        out.flush()
    }
}
