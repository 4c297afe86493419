// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funcinterval: the time between consecutive calls of kernel or user functions, or hits of tracepoints, as a
//! log2 histogram (BCC's tool, CO-RE).
//!
//! The pattern is resolved and attached to by the function-target family (`common::functions`): kernel
//! functions, `t:category:event` tracepoints, `lib:func` or `/path:func` user functions, with globs or `-r`
//! regexes. One program per mechanism records in BPF the gap since the previous hit of any match into a
//! cumulative log2 histogram ([`object`]); this front end prints each interval's difference in BCC's layout, JSON
//! lines, a heat map or Prometheus metrics ([`report`]).

mod bpf;
mod object;
mod report;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::cli::{parse_interval_secs, require_process};
use common::functions::attach::{missed_counter, Attacher, Cookies};
use common::functions::targets::{resolve, Kind, Target};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals, Tick};
use libbpf_rs::skel::Skel;

use report::{Report, Unit};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The time between consecutive calls of a function or hits of a tracepoint, as a log2 histogram.
#[derive(Debug, Parser)]
#[command(name = "funcinterval", version, after_help = EXAMPLES)]
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
    /// Read the pattern as a regular expression (by default, only * is special and matches any text)
    #[arg(short = 'r', long = "regexp")]
    regexp: bool,
    /// Print JSON lines: an object per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::ExportArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// What to time the gaps of: func, t:category:event, lib:func, p:lib:func or /path:func, with * in names (or
    /// a regular expression with -r); the gap is between consecutive hits of any match
    pattern: String,
}

pub const TOOL: common::tool::Tool = common::tool!(
    main,
    [Attach::Fentry, Attach::KprobeMulti, Attach::Kprobe, Attach::Tracepoint, Attach::UprobeMulti, Attach::Uprobe]
);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    (args.milliseconds, args.microseconds) =
        (args.export.display(args.milliseconds), args.export.display(args.microseconds));
    host.bpf_main(args.verbose, |signals| funcinterval(args, &host, signals))
}

fn funcinterval(args: Args, host: &Host, signals: Signals) -> Result<()> {
    if let Some(pid) = args.pid.pid {
        require_process(pid)?;
    }
    let target = resolve(&args.pattern, args.regexp, args.pid.pid)?;
    if matches!(target.kind, Kind::Usdt { .. }) {
        bail!(
            "'{}' names USDT probes: funcinterval times functions (func, lib:func) and tracepoints (t:cat:event)",
            args.pattern
        );
    }
    let btf = KernelBtf::load()?;
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.duration.is_some())?;
    let unit = Unit::from_flags(args.microseconds, args.milliseconds);
    let options = object::Options { pid: args.pid.pid, ns_per_unit: unit.ns };
    let attacher =
        Attacher { objects: &options, target: &target, pid: args.pid.pid, cookies: Cookies::Zero, btf: Some(&btf) };
    let (attached, mech) = attacher.attach_first_working(TOOL.attach, args.verbose.on())?;
    attached.warn_failures();

    let mut report = Report::new(unit, &args.pattern, args.timestamp, args.json);
    if let Some(mut endpoint) = endpoint {
        for skel in attached.objects() {
            endpoint.attached(mech, skel.object());
        }
        return endpoint.serve(&signals, |snapshot| {
            snapshot.lost_events_total("missed_calls", attached.missed());
            report.metrics(snapshot, &object::histogram(&attached)?);
            Ok(())
        });
    }
    let mut heat = match &args.export.heatmap {
        Some(path) => {
            std::fs::write(path, "").with_context(|| format!("cannot write {}", path.display()))?;
            let title = format!("Time between hits of {}", args.pattern);
            Some(common::output::heatmap::Heatmap::new(&title, unit.label))
        }
        None => None,
    };
    let mut out = Output::new();
    if !args.json {
        writeln!(out, "{}", banner(&args.pattern, &target, attached.failed.len()))?;
        out.flush()?;
    }
    let interval = args.interval.or(args.duration);
    let count = args.duration.zip(interval).map(|(d, i)| d.div_ceil(i));
    let mut missed = missed_counter();
    run_intervals(&signals, interval.map(Duration::from_secs), count, |tick| {
        let hist = object::histogram(&attached)?;
        if let Some(heat) = heat.as_mut() {
            heat.push_cumulative(common::output::stdout::clock_hms(), &hist.slots);
        }
        report.write(&mut out, &hist, tick == Tick::Last)?;
        missed.check(&attached.missed());
        Ok(())
    })?;
    if let (Some(heat), Some(path)) = (&heat, &args.export.heatmap) {
        heat.write_svg(path)?;
    }
    Ok(())
}

/// BCC's first line: `Tracing N functions for "PATTERN"...` for kernel functions, `Tracing tracepoint for
/// "CAT:EVENT"...` and `Tracing uprobe function for "FUNC"...` (the pattern without its prefix) for the others.
fn banner(pattern: &str, target: &Target, failed: usize) -> String {
    let name = |skip: usize| pattern.splitn(skip + 1, ':').nth(skip).unwrap_or(pattern).to_owned();
    let (what, shown) = match target.kind {
        Kind::Kernel => (format!("{} functions", target.matches.len() - failed), pattern.to_owned()),
        Kind::Tracepoint => ("tracepoint".to_owned(), name(1)),
        _ => ("uprobe function".to_owned(), pattern.rsplit(':').next().unwrap_or(pattern).to_owned()),
    };
    format!("Tracing {what} for \"{shown}\"... Hit Ctrl-C to end.")
}
