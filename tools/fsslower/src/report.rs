// SPDX-License-Identifier: Apache-2.0 OR MIT
//! fsslower's output: libbpf-tools' columns (`TIME COMM PID T BYTES OFF_KB LAT(ms) FILENAME`, the format strings
//! of its fsslower.c), its CSV (`-c`), or JSON lines with exact numbers.

use std::io::{self, Write};

use common::domain::fsop::{FsType, Op};
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and integer arrays; the BPF side zeroes it before filling it.
unsafe impl plain::Plain for event {}

/// One slow operation, decoded from the BPF record.
#[derive(Debug, Clone, Serialize)]
pub struct Slow {
    /// The file system traced.
    pub fs: &'static str,
    pub pid: u32,
    pub tid: u32,
    pub comm: Name,
    /// read, write, open or fsync, and its letter in the T column.
    pub op: &'static str,
    #[serde(rename = "type")]
    pub letter: char,
    /// Bytes read or written (negative: the error), the length of an fsync's range (i64::MAX: the whole file), 0
    /// for an open.
    pub bytes: i64,
    /// The file position the operation started at, in bytes.
    pub offset: i64,
    /// How long it took, in nanoseconds.
    pub latency_ns: u64,
    /// When it returned, in nanoseconds of CLOCK_MONOTONIC (the CSV's ENDTIME_ns).
    pub end_ns: u64,
    /// The file's name (its last path component, at most 31 bytes).
    pub file: Name,
}

impl Slow {
    pub fn from_bytes(data: &[u8], fs: FsType) -> Slow {
        let e: event = common::attach::maps::from_bytes(data);
        let op = Op::from_index(e.op).unwrap_or(Op::Read);
        Slow {
            fs: fs.name(),
            pid: e.pid,
            tid: e.tid,
            comm: Name::from_c(&e.task),
            op: op.name(),
            letter: op.letter(),
            bytes: e.size,
            offset: e.offset,
            latency_ns: e.delta_ns,
            end_ns: e.end_ns,
            file: Name::from_c(&e.file),
        }
    }

    /// The BYTES column: libbpf-tools prints `LL_MAX` for an fsync of the whole file.
    fn bytes_text(&self) -> String {
        if self.bytes == i64::MAX {
            "LL_MAX".to_string()
        } else {
            self.bytes.to_string()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Text,
    Csv,
    Json,
}

#[derive(Serialize)]
struct JsonSlow<'a> {
    time: String,
    #[serde(flatten)]
    slow: &'a Slow,
}

pub struct Printer {
    style: Style,
}

impl Printer {
    pub fn new(style: Style) -> Printer {
        Printer { style }
    }

    pub fn write_header(&mut self, out: &mut Output, fs: &str, min_ms: u64, duration: Option<u64>) -> io::Result<()> {
        match self.style {
            Style::Json => return Ok(()),
            Style::Csv => writeln!(out, "ENDTIME_ns,TASK,PID,TYPE,BYTES,OFFSET_b,LATENCY_us,FILE")?,
            Style::Text => {
                if min_ms > 0 {
                    write!(out, "Tracing {fs} operations slower than {min_ms} ms")?;
                } else {
                    write!(out, "Tracing {fs} operations")?;
                }
                match duration {
                    Some(secs) => writeln!(out, " for {secs} secs.")?,
                    None => writeln!(out, "... Hit Ctrl-C to end.")?,
                }
                writeln!(
                    out,
                    "{:<8} {:<16} {:<7} {:1} {:<7} {:<8} {:>7} FILENAME",
                    "TIME", "COMM", "PID", "T", "BYTES", "OFF_KB", "LAT(ms)"
                )?;
            }
        }
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, s: &Slow) -> io::Result<()> {
        match self.style {
            Style::Json => return out.json_line(&JsonSlow { time: clock_rfc3339(), slow: s }),
            Style::Csv => writeln!(
                out,
                "{},{},{},{},{},{},{},{}",
                s.end_ns,
                s.comm,
                s.pid,
                s.letter,
                s.bytes_text(),
                s.offset,
                s.latency_ns / 1000,
                s.file
            )?,
            Style::Text => writeln!(
                out,
                "{:<8} {:<16} {:<7} {} {:<7} {:<8} {:>7.2} {}",
                clock_hms(),
                s.comm,
                s.pid,
                s.letter,
                s.bytes_text(),
                s.offset / 1024,
                (s.latency_ns / 1000) as f64 / 1000.0,
                s.file
            )?,
        }
        out.flush()
    }
}
