// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funclatency: time kernel or user functions and print their latency as a histogram (BCC's tool, CO-RE).
//!
//! The pattern is resolved and attached to by the function-target family (`common::functions`): kernel
//! functions, `lib:func` or `/path:func` user functions, globs or `-r` regexes. An entry and a return program time each call in BPF into
//! cumulative log2 histograms (one per function with `-F`); this front end prints each interval's difference in
//! BCC's layout, or JSON lines. The BPF object's programs and options are in [`object`], printing in [`report`].

mod bpf;
mod object;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::maps::DropCounter;
use common::cli::{parse_interval_secs, require_process};
use common::functions::attach::{missed_counter, Attacher};
use common::functions::targets::{resolve, Kind};
use common::host::Host;
use common::output::heatmap::{sum_slots, HeatmapFile};
use common::output::stdout::Output;
use common::run::{run_intervals, Signals, Tick};
use libbpf_rs::skel::Skel;

use report::{Report, Unit};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// How long calls to kernel or user functions take, as a log2 histogram.
#[derive(Debug, Parser)]
#[command(name = "funclatency", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print and reset the histogram every this many seconds
    #[arg(short = 'i', long, value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many seconds
    #[arg(short = 'd', long, value_parser = parse_interval_secs)]
    duration: Option<u64>,
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Use microseconds for the histogram buckets (the default is nanoseconds)
    #[arg(short = 'u', long = "microseconds", conflicts_with = "milliseconds")]
    microseconds: bool,
    /// Use milliseconds for the histogram buckets (the default is nanoseconds)
    #[arg(short = 'm', long = "milliseconds")]
    milliseconds: bool,
    /// One histogram for each matched function instead of one for all
    #[arg(short = 'F', long = "function")]
    per_function: bool,
    /// Read the pattern as a regular expression (by default, only * is special and matches any text)
    #[arg(short = 'r', long = "regexp")]
    regexp: bool,
    /// Time calls nested up to this depth inside calls of the same functions (default: only the innermost)
    #[arg(short = 'l', long, value_parser = clap::value_parser!(u32).range(1..=64))]
    level: Option<u32>,
    /// Print JSON lines: an object per histogram per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::ExportArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Which functions to time: func, lib:func or /path:func, with * in names (or a regular expression with -r)
    pattern: String,
}

pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::KprobeMulti, Attach::Kprobe, Attach::UprobeMulti, Attach::Uprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    (args.milliseconds, args.microseconds) =
        (args.export.display(args.milliseconds), args.export.display(args.microseconds));
    host.bpf_main(args.verbose, |signals| funclatency(args, &host, signals))
}

fn funclatency(args: Args, host: &Host, signals: Signals) -> Result<()> {
    if let Some(pid) = args.pid.pid {
        require_process(pid)?;
    }
    let target = resolve(&args.pattern, args.regexp, args.pid.pid)?;
    if matches!(target.kind, Kind::Tracepoint | Kind::Usdt { .. }) {
        bail!(
            "'{}' names {}: funclatency times functions (kernel, or lib:func)",
            args.pattern,
            target_noun(&target.kind)
        );
    }
    let btf = KernelBtf::load()?;
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.duration.is_some())?;
    let unit = Unit::from_flags(args.microseconds, args.milliseconds);
    let options = object::Options {
        pid: args.pid.pid,
        level: args.level.unwrap_or(0),
        per_function: args.per_function,
        ns_per_unit: unit.ns_per_unit(),
        histograms: if args.per_function { target.matches.len() as u32 } else { 1 },
    };
    let attacher =
        Attacher { objects: &options, target: &target, pid: args.pid.pid, cookies: options.cookies(), btf: Some(&btf) };
    let (attached, mech) = attacher.attach_first_working(TOOL.attach, args.verbose.on())?;
    attached.warn_failures();

    let mut out = Output::new();
    let names: Vec<String> = target.matches.iter().map(|m| m.name.clone()).collect();
    let user = matches!(target.kind, Kind::User { .. });
    let mut report = Report::new(unit, names, args.per_function, args.timestamp, args.json)
        .in_process(args.pid.pid.filter(|_| user));
    if let Some(mut endpoint) = endpoint {
        for skel in attached.objects() {
            endpoint.attached(mech, skel.object());
        }
        return endpoint.serve(&signals, |snapshot| {
            snapshot.map_full_sum("start", object::untimed(&attached));
            snapshot.lost_events_total("missed_calls", attached.missed());
            report.metrics(snapshot, object::histograms(&attached, &options)?);
            Ok(())
        });
    }
    let title = format!("Latency of {}", args.pattern);
    let mut heat = HeatmapFile::open(args.export.heatmap.as_deref(), &title, unit.label())?;
    if !args.json {
        use std::io::Write;
        let traced = target.matches.len() - attached.failed.len();
        writeln!(out, "Tracing {traced} functions for \"{}\"... Hit Ctrl-C to end.", args.pattern)?;
        out.flush()?;
    }
    let interval = args.interval.or(args.duration);
    let count = args.duration.zip(interval).map(|(d, i)| d.div_ceil(i));
    let mut untimed = DropCounter::new("calls from the histograms", "too many calls in flight");
    let mut missed = missed_counter();
    run_intervals(&signals, interval.map(Duration::from_secs), count, |tick| {
        let hists = object::histograms(&attached, &options)?;
        if let Some(heat) = heat.as_mut() {
            heat.push(&sum_slots(hists.iter().map(|h| &h.slots[..])));
        }
        report.write(&mut out, hists, tick == Tick::Last)?;
        untimed.check_all(object::untimed(&attached));
        missed.check(&attached.missed());
        Ok(())
    })?;
    heat.map(|h| h.finish()).transpose()?;
    Ok(())
}

fn target_noun(kind: &Kind) -> &'static str {
    match kind {
        Kind::Tracepoint => "tracepoints",
        Kind::Usdt { .. } => "USDT probes",
        _ => "functions",
    }
}
