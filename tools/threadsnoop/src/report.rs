// SPDX-License-Identifier: Apache-2.0 OR MIT
//! threadsnoop's output: BCC's columns `TIME(ms) PID COMM FUNC` (milliseconds since the first thread seen; the
//! start routine's name, or its address in hex when it has none) or one JSON object per new thread.

use std::io::Write;

use anyhow::Result;
use common::attach::maps::from_bytes;
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::event;
use crate::names::Namer;

// SAFETY: a #[repr(C)] struct of integers and char arrays, generated from threadsnoop.h.
unsafe impl plain::Plain for event {}

#[derive(Serialize)]
struct JsonThread<'a> {
    time: &'a str,
    /// Nanoseconds since the first thread seen (the TIME(ms) column, exact).
    elapsed_ns: u64,
    pid: u32,
    tid: u32,
    comm: &'a Name,
    func: &'a str,
    address: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<&'a str>,
}

pub struct Report {
    json: bool,
    verbose: bool,
    first_ts: Option<u64>,
    namer: Namer,
}

impl Report {
    pub fn new(json: bool, verbose: bool) -> Self {
        Report { json, verbose, first_ts: None, namer: Namer::new() }
    }

    pub fn write_header(&self, out: &mut Output) -> Result<()> {
        if !self.json {
            writeln!(out, "{:<10} {:<7} {:<16} FUNC", "TIME(ms)", "PID", "COMM")?;
            out.flush()?;
        }
        Ok(())
    }

    /// Writes one new thread and flushes.
    pub fn write_event(&mut self, out: &mut Output, data: &[u8]) -> Result<()> {
        let e: event = from_bytes(data);
        let first = *self.first_ts.get_or_insert(e.ts);
        let elapsed_ns = e.ts.saturating_sub(first);
        let comm = Name::from_c(&e.comm);
        let named = self.namer.name(&e);
        if let (Err(why), true) = (&named, self.verbose) {
            eprintln!("cannot name start routine {:#x} of process {}: {why}", e.start, e.pid);
        }
        let (func, module) = match &named {
            Ok(sym) => (sym.name.clone(), sym.module.as_deref()),
            Err(_) => (format!("{:#x}", e.start), None),
        };
        if self.json {
            out.json_line(&JsonThread {
                time: &clock_rfc3339(),
                elapsed_ns,
                pid: e.pid,
                tid: e.tid,
                comm: &comm,
                func: &func,
                address: e.start,
                module,
            })?;
        } else {
            writeln!(out, "{:<10} {:<7} {:<16} {}", elapsed_ns / 1_000_000, e.pid, comm, func)?;
            out.flush()?;
        }
        Ok(())
    }
}
