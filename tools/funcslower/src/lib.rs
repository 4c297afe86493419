// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funcslower: one line for each call of kernel or user functions slower than a threshold (BCC's tool, CO-RE).
//!
//! Each pattern is resolved and attached to by the function-target family (`common::functions`): kernel
//! functions, `lib:func` or `/path:func` user functions, with globs. An entry and a return program time every call
//! per thread in BPF and send the slow ones, with the return value, the first arguments and stack ids, through a
//! ring buffer ([`object`]); this front end prints them in BCC's columns, with stacks or folded stacks, or as JSON
//! lines ([`report`]), and counts the events lost.

mod arity;
mod bpf;
mod object;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::{Attach, KernelBtf};
use common::attach::maps::from_bytes;
use common::cli::require_process;
use common::functions::attach::{kernel_has_cookies, missed_counter, Attached, Attacher, Cookies};
use common::functions::targets::{resolve, Kind, Target};
use common::host::Host;
use common::output::name::Name;
use common::output::stdout::Output;
use common::process::symbols::Symbolizer;
use common::run::Signals;
use common::stacks::maps::StackTraces;
use common::stacks::{Collected, Sample, Stack};
use libbpf_rs::MapCore;

use bpf::types::event;
use bpf::BpfSkel;
use report::{Call, Report, Threshold, TimeColumn};

// SAFETY: a plain C struct of integers and chars, generated from funcslower.h.
unsafe impl plain::Plain for event {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Calls of kernel or user functions slower than a threshold, one line each.
#[derive(Debug, Parser)]
#[command(name = "funcslower", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Show calls that take at least this many milliseconds (fractions allowed; the default is 1)
    #[arg(short = 'm', long = "min-ms", value_name = "MIN_MS", value_parser = parse_threshold, conflicts_with = "min_us")]
    min_ms: Option<f64>,
    /// Show calls that take at least this many microseconds (fractions allowed)
    #[arg(short = 'u', long = "min-us", value_name = "MIN_US", value_parser = parse_threshold)]
    min_us: Option<f64>,
    /// Also print the first N arguments of each call, in hexadecimal (1 to 6)
    #[arg(short = 'a', long = "arguments", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=6))]
    arguments: Option<u32>,
    /// Start each line with the time of day (HH:MM:SS)
    #[arg(short = 'T', long = "time", conflicts_with = "timestamp")]
    time: bool,
    /// Start each line with the seconds since the first slow call began
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Print each call's user-space stack under its line
    #[arg(short = 'U', long = "user-stack")]
    user_stack: bool,
    /// Print each call's kernel stack under its line
    #[arg(short = 'K', long = "kernel-stack")]
    kernel_stack: bool,
    /// Print only the stacks, one folded line each (comm;frames 1), for flame graphs (with -U and/or -K)
    #[arg(short = 'f', long, conflicts_with = "json")]
    folded: bool,
    /// Print JSON lines: an object per slow call
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// The functions to time: func (kernel), lib:func or /path:func (user), with * in names
    #[arg(required = true, value_name = "FUNCTION")]
    functions: Vec<String>,
}

pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::KprobeMulti, Attach::Kprobe, Attach::UprobeMulti, Attach::Uprobe]);

fn parse_threshold(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..1e12).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a duration: give a number of at least 0")),
    }
}

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    if args.folded && !(args.user_stack || args.kernel_stack) {
        common::cli::usage_error("-f prints stacks: give -U, -K or both");
    }
    host.bpf_main(args.verbose, |signals| funcslower(args, signals))
}

/// One pattern, resolved and attached.
struct Traced {
    attached: Attached<BpfSkel<'static>>,
    /// Name the function from the entry address: several matches, and no cookie or per-function object says which.
    by_address: bool,
    kind: Kind,
}

fn funcslower(args: Args, signals: Signals) -> Result<()> {
    if let Some(pid) = args.pid.pid {
        require_process(pid)?;
    }
    let targets: Vec<Target> = args.functions.iter().map(|p| resolve(p, false, args.pid.pid)).collect::<Result<_>>()?;
    for (pattern, target) in args.functions.iter().zip(&targets) {
        if matches!(target.kind, Kind::Tracepoint | Kind::Usdt { .. }) {
            bail!("'{pattern}' names {}: funcslower times functions (func, lib:func)", target.kind.noun());
        }
    }
    let btf = KernelBtf::load()?;
    let arity = if targets.iter().any(|t| t.kind == Kind::Kernel) { arity::FunctionArity::load().ok() } else { None };
    let cookies = kernel_has_cookies(&btf);
    // User addresses are named with -U, and for user functions named by their entry address (several matches and
    // no cookies), from the process's memory maps, which are gone once it exits. -p's process has them saved now,
    // before its first call; any other when the BPF side reports it at its first traced call's entry (a 4-byte
    // record on the events ring buffer; a lookup added to every call, so only then), or else at its first event.
    let user_frames = args.user_stack
        || targets.iter().any(|t| matches!(t.kind, Kind::User { .. }) && !cookies && t.matches.len() > 1);
    let mut symbolizer = Symbolizer::new();
    if let (true, Some(pid)) = (user_frames, args.pid.pid) {
        symbolizer.remember_process(pid);
    }
    let threshold = match (args.min_us, args.min_ms) {
        (Some(us), None) => Threshold { unit: "us", value: us },
        (_, ms) => Threshold { unit: "ms", value: ms.unwrap_or(1.0) },
    };

    // Every function of every pattern, in one list: (printed name, pattern number).
    let mut funcs: Vec<(String, usize)> = Vec::new();
    let mut traced = Vec::new();
    for (n, (pattern, target)) in args.functions.iter().zip(&targets).enumerate() {
        let prefix = match target.kind {
            Kind::User { .. } => pattern.rsplit_once(':').map(|(lib, _)| format!("{lib}:")).unwrap_or_default(),
            _ => String::new(),
        };
        let options = object::Options {
            pid: args.pid.pid,
            min_ns: threshold.min_ns(),
            args: args.arguments.unwrap_or(0),
            user_stacks: args.user_stack,
            kernel_stacks: args.kernel_stack,
            notice_processes: user_frames && args.pid.pid.is_none(),
            func_base: funcs.len() as u32,
            cookies,
            target,
            arity: arity.as_ref(),
        };
        let attacher = Attacher {
            objects: &options,
            target,
            pid: args.pid.pid,
            cookies: if cookies { Cookies::Index } else { Cookies::Zero },
            btf: Some(&btf),
        };
        let (attached, mech) = attacher.attach_first_working(TOOL.attach, args.verbose.on())?;
        attached.warn_failures();
        let by_address = !cookies && mech != Attach::Fentry && target.matches.len() > 1;
        funcs.extend(target.matches.iter().map(|m| (format!("{prefix}{}", m.name), n)));
        traced.push(Traced { attached, by_address, kind: target.kind.clone() });
    }

    let mut out = Output::new();
    let time = match (args.time, args.timestamp) {
        (true, _) => TimeColumn::Clock,
        (_, true) => TimeColumn::Relative,
        _ => TimeColumn::None,
    };
    let mut report = Report::new(threshold, time, args.arguments.is_some(), args.folded, args.json);
    report.header(&mut out)?;

    let rings: Vec<&dyn MapCore> = traced.iter().map(|t| &t.attached.maps().maps.events as &dyn MapCore).collect();
    let all_bss: Vec<&bpf::types::bss> =
        traced.iter().flat_map(|t| t.attached.objects().iter().filter_map(|s| s.maps.bss_data.as_deref())).collect();
    let mut stream = EventStream::shared(rings, all_bss.iter().map(|b| &b.lost).collect(), "slow calls");
    for b in &all_bss {
        stream = stream.also_dropped(&b.untimed, "calls", "too many calls in flight");
        stream = stream.also_dropped(
            &b.lost_notices,
            "process notices",
            "ring buffer full; if those processes exited, their frames may show as [unknown]",
        );
    }
    let collected = Collected { user: args.user_stack, kernel: args.kernel_stack };
    let mut traces: Vec<_> =
        traced.iter().map(|t| StackTraces::new(&t.attached.maps().maps.stackmap, collected)).collect();
    let mut missed = missed_counter();
    let verbose = args.verbose.on();
    let missed_total = || traced.iter().map(|t| t.attached.missed()).sum::<u64>();
    stream.run(
        &signals,
        &mut out,
        args.json,
        || {
            missed.check(&missed_total());
            false
        },
        |out, data| {
            if let Ok(pid) = <[u8; 4]>::try_from(data) {
                symbolizer.remember_process(u32::from_ne_bytes(pid));
                return Ok(());
            }
            let e: event = from_bytes(data);
            let comm = Name::from_c(&e.comm);
            let (mut func, n) = funcs.get(e.func as usize).cloned().unwrap_or_else(|| ("?".to_owned(), 0));
            if user_frames {
                symbolizer.remember_process(e.pid);
            }
            if traced[n].by_address {
                let symbol = match traced[n].kind {
                    Kind::Kernel => symbolizer.kernel(&[e.ip]),
                    _ => symbolizer.user(e.pid, &[e.ip]),
                };
                if let Some(Some(s)) = symbol.first() {
                    func = s.name.clone();
                }
            }
            let (mut user, mut kernel) = (Stack::Skipped, Stack::Skipped);
            if args.user_stack || args.kernel_stack {
                let task = traces[n].task(e.pid, e.pid, comm.clone(), e.user_stack_id, e.kern_stack_id);
                let sample = Sample { task, waker: None, value: 1 };
                if let Some(named) = common::stacks::symbolize::symbolize(vec![sample], &mut symbolizer, verbose).pop()
                {
                    (user, kernel) = (named.task.user, named.task.kernel);
                }
            }
            let nargs = args.arguments.unwrap_or(0) as usize;
            report.write(
                out,
                &Call {
                    comm: &comm,
                    pid: e.pid,
                    tid: e.tid,
                    start_ns: e.start_ns,
                    duration_ns: e.duration_ns,
                    retval: e.retval,
                    func: &func,
                    args: &e.args[..nargs],
                    user,
                    kernel,
                },
            )
        },
    )
}
