// SPDX-License-Identifier: Apache-2.0 OR MIT
//! argdist: trace a function or tracepoint and display a summary of its parameter values (BCC's tool, CO-RE,
//! with no compiler at run time).
//!
//! Each `-H`/`-C` spec is parsed and resolved by `common::probe` into the parameters of one generic, prebuilt
//! BPF object (`argdist.bpf.c` over `bpf/include/probe.bpf.h`): the values to fetch (tracepoint fields at their
//! tracefs offsets, function arguments by position, `$retval`, `$latency`), the filter's comparisons, and the
//! key's expressions. Loading and attaching is in [`attach`], printing in [`report`].

mod attach;
mod bpf;
mod report;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Parser;
use common::attach::features::Attach;
use common::attach::maps::DropCounter;
use common::cli::{parse_interval_secs, require_process};
use common::host::Host;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use common::probe::attach::Site;
use common::probe::plan::{plan, Limits};
use common::probe::spec::{parse_argdist, Spec};
use common::probe::usage_exit;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::Skel;

use crate::bpf::consts::{LIT_MAX, MAX_ENTRY, MAX_FETCH, MAX_INSNS, MAX_KEYS, MAX_LITS, STR_MAX, VM_DEPTH};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Histograms or counts of function arguments, return values and tracepoint fields.
#[derive(Debug, Parser)]
#[command(name = "argdist", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    tid: common::cli::filter::TidArg,
    /// Bytes read from a char* argument before it is cut
    #[arg(short = 'z', long = "string-size", default_value_t = 80,
          value_parser = clap::value_parser!(u32).range(1..=STR_MAX as i64))]
    string_size: u32,
    /// Seconds between reports (1 if not given)
    #[arg(short = 'i', long, value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many seconds
    #[arg(short = 'd', long, value_parser = parse_interval_secs)]
    duration: Option<u64>,
    /// Stop after this many reports
    #[arg(short = 'n', long = "number", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Let histograms and counts accumulate across reports instead of starting each report from zero
    #[arg(short = 'c', long)]
    cumulative: bool,
    /// Show only the N largest counts (histograms are always shown whole)
    #[arg(short = 'T', long, value_parser = clap::value_parser!(u32).range(1..))]
    top: Option<u32>,
    /// A probe spec whose expression is gathered into a log2 histogram (syntax in the examples below)
    #[arg(short = 'H', long = "histogram", value_name = "specifier")]
    histogram: Vec<String>,
    /// A probe spec whose expression values are counted, one row per value (syntax in the examples below)
    #[arg(short = 'C', long = "count", value_name = "specifier")]
    count_spec: Vec<String>,
    /// Header files to include: accepted so that BCC command lines work, and ignored, since field types come from
    /// tracefs and the spec's signature and nothing is compiled
    #[arg(short = 'I', long = "include", value_name = "header")]
    include: Vec<String>,
    /// Print JSON lines: an object per probe per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Tracepoint, Attach::Uprobe, Attach::Fentry, Attach::Kprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    if args.histogram.is_empty() && args.count_spec.is_empty() {
        eprintln!("{}: at least one specifier is required (-H or -C)", common::identity::invoked_name());
        return ExitCode::from(2);
    }
    host.bpf_main(args.verbose, |signals| argdist(args, &host, signals))
}

const LIMITS: Limits = Limits {
    fetches: MAX_FETCH,
    exprs: MAX_KEYS,
    insns: MAX_INSNS,
    depth: VM_DEPTH,
    lits: MAX_LITS,
    lit_max: LIT_MAX,
    entry: MAX_ENTRY,
};

/// Parses and resolves every spec (exit 2 on the first it cannot take), counts first as BCC orders them.
fn resolve_all(args: &Args) -> Vec<(Spec, common::probe::plan::Plan, Site, bool)> {
    let tracefs = if args.histogram.iter().chain(&args.count_spec).any(|s| s.trim_start().starts_with("t:")) {
        match common::attach::features::tracefs() {
            Ok(dir) => Some(dir),
            Err(err) => {
                eprintln!("{}: {err:#}", common::identity::invoked_name());
                std::process::exit(1);
            }
        }
    } else {
        None
    };
    let specs = args.count_spec.iter().map(|s| (s, false)).chain(args.histogram.iter().map(|s| (s, true)));
    let mut out = Vec::new();
    for (raw, hist) in specs {
        let resolved = parse_argdist(raw, hist).and_then(|spec| {
            let plan = plan(&spec, tracefs.as_deref(), &LIMITS)?;
            let site = common::probe::attach::site(&spec, args.pid.pid)?;
            Ok((spec, plan, site, hist))
        });
        match resolved {
            Ok(r) => out.push(r),
            Err(err) => usage_exit(&err),
        }
    }
    out
}

fn argdist(args: Args, host: &Host, signals: Signals) -> Result<()> {
    if let Some(pid) = args.pid.pid {
        require_process(pid)?;
    }
    if !args.include.is_empty() {
        eprintln!(
            "{}: -I {} ignored: this argdist is prebuilt, nothing is compiled (types come from tracefs and the spec)",
            common::identity::invoked_name(),
            args.include.join(" -I ")
        );
    }
    let resolved = resolve_all(&args);
    let reports = args.interval.is_some() || args.duration.is_some() || args.count.is_some();
    if args.export.prometheus.is_some() && (args.cumulative || args.top.is_some()) {
        common::cli::usage_error("--prometheus serves every value since the start: -c and -T do not apply");
    }
    let endpoint = args.export.endpoint(host, reports)?;
    let options = |hist| attach::Options {
        pid: args.pid.pid,
        tid: args.tid.tid,
        string_size: args.string_size,
        hist,
        verbose: args.verbose.on(),
    };
    let mut probes = Vec::new();
    for (spec, plan, site, hist) in resolved {
        let attached = attach::attach(&spec, &plan, &site, &options(hist))?;
        if args.verbose.on() {
            eprintln!("attached with {} ({}: {} values fetched)", attached.how, spec.raw, plan.fetches.len());
        }
        probes.push(report::Probe::new(spec, plan, hist, attached));
    }
    if let Some(mut endpoint) = endpoint {
        for p in &probes {
            endpoint.attached(p.attached.how, p.attached.skel.object());
        }
        return endpoint.serve(&signals, |s| {
            s.map_full_sum("counts", probes.iter().map(|p| p.dropped()));
            if probes.iter().any(|p| !p.hist) {
                report::declare_metrics(s);
            }
            probes.iter().try_for_each(|p| p.metrics(s))
        });
    }
    let mut out = Output::new();
    let interval_s = args.interval.unwrap_or(1);
    let interval = Duration::from_secs(interval_s);
    let by_duration = args.duration.map(|d| d.div_ceil(interval_s));
    let count = match (args.count, by_duration) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut dropped = DropCounter::new("events from the counts", "too many distinct keys");
    let top = args.top.map(|t| t as usize);
    run_intervals(&signals, Some(interval), count, |_| {
        // The text's header has BCC's HH:MM:SS; JSON's `time` is RFC 3339, as in every tool (docs/json.md).
        let time = if args.json { clock_rfc3339() } else { clock_hms() };
        if !args.json {
            writeln!(out, "[{time}]")?;
        }
        for p in probes.iter_mut() {
            p.write(&mut out, &time, top, args.cumulative, args.json)?;
        }
        out.flush()?;
        dropped.check_all(probes.iter().map(|p| p.dropped()));
        Ok(())
    })
}
