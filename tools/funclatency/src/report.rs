// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funclatency's output: each interval's histograms in BCC's layout (`Function = name` sections with -F, `Function
//! = name [PID]` for user functions with -p, then BCC's `avg = ..., total: ..., count: ...` line over all of them),
//! or JSON lines; `Detaching...` at the end.

use std::io::Write;

use anyhow::Result;
use common::output::hist::{log2_buckets, write_log2_hist, Bucket, IntervalDiff, Log2Hist};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::hist;

/// The histogram's unit: nsecs, or usecs (-u), or msecs (-m).
#[derive(Debug, Clone, Copy)]
pub struct Unit {
    label: &'static str,
    ns: u64,
}

impl Unit {
    pub fn from_flags(micros: bool, millis: bool) -> Self {
        match (micros, millis) {
            (_, true) => Unit { label: "msecs", ns: 1_000_000 },
            (true, _) => Unit { label: "usecs", ns: 1_000 },
            _ => Unit { label: "nsecs", ns: 1 },
        }
    }

    pub fn ns_per_unit(self) -> u64 {
        self.ns
    }

    pub fn label(self) -> &'static str {
        self.label
    }
}

#[derive(Serialize)]
struct JsonHist<'a> {
    time: &'a str,
    unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    function: Option<&'a str>,
    /// With -F, -p and a user function, the process (BCC's `[PID]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    buckets: Vec<Bucket>,
    count: u64,
    /// Total latency in `unit`, truncated.
    sum: u64,
    /// Total latency in nanoseconds, exact.
    sum_ns: u64,
}

pub struct Report {
    unit: Unit,
    names: Vec<String>,
    per_function: bool,
    /// The process the user functions are timed in (-p), named in -F's headings as BCC does.
    process: Option<u32>,
    timestamp: bool,
    json: bool,
    diff: IntervalDiff<u32>,
}

impl Report {
    pub fn new(unit: Unit, names: Vec<String>, per_function: bool, timestamp: bool, json: bool) -> Self {
        Report { unit, names, per_function, process: None, timestamp, json, diff: IntervalDiff::new() }
    }

    /// User functions timed in process `pid` (-p): BCC heads -F's histograms `Function = name [PID]`.
    pub fn in_process(mut self, pid: Option<u32>) -> Self {
        self.process = pid;
        self
    }

    /// The cumulative histograms as Prometheus's `corebpf_funclatency_call_latency_seconds`, labelled by
    /// `function` with -F.
    pub fn metrics(&self, snapshot: &mut common::output::metrics::Snapshot, cumulative: Vec<hist>) {
        use common::output::metrics::HistogramValue;
        const HELP: &str = "Latency of the traced functions' calls (BCC log2 buckets)";
        let labels: &[&'static str] = if self.per_function { &["function"] } else { &[] };
        for (i, h) in cumulative.iter().enumerate() {
            let values: Vec<String> = self.function(i as u32).map(str::to_string).into_iter().collect();
            let value = HistogramValue::from_log2_slots(&h.slots, h.sum_ns, self.unit.ns);
            snapshot.histogram_seconds("call_latency", HELP, labels, values, value);
        }
    }

    /// Writes this interval (the difference from the last read of the cumulative histograms).
    pub fn write(&mut self, out: &mut Output, cumulative: Vec<hist>, last: bool) -> Result<()> {
        let current = cumulative
            .into_iter()
            .enumerate()
            .map(|(i, h)| (i as u32, Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns }));
        let sections = self.diff.update(current);
        if self.json {
            self.write_json(out, &sections)
        } else {
            self.write_text(out, &sections, last)
        }
    }

    fn function(&self, index: u32) -> Option<&str> {
        self.per_function.then(|| self.names.get(index as usize).map(String::as_str).unwrap_or("?"))
    }

    fn write_text(&self, out: &mut Output, sections: &[(u32, Log2Hist)], last: bool) -> Result<()> {
        writeln!(out)?;
        if self.timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        for (index, hist) in sections {
            match (self.function(*index), self.process) {
                (Some(name), Some(pid)) => writeln!(out, "\nFunction = {name} [{pid}]")?,
                (Some(name), None) => writeln!(out, "\nFunction = {name}")?,
                (None, _) => {}
            }
            write_log2_hist(out, &hist.slots, self.unit.label)?;
        }
        let (count, sum_ns) = sections.iter().fold((0, 0), |(c, s), (_, h)| (c + h.count, s + h.sum));
        if let Some(avg_ns) = sum_ns.checked_div(count) {
            let label = self.unit.label;
            let (avg, total) = (avg_ns / self.unit.ns, sum_ns / self.unit.ns);
            writeln!(out, "\navg = {avg} {label}, total: {total} {label}, count: {count}\n")?;
        }
        if last {
            writeln!(out, "Detaching...")?;
        }
        out.flush()?;
        Ok(())
    }

    /// One JSON line per histogram; without -F, one line even for an idle interval.
    fn write_json(&self, out: &mut Output, sections: &[(u32, Log2Hist)]) -> Result<()> {
        let timestamp = clock_rfc3339();
        let idle = [(0, Log2Hist::default())];
        let sections = if sections.is_empty() && !self.per_function { &idle[..] } else { sections };
        for (index, hist) in sections {
            out.json_line(&JsonHist {
                time: &timestamp,
                unit: self.unit.label,
                function: self.function(*index),
                pid: self.process.filter(|_| self.per_function),
                buckets: log2_buckets(&hist.slots),
                count: hist.count,
                sum: hist.sum / self.unit.ns,
                sum_ns: hist.sum,
            })?;
        }
        Ok(())
    }
}
