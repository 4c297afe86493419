// SPDX-License-Identifier: Apache-2.0 OR MIT
//! bashreadline's output: BCC's columns `TIME PID COMMAND` (local time of day when the line was read) or one JSON
//! object per line.

use std::io::Write;

use anyhow::Result;
use common::attach::maps::from_bytes;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and char arrays, generated from bashreadline.h.
unsafe impl plain::Plain for event {}

#[derive(Serialize)]
struct JsonLine<'a> {
    time: &'a str,
    pid: u32,
    tid: u32,
    comm: &'a Name,
    command: &'a Name,
    truncated: bool,
}

pub struct Report {
    json: bool,
}

impl Report {
    pub fn new(json: bool) -> Self {
        Report { json }
    }

    pub fn write_header(&self, out: &mut Output) -> Result<()> {
        if !self.json {
            writeln!(out, "{:<9} {:<7} COMMAND", "TIME", "PID")?;
            out.flush()?;
        }
        Ok(())
    }

    /// Writes one command line and flushes.
    pub fn write_line(&self, out: &mut Output, data: &[u8]) -> Result<()> {
        let e: event = from_bytes(data);
        let command = Name::from_c(&e.line);
        if self.json {
            out.json_line(&JsonLine {
                time: &clock_rfc3339(),
                pid: e.pid,
                tid: e.tid,
                comm: &Name::from_c(&e.comm),
                command: &command,
                truncated: e.truncated != 0,
            })?;
        } else {
            writeln!(out, "{:<9} {:<7} {}", clock_hms(), e.pid, command)?;
            out.flush()?;
        }
        Ok(())
    }
}
