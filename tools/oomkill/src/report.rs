// SPDX-License-Identifier: Apache-2.0 OR MIT
//! oomkill's output: BCC's line per kill (`HH:MM:SS Triggered by PID N ("comm"), OOM kill of PID M ("comm"),
//! P pages, loadavg: ...`, the layout of BCC's `tools/oomkill.py` and libbpf-tools' `oomkill.c`) or JSON lines.

use std::io::{self, Write};

use chrono::Local;
use common::attach::maps::from_bytes;
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::consts::{HAVE_COMM, HAVE_MEM, HAVE_UID};
use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and char arrays; the BPF side zeroes every byte before filling it.
unsafe impl plain::Plain for event {}

/// The victim's memory as the kernel's tracepoint reports it (kernels 6.8 and later), in kB.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    pub total_vm_kb: u64,
    pub anon_rss_kb: u64,
    pub file_rss_kb: u64,
    pub shmem_rss_kb: u64,
    pub pgtables_kb: u64,
    pub oom_score_adj: i32,
}

/// One OOM kill, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Kill {
    /// The process whose allocation ran the OOM killer, and its thread.
    pub triggered_pid: u32,
    pub triggered_tid: u32,
    pub triggered_comm: Name,
    /// The task killed (the tracepoint's `pid`: the victim's thread that holds its memory, usually its main one).
    pub killed_pid: u32,
    /// Its name; `?` where the kernel does not say and it is gone.
    pub killed_comm: Name,
    /// Its resident memory in pages (anonymous + file + shared), 0 where the kernel does not say.
    pub pages: u64,
    #[serde(flatten)]
    pub memory: Option<Memory>,
    /// The killed task's user ID, where the kernel's event says it (6.9+); absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

impl Kill {
    pub fn from_bytes(data: &[u8]) -> Kill {
        let e: event = from_bytes(data);
        let killed_comm = if e.have & HAVE_COMM as u32 != 0 {
            Name::from_c(&e.tcomm)
        } else {
            // Older kernels name only the victim's PID: it is dying but not yet reaped, so /proc still has it.
            std::fs::read(format!("/proc/{}/comm", e.tpid))
                .map(|mut s| {
                    s.pop_if(|b| *b == b'\n');
                    Name::from(s)
                })
                .unwrap_or_else(|_| "?".into())
        };
        let memory = (e.have & HAVE_MEM as u32 != 0).then_some(Memory {
            total_vm_kb: e.total_vm_kb,
            anon_rss_kb: e.anon_rss_kb,
            file_rss_kb: e.file_rss_kb,
            shmem_rss_kb: e.shmem_rss_kb,
            pgtables_kb: e.pgtables_kb,
            oom_score_adj: e.oom_score_adj,
        });
        let pages =
            memory.as_ref().map_or(0, |m| (m.anon_rss_kb + m.file_rss_kb + m.shmem_rss_kb) * 1024 / page_size());
        Kill {
            triggered_pid: e.fpid,
            triggered_tid: e.ftid,
            triggered_comm: Name::from_c(&e.fcomm),
            killed_pid: e.tpid,
            killed_comm,
            pages,
            memory,
            uid: (e.have & HAVE_UID as u32 != 0).then_some(e.uid),
        }
    }
}

/// /proc/loadavg without its newline ("0.99 0.39 0.30 3/282 22724"), read when the kill is printed, as BCC does.
fn loadavg() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg").ok().map(|s| s.trim_end().to_string())
}

#[derive(Serialize)]
struct JsonKill<'a> {
    time: String,
    #[serde(flatten)]
    kill: &'a Kill,
    loadavg: Option<String>,
}

pub struct Printer {
    json: bool,
}

impl Printer {
    pub fn new(json: bool) -> Printer {
        Printer { json }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        writeln!(out, "Tracing OOM kills... Ctrl-C to stop.")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, k: &Kill) -> io::Result<()> {
        if self.json {
            return out.json_line(&JsonKill { time: clock_rfc3339(), kill: k, loadavg: loadavg() });
        }
        writeln!(out, "{}", line(&Local::now().format("%H:%M:%S").to_string(), k, loadavg().as_deref()))?;
        out.flush()
    }
}

/// BCC's line; without a load average (/proc unreadable), libbpf-tools' shorter form.
fn line(time: &str, k: &Kill, loadavg: Option<&str>) -> String {
    let mut line = format!(
        "{time} Triggered by PID {} (\"{}\"), OOM kill of PID {} (\"{}\"), {} pages",
        k.triggered_pid, k.triggered_comm, k.killed_pid, k.killed_comm, k.pages
    );
    if let Some(avg) = loadavg {
        line += &format!(", loadavg: {avg}");
    }
    line
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
    fn bcc_line_and_old_kernels_record() {
        let mut e = event { fpid: 7, ftid: 8, tpid: 9, have: (HAVE_COMM | HAVE_MEM) as u32, ..Default::default() };
        set(&mut e.fcomm, b"sh");
        set(&mut e.tcomm, b"perl");
        e.anon_rss_kb = 4 * page_size() / 1024;
        // SAFETY: event is Plain.
        let k = Kill::from_bytes(unsafe { plain::as_bytes(&e) });
        assert_eq!((k.pages, k.uid), (4, None));
        assert_eq!(
            line("21:03:39", &k, Some("0.99 0.39 0.30 3/282 22724")),
            "21:03:39 Triggered by PID 7 (\"sh\"), OOM kill of PID 9 (\"perl\"), 4 pages, loadavg: 0.99 0.39 0.30 3/282 22724"
        );
        let old = event { fpid: 7, tpid: u32::MAX, ..Default::default() };
        // SAFETY: event is Plain.
        let k = Kill::from_bytes(unsafe { plain::as_bytes(&old) });
        assert_eq!((k.killed_comm.text().as_ref(), k.pages, k.memory.is_none()), ("?", 0, true));
    }
}
