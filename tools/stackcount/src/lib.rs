// SPDX-License-Identifier: Apache-2.0 OR MIT
//! stackcount: count events and the stack traces that led to them (BCC's tool, CO-RE).
//!
//! The pattern is resolved and attached to by the function-target family (`common::functions`): kernel
//! functions, `t:category:event` tracepoints, `lib:func` user functions, `u:lib:probe` USDT probes. The BPF side
//! counts each event per (process, command, user stack, kernel stack) in the kernel ([`object`]); this front end names the frames with
//! the shared stack machinery (`common::stacks`) and prints them in BCC's layout, folded, as JSON or as a
//! flame graph ([`report`]); or, with `--prometheus`, serves the counts as a counter per process name and folded
//! stack ([`metrics`]).

mod bpf;
mod metrics;
mod object;
mod report;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::maps::DropCounter;
use common::cli::{parse_interval_secs, require_process};
use common::functions::attach::{missed_counter, write_plan, Attacher, Cookies};
use common::functions::targets::{resolve, Target};
use common::host::Host;
use common::output::stdout::Output;
use common::process::symbols::{process_notices, Symbolizer};
use common::run::Signals;
use common::stacks::{self, Collected};

use report::{Layout, Report};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Count the stack traces that lead to kernel or user functions, tracepoints or USDT probes.
#[derive(Debug, Parser)]
#[command(name = "stackcount", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only events on this CPU
    #[arg(short = 'c', long, value_parser = clap::value_parser!(u32).range(0..4096))]
    cpu: Option<u32>,
    /// Print and reset the counts every this many seconds
    #[arg(short = 'i', long, value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many seconds
    #[arg(short = 'D', long, value_parser = parse_interval_secs)]
    duration: Option<u64>,
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Read the pattern as a regular expression (by default, only * is special and matches any text)
    #[arg(short = 'r', long = "regexp")]
    regexp: bool,
    /// Print each symbol with its offset (symbol+0x1f)
    #[arg(short = 's', long = "offset")]
    offset: bool,
    /// Keep separate stacks for each process (the process is printed with its stacks)
    #[arg(short = 'P', long = "perpid")]
    per_pid: bool,
    /// Record only the kernel part of each stack
    #[arg(short = 'K', long = "kernel-stacks-only", conflicts_with = "user_stacks_only")]
    kernel_stacks_only: bool,
    /// Record only the user-space part of each stack
    #[arg(short = 'U', long = "user-stacks-only")]
    user_stacks_only: bool,
    /// Print each frame's address beside its symbol (repeat for libbpf's debug messages)
    #[arg(id = "verbose", short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    /// Mark where the kernel part of a stack ends and the user part begins ("-" folded, "--" otherwise)
    #[arg(short = 'd', long = "delimited")]
    delimited: bool,
    /// Print one line per stack, frames joined by ";" and the count last (the input of flame graph tools)
    #[arg(short = 'f', long = "folded")]
    folded: bool,
    /// Print JSON lines: an object per stack per report
    #[arg(short = 'j', long, conflicts_with = "folded")]
    json: bool,
    /// Also draw the counted stacks as an SVG flame graph in FILE
    #[arg(long, value_name = "FILE", conflicts_with = "prometheus")]
    flamegraph: Option<PathBuf>,
    /// Size of the stack trace map (entries); stacks beyond it are shown as missed
    #[arg(long, default_value_t = 16384, value_parser = clap::value_parser!(u32).range(1..=1 << 24))]
    stack_storage_size: u32,
    /// Size of the map of distinct stacks counted at once (entries)
    #[arg(long, default_value_t = 10240, value_parser = clap::value_parser!(u32).range(1..=1 << 24))]
    hash_storage_size: u32,
    /// Print on stderr what will be traced and how before starting: each match and where it attaches, the
    /// mechanisms to try, the filters and map sizes, then the mechanism used
    #[arg(long)]
    debug: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    /// What to count stacks of: func, p::func, t:category:event, lib:func, /path:func or u:lib:probe, with * in
    /// names (or a regular expression with -r)
    pattern: String,
}

pub const TOOL: common::tool::Tool = common::tool!(
    main,
    [Attach::Fentry, Attach::KprobeMulti, Attach::Kprobe, Attach::Tracepoint, Attach::UprobeMulti, Attach::Uprobe]
);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    let verbose = common::cli::Verbose { level: args.verbose.saturating_sub(1) };
    host.bpf_main(verbose, |signals| stackcount(args, &host, signals))
}

fn stackcount(args: Args, host: &Host, signals: Signals) -> Result<()> {
    if let Some(pid) = args.pid.pid {
        require_process(pid)?;
    }
    let target = resolve(&args.pattern, args.regexp, args.pid.pid)?;
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.duration.is_some())?;
    let flamegraph = stacks::create_flamegraph_file(args.flamegraph.as_deref())?.zip(args.flamegraph.clone());
    let collected = Collected { user: !args.kernel_stacks_only, kernel: !args.user_stacks_only };
    let options = object::Options {
        pid: args.pid.pid,
        cpu: args.cpu,
        user_stacks: collected.user,
        kernel_stacks: collected.kernel,
        stack_storage_size: args.stack_storage_size,
        hash_storage_size: args.hash_storage_size,
    };
    if args.debug {
        print_debug(&target, &options)?;
    }
    let attacher =
        Attacher { objects: &options, target: &target, pid: args.pid.pid, cookies: Cookies::Zero, btf: None };
    let (mut attached, mech) = attacher.attach_first_working(TOOL.attach, args.verbose > 0)?;
    if args.debug {
        eprintln!("attached with {mech}");
    }
    attached.warn_failures();
    if let Some(mut endpoint) = endpoint {
        for skel in attached.objects() {
            endpoint.attached(mech, libbpf_rs::skel::Skel::object(skel));
        }
        let mut names = common::output::stackseries::StackNames::new(collected, false);
        return endpoint.serve(&signals, |s| {
            let maps = &attached.maps().maps;
            s.lost_events_total("missed_calls", attached.missed());
            s.map_full("counts", &maps.bss_data.as_deref().context("BPF object has no .bss")?.lost_counts);
            metrics::write(s, &mut names, &maps.counts, &maps.stackmap)
        });
    }

    let mut out = Output::new();
    let layout = Layout {
        // -p implies per-process counting, as in BCC (but the process line is left out: it is the one asked for).
        per_pid: args.per_pid || args.pid.pid.is_some(),
        show_process: args.per_pid && args.pid.pid.is_none(),
        timestamp: args.timestamp,
        raw_addresses: args.verbose > 0,
        folded: args.folded,
        json: args.json,
        style: stacks::Style {
            delimited: args.delimited && collected.user && collected.kernel,
            // BCC's stackcount folds a `-` between the stacks even when one is empty (profile does not).
            delimit_empty: true,
            annotate_kernel: false,
            offsets: args.offset,
        },
    };
    let mut report = Report::new(layout, collected);
    if !args.folded && !args.json {
        let traced = target.matches.len() - attached.failed.len();
        writeln!(out, "Tracing {traced} functions for \"{}\"... Hit Ctrl-C to end.", args.pattern)?;
        out.flush()?;
    }

    // Each process's memory maps are saved when it is first counted, so it is named even if it exits.
    let mut symbolizer = Symbolizer::new();
    let interval = args.interval.or(args.duration).map(Duration::from_secs);
    let reports = args.duration.zip(args.interval.or(args.duration)).map(|(d, i)| d.div_ceil(i));
    let mut losses = DropCounter::new("events", "the counts map was full; try a bigger --hash-storage-size");
    let mut missed = missed_counter();
    let start = Instant::now();
    let mut done = 0u32;
    loop {
        let deadline = interval.and_then(|i| start.checked_add(i.checked_mul(done.saturating_add(1))?));
        let maps = attached.maps();
        let bss = maps.maps.bss_data.as_deref().context("BPF object has no .bss")?;
        let notices = process_notices(&maps.maps.new_pids, &bss.lost_notices);
        let lost_notices =
            symbolizer.remember_noticed(&signals, &notices, || deadline.is_some_and(|d| Instant::now() >= d))?;
        done = done.saturating_add(1);
        let last = signals.stopped() || interval.is_none() || reports.is_some_and(|n| u64::from(done) >= n);
        missed.check(&attached.missed());
        if last {
            attached.detach(); // a consistent snapshot, and the probes gone before the report
        }
        let named = report.interval(attached.maps(), &mut symbolizer, args.verbose > 0)?;
        report.write(&mut out, &named, last)?;
        if let Some(bss) = attached.maps().maps.bss_data.as_ref() {
            losses.check(&bss.lost_counts);
        }
        if last {
            if let Some((file, path)) = flamegraph {
                report.write_flamegraph(attached.maps(), &mut symbolizer, file, &path, &args.pattern)?;
            }
            lost_notices.report(&mut out, args.json)?;
            return Ok(());
        }
    }
}

/// `--debug`: BCC prints its generated BPF program; this tool has none to print, so it says on stderr what the
/// program will do: the plan of the attach (each match and where it goes, the mechanisms to try), the stacks
/// collected, the filters and the sizes of the maps.
fn print_debug(target: &Target, options: &object::Options) -> Result<()> {
    let btf = KernelBtf::load()?;
    let mut err = std::io::stderr().lock();
    let how = "one counting program for all matches; the stack IDs are its key";
    write_plan(&mut err, target, TOOL.attach, Some(crate::bpf::consts::MAX_FENTRY_FUNCS), &btf, how)?;
    let stacks = match (options.user_stacks, options.kernel_stacks) {
        (true, true) => "user and kernel",
        (true, false) => "user",
        _ => "kernel",
    };
    let pid = options.pid.map_or("any".into(), |p| p.to_string());
    let cpu = options.cpu.map_or("any".into(), |c| c.to_string());
    writeln!(err, "stacks: {stacks}; filters: process {pid}, CPU {cpu}")?;
    writeln!(
        err,
        "maps: stackmap (stack traces) {} entries, counts (per stack and process) {} entries",
        options.stack_storage_size, options.hash_storage_size
    )?;
    Ok(())
}
