// SPDX-License-Identifier: Apache-2.0 OR MIT
//! uthreads' output: BCC's banner and `TIME ID TYPE DESCRIPTION` columns (seconds since tracing started; the new
//! thread's TID for a pthread, `R=<Java ID>/N=<native ID>` for a Java thread; `pthread`, `start` or `stop`; the
//! start routine as `name [file]`, or its address when it has no symbol, or the Java thread's name), or one JSON
//! object per event.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use common::attach::maps::from_bytes;
use common::output::stdout::monotonic_ns;
use common::output::stdout::{printable, Output};
use common::process::symbols::Symbolizer;
use serde::Serialize;

use crate::bpf::consts;
use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and a char array, generated from uthreads.h.
unsafe impl plain::Plain for event {}

#[derive(Serialize)]
struct JsonThread<'a> {
    ts: f64,
    pid: u32,
    /// The thread the probe fired in.
    tid: u32,
    #[serde(rename = "type")]
    kind: &'a str,
    /// pthread: the start routine's address; Java: the thread's Java ID.
    runtime_id: u64,
    /// pthread: the new thread's TID; Java: the native ID HotSpot reports.
    native_id: u64,
    description: &'a str,
}

pub struct Report {
    pid: u32,
    json: bool,
    /// The monotonic clock (the BPF side's bpf_ktime_get_ns) when tracing started.
    start_ns: u64,
    symbolizer: Symbolizer,
    /// The process's file mappings when tracing started, so that a start routine is named (through its file and
    /// offset) even when the process, or its last thread, is gone by the time its record is read.
    mappings: Vec<Mapping>,
}

/// A file mapped into the process: its addresses, the file offset of the first and the file.
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    path: PathBuf,
}

/// The file mappings of process `pid` (empty if its maps cannot be read).
fn mappings(pid: u32) -> Vec<Mapping> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let parse = |line: &str| -> Option<Mapping> {
        let mut cols = line.split_whitespace();
        let (start, end) = cols.next()?.split_once('-')?;
        let offset = u64::from_str_radix(cols.nth(1)?, 16).ok()?;
        let path = cols.nth(2)?;
        if !path.starts_with('/') {
            return None;
        }
        // The file as this process sees it; the process's own view (a container's) if not.
        let file =
            if Path::new(path).exists() { PathBuf::from(path) } else { format!("/proc/{pid}/root{path}").into() };
        let start = u64::from_str_radix(start, 16).ok()?;
        Some(Mapping { start, end: u64::from_str_radix(end, 16).ok()?, offset, path: file })
    };
    maps.lines().filter_map(parse).collect()
}

impl Report {
    pub fn new(pid: u32, json: bool) -> Self {
        let mut symbolizer = Symbolizer::new();
        symbolizer.remember_process(pid);
        let mappings = mappings(pid);
        Report { pid, json, start_ns: monotonic_ns(), symbolizer, mappings }
    }

    pub fn write_header(&self, out: &mut Output, language: &str) -> Result<()> {
        if !self.json {
            writeln!(out, "Tracing thread events in process {} (language: {language})... Ctrl-C to quit.", self.pid)?;
            writeln!(out, "{:<8} {:<16} {:<8} {:<30}", "TIME", "ID", "TYPE", "DESCRIPTION")?;
            out.flush()?;
        }
        Ok(())
    }

    /// Writes one thread event and flushes.
    pub fn write_event(&mut self, out: &mut Output, data: &[u8]) -> Result<()> {
        let e: event = from_bytes(data);
        let (kind, id, description) = if e.kind as usize == consts::KIND_PTHREAD {
            ("pthread", e.native_id.to_string(), self.routine(e.pid, e.runtime_id))
        } else {
            let kind = if e.kind as usize == consts::KIND_JAVA_START { "start" } else { "stop" };
            let len = (e.name_len as usize).min(e.name.len());
            let name: Vec<u8> = e.name[..len].iter().map(|&c| c as u8).collect();
            (kind, format!("R={}/N={}", e.runtime_id, e.native_id), String::from_utf8_lossy(&name).into_owned())
        };
        let time_ns = e.ts.saturating_sub(self.start_ns);
        if self.json {
            out.json_line(&JsonThread {
                ts: time_ns as f64 / 1e9,
                pid: e.pid,
                tid: e.tid,
                kind,
                runtime_id: e.runtime_id,
                native_id: e.native_id,
                description: &description,
            })?;
        } else {
            let description = printable(description.as_bytes());
            writeln!(out, "{:<8.3} {:<16} {:<8} {}", time_ns as f64 / 1e9, id, kind, description)?;
            out.flush()?;
        }
        Ok(())
    }

    /// A start routine as `name [file]`, or its address in hex when it has no symbol.
    fn routine(&self, pid: u32, addr: u64) -> String {
        let saved = self.mappings.iter().find(|m| m.start <= addr && addr < m.end).and_then(|m| {
            let sym = self.symbolizer.file_offsets_each(&m.path, &[addr - m.start + m.offset]).pop()?.ok()?;
            let file = m.path.file_name()?.to_string_lossy().into_owned();
            Some(format!("{} [{file}]", sym.name))
        });
        if let Some(named) = saved {
            return named;
        }
        match self.symbolizer.user(pid, &[addr]).pop().flatten() {
            Some(sym) => match sym.module.as_deref().and_then(|m| Path::new(m).file_name()) {
                Some(file) => format!("{} [{}]", sym.name, file.to_string_lossy()),
                None => sym.name,
            },
            None => format!("{addr:#x}"),
        }
    }
}
