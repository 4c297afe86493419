// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funcinterval's output: each interval's histogram of gaps in BCC's layout (a blank line, the time with -T, the
//! log2 histogram, `Detaching...` at the end), or a JSON line per interval; and the Prometheus histogram.

use std::io::Write;

use anyhow::Result;
use common::output::hist::{log2_buckets, write_log2_hist, Bucket, IntervalDiff, Log2Hist};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::hist;

/// The histogram's unit: nsecs, or usecs (-u), or msecs (-m).
#[derive(Debug, Clone, Copy)]
pub struct Unit {
    pub label: &'static str,
    pub ns: u64,
}

impl Unit {
    pub fn from_flags(micros: bool, millis: bool) -> Self {
        match (micros, millis) {
            (_, true) => Unit { label: "msecs", ns: 1_000_000 },
            (true, _) => Unit { label: "usecs", ns: 1_000 },
            _ => Unit { label: "nsecs", ns: 1 },
        }
    }
}

#[derive(Serialize)]
struct JsonInterval<'a> {
    time: &'a str,
    pattern: &'a str,
    unit: &'static str,
    buckets: Vec<Bucket>,
    /// Gaps measured in this interval.
    count: u64,
    /// Their total in `unit`, truncated.
    sum: u64,
    /// Their total in nanoseconds, exact.
    sum_ns: u64,
}

pub struct Report {
    unit: Unit,
    pattern: String,
    timestamp: bool,
    json: bool,
    diff: IntervalDiff<u32>,
}

/// `corebpf_funcinterval_call_interval_seconds`.
const METRIC: &str = "call_interval";
const METRIC_HELP: &str = "Time from one hit of the traced functions or tracepoints to the next (BCC log2 buckets)";

impl Report {
    pub fn new(unit: Unit, pattern: &str, timestamp: bool, json: bool) -> Self {
        Report { unit, pattern: pattern.to_owned(), timestamp, json, diff: IntervalDiff::new() }
    }

    /// The cumulative histogram as Prometheus's `corebpf_funcinterval_call_interval_seconds`.
    pub fn metrics(&self, snapshot: &mut common::output::metrics::Snapshot, cumulative: &hist) {
        use common::output::metrics::HistogramValue;
        let value = HistogramValue::from_log2_slots(&cumulative.slots, cumulative.sum_ns, self.unit.ns);
        snapshot.histogram_seconds(METRIC, METRIC_HELP, &[], Vec::new(), value);
    }

    /// Writes this interval (the difference from the last read of the cumulative histogram).
    pub fn write(&mut self, out: &mut Output, cumulative: &hist, last: bool) -> Result<()> {
        let current = Log2Hist { slots: cumulative.slots.to_vec(), count: cumulative.count, sum: cumulative.sum_ns };
        let hist = self.diff.update([(0, current)]).pop().map(|(_, h)| h).unwrap_or_default();
        if self.json {
            out.json_line(&JsonInterval {
                time: &clock_rfc3339(),
                pattern: &self.pattern,
                unit: self.unit.label,
                buckets: log2_buckets(&hist.slots),
                count: hist.count,
                sum: hist.sum / self.unit.ns,
                sum_ns: hist.sum,
            })?;
            return Ok(());
        }
        writeln!(out)?;
        if self.timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        write_log2_hist(out, &hist.slots, self.unit.label)?;
        if last {
            writeln!(out, "Detaching...")?;
        }
        out.flush()?;
        Ok(())
    }
}
