// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funccount: count calls of kernel functions, tracepoints, user functions and USDT probes (BCC's tool, CO-RE).
//!
//! The pattern is resolved to a list of matches and attached to by the function-target family
//! (`common::functions`): one BPF program per kind of probe is attached to every match with the match's index
//! as its BPF cookie ([`object`]), counting into a per-CPU array that this
//! front end prints every interval in BCC's layout or as JSON lines ([`report`]).

mod bpf;
mod object;
mod report;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::cli::parse_interval_secs;
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals, Tick};
use libbpf_rs::skel::Skel;

use crate::bpf::consts::FUNCCOUNT_SLOTS;

use common::functions::attach::{kernel_has_cookies, missed_counter, write_plan, Attacher, Cookies};
use common::functions::targets::{self, Kind, Target};
use object::Filters;
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// `--prometheus`: `corebpf_funccount_calls_total{function="..."}`, one series per match.
const CALLS_HELP: &str = "Calls of each matched function, tracepoint or probe";

/// How many times kernel or user functions, tracepoints or USDT probes fire, one count per probe.
#[derive(Debug, Parser)]
#[command(name = "funccount", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print and reset the counts every this many seconds
    #[arg(short = 'i', long, value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many seconds
    #[arg(short = 'd', long, value_parser = parse_interval_secs)]
    duration: Option<u64>,
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Read the pattern as a regular expression (by default, only * is special and matches any text)
    #[arg(short = 'r', long)]
    regexp: bool,
    /// List the probes the pattern matches and how each would be attached, then exit without tracing
    #[arg(short = 'D', long)]
    debug: bool,
    /// Only calls made on this CPU
    #[arg(short = 'c', long)]
    cpu: Option<u32>,
    /// Print JSON lines: an object per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    metrics: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// What to count: func, p::func, t:category:event, lib:func, p:lib:func, /path:func or u:lib:probe, with * in
    /// names (or a regular expression with -r)
    pattern: String,
}

/// Every mechanism funccount may use; which apply depends on the pattern (`common::functions::attach::ladder`).
pub const TOOL: common::tool::Tool = common::tool!(
    main,
    [
        Attach::Fentry,
        Attach::KprobeMulti,
        Attach::Kprobe,
        Attach::RawTp,
        Attach::Tracepoint,
        Attach::UprobeMulti,
        Attach::Uprobe
    ]
);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| funccount(args, &host, signals))
}

fn funccount(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    if let Some(cpu) = args.cpu {
        let cpus = libbpf_rs::num_possible_cpus()?;
        if cpu as usize >= cpus {
            bail!("no CPU {cpu}: this machine has CPUs 0-{}", cpus - 1);
        }
    }
    let target = targets::resolve(&args.pattern, args.regexp, args.pid.pid)?;
    if let Some(note) = target.note.as_deref().filter(|_| args.verbose.on()) {
        eprintln!("{}: {note}", common::identity::invoked_name());
    }
    let btf = KernelBtf::load()?;
    if args.debug {
        return print_plan(&target, &btf);
    }
    let interval_given = args.interval.is_some() || args.duration.is_some();
    let endpoint = args.metrics.endpoint(host, interval_given)?;
    let filters = Filters { pid: args.pid.pid, cpu: args.cpu, matches: target.matches.len() };
    let cookies = if kernel_has_cookies(&btf) { Cookies::Index } else { Cookies::Slots };
    if args.verbose.on() && cookies == Cookies::Slots {
        eprintln!("this kernel has no BPF cookies: one program per match, {FUNCCOUNT_SLOTS} per object");
    }
    let attacher = Attacher { objects: &filters, target: &target, pid: args.pid.pid, cookies, btf: Some(&btf) };
    let (attached, mech) = attacher.attach_first_working_with(TOOL.attach, args.verbose.on(), |mech| match mech {
        Attach::RawTp => object::raw_syscalls(&attacher),
        _ => attacher.attach(mech),
    })?;
    attached.warn_failures();

    if let Some(mut endpoint) = endpoint {
        for skel in attached.objects() {
            endpoint.attached(mech, skel.object());
        }
        return endpoint.serve(&signals, |snapshot| {
            snapshot.lost_events_total("missed_calls", attached.missed());
            let totals = object::totals(&attached, target.matches.len())?;
            snapshot.declare_counter("calls", CALLS_HELP, &["function"]);
            for (m, total) in target.matches.iter().zip(totals) {
                snapshot.counter("calls", CALLS_HELP, &["function"], vec![m.name.clone()], total);
            }
            Ok(())
        });
    }
    let mut out = Output::new();
    let attached_count = target.matches.len() - attached.failed.len();
    if !args.json {
        writeln!(out, "Tracing {attached_count} functions for \"{}\"... Hit Ctrl-C to end.", args.pattern)?;
        out.flush()?;
    }
    let names = target.matches.iter().map(|m| m.name.clone()).collect();
    let mut report = Report::new(&args.pattern, names, args.timestamp, args.json);
    let interval = args.interval.or(args.duration);
    let count = args.duration.zip(interval).map(|(d, i)| d.div_ceil(i));
    let mut missed = missed_counter();
    run_intervals(&signals, interval.map(Duration::from_secs), count, |tick| {
        report.write(&mut out, object::totals(&attached, target.matches.len())?, tick == Tick::Last)?;
        missed.check(&attached.missed());
        Ok(())
    })
}

/// `-D`: what each match is, where it would be attached, and the mechanisms that would be tried.
fn print_plan(target: &Target, btf: &KernelBtf) -> Result<()> {
    let how = match (&target.kind, kernel_has_cookies(btf)) {
        (Kind::Kernel, _) => "fentry: a program per function; kprobes: the match's index as BPF cookie",
        (_, true) => "one program, the match's index as BPF cookie",
        (_, false) => "a program per match (no BPF cookies)",
    };
    let mut out = Output::new();
    write_plan(&mut out, target, TOOL.attach, None, btf, how)?;
    out.flush()?;
    Ok(())
}
