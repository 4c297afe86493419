// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biosnoop's output: BCC's columns (the format strings of BCC's `tools/biosnoop.py`: `TIME(s) COMM PID DISK T
//! SECTOR BYTES [P] [QUE(ms)] LAT(ms)`), libbpf-tools' `-t` timestamp, the request flags with `-e`, or JSON lines.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use common::attach::features::KernelBtf;
use common::attach::maps::c_string;
use common::domain::blockdev::{Disks, RqFlagNames};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
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
    pub comm: String,
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
            comm: c_string(&e.comm),
        }
    }
}

/// Tells writes from everything else as BCC's `T` column does: `W` when the request's operation is
/// REQ_OP_WRITE, else `R`. The operation's bit width and value come from the kernel's BTF.
#[derive(Debug, Clone, Copy)]
pub struct WriteOp {
    op_mask: u64,
    write: u64,
}

impl WriteOp {
    pub fn from_btf(btf: &KernelBtf) -> WriteOp {
        let op_bits = btf.enum_value("__REQ_FAILFAST_DEV").unwrap_or(8) as u32;
        let write = btf.enum_value("REQ_OP_WRITE").unwrap_or(1) as u64;
        WriteOp { op_mask: (1u64 << op_bits) - 1, write }
    }

    fn rw(self, cmd_flags: u64) -> &'static str {
        if cmd_flags & self.op_mask == self.write {
            "W"
        } else {
            "R"
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
    comm: &'a str,
    pid: u32,
    disk: &'a str,
    dev: String,
    rw: &'static str,
    flags: String,
    cmd_flags: u64,
    sector: u64,
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
    write_op: WriteOp,
    first_ns: Option<u64>,
    /// -P: the sector after the last I/O of each disk.
    next_sector: HashMap<u32, u64>,
}

impl Printer {
    pub fn new(style: Style, disks: Disks, flag_names: RqFlagNames, write_op: WriteOp) -> Printer {
        Printer {
            style,
            disks,
            rescanned: HashSet::new(),
            flag_names,
            write_op,
            first_ns: None,
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
        let rw = self.write_op.rw(io.cmd_flags);
        let pattern = s.pattern.then(|| self.pattern(io));
        if s.json {
            return out.json_line(&JsonIo {
                time: clock_rfc3339(),
                ts: since,
                comm: &io.comm,
                pid: io.pid,
                disk: &disk,
                dev: format!("{}:{}", io.dev >> 20, io.dev & 0xfffff),
                rw,
                flags: self.flag_names.describe(io.cmd_flags),
                cmd_flags: io.cmd_flags,
                sector: io.sector,
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
        line += &format!("{:<14.14} {:<7} {:<9} {:<1} {:<10} {:<7}", io.comm, io.pid, disk, rw, io.sector, io.bytes);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_is_the_operation_not_a_flag_bit() {
        let op = WriteOp { op_mask: 0xff, write: 1 };
        assert_eq!(op.rw(1), "W");
        assert_eq!(op.rw(1 | 1 << 11), "W");
        assert_eq!(op.rw(0), "R");
        assert_eq!(op.rw(2), "R");
        assert_eq!(op.rw(3), "R");
    }
}
