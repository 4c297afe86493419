//! cpudist's output: per-interval histograms in BCC's text layout or as JSON lines.
//!
//! The BPF side keeps cumulative histograms keyed by process or thread (0 for the single one); [`Report`]
//! subtracts the previous read to get this interval's slices, names the sections as libbpf-tools does
//! (`pid = 1234 comm`) and writes them, with `-e` BCC's average/total/count line.

use anyhow::Result;
use common::attach::maps::c_string;
use common::output::hist::{log2_buckets, write_log2_hist, Bucket, IntervalDiff, Log2Hist};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::hist;

// SAFETY: a plain C struct of integers and chars, generated from cpudist.h.
unsafe impl plain::Plain for hist {}

/// What a histogram is per; the value is the BPF side's `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    All = 0,
    Process = 1,
    Thread = 2,
}

impl Per {
    /// The section header's name, as BCC prints it (`pid = 1234`).
    fn label(self) -> Option<&'static str> {
        match self {
            Per::All => None,
            Per::Process => Some("pid"),
            Per::Thread => Some("tid"),
        }
    }
}

/// One histogram of one interval, as a JSON line.
#[derive(Serialize)]
struct JsonHist<'a> {
    timestamp: &'a str,
    unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    comm: Option<&'a str>,
    buckets: Vec<Bucket>,
    count: u64,
    /// Total time in `unit`, truncated.
    sum: u64,
    /// Total time in nanoseconds, exact.
    sum_ns: u64,
}

pub struct Report {
    unit: &'static str,
    ns_per_unit: u64,
    per: Per,
    extension: bool,
    /// The first task seen in each histogram (its comm), by key.
    comms: std::collections::HashMap<u32, String>,
    diff: IntervalDiff<u32>,
}

impl Report {
    pub fn new(millis: bool, per: Per, extension: bool) -> Self {
        let (unit, ns_per_unit) = if millis { ("msecs", 1_000_000) } else { ("usecs", 1_000) };
        Report { unit, ns_per_unit, per, extension, comms: Default::default(), diff: IntervalDiff::new() }
    }

    /// This interval's non-empty histograms, sorted by key.
    pub fn interval(&mut self, entries: Vec<(u32, hist)>) -> Vec<(u32, Log2Hist)> {
        for (key, h) in &entries {
            self.comms.entry(*key).or_insert_with(|| c_string(&h.comm));
        }
        self.diff.update(
            entries.into_iter().map(|(k, h)| (k, Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns })),
        )
    }

    fn comm(&self, key: u32) -> &str {
        self.comms.get(&key).map(String::as_str).unwrap_or("")
    }

    /// One interval in BCC's layout: a blank line, the time with `-T`, then each histogram.
    pub fn write_text(&mut self, out: &mut Output, entries: Vec<(u32, hist)>, timestamp: bool) -> Result<()> {
        use std::io::Write;
        let sections = self.interval(entries);
        writeln!(out)?;
        if timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        for (key, hist) in &sections {
            if let Some(label) = self.per.label() {
                writeln!(out, "\n{label} = {key} {}", self.comm(*key))?;
            }
            write_log2_hist(out, &hist.slots, self.unit)?;
            if self.extension && hist.count > 0 {
                // BCC's -e line: average and total in the histogram's unit, and the count.
                let (unit, total) = (self.unit, hist.sum / self.ns_per_unit);
                let avg = hist.sum / hist.count / self.ns_per_unit;
                writeln!(out, "\navg = {avg} {unit}, total: {total} {unit}, count: {}\n", hist.count)?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// One JSON line per histogram of this interval; with one histogram, a line even for an idle interval.
    pub fn write_json(&mut self, out: &mut Output, entries: Vec<(u32, hist)>) -> Result<()> {
        let mut sections = self.interval(entries);
        let timestamp = clock_rfc3339();
        if sections.is_empty() && self.per == Per::All {
            sections.push((0, Log2Hist::default()));
        }
        for (key, hist) in &sections {
            let id = |p: Per| (self.per == p).then_some(*key);
            let line = JsonHist {
                timestamp: &timestamp,
                unit: self.unit,
                pid: id(Per::Process),
                tid: id(Per::Thread),
                comm: (self.per != Per::All).then(|| self.comm(*key)),
                buckets: log2_buckets(&hist.slots),
                count: hist.count,
                sum: hist.sum / self.ns_per_unit,
                sum_ns: hist.sum,
            };
            out.json_line(&line)?;
        }
        Ok(())
    }
}
