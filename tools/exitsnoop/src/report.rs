// SPDX-License-Identifier: Apache-2.0 OR MIT
//! exitsnoop's output: BCC's columns (`[TIME-TZ] [LABEL] PCOMM PID PPID TID AGE(s) EXIT_CODE`, the layout of BCC's
//! `tools/exitsnoop.py`; EXIT_CODE is `0`, `code N` or `signal N (NAME)`, with `, core dumped`) or JSON lines, which name the
//! process's container.

use std::io::{self, Write};

use chrono::{Local, Utc};
use common::attach::maps::from_bytes;
use common::domain::container_names::ContainerNames;
use common::domain::signals;
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and a char array; the BPF side fills every byte.
unsafe impl plain::Plain for event {}

/// One exit, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exit {
    /// The task's cgroup v2 ID, which names its container.
    #[serde(skip)]
    pub cgroup_id: u64,
    /// When the process's main thread (with --per-thread, the thread) started: with the PID, which process.
    #[serde(skip)]
    pub start_ns: u64,
    pub comm: Name,
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// From the task's start to its exit.
    pub age_ns: u64,
    /// The code passed to exit() (0 when a signal ended the task).
    pub exit_code: u32,
    /// The signal that ended the task, or 0.
    pub signal: u32,
    pub core_dumped: bool,
    /// The kernel's whole exit status (as wait() reports it).
    pub status: u32,
}

/// The processes reported lately, to keep one record of each: when two of a process's threads end at once, both
/// can see that none is left (exitsnoop.bpf.c) and both report the process. Their records come one after the
/// other, microseconds apart, so remembering the last few thousand processes is enough.
#[derive(Default)]
pub struct Processes {
    seen: std::collections::HashSet<(u32, u64)>,
    order: std::collections::VecDeque<(u32, u64)>,
}

impl Processes {
    const REMEMBERED: usize = 4096;

    /// True the first time process `e` (its PID and start) is reported.
    pub fn first_report(&mut self, e: &Exit) -> bool {
        let key = (e.pid, e.start_ns);
        if !self.seen.insert(key) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > Self::REMEMBERED {
            let old = self.order.pop_front().expect("not empty");
            self.seen.remove(&old);
        }
        true
    }
}

impl Exit {
    pub fn from_bytes(data: &[u8]) -> Exit {
        let e: event = from_bytes(data);
        Exit {
            cgroup_id: e.cgroup_id,
            start_ns: e.start_ns,
            comm: Name::from_c(&e.comm),
            pid: e.pid,
            ppid: e.ppid,
            tid: e.tid,
            cpu: e.cpu,
            age_ns: e.exit_ns.saturating_sub(e.start_ns),
            exit_code: (e.exit_code >> 8) & 0xff,
            signal: e.exit_code & 0x7f,
            core_dumped: e.exit_code & 0x80 != 0,
            status: e.exit_code,
        }
    }

    /// The EXIT_CODE column.
    pub fn outcome(&self) -> String {
        if self.signal == 0 {
            return if self.exit_code == 0 { "0".into() } else { format!("code {}", self.exit_code) };
        }
        let name = signals::name(self.signal).unwrap_or_else(|| "unknown".into());
        let mut text = format!("signal {} ({name})", self.signal);
        if self.core_dumped {
            text += ", core dumped";
        }
        text
    }
}

/// What to print besides the columns.
#[derive(Debug, Clone, Default)]
pub struct Style {
    pub json: bool,
    pub timestamp: bool,
    pub utc: bool,
    pub label: Option<String>,
}

#[derive(Serialize)]
struct JsonExit<'a> {
    time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<&'a str>,
    #[serde(flatten)]
    exit: &'a Exit,
    /// The container the process ran in (absent for the host's processes).
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
}

pub struct Printer {
    style: Style,
    containers: ContainerNames,
}

/// The local time zone's abbreviation (`UTC`, `CET`), as BCC's TIME-<zone> column header names it.
fn zone_abbreviation() -> String {
    // SAFETY: time(NULL) and localtime_r on our own struct tm; tm_zone points at a static string of libc's.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() || tm.tm_zone.is_null() {
            return Local::now().format("%:z").to_string();
        }
        std::ffi::CStr::from_ptr(tm.tm_zone).to_string_lossy().into_owned()
    }
}

impl Printer {
    pub fn new(style: Style) -> Printer {
        Printer { style, containers: ContainerNames::new() }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        let s = &self.style;
        if s.json {
            return Ok(());
        }
        let mut line = String::new();
        if s.timestamp {
            let zone = if s.utc { "UTC".to_string() } else { zone_abbreviation() };
            line += &format!("{:<13}", format!("TIME-{zone}"));
        }
        if s.label.is_some() {
            line += &format!("{:<6}", "LABEL");
        }
        line += &format!("{:<16} {:<7} {:<7} {:<7} {:<7} {}", "PCOMM", "PID", "PPID", "TID", "AGE(s)", "EXIT_CODE");
        writeln!(out, "{line}")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, e: &Exit) -> io::Result<()> {
        let s = &self.style;
        if s.json {
            let container = self.containers.of_cgroup(e.cgroup_id);
            let container = container.as_deref();
            return out.json_line(&JsonExit { time: clock_rfc3339(), label: s.label.as_deref(), exit: e, container });
        }
        let mut line = String::new();
        if s.timestamp {
            let now = if s.utc {
                Utc::now().format("%H:%M:%S%.3f").to_string()
            } else {
                Local::now().format("%H:%M:%S%.3f").to_string()
            };
            line += &format!("{now:<13}");
        }
        if let Some(label) = &s.label {
            line += &format!("{label:<6}");
        }
        let age = e.age_ns as f64 / 1e9;
        line += &format!("{:<16} {:<7} {:<7} {:<7} {:<7.2} {}", e.comm, e.pid, e.ppid, e.tid, age, e.outcome());
        writeln!(out, "{line}")?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(status: u32) -> Exit {
        let e = event { exit_code: status, start_ns: 1, exit_ns: 2, ..Default::default() };
        // SAFETY: event is Plain.
        Exit::from_bytes(unsafe { plain::as_bytes(&e) })
    }

    #[test]
    fn exit_status_reads_as_bcc_prints_it() {
        assert_eq!(exit(0).outcome(), "0");
        assert_eq!(exit(3 << 8).outcome(), "code 3");
        assert_eq!(exit(9).outcome(), "signal 9 (KILL)");
        assert_eq!(exit(0x80 | 11).outcome(), "signal 11 (SEGV), core dumped");
        let e = exit(0x80 | 6);
        assert_eq!((e.exit_code, e.signal, e.core_dumped, e.age_ns), (0, 6, true, 1));
    }
}
