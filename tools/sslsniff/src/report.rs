// SPDX-License-Identifier: Apache-2.0 OR MIT
//! sslsniff's output: BCC's lines `FUNC TIME(s) COMM PID LEN [UID TID] [LAT(ms)]`, each followed by the data
//! between `----- DATA -----` and `----- END DATA -----` marks (the end mark says how many bytes were not kept),
//! or one JSON object per call.

use std::io::Write;

use anyhow::Result;
use common::attach::maps::from_bytes;
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, printable_lines, Output, TraceStart};
use serde::Serialize;

use crate::bpf::consts::{RW_HANDSHAKE, RW_READ};
use crate::bpf::types::ssl_event;
use crate::Args;

// SAFETY: a #[repr(C)] struct of integers and a char array, generated from sslsniff.h.
unsafe impl plain::Plain for ssl_event {}

/// Hexadecimal digits per line of --hexdump (16 bytes), as BCC wraps them.
const HEX_WIDTH: usize = 32;

#[derive(Serialize)]
struct JsonCall<'a> {
    time: String,
    ts: f64,
    func: &'a str,
    comm: &'a Name,
    pid: u32,
    tid: u32,
    uid: u32,
    len: u32,
    latency_ns: u64,
    /// Bytes of data not kept (beyond --max-buffer-size, or all of them if they could not be read).
    lost_bytes: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_hex: Option<&'a str>,
}

pub struct Report {
    extra: bool,
    latency: bool,
    hexdump: bool,
    json: bool,
    /// The first record's timestamp: TIME(s) counts from it, as in BCC.
    start: Option<u64>,
    /// JSON's `ts` counts from it.
    trace_start: TraceStart,
}

impl Report {
    pub fn new(args: &Args) -> Self {
        Report {
            extra: args.extra,
            latency: args.latency,
            hexdump: args.hexdump,
            json: args.json,
            start: None,
            trace_start: TraceStart::now(),
        }
    }

    pub fn write_header(&self, out: &mut Output) -> Result<()> {
        if self.json {
            return Ok(());
        }
        write!(out, "{:<12} {:<18} {:<16} {:<7} {:<7}", "FUNC", "TIME(s)", "COMM", "PID", "LEN")?;
        if self.extra {
            write!(out, " {:<7} {:<7}", "UID", "TID")?;
        }
        if self.latency {
            write!(out, " {:<7}", "LAT(ms)")?;
        }
        writeln!(out)?;
        out.flush()?;
        Ok(())
    }

    /// Writes one call (a ring-buffer record: the header, then the bytes captured) and flushes.
    pub fn write_call(&mut self, out: &mut Output, data: &[u8]) -> Result<()> {
        let hdr = std::mem::size_of::<ssl_event>();
        let e: ssl_event = from_bytes(data);
        let kept = if e.buf_filled == 1 { (e.captured as usize).min(data.len().saturating_sub(hdr)) } else { 0 };
        let bytes = &data[hdr.min(data.len())..][..kept];
        let start = *self.start.get_or_insert(e.timestamp_ns);
        let time_s = e.timestamp_ns.saturating_sub(start) as f64 / 1e9;
        let rw = e.rw as usize;
        let func = match rw {
            RW_READ => "READ/RECV",
            RW_HANDSHAKE => "HANDSHAKE",
            _ => "WRITE/SEND",
        };
        let comm = Name::from_c(&e.comm);
        let lost_bytes = e.len - kept as u32;
        let text = (!self.hexdump).then(|| String::from_utf8_lossy(bytes));
        let hex = self.hexdump.then(|| hex_lines(bytes));

        if self.json {
            let hex_flat = hex.as_ref().map(|h| h.replace('\n', ""));
            out.json_line(&JsonCall {
                time: clock_rfc3339(),
                ts: self.trace_start.secs(e.timestamp_ns),
                func,
                comm: &comm,
                pid: e.pid,
                tid: e.tid,
                uid: e.uid,
                len: e.len,
                latency_ns: e.delta_ns,
                lost_bytes,
                data: text.as_deref().filter(|_| rw != RW_HANDSHAKE),
                data_hex: hex_flat.as_deref().filter(|_| rw != RW_HANDSHAKE),
            })?;
            return Ok(());
        }

        write!(out, "{func:<12} {time_s:<18.9} {comm:<16} {:<7} {:<6}", e.pid, e.len)?;
        if self.extra {
            write!(out, " {:<7} {:<7}", e.uid, e.tid)?;
        }
        if self.latency {
            let lat = if e.delta_ns != 0 { format!("{:.3}", e.delta_ns as f64 / 1e6) } else { "N/A".to_string() };
            write!(out, " {lat:<7}")?;
        }
        if kept == 0 {
            writeln!(out)?;
        } else {
            // The payload as it reads, but no byte of it reaches the terminal as a control sequence.
            let shown = text.is_some().then(|| printable_lines(bytes));
            let body = match (&shown, &hex) {
                (Some(text), _) => text.as_str(),
                (None, Some(hex)) => hex.as_str(),
                (None, None) => "",
            };
            let end = if lost_bytes > 0 {
                format!("----- END DATA (TRUNCATED, {lost_bytes} bytes lost) -----")
            } else {
                "----- END DATA -----".to_string()
            };
            // BCC's layout: the data between its marks, then two empty lines.
            write!(out, "\n----- DATA -----\n{body}\n{end}\n\n\n")?;
        }
        out.flush()?;
        Ok(())
    }
}

/// The bytes in lowercase hexadecimal, HEX_WIDTH digits a line.
fn hex_lines(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let lines: Vec<&str> =
        hex.as_bytes().chunks(HEX_WIDTH).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_wrapped_at_sixteen_bytes() {
        assert_eq!(hex_lines(b""), "");
        assert_eq!(hex_lines(b"AB"), "4142");
        let twenty: Vec<u8> = (0..20).collect();
        assert_eq!(hex_lines(&twenty), "000102030405060708090a0b0c0d0e0f\n10111213");
    }
}
