// SPDX-License-Identifier: Apache-2.0 OR MIT
//! fsdist's output: for each operation with events in the interval, `operation = 'read'` and its log2 histogram
//! (libbpf-tools' layout), or one JSON line; and the Prometheus histograms, one per operation, in seconds.

use std::io::Write;

use anyhow::Result;
use common::domain::fsop::{FsType, Op};
use common::output::hist::{log2_buckets, write_log2_hist, Bucket, Log2Hist};
use common::output::metrics::{HistogramValue, Snapshot};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::hist;

/// The histograms of every operation, by fsop.h's numbering.
pub type Hists = Vec<Log2Hist>;

/// Copies the BPF side's cumulative histograms (in the memory-mapped .bss the kernel updates as it goes).
pub fn read_hists(hists: &[hist]) -> Hists {
    hists
        .iter()
        .map(|h| {
            // SAFETY: `h` points into the skeleton's mapped .bss, updated concurrently by the kernel: read it as
            // volatile memory.
            let h: hist = unsafe { std::ptr::read_volatile(h) };
            Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns }
        })
        .collect()
}

pub fn empty() -> Hists {
    vec![Log2Hist::default(); Op::ALL.len()]
}

/// What each operation added from `before` to `now`.
pub fn since(now: &Hists, before: &Hists) -> Hists {
    now.iter().zip(before).map(|(n, b)| n.since(b)).collect()
}

#[derive(Serialize)]
struct JsonHist<'a> {
    time: &'a str,
    fs: &'static str,
    operation: &'static str,
    unit: &'static str,
    buckets: Vec<Bucket>,
    count: u64,
    sum_ns: u64,
}

pub struct Report {
    fs: FsType,
    millis: bool,
}

/// The time line above each report: none, libbpf-tools' `-T` (`HH:MM:SS`), or BCC's default with an interval
/// (`HH:MM:SS:`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Clock {
    None,
    Libbpf,
    Bcc,
}

impl Report {
    pub fn new(fs: FsType, millis: bool) -> Report {
        Report { fs, millis }
    }

    pub fn unit(&self) -> &'static str {
        if self.millis {
            "msecs"
        } else {
            "usecs"
        }
    }

    /// One interval in libbpf-tools' layout: a blank line, the time as `clock` asks, then each operation that had
    /// events.
    pub fn write_text(&self, out: &mut Output, hists: &Hists, clock: Clock) -> Result<()> {
        writeln!(out)?;
        match clock {
            Clock::None => {}
            Clock::Libbpf => writeln!(out, "{:<8}", clock_hms())?,
            Clock::Bcc => writeln!(out, "{}:", clock_hms())?,
        }
        for (op, h) in Op::ALL.iter().zip(hists) {
            if h.is_empty() {
                continue;
            }
            writeln!(out, "operation = '{}'", op.name())?;
            write_log2_hist(out, &h.slots, self.unit())?;
            writeln!(out)?;
        }
        out.flush()?;
        Ok(())
    }

    pub fn write_json(&self, out: &mut Output, hists: &Hists) -> Result<()> {
        let timestamp = clock_rfc3339();
        for (op, h) in Op::ALL.iter().zip(hists) {
            if h.is_empty() {
                continue;
            }
            out.json_line(&JsonHist {
                time: &timestamp,
                fs: self.fs.name(),
                operation: op.name(),
                unit: self.unit(),
                buckets: log2_buckets(&h.slots),
                count: h.count,
                sum_ns: h.sum,
            })?;
        }
        Ok(())
    }

    /// `corebpf_fsdist_operation_latency_seconds{fs, operation}`: every operation's cumulative histogram (kept in
    /// microseconds: metrics ignore -m), each operation exported from the start, empty or not.
    pub fn metrics(&self, s: &mut Snapshot, hists: &Hists) {
        const NAME: &str = "operation_latency";
        const HELP: &str = "Time file system operations took, from the call into the file system to its return";
        let labels = ["fs", "operation"];
        s.declare_histogram_seconds(NAME, HELP, &labels);
        for (op, h) in Op::ALL.iter().zip(hists) {
            let value = HistogramValue::from_log2_slots(&h.slots, h.sum, 1000);
            s.histogram_seconds(NAME, HELP, &labels, vec![self.fs.name().into(), op.name().into()], value);
        }
    }
}
