// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The report of the scheduler latency histogram tools (cpudist, runqlat): log2 histograms kept by the BPF side
//! in one histogram or per process (`-P`), thread (`-L`) or PID namespace (`--pidnss`) ([`Per`]), each with the
//! comm of the first task seen in it, and the run that prints them every interval ([`run`]).
//!
//! The histograms are cumulative; [`Report`] subtracts the previous read to get the interval's, names the
//! sections as libbpf-tools does (`pid = 1234 comm`, or as BCC's runqlat `pid = 1234`) and writes them in BCC's layout (a blank line, the time with
//! `-T`, each histogram, with `-e` BCC's average/total/count line), or as one JSON line per histogram; with
//! `--heatmap` ([`Report::heatmap`]) the run also draws every interval, all histograms added up, as a heat map.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;
use serde::Serialize;

use crate::cli::IntervalCount;
use crate::domain::container_names::{ContainerLabelArgs, PidContainers};
use crate::output::heatmap::{sum_slots, HeatmapFile};
use crate::output::hist::{log2_buckets, write_log2_hist, Bucket, IntervalDiff, Log2Hist};
use crate::output::stdout::{clock_hms, clock_rfc3339, printable, Output};
use crate::run::{run_intervals, Signals};

/// What a histogram is per; the value is the BPF side's `per`, numbered as `bpf/include/per.h`'s `PER_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    All = 0,
    Process = 1,
    Thread = 2,
    PidNamespace = 3,
}

impl Per {
    /// From the flags `-P`, `-L` and `--pidnss` (false where a tool has no such flag), in that order of precedence.
    pub fn from_flags(pids: bool, tids: bool, pidnss: bool) -> Per {
        if pids {
            Per::Process
        } else if tids {
            Per::Thread
        } else if pidnss {
            Per::PidNamespace
        } else {
            Per::All
        }
    }

    /// The section header's name, as BCC prints it (`pid = 1234`).
    fn label(self) -> Option<&'static str> {
        match self {
            Per::All => None,
            Per::Process => Some("pid"),
            Per::Thread => Some("tid"),
            Per::PidNamespace => Some("pidns"),
        }
    }
}

/// One histogram's cumulative record as read from the BPF map: its key (0 for the single one), the comm of the
/// first task seen in it, and the histogram.
pub type Entry = (u32, String, Log2Hist);

/// One histogram of one interval, as a JSON line.
#[derive(Serialize)]
struct JsonHist<'a> {
    time: &'a str,
    unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pidns: Option<u32>,
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
    comms: HashMap<u32, String>,
    /// Section headings name the comm too (`pid = 1234 comm`, libbpf-tools' and BCC's cpudist's layout), not
    /// the key alone (`pid = 1234`, BCC's runqlat).
    comm_in_heading: bool,
    diff: IntervalDiff<u32>,
    heat: Option<HeatmapFile>,
    /// `--container-label`: the container of each process or thread, for its series.
    containers: Option<RefCell<PidContainers>>,
}

impl Report {
    /// Histograms in milliseconds (`-m`) or microseconds; `extension` (`-e`) adds BCC's average/total/count line.
    pub fn new(millis: bool, per: Per, extension: bool) -> Self {
        let (unit, ns_per_unit) = if millis { ("msecs", 1_000_000) } else { ("usecs", 1_000) };
        Report {
            unit,
            ns_per_unit,
            per,
            extension,
            comms: HashMap::new(),
            comm_in_heading: true,
            diff: IntervalDiff::new(),
            heat: None,
            containers: None,
        }
    }

    /// Whether section headings name the comm after the key (by default they do).
    pub fn comm_in_heading(mut self, yes: bool) -> Self {
        self.comm_in_heading = yes;
        self
    }

    /// `--container-label` ([`ContainerLabelArgs`]): the per-process (-P) or per-thread (-L) series also carry
    /// their task's container. A usage error without --prometheus or without -P or -L.
    pub fn container_label(mut self, args: ContainerLabelArgs, serving: bool) -> Self {
        let per_task = matches!(self.per, Per::Process | Per::Thread);
        self.containers = args.open(serving, per_task, "-P or -L").map(RefCell::new);
        self
    }

    /// `--heatmap FILE.svg` for a run titled `title`: the file is created now (a path that cannot be written fails
    /// before tracing) and the picture written when the run ends.
    pub fn heatmap(mut self, path: Option<&std::path::Path>, title: &str) -> Result<Self> {
        self.heat = HeatmapFile::open(path, title, self.unit)?;
        Ok(self)
    }

    /// This interval's non-empty histograms, sorted by key.
    pub fn interval(&mut self, entries: Vec<Entry>) -> Vec<(u32, Log2Hist)> {
        let mut hists = Vec::with_capacity(entries.len());
        for (key, comm, hist) in entries {
            self.comms.entry(key).or_insert(comm);
            hists.push((key, hist));
        }
        self.diff.update(hists)
    }

    fn comm(&self, key: u32) -> &str {
        self.comms.get(&key).map(String::as_str).unwrap_or("")
    }

    /// One interval in BCC's layout: a blank line, the time with `-T`, then each histogram.
    pub fn write_text(&mut self, out: &mut Output, entries: Vec<Entry>, timestamp: bool) -> Result<()> {
        let sections = self.interval(entries);
        writeln!(out)?;
        if timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        for (key, hist) in &sections {
            if let Some(label) = self.per.label() {
                if self.comm_in_heading {
                    writeln!(out, "\n{label} = {key} {}", printable(self.comm(*key).as_bytes()))?;
                } else {
                    writeln!(out, "\n{label} = {key}")?;
                }
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
    pub fn write_json(&mut self, out: &mut Output, entries: Vec<Entry>) -> Result<()> {
        let mut sections = self.interval(entries);
        let timestamp = clock_rfc3339();
        if sections.is_empty() && self.per == Per::All {
            sections.push((0, Log2Hist::default()));
        }
        for (key, hist) in &sections {
            let id = |p: Per| (self.per == p).then_some(*key);
            let line = JsonHist {
                time: &timestamp,
                unit: self.unit,
                pid: id(Per::Process),
                tid: id(Per::Thread),
                pidns: id(Per::PidNamespace),
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

impl Report {
    /// `--prometheus`: the cumulative histograms as `corebpf_<tool>_<name>_seconds`, labelled `pid` and `comm`
    /// (-P), `tid` and `comm` (-L) or `pidns` (--pidnss), with `container` after them with --container-label;
    /// one unlabelled series otherwise, present from the start.
    pub fn metrics(&self, s: &mut crate::output::metrics::Snapshot, name: &str, help: &str, entries: Vec<Entry>) {
        use crate::output::metrics::HistogramValue;
        let mut containers = self.containers.as_ref().map(RefCell::borrow_mut);
        let labels: &[&'static str] = match (self.per, containers.is_some()) {
            (Per::All, _) => &[],
            (Per::Process, false) => &["pid", "comm"],
            (Per::Process, true) => &["pid", "comm", PidContainers::LABEL],
            (Per::Thread, false) => &["tid", "comm"],
            (Per::Thread, true) => &["tid", "comm", PidContainers::LABEL],
            (Per::PidNamespace, _) => &["pidns"],
        };
        let mut series: Vec<(Vec<String>, Log2Hist)> = entries
            .into_iter()
            .map(|(key, comm, hist)| match self.per {
                Per::All => (Vec::new(), hist),
                Per::PidNamespace => (vec![key.to_string()], hist),
                _ => {
                    let mut values = vec![key.to_string(), comm];
                    values.extend(containers.as_mut().map(|c| c.label(key)));
                    (values, hist)
                }
            })
            .collect();
        if series.is_empty() && self.per == Per::All {
            series.push((Vec::new(), Log2Hist { slots: vec![0; 2], count: 0, sum: 0 }));
        }
        for (values, h) in series {
            let value = HistogramValue::from_log2_slots(&h.slots, h.sum, self.ns_per_unit);
            s.histogram_seconds(name, help, labels, values, value);
        }
    }
}

/// `--prometheus`: serves the histograms (see [`Report::metrics`]) and the BPF side's counters of the start map
/// and the histogram map being full (`full`: start, hists), until a stop signal.
pub fn serve(
    endpoint: crate::host::endpoint::Endpoint,
    signals: &Signals,
    report: &Report,
    (name, help): (&str, &str),
    full: [&u64; 2],
    mut read: impl FnMut() -> Result<Vec<Entry>>,
) -> Result<()> {
    endpoint.serve(signals, |s| {
        s.map_full("start", full[0]);
        s.map_full("hists", full[1]);
        report.metrics(s, name, help, read()?);
        Ok(())
    })
}

/// The run: BCC's banner `Tracing <what>... Hit Ctrl-C to end.` (text only), then one report per interval (or
/// one at Ctrl-C) of what `read` returns, every histogram's cumulative record.
pub fn run(
    signals: &Signals,
    every: &IntervalCount,
    what: &str,
    mut report: Report,
    json: bool,
    timestamp: bool,
    mut read: impl FnMut() -> Result<Vec<Entry>>,
) -> Result<()> {
    let mut out = Output::new();
    if !json {
        writeln!(out, "Tracing {what}... Hit Ctrl-C to end.")?;
        out.flush()?;
    }
    run_intervals(signals, every.interval(), every.count, |_| {
        let entries = read()?;
        if let Some(heat) = report.heat.as_mut() {
            heat.push(&sum_slots(entries.iter().map(|(_, _, h)| &h.slots[..])));
        }
        if json {
            report.write_json(&mut out, entries)
        } else {
            report.write_text(&mut out, entries, timestamp)
        }
    })?;
    report.heat.map(|h| h.finish()).transpose()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_is_numbered_as_the_c_header() {
        let header = include_str!("../../../bpf/include/per.h");
        for (per, name) in [
            (Per::All, "PER_ALL"),
            (Per::Process, "PER_PROCESS"),
            (Per::Thread, "PER_THREAD"),
            (Per::PidNamespace, "PER_PIDNS"),
        ] {
            assert_eq!(per as usize, crate::c_header::define(header, name), "{name}");
        }
    }
}
