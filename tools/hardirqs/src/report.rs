//! hardirqs' output: per-interval totals, counts or histograms per handler name, in BCC's layout or as JSON lines.
//!
//! The BPF side keeps a cumulative record per handler name; [`Report`] subtracts the previous read to get this
//! interval's events.

use anyhow::Result;
use common::attach::maps::c_string;
use common::output::hist::{log2_buckets, write_log2_hist, write_totals, Bucket, IntervalDiff, Log2Hist};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::{hist, irq_key};

// SAFETY: plain C structs of integers and chars, generated from hardirqs.h.
unsafe impl plain::Plain for hist {}
unsafe impl plain::Plain for irq_key {}

/// What the report shows: total time (default), event counts (`-C`) or histograms (`-d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Total,
    Count,
    Dist,
}

#[derive(Serialize)]
struct JsonVector<'a> {
    hardirq: &'a str,
    count: u64,
    /// Total time in `unit`, truncated, as the text prints it.
    total: u64,
    total_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    buckets: Option<Vec<Bucket>>,
}

#[derive(Serialize)]
struct JsonInterval<'a> {
    timestamp: &'a str,
    unit: &'static str,
    hardirqs: Vec<JsonVector<'a>>,
}

pub struct Report {
    mode: Mode,
    unit: &'static str,
    ns_per_unit: u64,
    diff: IntervalDiff<String>,
}

impl Report {
    pub fn new(mode: Mode, nanoseconds: bool) -> Self {
        let (unit, ns_per_unit) = if nanoseconds { ("nsecs", 1) } else { ("usecs", 1_000) };
        Report { mode, unit, ns_per_unit, diff: IntervalDiff::new() }
    }

    fn interval(&mut self, entries: Vec<(irq_key, hist)>) -> Vec<(String, Log2Hist)> {
        self.diff.update(
            entries
                .into_iter()
                .map(|(k, h)| (c_string(&k.name), Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns })),
        )
    }

    /// One interval in BCC's layout: a blank line, the time with `-T`, then the table or the histograms.
    pub fn write_text(&mut self, out: &mut Output, entries: Vec<(irq_key, hist)>, timestamp: bool) -> Result<()> {
        use std::io::Write;
        let vectors = self.interval(entries);
        writeln!(out)?;
        if timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        match self.mode {
            Mode::Dist => {
                for (name, h) in &vectors {
                    writeln!(out, "\nhardirq = {name}")?;
                    write_log2_hist(out, &h.slots, self.unit)?;
                }
            }
            Mode::Total | Mode::Count => {
                let (header, rows): (String, Vec<(String, u64)>) = if self.mode == Mode::Count {
                    ("TOTAL_count".into(), vectors.iter().map(|(n, h)| (n.clone(), h.count)).collect())
                } else {
                    (
                        format!("TOTAL_{}", self.unit),
                        vectors.iter().map(|(n, h)| (n.clone(), h.sum / self.ns_per_unit)).collect(),
                    )
                };
                write_totals(out, "HARDIRQ", 26, &header, &rows)?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// One JSON line per interval, with every handler that ran in it.
    pub fn write_json(&mut self, out: &mut Output, entries: Vec<(irq_key, hist)>) -> Result<()> {
        let vectors = self.interval(entries);
        let timestamp = clock_rfc3339();
        let line = JsonInterval {
            timestamp: &timestamp,
            unit: self.unit,
            hardirqs: vectors
                .iter()
                .map(|(name, h)| JsonVector {
                    hardirq: name,
                    count: h.count,
                    total: h.sum / self.ns_per_unit,
                    total_ns: h.sum,
                    buckets: (self.mode == Mode::Dist).then(|| log2_buckets(&h.slots)),
                })
                .collect(),
        };
        out.json_line(&line)?;
        Ok(())
    }
}
