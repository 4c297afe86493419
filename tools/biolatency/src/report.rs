// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biolatency's output: per-interval histograms in BCC's text layout or as JSON lines.
//!
//! The BPF side keeps cumulative histograms keyed by (disk, flags); [`Report`] subtracts the previous read to get
//! this interval's I/Os, names the sections (`disk = vda`, `flags = Sync-Write`) and writes them.

use std::io::{self, Write};

use anyhow::Result;
use common::domain::blockdev::{Disks, RqFlagNames};
use common::output::hist::{log2_buckets, write_log2_hist, Bucket, IntervalDiff, Log2Hist};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::{hist, hist_key};

// SAFETY: plain C structs of integers, generated from biolatency.h.
unsafe impl plain::Plain for hist_key {}
unsafe impl plain::Plain for hist {}

/// The histogram's unit: `usecs`, or `msecs` with `-m`.
#[derive(Debug, Clone, Copy)]
pub struct Units {
    label: &'static str,
    ns_per_unit: u64,
}

impl Units {
    pub fn new(millis: bool) -> Self {
        if millis {
            Units { label: "msecs", ns_per_unit: 1_000_000 }
        } else {
            Units { label: "usecs", ns_per_unit: 1_000 }
        }
    }
}

/// One histogram of one interval, as a JSON line: BCC's keys first (`ts`, `val_type`, `data`, and `disk` or
/// `flags`), so that scripts written for BCC's `-j` read it, then this toolkit's (the exact time, the buckets under
/// the names the other tools' JSON uses, the count and sums).
#[derive(Serialize)]
struct JsonHist<'a> {
    /// BCC's `%Y-%m-%d %H:%M:%S`, local time.
    ts: &'a str,
    /// BCC's name of the unit.
    val_type: &'static str,
    /// BCC's buckets: `interval-start`, `interval-end`, `count`.
    data: Vec<BccBucket>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disk: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flags: Option<String>,
    time: &'a str,
    unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cmd_flags: Option<u64>,
    buckets: Vec<Bucket>,
    count: u64,
    /// Total latency in `unit`, truncated, as `-e` prints it.
    sum: u64,
    /// Total latency in nanoseconds, exact.
    sum_ns: u64,
}

/// One bucket of BCC's `data` list: the same bounds as [`Bucket`], under BCC's names.
#[derive(Serialize)]
struct BccBucket {
    #[serde(rename = "interval-start")]
    start: u64,
    #[serde(rename = "interval-end")]
    end: u64,
    count: u64,
}

/// BCC's `ts` from an RFC 3339 time (`2026-11-29T04:50:00.123+00:00` → `2026-11-29 04:50:00`), so both name the
/// same instant.
fn bcc_ts(rfc3339: &str) -> String {
    rfc3339.get(..19).unwrap_or(rfc3339).replacen('T', " ", 1)
}

/// (kernel dev, cmd_flags): both zero unless -D / -F asked for them.
type Key = (u32, u64);

pub struct Report {
    units: Units,
    disks: Disks,
    flag_names: Option<RqFlagNames>,
    per_disk: bool,
    extension: bool,
    diff: IntervalDiff<Key>,
}

impl Report {
    pub fn new(units: Units, disks: Disks, flag_names: Option<RqFlagNames>, per_disk: bool, extension: bool) -> Self {
        Report { units, disks, flag_names, per_disk, extension, diff: IntervalDiff::new() }
    }

    fn interval(&mut self, entries: Vec<(hist_key, hist)>) -> Vec<(Key, Log2Hist)> {
        self.diff.update(
            entries.into_iter().map(|(k, h)| {
                ((k.dev, k.cmd_flags), Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns })
            }),
        )
    }

    fn disk_name(&self, key: Key) -> Option<&str> {
        self.per_disk.then(|| self.disks.name(key.0))
    }

    fn flags_name(&self, key: Key) -> Option<String> {
        self.flag_names.as_ref().map(|names| names.describe(key.1))
    }

    /// One interval in BCC's layout: a blank line, the time with `-T`, then each histogram.
    pub fn write_text(&mut self, out: &mut Output, entries: Vec<(hist_key, hist)>, timestamp: bool) -> Result<()> {
        let sections = self.interval(entries);
        writeln!(out)?;
        if timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        for (key, hist) in &sections {
            let title = match (self.disk_name(*key), self.flags_name(*key)) {
                (Some(disk), Some(flags)) => Some(format!("disk = {disk}, flags = {flags}")),
                (Some(disk), None) => Some(format!("disk = {disk}")),
                (None, Some(flags)) => Some(format!("flags = {flags}")),
                (None, None) => None,
            };
            if let Some(title) = title {
                writeln!(out, "\n{title}")?;
            }
            write_log2_hist(out, &hist.slots, self.units.label)?;
            if self.extension {
                self.write_extension(out, hist)?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// BCC's `-e` line: average and total in the histogram's unit, and the count.
    fn write_extension(&self, out: &mut impl Write, hist: &Log2Hist) -> io::Result<()> {
        if hist.count == 0 {
            return Ok(());
        }
        let (label, unit) = (self.units.label, self.units.ns_per_unit);
        let total = hist.sum / unit;
        let avg = hist.sum / hist.count / unit;
        writeln!(out, "\navg = {avg} {label}, total: {total} {label}, count: {}\n", hist.count)
    }

    /// One JSON line per histogram of this interval; without -D/-F, one line even for an idle interval.
    pub fn write_json(&mut self, out: &mut Output, entries: Vec<(hist_key, hist)>) -> Result<()> {
        let mut sections = self.interval(entries);
        let timestamp = clock_rfc3339();
        let ts = bcc_ts(&timestamp);
        if sections.is_empty() && !self.per_disk && self.flag_names.is_none() {
            sections.push(((0, 0), Log2Hist::default()));
        }
        for (key, hist) in &sections {
            let buckets = log2_buckets(&hist.slots);
            let line = JsonHist {
                ts: &ts,
                val_type: self.units.label,
                data: buckets.iter().map(|b| BccBucket { start: b.low, end: b.high, count: b.count }).collect(),
                time: &timestamp,
                unit: self.units.label,
                disk: self.disk_name(*key),
                flags: self.flags_name(*key),
                cmd_flags: self.flag_names.as_ref().map(|_| key.1),
                buckets,
                count: hist.count,
                sum: hist.sum / self.units.ns_per_unit,
                sum_ns: hist.sum,
            };
            out.json_line(&line)?;
        }
        Ok(())
    }
}

impl Report {
    /// `--prometheus`: the cumulative histograms as `corebpf_biolatency_io_latency_seconds`, labelled by `device`
    /// with -D and `operation` (read, write, flush, discard, other) with -F; one unlabelled series otherwise,
    /// present before the first I/O. The flag bits that -F prints (Sync, Metadata, ...) are summed over: each
    /// combination would be a series of its own.
    pub fn metrics(&self, snapshot: &mut common::output::metrics::Snapshot, entries: Vec<(hist_key, hist)>) {
        use common::output::metrics::HistogramValue;
        const HELP: &str = "Block device I/O latency (BCC log2 buckets)";
        let mut labels: Vec<&'static str> = Vec::new();
        if self.per_disk {
            labels.push("device");
        }
        if self.flag_names.is_some() {
            labels.push("operation");
        }
        let mut series = Vec::new();
        for (k, h) in entries {
            let key = (k.dev, k.cmd_flags);
            let operation = self.flag_names.as_ref().map(|names| names.operation(k.cmd_flags).to_string());
            let values: Vec<String> = self.disk_name(key).map(str::to_string).into_iter().chain(operation).collect();
            series.push((values, h.slots.to_vec(), h.sum_ns));
        }
        if series.is_empty() && labels.is_empty() {
            series.push((Vec::new(), vec![0; crate::bpf::consts::MAX_SLOTS], 0));
        }
        // Declared even before the first I/O of a labelled histogram, so the family is always in the exposition.
        snapshot.declare_histogram_seconds("io_latency", HELP, &labels);
        for (values, slots, sum_ns) in series {
            // The +Inf bucket is the count: both from the same read of the slots.
            let value = HistogramValue::from_log2_slots(&slots, sum_ns, self.units.ns_per_unit);
            snapshot.histogram_seconds("io_latency", HELP, &labels, values, value);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bcc_ts_is_date_and_time_of_day() {
        assert_eq!(super::bcc_ts("2026-11-29T04:50:07.123+01:00"), "2026-11-29 04:50:07");
    }
}
