//! softirqs' output: per-interval totals, counts or histograms per vector, in BCC's layout or as JSON lines.
//!
//! The BPF side keeps a cumulative record per vector; [`Report`] subtracts the previous read to get this
//! interval's events and names the vectors from the kernel's BTF (`NET_RX_SOFTIRQ` is `net_rx`, as BCC prints).

use anyhow::{bail, Result};
use common::output::hist::{log2_buckets, write_log2_hist, write_totals, Bucket, IntervalDiff, Log2Hist};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::hist;

// SAFETY: a plain C struct of integers, generated from softirqs.h.
unsafe impl plain::Plain for hist {}

/// The names of the softirq vectors by number, from the kernel's anonymous enum of `*_SOFTIRQ` enumerators
/// (`NET_RX_SOFTIRQ` → `net_rx`), without its `NR_SOFTIRQS` end marker.
pub fn vector_names() -> Result<Vec<(u32, String)>> {
    let members = common::attach::btf_enums::enum_with_member("NET_RX_SOFTIRQ")?;
    let names: Vec<(u32, String)> = members
        .into_iter()
        .filter_map(|(name, value)| {
            let short = name.strip_suffix("_SOFTIRQ")?;
            Some((u32::try_from(value).ok()?, short.to_ascii_lowercase()))
        })
        .collect();
    if names.is_empty() {
        bail!("the kernel's BTF has no enum of softirq vectors (NET_RX_SOFTIRQ)");
    }
    Ok(names)
}

/// What the report shows: total time (default), event counts (`-C`) or histograms (`-d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Total,
    Count,
    Dist,
}

#[derive(Serialize)]
struct JsonVector<'a> {
    softirq: &'a str,
    vec: u32,
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
    softirqs: Vec<JsonVector<'a>>,
}

pub struct Report {
    names: Vec<(u32, String)>,
    mode: Mode,
    unit: &'static str,
    ns_per_unit: u64,
    diff: IntervalDiff<u32>,
}

impl Report {
    pub fn new(names: Vec<(u32, String)>, mode: Mode, nanoseconds: bool) -> Self {
        let (unit, ns_per_unit) = if nanoseconds { ("nsecs", 1) } else { ("usecs", 1_000) };
        Report { names, mode, unit, ns_per_unit, diff: IntervalDiff::new() }
    }

    fn name(&self, vec: u32) -> String {
        self.names.iter().find(|(v, _)| *v == vec).map(|(_, n)| n.clone()).unwrap_or_else(|| format!("vec {vec}"))
    }

    fn interval(&mut self, entries: Vec<(u32, hist)>) -> Vec<(u32, Log2Hist)> {
        self.diff.update(
            entries.into_iter().map(|(k, h)| (k, Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns })),
        )
    }

    /// One interval in BCC's layout: a blank line, the time with `-T`, then the table or the histograms.
    pub fn write_text(&mut self, out: &mut Output, entries: Vec<(u32, hist)>, timestamp: bool) -> Result<()> {
        use std::io::Write;
        let vectors = self.interval(entries);
        writeln!(out)?;
        if timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        match self.mode {
            Mode::Dist => {
                for (vec, h) in &vectors {
                    writeln!(out, "\nsoftirq = {}", self.name(*vec))?;
                    write_log2_hist(out, &h.slots, self.unit)?;
                }
            }
            Mode::Total | Mode::Count => {
                let (header, rows): (String, Vec<(String, u64)>) = if self.mode == Mode::Count {
                    ("TOTAL_count".into(), vectors.iter().map(|(v, h)| (self.name(*v), h.count)).collect())
                } else {
                    (
                        format!("TOTAL_{}", self.unit),
                        vectors.iter().map(|(v, h)| (self.name(*v), h.sum / self.ns_per_unit)).collect(),
                    )
                };
                write_totals(out, "SOFTIRQ", 16, &header, &rows)?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// One JSON line per interval, with every vector that ran in it.
    pub fn write_json(&mut self, out: &mut Output, entries: Vec<(u32, hist)>) -> Result<()> {
        let vectors = self.interval(entries);
        let timestamp = clock_rfc3339();
        let names: Vec<String> = vectors.iter().map(|(v, _)| self.name(*v)).collect();
        let line = JsonInterval {
            timestamp: &timestamp,
            unit: self.unit,
            softirqs: vectors
                .iter()
                .zip(&names)
                .map(|((vec, h), name)| JsonVector {
                    softirq: name,
                    vec: *vec,
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
