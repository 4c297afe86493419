// SPDX-License-Identifier: Apache-2.0 OR MIT
//! wqlat's output: BCC's layout (the banner, then each interval: a blank line, the time with `-T`, and the
//! histogram, or with `-W` a `wqname = NAME` section per workqueue), one JSON line per histogram per interval,
//! or the cumulative histograms as Prometheus metrics.

use std::io::Write;

use anyhow::Result;
use common::output::hist::{log2_buckets, write_log2_hist, Bucket, IntervalDiff, Log2Hist};
use common::output::metrics::{HistogramValue, Snapshot};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

/// The histogram's unit: -N, the default, -m.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Nsecs,
    Usecs,
    Msecs,
}

impl Unit {
    pub fn ns(self) -> u64 {
        match self {
            Unit::Nsecs => 1,
            Unit::Usecs => 1_000,
            Unit::Msecs => 1_000_000,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Unit::Nsecs => "nsecs",
            Unit::Usecs => "usecs",
            Unit::Msecs => "msecs",
        }
    }
}

#[derive(Serialize)]
struct JsonHist<'a> {
    time: &'a str,
    unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    wqname: Option<&'a str>,
    buckets: Vec<Bucket>,
    count: u64,
    sum_ns: u64,
}

pub struct Report {
    unit: Unit,
    per_wq: bool,
    diff: IntervalDiff<String>,
}

impl Report {
    pub fn new(unit: Unit, per_wq: bool) -> Report {
        Report { unit, per_wq, diff: IntervalDiff::new() }
    }

    /// BCC's banner (none for JSON).
    pub fn write_banner(&self, out: &mut Output, json: bool) -> Result<()> {
        if !json {
            writeln!(out, "Tracing work queue request latency time... Hit Ctrl-C to end.")?;
            out.flush()?;
        }
        Ok(())
    }

    /// What the cumulative histograms `hists` (by workqueue name; one, unnamed, without -W) added since the
    /// last interval.
    pub fn write_interval(
        &mut self,
        out: &mut Output,
        hists: Vec<(String, Log2Hist)>,
        json: bool,
        timestamp: bool,
    ) -> Result<()> {
        let sections = self.diff.update(hists);
        if json {
            let now = clock_rfc3339();
            for (name, h) in &sections {
                out.json_line(&JsonHist {
                    time: &now,
                    unit: self.unit.label(),
                    wqname: self.per_wq.then_some(name.as_str()),
                    buckets: log2_buckets(&h.slots),
                    count: h.count,
                    sum_ns: h.sum,
                })?;
            }
            return Ok(());
        }
        writeln!(out)?;
        if timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        for (name, h) in &sections {
            if self.per_wq {
                writeln!(out, "\nwqname = {name}")?;
            }
            write_log2_hist(out, &h.slots, self.unit.label())?;
        }
        out.flush()?;
        Ok(())
    }

    /// `--prometheus`: the cumulative histograms as `corebpf_wqlat_latency_seconds`, labelled by `workqueue` with
    /// -W (one unlabelled series otherwise, present before the first work item).
    pub fn metrics(&self, snapshot: &mut Snapshot, hists: Vec<(String, Log2Hist)>) {
        const HELP: &str = "Workqueue latency, from a work item queued to its execution start (BCC log2 buckets)";
        let labels: &[&'static str] = if self.per_wq { &["workqueue"] } else { &[] };
        let mut series: Vec<(Vec<String>, Log2Hist)> =
            hists.into_iter().map(|(name, h)| (if self.per_wq { vec![name] } else { Vec::new() }, h)).collect();
        if series.is_empty() && !self.per_wq {
            series.push((Vec::new(), Log2Hist { slots: vec![0; crate::bpf::consts::MAX_SLOTS], count: 0, sum: 0 }));
        }
        for (values, h) in series {
            let value = HistogramValue::from_log2_slots(&h.slots, h.sum, self.unit.ns());
            snapshot.histogram_seconds("latency", HELP, labels, values, value);
        }
    }
}
