// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The report of tools that keep one log2 histogram per name, such as bitesize's histogram of I/O sizes per
//! process name: a section `Process Name = dd` for each name seen in the interval, in BCC's layout, or one JSON
//! line per name.
//!
//! The BPF side keeps cumulative histograms in a hash map keyed by the name (it never deletes them, so no event
//! is lost between a read and a clear); [`run`] reads them every interval and prints what each name added since
//! the previous read ([`IntervalDiff`]). With a heat map ([`run_with_mean`]'s `heat`), each interval is also a
//! column of it, every name's histogram added up.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;
use serde::Serialize;

use crate::cli::IntervalCount;
use crate::domain::container_names::{ContainerNames, PidContainers};
use crate::output::heatmap::{sum_slots, HeatmapFile};
use crate::output::hist::{log2_buckets, write_log2_hist, Bucket, IntervalDiff, Log2Hist};
use crate::output::stdout::{clock_hms, clock_rfc3339, printable, Output};
use crate::run::{run_intervals, Signals};

/// How the report names things: the banner's `Tracing <what>...`, the section header (`Process Name`) with the
/// JSON field that holds the name (`comm`), and the histogram's unit (`Kbytes`).
pub struct Layout {
    pub what: &'static str,
    pub header: &'static str,
    pub field: &'static str,
    pub unit: &'static str,
}

/// One histogram of one interval, as a JSON line.
#[derive(Serialize)]
struct JsonHist<'a> {
    time: &'a str,
    unit: &'static str,
    #[serde(flatten)]
    name: std::collections::BTreeMap<&'static str, &'a str>,
    buckets: Vec<Bucket>,
    count: u64,
    /// With [`run_with_mean`]: the sum of the values and their mean (integer division, as BCC prints it).
    #[serde(skip_serializing_if = "Option::is_none")]
    sum: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mean: Option<u64>,
}

/// The mean of an interval's values, as BCC's `[AVG n]` shows it.
fn mean_of(hist: &Log2Hist) -> u64 {
    hist.sum.checked_div(hist.count).unwrap_or(0)
}

/// Writes one interval in BCC's layout: a blank line, the time with `-T`, then a section per name.
fn write_text(
    out: &mut Output,
    layout: &Layout,
    sections: &[(String, Log2Hist)],
    timestamp: bool,
    mean: bool,
) -> Result<()> {
    writeln!(out)?;
    if timestamp {
        writeln!(out, "{:<8}", clock_hms())?;
    }
    for (name, hist) in sections {
        if mean {
            writeln!(out, "\n{} = {} [AVG {}]", layout.header, printable(name.as_bytes()), mean_of(hist))?;
        } else {
            writeln!(out, "\n{} = {}", layout.header, printable(name.as_bytes()))?;
        }
        write_log2_hist(out, &hist.slots, layout.unit)?;
    }
    out.flush()?;
    Ok(())
}

/// Writes one JSON line per name of this interval.
fn write_json(out: &mut Output, layout: &Layout, sections: &[(String, Log2Hist)], mean: bool) -> Result<()> {
    let timestamp = clock_rfc3339();
    for (name, hist) in sections {
        let line = JsonHist {
            time: &timestamp,
            unit: layout.unit,
            name: [(layout.field, name.as_str())].into(),
            buckets: log2_buckets(&hist.slots),
            count: hist.count,
            sum: mean.then_some(hist.sum),
            mean: mean.then(|| mean_of(hist)),
        };
        out.json_line(&line)?;
    }
    Ok(())
}

/// The run: the banner (text only), then one report per interval (or one at Ctrl-C) of what each name added to
/// the cumulative histograms `read` returns.
pub fn run(
    signals: &Signals,
    every: &IntervalCount,
    layout: &Layout,
    json: bool,
    timestamp: bool,
    read: impl FnMut() -> Result<Vec<(String, Log2Hist)>>,
) -> Result<()> {
    run_with_mean(signals, every, layout, json, timestamp, false, None, read)
}

/// [`run`], with each histogram's mean when `mean` is set (the histograms' `sum` over their `count`): BCC's
/// ` [AVG n]` after the section's name (tcprtt's `-e`), and `sum` and `mean` fields in JSON; `heat`
/// (`--heatmap FILE.svg`) gets a column per interval and is written when the run ends.
#[allow(clippy::too_many_arguments)]
pub fn run_with_mean(
    signals: &Signals,
    every: &IntervalCount,
    layout: &Layout,
    json: bool,
    timestamp: bool,
    mean: bool,
    mut heat: Option<HeatmapFile>,
    mut read: impl FnMut() -> Result<Vec<(String, Log2Hist)>>,
) -> Result<()> {
    let mut out = Output::new();
    if !json {
        writeln!(out, "Tracing {}... Hit Ctrl-C to end.", layout.what)?;
        out.flush()?;
    }
    let mut diff = IntervalDiff::new();
    run_intervals(signals, every.interval(), every.count, |_| {
        let cumulative = read()?;
        if let Some(heat) = heat.as_mut() {
            heat.push(&sum_slots(cumulative.iter().map(|(_, h)| &h.slots[..])));
        }
        let sections = diff.update(cumulative);
        if json {
            write_json(&mut out, layout, &sections, mean)
        } else {
            write_text(&mut out, layout, &sections, timestamp, mean)
        }
    })?;
    heat.as_ref().map_or(Ok(()), HeatmapFile::finish)
}

/// `--prometheus`: serves the cumulative histograms `read` returns (slots of `bytes_per_unit` bytes, sums in
/// bytes) as the histogram `corebpf_<tool>_<name>_bytes` labelled by the layout's field (`comm`), and `full` (the
/// BPF side's count of events dropped for a full map) as `corebpf_map_full_total`, until a stop signal. Each
/// histogram comes with the cgroup ID of the tasks counted in it (0 unless the BPF side keys by cgroup); with
/// `containers` (`--container-label`) the series also carry `container`, and histograms whose labels come out
/// the same (two cgroups of the host, or of one container) are added up.
#[allow(clippy::too_many_arguments)]
pub fn serve(
    endpoint: crate::host::endpoint::Endpoint,
    signals: &Signals,
    layout: &Layout,
    (name, help): (&str, &str),
    bytes_per_unit: u64,
    full: Option<&u64>,
    mut containers: Option<ContainerNames>,
    mut read: impl FnMut() -> Result<Vec<(String, u64, Log2Hist)>>,
) -> Result<()> {
    use crate::output::metrics::HistogramValue;
    let with_container = [layout.field, PidContainers::LABEL];
    let labels = if containers.is_some() { &with_container[..] } else { &with_container[..1] };
    endpoint.serve(signals, |s| {
        if let Some(full) = full {
            s.map_full("hists", full);
        }
        s.declare_histogram_bytes(name, help, labels);
        let mut series: BTreeMap<Vec<String>, Log2Hist> = BTreeMap::new();
        for (key, cgroup_id, h) in read()? {
            let mut values = vec![key];
            values.extend(containers.as_mut().map(|c| c.label(cgroup_id)));
            series.entry(values).or_default().add(&h);
        }
        for (values, h) in series {
            let value = HistogramValue::from_log2_slots_bytes(&h.slots, h.sum, bytes_per_unit);
            s.histogram_bytes(name, help, labels, values, value);
        }
        Ok(())
    })
}
