// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The IRQ time tools (hardirqs, softirqs): their shared flags ([`IrqArgs`]), the choice and attachment of their
//! entry/exit tracepoint pair ([`attach_pair`]), and the run and report ([`run`], [`Report`]).
//!
//! Each tool's BPF side keeps, per IRQ (a hard IRQ handler name, a softirq vector), a cumulative count, time sum
//! and log2 histogram; the report subtracts the previous read to get the interval's events and prints them as
//! BCC does: total time (default), event counts (`-C`) or histograms (`-d`), a blank line and the time with `-T`
//! before each interval, or one JSON line per interval (`-j`). [`Kind`] holds what differs between the tools:
//! the words of the banner, the column header and width, and the names of the JSON fields. `--heatmap FILE.svg`
//! draws the handler times of every interval, all IRQs added up, whatever the report shows.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use libbpf_rs::{Link, Object};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::attach::loader::attach_loaded_tracepoint;
use crate::cli::IntervalCount;
use crate::output::heatmap::{sum_slots, HeatmapFile};
use crate::output::hist::{log2_buckets, write_log2_hist, write_totals, IntervalDiff, Log2Hist};
use crate::output::stdout::{clock_hms, clock_rfc3339, Output};
use crate::run::{run_intervals, Signals};

/// The IRQ time tools' flags, as BCC's hardirqs and softirqs have them. softirqs calls `-C` `--events` with its
/// own help: `#[command(mut_arg("count_events", ...))]` on the tool's command renames it (the id is not `count`,
/// which is the `[COUNT]` of [`IntervalCount`]).
#[derive(Debug, Clone, Args)]
pub struct IrqArgs {
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    pub timestamp: bool,
    /// Print times in nanoseconds instead of microseconds
    #[arg(short = 'N', long)]
    pub nanoseconds: bool,
    /// Count the interrupts instead of timing them
    #[arg(id = "count_events", short = 'C', long = "count", conflicts_with_all = ["dist", "nanoseconds"])]
    pub count: bool,
    /// Print a log2 histogram of the handler times for each interrupt instead of totals
    #[arg(short = 'd', long)]
    pub dist: bool,
    /// Only interrupts handled on this CPU
    #[arg(short = 'c', long, value_name = "CPU")]
    pub cpu: Option<u32>,
    /// Print JSON lines: an object per report
    #[arg(short = 'j', long)]
    pub json: bool,
    #[command(flatten)]
    pub export: crate::cli::ExportArgs,
    #[command(flatten)]
    pub verbose: crate::cli::Verbose,
    #[command(flatten)]
    pub every: IntervalCount,
}

impl IrqArgs {
    /// The flags as they apply: `-N` is a display flag, off with `--prometheus` (metrics keep one fixed unit).
    pub fn applied(mut self) -> Self {
        self.nanoseconds = self.export.display(self.nanoseconds);
        self
    }

    /// With `--prometheus`, the endpoint, bound now (before loading); see [`crate::cli::ExportArgs::endpoint`].
    pub fn endpoint(&self, host: &crate::host::Host) -> Result<Option<crate::host::endpoint::Endpoint>> {
        self.export.endpoint(host, self.every.interval.is_some())
    }

    /// What the report shows, from `-C` and `-d`.
    pub fn mode(&self) -> Mode {
        if self.count {
            Mode::Count
        } else if self.dist {
            Mode::Dist
        } else {
            Mode::Total
        }
    }

    /// Checks `-c CPU` against the CPUs the machine has (one line and exit 1 if it has no such CPU).
    pub fn check_cpu(&self) -> Result<()> {
        if let Some(cpu) = self.cpu {
            crate::attach::perf::sampling_cpus(Some(cpu))?;
        }
        Ok(())
    }
}

/// What the report shows: total time (default), event counts (`-C`) or histograms (`-d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Total,
    Count,
    Dist,
}

/// What differs between the IRQ time tools' outputs.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// In the banner: `Tracing <words> event time...` (`hard irq`).
    pub words: &'static str,
    /// The JSON field of an IRQ's name and the `<name> = ` before each histogram (`hardirq`).
    pub field: &'static str,
    /// The JSON array of the interval's IRQs (`hardirqs`).
    pub array: &'static str,
    /// The totals table's name column header (`HARDIRQ`) and its width.
    pub column: &'static str,
    pub width: usize,
}

/// One IRQ: its name and, for softirqs, its vector number (also in JSON as `vec`). The report lists IRQs in this
/// order: by vector, then by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Irq {
    pub vec: Option<u32>,
    pub name: String,
}

/// The report: the previous cumulative read, and the unit.
pub struct Report {
    kind: Kind,
    mode: Mode,
    unit: &'static str,
    ns_per_unit: u64,
    diff: IntervalDiff<Irq>,
}

/// One IRQ in a JSON line: `{"<field>": name, ["vec": n,] "count", "total", "total_ns"[, "buckets"]}`.
struct JsonIrq<'a> {
    report: &'a Report,
    irq: &'a Irq,
    hist: &'a Log2Hist,
}

impl Serialize for JsonIrq<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(self.report.kind.field, &self.irq.name)?;
        if let Some(vec) = self.irq.vec {
            map.serialize_entry("vec", &vec)?;
        }
        map.serialize_entry("count", &self.hist.count)?;
        // Total time in `unit`, truncated, as the text prints it.
        map.serialize_entry("total", &(self.hist.sum / self.report.ns_per_unit))?;
        map.serialize_entry("total_ns", &self.hist.sum)?;
        if self.report.mode == Mode::Dist {
            map.serialize_entry("buckets", &log2_buckets(&self.hist.slots))?;
        }
        map.end()
    }
}

/// One interval's JSON line: `{"time", "unit", "<array>": [...]}`.
struct JsonInterval<'a> {
    report: &'a Report,
    time: String,
    irqs: &'a [(Irq, Log2Hist)],
}

impl Serialize for JsonInterval<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("time", &self.time)?;
        map.serialize_entry("unit", self.report.unit)?;
        let irqs: Vec<JsonIrq<'_>> =
            self.irqs.iter().map(|(irq, hist)| JsonIrq { report: self.report, irq, hist }).collect();
        map.serialize_entry(self.report.kind.array, &irqs)?;
        map.end()
    }
}

impl Report {
    pub fn new(kind: Kind, mode: Mode, nanoseconds: bool) -> Self {
        let (unit, ns_per_unit) = if nanoseconds { ("nsecs", 1) } else { ("usecs", 1_000) };
        Report { kind, mode, unit, ns_per_unit, diff: IntervalDiff::new() }
    }

    /// One interval in BCC's layout: a blank line, the time with `-T`, then the table or the histograms.
    pub fn write_text(&mut self, out: &mut Output, entries: Vec<(Irq, Log2Hist)>, timestamp: bool) -> Result<()> {
        let irqs = self.diff.update(entries);
        writeln!(out)?;
        if timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        match self.mode {
            Mode::Dist => {
                for (irq, h) in &irqs {
                    writeln!(out, "\n{} = {}", self.kind.field, irq.name)?;
                    write_log2_hist(out, &h.slots, self.unit)?;
                }
            }
            Mode::Total | Mode::Count => {
                let (header, rows): (String, Vec<(String, u64)>) = if self.mode == Mode::Count {
                    ("TOTAL_count".into(), irqs.iter().map(|(irq, h)| (irq.name.clone(), h.count)).collect())
                } else {
                    (
                        format!("TOTAL_{}", self.unit),
                        irqs.iter().map(|(irq, h)| (irq.name.clone(), h.sum / self.ns_per_unit)).collect(),
                    )
                };
                write_totals(out, self.kind.column, self.kind.width, &header, &rows)?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// One JSON line per interval, with every IRQ that ran in it.
    pub fn write_json(&mut self, out: &mut Output, entries: Vec<(Irq, Log2Hist)>) -> Result<()> {
        let irqs = self.diff.update(entries);
        out.json_line(&JsonInterval { report: self, time: clock_rfc3339(), irqs: &irqs })?;
        Ok(())
    }
}

impl Report {
    /// `--prometheus`: each IRQ's cumulative histogram as `corebpf_<tool>_handler_seconds`, labelled by its name
    /// (`hardirq`, `softirq`): its `_count` is the events, its `_sum` their exact time.
    pub fn metrics(&self, s: &mut crate::output::metrics::Snapshot, irqs: Vec<(Irq, Log2Hist)>) {
        use crate::output::metrics::HistogramValue;
        let help = "Time spent in each interrupt's handler (BCC log2 buckets)";
        s.declare_histogram_seconds("handler", help, &[self.kind.field]);
        for (irq, h) in irqs {
            let value = HistogramValue::from_log2_slots(&h.slots, h.sum, self.ns_per_unit);
            s.histogram_seconds("handler", help, &[self.kind.field], vec![irq.name], value);
        }
    }
}

/// The run: BCC's banner (text only), then one report per interval (or one at Ctrl-C) of what `read` returns,
/// every IRQ's cumulative record. With an `endpoint` (`--prometheus`), serves them instead, and `full` (the BPF
/// side's count of events dropped for a full histogram map) as `corebpf_map_full_total`.
pub fn run(
    kind: Kind,
    args: &IrqArgs,
    signals: &Signals,
    endpoint: Option<crate::host::endpoint::Endpoint>,
    full: Option<&u64>,
    mut read: impl FnMut() -> Result<Vec<(Irq, Log2Hist)>>,
) -> Result<()> {
    if let Some(endpoint) = endpoint {
        let report = Report::new(kind, args.mode(), false);
        return endpoint.serve(signals, |s| {
            if let Some(full) = full {
                s.map_full("hists", full);
            }
            report.metrics(s, read()?);
            Ok(())
        });
    }
    let mut out = Output::new();
    let mut report = Report::new(kind, args.mode(), args.nanoseconds);
    let title = format!("{} handler time", kind.words);
    let mut heat = HeatmapFile::open(args.export.heatmap.as_deref(), &title, report.unit)?;
    if !args.json {
        if args.count {
            writeln!(out, "Tracing {} events... Hit Ctrl-C to end.", kind.words)?;
        } else {
            writeln!(out, "Tracing {} event time... Hit Ctrl-C to end.", kind.words)?;
        }
        out.flush()?;
    }
    run_intervals(signals, args.every.interval(), args.every.count, |_| {
        let irqs = read()?;
        if let Some(heat) = heat.as_mut() {
            heat.push(&sum_slots(irqs.iter().map(|(_, h)| &h.slots[..])));
        }
        if args.json {
            report.write_json(&mut out, irqs)
        } else {
            report.write_text(&mut out, irqs, args.timestamp)
        }
    })?;
    heat.map(|h| h.finish()).transpose()?;
    Ok(())
}

/// Attaches the loaded programs of the `irq:` tracepoints `names` (entry, then exit: the halves of their
/// TP_BTF_RAW pairs that [`autoload_by_section`](crate::attach::loader::autoload_by_section) kept).
pub fn attach_pair(object: &Object, names: [&str; 2]) -> Result<Vec<Link>> {
    names.into_iter().map(|name| attach_loaded_tracepoint(object, "irq", name)).collect()
}
