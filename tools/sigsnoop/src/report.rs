// SPDX-License-Identifier: Apache-2.0 OR MIT
//! sigsnoop's output: libbpf-tools' columns (`TIME PID COMM SIG TPID TCOMM RESULT`; SIG a number, or a name with
//! -n) or JSON lines.

use std::io::{self, Write};

use common::domain::killcalls::{sig_column, SignalEvent, RECORD_SIZE};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

// The record is killcalls.bpf.h's struct signal_event, decoded by common::domain::killcalls.
const _: () = assert!(std::mem::size_of::<crate::bpf::types::signal_event>() == RECORD_SIZE);

pub struct Printer {
    json: bool,
    names: bool,
}

#[derive(Serialize)]
struct JsonSignal<'a> {
    time: String,
    #[serde(flatten)]
    signal: &'a SignalEvent,
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

    pub fn write(&mut self, out: &mut Output, s: &SignalEvent) -> io::Result<()> {
        if self.json {
            return out.json_line(&JsonSignal { time: clock_rfc3339(), signal: s });
        }
        let sig = sig_column(s.sig, self.names);
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
