// SPDX-License-Identifier: Apache-2.0 OR MIT
//! gethostlatency's output: one line per completed resolver call, in BCC's `TIME PID COMM LATms HOST` columns or
//! as a JSON object with the exact latency in nanoseconds, the function and the host.
//!
//! A host name longer than the BPF side captures is shown with a trailing `...` (and `"truncated": true` in JSON).

use std::io::Write;

use anyhow::{Context, Result};
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::call;

// SAFETY: a plain C struct of integers and byte arrays, generated from gethostlatency.h.
unsafe impl plain::Plain for call {}

/// The traced functions, in the order of `enum resolver_func` in gethostlatency.h.
pub const FUNCS: [&str; 5] = ["getaddrinfo", "gethostbyname", "gethostbyname2", "gethostbyname_r", "gethostbyname2_r"];

/// Marks a host name cut at the captured length.
const TRUNCATED_MARK: &str = "...";

/// One call, as a JSON line.
#[derive(Serialize)]
struct JsonCall<'a> {
    time: &'a str,
    pid: u32,
    tid: u32,
    comm: &'a Name,
    latency_ns: u64,
    function: &'a str,
    host: &'a Name,
    truncated: bool,
}

pub struct Report {
    json: bool,
}

impl Report {
    pub fn new(json: bool) -> Self {
        Report { json }
    }

    /// BCC's column header (text output only).
    pub fn write_header(&self, out: &mut Output) -> Result<()> {
        if !self.json {
            writeln!(out, "{:<9} {:<7} {:<16} {:>10} HOST", "TIME", "PID", "COMM", "LATms")?;
            out.flush()?;
        }
        Ok(())
    }

    /// Writes the record of one completed call and flushes.
    pub fn write_call(&self, out: &mut Output, data: &[u8]) -> Result<()> {
        let mut c = call::default();
        plain::copy_from_bytes(&mut c, data).ok().context("short record from the ring buffer")?;
        let comm = Name::from_c(&c.comm);
        let mut host = Name::from_c(&c.host);
        let truncated = c.truncated != 0;
        if truncated {
            host.push_str(TRUNCATED_MARK);
        }
        let function = FUNCS.get(c.func as usize).copied().unwrap_or("?");
        if self.json {
            out.json_line(&JsonCall {
                time: &clock_rfc3339(),
                pid: c.pid,
                tid: c.tid,
                comm: &comm,
                latency_ns: c.ts,
                function,
                host: &host,
                truncated,
            })?;
        } else {
            let ms = c.ts as f64 / 1e6;
            writeln!(out, "{:<9} {:<7} {:<16} {:>10.2} {}", clock_hms(), c.pid, comm, ms, host)?;
            out.flush()?;
        }
        Ok(())
    }
}
