// SPDX-License-Identifier: Apache-2.0 OR MIT
//! killsnoop's output: BCC's columns (`TIME PID COMM SIG TPID RESULT`, the PID columns as wide as the largest
//! PID plus one; SIG a number, or a name with -n) or JSON lines, which name the sender's container.

use std::io::{self, Write};

use common::domain::container_names::ContainerNames;
use common::domain::killcalls::{sig_column, SignalEvent, RECORD_SIZE};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

// The record is killcalls.bpf.h's struct signal_event, decoded by common::domain::killcalls.
const _: () = assert!(std::mem::size_of::<crate::bpf::types::signal_event>() == RECORD_SIZE);

pub struct Printer {
    json: bool,
    names: bool,
    pid_width: usize,
    containers: ContainerNames,
}

/// One call as JSON: what the call carries (no target name, group or si_code: those are sigsnoop's).
#[derive(Serialize)]
struct JsonCall<'a> {
    time: String,
    call: &'static str,
    pid: u32,
    tid: u32,
    comm: &'a str,
    sig: i32,
    tpid: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tgid: Option<i32>,
    result: i32,
    result_name: &'a str,
    /// The container the sender runs in (absent for the host's processes).
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
}

/// BCC's width of the PID columns: the digits of the largest PID (kernel.pid_max) plus one, else 6.
fn pid_width() -> usize {
    std::fs::read_to_string("/proc/sys/kernel/pid_max").map_or(6, |s| s.trim().len() + 1)
}

impl Printer {
    pub fn new(json: bool, names: bool) -> Printer {
        Printer { json, names, pid_width: pid_width(), containers: ContainerNames::new() }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        let w = self.pid_width;
        writeln!(out, "{:<9} {:<w$} {:<16} {:<4} {:<w$} RESULT", "TIME", "PID", "COMM", "SIG", "TPID")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, s: &SignalEvent) -> io::Result<()> {
        if self.json {
            let container = self.containers.of_cgroup(s.cgroup_id);
            return out.json_line(&JsonCall {
                time: clock_rfc3339(),
                call: s.source,
                pid: s.pid,
                tid: s.tid,
                comm: &s.comm,
                sig: s.sig,
                tpid: s.tpid,
                tgid: s.tgid,
                result: s.result,
                result_name: &s.result_name,
                container: container.as_deref(),
            });
        }
        let w = self.pid_width;
        let sig = sig_column(s.sig, self.names);
        writeln!(out, "{:<9} {:<w$} {:<16} {:<4} {:<w$} {}", clock_hms(), s.pid, s.comm, sig, s.tpid, s.result)?;
        out.flush()
    }
}
