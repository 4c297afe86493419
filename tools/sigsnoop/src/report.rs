//! sigsnoop's output: libbpf-tools' columns (`TIME PID COMM SIG TPID TCOMM RESULT`; SIG a number, or a name with
//! -n) or JSON lines.

use std::io::{self, Write};

use common::attach::maps::{c_string, from_bytes};
use common::domain::signals;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::{consts, types::event};

// SAFETY: a #[repr(C)] struct of integers and char arrays; the BPF side zeroes it.
unsafe impl plain::Plain for event {}

/// The names of signal_generate's results (the kernel's enum trace_signal_result).
const RESULTS: [&str; 5] = ["delivered", "ignored", "already_pending", "overflow_fail", "lose_info"];

/// One signal sent, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Signal {
    /// What saw it: `generate` (the kernel generated it), or the system call: `kill`, `tkill`, `tgkill`.
    pub source: &'static str,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub sig: i32,
    /// The target: the thread signalled, or the PID argument of the call.
    pub tpid: i32,
    /// The target's process (signal_generate through tp_btf/raw_tp, tgkill's first argument), if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tgid: Option<i32>,
    /// The target's name, if the kernel generated the signal.
    pub tcomm: Option<String>,
    /// signal_generate's result (0 delivered, 1 ignored, 2 already pending, 3 overflow, 4 info lost), or the
    /// call's return value (0, or a negative errno).
    pub result: i32,
    /// The result in words: a result name, or the errno name of a failed call.
    pub result_name: String,
    /// signal_generate: sent to the whole thread group, and its si_code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
}

impl Signal {
    pub fn from_bytes(data: &[u8]) -> Signal {
        let e: event = from_bytes(data);
        let generate = e.source as usize == consts::SRC_GENERATE;
        let result_name = if generate {
            RESULTS.get(e.ret as usize).map_or_else(|| e.ret.to_string(), |s| s.to_string())
        } else if e.ret < 0 {
            common::domain::syscalls::errno_name(-e.ret).map_or_else(|| e.ret.to_string(), str::to_string)
        } else {
            "ok".to_string()
        };
        Signal {
            source: match e.source as usize {
                consts::SRC_KILL => "kill",
                consts::SRC_TKILL => "tkill",
                consts::SRC_TGKILL => "tgkill",
                _ => "generate",
            },
            pid: e.pid,
            tid: e.tid,
            comm: c_string(&e.comm),
            sig: e.sig,
            tpid: e.tpid,
            tgid: (e.tgid >= 0).then_some(e.tgid),
            tcomm: (e.has_tcomm != 0).then(|| c_string(&e.tcomm)),
            result: e.ret,
            result_name,
            group: generate.then_some(e.group != 0),
            code: generate.then_some(e.code),
        }
    }
}

pub struct Printer {
    json: bool,
    names: bool,
}

#[derive(Serialize)]
struct JsonSignal<'a> {
    time: String,
    #[serde(flatten)]
    signal: &'a Signal,
}

impl Printer {
    pub fn new(json: bool, names: bool) -> Printer {
        Printer { json, names }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        writeln!(out, "{:<8} {:<7} {:<16} {:<9} {:<7} {:<16} RESULT", "TIME", "PID", "COMM", "SIG", "TPID", "TCOMM")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, s: &Signal) -> io::Result<()> {
        if self.json {
            return out.json_line(&JsonSignal { time: clock_rfc3339(), signal: s });
        }
        let sig = match (self.names, u32::try_from(s.sig).ok().and_then(signals::name)) {
            (true, Some(name)) => format!("SIG{name}"),
            (true, None) if s.sig == 0 => "0".to_string(),
            _ => s.sig.to_string(),
        };
        let tcomm = s.tcomm.as_deref().unwrap_or("N/A");
        writeln!(
            out,
            "{:<8} {:<7} {:<16} {:<9} {:<7} {:<16} {}",
            clock_hms(),
            s.pid,
            s.comm,
            sig,
            s.tpid,
            tcomm,
            s.result
        )?;
        out.flush()
    }
}
