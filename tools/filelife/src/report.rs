// SPDX-License-Identifier: Apache-2.0 OR MIT
//! filelife's output: BCC's columns (`TIME PID COMM AGE(s) FILE`, the format strings of BCC's
//! `tools/filelife.py`) or JSON lines with the age in nanoseconds and the file's inode and device.

use std::io::{self, Write};

use common::attach::maps::{c_bytes, c_string};
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, printable, Output};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and integer arrays; the BPF side fills every field it sends.
unsafe impl plain::Plain for event {}

/// One deleted file, decoded from the BPF record.
#[derive(Debug, Clone, Serialize)]
pub struct Death {
    /// The process that deleted it, and its thread.
    pub pid: u32,
    pub tid: u32,
    pub comm: Name,
    /// Nanoseconds from its creation to its deletion.
    pub age_ns: u64,
    /// The name it was deleted under (its last path component).
    pub file: String,
    pub ino: u64,
    /// The file system's device, `major:minor`.
    pub dev: String,
    /// The process that created it.
    pub creator_pid: u32,
    /// -F: its path from the root (`...` first when the directories were too deep to read them all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The text column FILE (the path with -F), its bytes escaped as `ls -b` does: a name may hold a newline or a
    /// terminal's control sequence.
    #[serde(skip)]
    pub shown_file: String,
}

impl Death {
    pub fn from_bytes(data: &[u8], full_path: bool) -> Death {
        let mut e = event::default();
        // SAFETY: event is Plain (any bytes are a valid value).
        let bytes = unsafe { plain::as_mut_bytes(&mut e) };
        let n = data.len().min(bytes.len());
        bytes[..n].copy_from_slice(&data[..n]);
        let file = c_string(&e.name);
        let depth = (e.depth as usize).min(e.dirs.len());
        let walk = |component: fn(&[i8]) -> String, name: &str| {
            common::domain::paths::from_walk(e.dirs[..depth].iter().map(|d| component(d)), e.dirs_complete != 0, name)
        };
        let path = full_path.then(|| walk(c_string, &file));
        let shown_name = printable(&c_bytes(&e.name));
        let shown_file = if full_path { walk(|d| printable(&c_bytes(d)), &shown_name) } else { shown_name };
        Death {
            pid: e.pid,
            tid: e.tid,
            comm: Name::from_c(&e.comm),
            age_ns: e.age_ns,
            file,
            ino: e.ino,
            dev: format!("{}:{}", e.dev >> 20, e.dev & 0xfffff),
            creator_pid: e.creator,
            path,
            shown_file,
        }
    }
}

#[derive(Serialize)]
struct JsonDeath<'a> {
    time: String,
    age: f64,
    #[serde(flatten)]
    death: &'a Death,
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
        writeln!(out, "{:<8} {:<7} {:<16} {:<7} FILE", "TIME", "PID", "COMM", "AGE(s)")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, d: &Death) -> io::Result<()> {
        let age = d.age_ns as f64 / 1e9;
        if self.json {
            return out.json_line(&JsonDeath { time: clock_rfc3339(), age, death: d });
        }
        writeln!(out, "{:<8} {:<7} {:<16} {:<7.2} {}", clock_hms(), d.pid, d.comm, age, d.shown_file)?;
        out.flush()
    }
}
