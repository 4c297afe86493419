// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biosnoop's output: BCC's columns (the format strings of BCC's `tools/biosnoop.py`: `TIME(s) COMM PID DISK T
//! SECTOR BYTES [P] [QUE(ms)] LAT(ms)`), libbpf-tools' `-t` timestamp, the request flags with `-e`, or JSON lines.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use common::domain::blockdev::{Disks, RqFlagNames, RqOps};
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output, TraceStart};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and integer arrays; the BPF side fills every field it sends.
unsafe impl plain::Plain for event {}

/// One completed request, decoded from the BPF record.
#[derive(Debug, Clone)]
pub struct Io {
    pub ts_ns: u64,
    pub latency_ns: u64,
    pub queue_ns: u64,
    pub sector: u64,
    pub cmd_flags: u64,
    pub bytes: u32,
    pub pid: u32,
    pub dev: u32,
    pub comm: Name,
}

impl Io {
    pub fn from_bytes(data: &[u8]) -> Io {
        let e: event = common::attach::maps::from_bytes(data);
        Io {
            ts_ns: e.ts_ns,
            latency_ns: e.latency_ns,
            queue_ns: e.queue_ns,
            sector: e.sector,
            cmd_flags: e.cmd_flags,
            bytes: e.bytes,
            pid: e.pid,
            dev: e.dev,
            comm: Name::from_c(&e.comm),
        }
    }
}

/// Which columns to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    pub json: bool,
    /// `-Q`: the QUE(ms) column.
    pub queue: bool,
    /// `-P`: the P column (S sequential, R random, ? first I/O seen on the disk).
    pub pattern: bool,
    /// `-e`: the request flags, last.
    pub extended: bool,
    /// `-t`: wall-clock HH:MM:SS.mmm instead of seconds since the first I/O.
    pub timestamp: bool,
}

#[derive(Serialize)]
struct JsonIo<'a> {
    time: String,
    ts: f64,
    comm: &'a Name,
    pid: u32,
    disk: &'a str,
    dev: String,
    rw: &'static str,
    flags: String,
    cmd_flags: u64,
    /// None for a request with no sector (a flush).
    sector: Option<u64>,
    bytes: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue_ns: Option<u64>,
    latency_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pattern: Option<&'static str>,
}

pub struct Printer {
    style: Style,
    disks: Disks,
    /// Devices not known at start for which /sys was scanned again (once each).
    rescanned: HashSet<u32>,
    flag_names: RqFlagNames,
    ops: RqOps,
    first_ns: Option<u64>,
    /// JSON's `ts` counts from it.
    start: TraceStart,
    /// -P: the sector after the last I/O of each disk.
    next_sector: HashMap<u32, u64>,
}

impl Printer {
    pub fn new(style: Style, disks: Disks, flag_names: RqFlagNames, ops: RqOps) -> Printer {
        Printer {
            style,
            disks,
            rescanned: HashSet::new(),
            flag_names,
            ops,
            first_ns: None,
            start: TraceStart::now(),
            next_sector: HashMap::new(),
        }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        let s = self.style;
        if s.json {
            return Ok(());
        }
        let mut line = String::new();
        if s.timestamp {
            line += &format!("{:<12} ", "TIMESTAMP");
        } else {
            line += &format!("{:<11} ", "TIME(s)");
        }
        line += &format!("{:<14} {:<7} {:<9} {:<1} {:<10} {:<7}", "COMM", "PID", "DISK", "T", "SECTOR", "BYTES");
        if s.pattern {
            line += &format!("{:<1} ", "P");
        }
        if s.queue {
            line += &format!("{:>7} ", "QUE(ms)");
        }
        line += &format!("{:>7}", "LAT(ms)");
        if s.extended {
            line += " FLAGS";
        }
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// The disk's name as BCC prints it (`<unknown>` if /sys has none, even after a rescan for disks added
    /// since the start).
    fn disk_name(&mut self, dev: u32) -> String {
        if self.disks.name(dev) == "?" && self.rescanned.insert(dev) {
            self.disks = Disks::scan();
        }
        match self.disks.name(dev) {
            "?" => "<unknown>".to_string(),
            name => name.to_string(),
        }
    }

    /// -P: S if the I/O starts where the disk's last one ended, R if elsewhere, ? for the disk's first.
    fn pattern(&mut self, io: &Io) -> &'static str {
        let next = io.sector.wrapping_add(io.bytes as u64 / 512);
        match self.next_sector.insert(io.dev, next) {
            Some(expected) if expected == io.sector => "S",
            Some(_) => "R",
            None => "?",
        }
    }

    pub fn write(&mut self, out: &mut Output, io: &Io) -> io::Result<()> {
        let s = self.style;
        let first = *self.first_ns.get_or_insert(io.ts_ns);
        let since = io.ts_ns.saturating_sub(first) as f64 / 1e9;
        let disk = self.disk_name(io.dev);
        // BCC's R and W, and a type of their own for the requests that move no data (D, F, Z, ...).
        let rw = self.ops.of(io.cmd_flags).letter();
        // A flush has no sector: the kernel leaves it at (sector_t)-1.
        let sector = (io.sector != u64::MAX).then_some(io.sector);
        let pattern = s.pattern.then(|| self.pattern(io));
        if s.json {
            return out.json_line(&JsonIo {
                time: clock_rfc3339(),
                ts: self.start.secs(io.ts_ns),
                comm: &io.comm,
                pid: io.pid,
                disk: &disk,
                dev: format!("{}:{}", io.dev >> 20, io.dev & 0xfffff),
                rw,
                flags: self.flag_names.describe(io.cmd_flags),
                cmd_flags: io.cmd_flags,
                sector,
                bytes: io.bytes,
                queue_ns: s.queue.then_some(io.queue_ns),
                latency_ns: io.latency_ns,
                pattern,
            });
        }
        let mut line = String::new();
        if s.timestamp {
            // libbpf-tools' HH:MM:SS.mmm (the milliseconds from the same instant's system time).
            let millis = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            line += &format!("{:<8}.{:03} ", clock_hms(), millis.subsec_millis());
        } else {
            line += &format!("{since:<11.6} ");
        }
        let sector = sector.map_or("-".to_string(), |s| s.to_string());
        line += &format!("{:<14.14} {:<7} {:<9} {:<1} {sector:<10} {:<7}", io.comm, io.pid, disk, rw, io.bytes);
        if let Some(p) = pattern {
            line += &format!("{p:<1} ");
        }
        if s.queue {
            line += &format!("{:>7.2} ", io.queue_ns as f64 / 1e6);
        }
        line += &format!("{:>7.2}", io.latency_ns as f64 / 1e6);
        if s.extended {
            line += " ";
            line += &self.flag_names.describe(io.cmd_flags);
        }
        writeln!(out, "{line}")?;
        out.flush()
    }
}
