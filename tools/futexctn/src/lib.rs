// SPDX-License-Identifier: Apache-2.0 OR MIT
//! futexctn: user-space lock contention, a histogram of FUTEX_WAIT sleeps per thread, futex address and user
//! stack (libbpf-tools' tool, CO-RE).
//!
//! The BPF side (`futexctn.bpf.c`) times each FUTEX_WAIT that slept until woken, from `syscalls:sys_enter_futex`
//! to `sys_exit_futex`, filtered in the kernel by process, thread and address, into one histogram per (thread,
//! address, user stack), or per (process, address) with `-s`. Each report moves the kernel's epoch on and takes
//! the entries of the epochs before it (`report.rs`), so every wait is in exactly one report; the stacks are
//! named through blazesym with the memory maps each process had when first seen (it may have exited by then).
//! `--heatmap FILE.svg` draws each report's waits, every histogram added up, as a column of a heat map.

mod bpf;
mod metrics;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, load_first_working, open_skeleton_core_free, rodata};
use common::attach::maps::DropCounter;
use common::cli::IntervalCount;
use common::domain::container_names::ContainerLabelArgs;
use common::host::Host;
use common::output::stdout::Output;
use common::process::symbols::{process_notices, Symbolizer};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Futex contention: a histogram of the time FUTEX_WAIT slept, per thread, lock address and user stack
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    tid: common::cli::filter::TidArg,
    /// Only the futex at this user address (hexadecimal, with or without 0x)
    #[arg(short = 'l', long, value_name = "LOCK", value_parser = parse_lock)]
    lock: Option<u64>,
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Histogram and times in milliseconds instead of microseconds
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// Most frames kept per user stack
    #[arg(long, value_name = "PERF-MAX-STACK-DEPTH", default_value_t = 127, value_parser = clap::value_parser!(u32).range(1..=127))]
    perf_max_stack_depth: u32,
    /// How many distinct user stacks can be kept
    #[arg(long, value_name = "STACK-STORAGE-SIZE", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1048576))]
    stack_storage_size: u32,
    /// One histogram per process and lock, without stacks
    #[arg(short = 's', long)]
    summary: bool,
    /// Print JSON lines: an object per histogram per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    metrics: common::cli::ExportArgs,
    #[command(flatten)]
    containers: ContainerLabelArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

/// -l LOCK: a user-space address in hexadecimal (`0x7f12...` or `7f12...`), not 0.
fn parse_lock(s: &str) -> Result<u64, String> {
    let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    match u64::from_str_radix(hex, 16) {
        Ok(0) => Err("the lock address 0 is no futex".into()),
        Ok(addr) => Ok(addr),
        Err(_) => Err(format!("'{s}' is not a hexadecimal address")),
    }
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    // Metrics are per process name in microseconds, whatever the display flags say.
    args.milliseconds = args.metrics.display(args.milliseconds);
    args.summary |= args.metrics.prometheus.is_some();
    host.bpf_main(args.verbose, |signals| futexctn(args, &host, signals))
}

fn futexctn(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    args.tid.tid.map(common::cli::require_thread).transpose()?;
    let endpoint = args.metrics.endpoint(host, args.every.interval.is_some())?;
    let containers = args.containers.open_by_cgroup(endpoint.is_some());
    let ((mut skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let mut totals = metrics::Totals::new(containers);
        return endpoint.serve(&signals, |s| {
            totals.add(report::take(&mut skel)?);
            totals.write(s)?;
            let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
            s.map_full("start", &bss.start_full);
            s.map_full("hists", &bss.hists_full);
            Ok(())
        });
    }

    let mut out = Output::new();
    if !args.json {
        // libbpf-tools prints this on stderr; here it is on stdout, where the kit's tools say they are tracing.
        use std::io::Write;
        writeln!(out, "Summarize futex contention latency, hit ctrl-c to exit")?;
        out.flush()?;
    }
    let mut report = Report::new(args.milliseconds, args.summary, args.timestamp, args.json);
    let unit = if args.milliseconds { "msecs" } else { "usecs" };
    let mut heat = report::Heat::open(args.metrics.heatmap.as_deref(), unit)?;
    let mut symbolizer = Symbolizer::new();
    let mut start_full = DropCounter::new("futex waits", "too many waits in flight");
    let mut hists_full = DropCounter::new("futex waits", "too many histograms; try -s or a filter");
    let interval = args.every.interval();
    let start = Instant::now();
    let mut done = 0u64;
    let lost_notices = loop {
        let deadline = interval.and_then(|i| start.checked_add(i.checked_mul(u32::try_from(done + 1).ok()?)?));
        let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
        let notices = process_notices(&skel.maps.new_pids, &bss.lost_notices);
        let lost_notices =
            symbolizer.remember_noticed(&signals, &notices, || deadline.is_some_and(|d| Instant::now() >= d))?;
        if signals.stdout_gone() {
            return Ok(());
        }
        done += 1;
        let last = signals.stopped() || interval.is_none() || args.every.count.is_some_and(|c| done >= c);
        let entries = report::take(&mut skel)?;
        heat.push(&entries);
        report.write(&mut out, &skel.maps.stackmap, entries, &mut symbolizer, args.perf_max_stack_depth as usize)?;
        let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
        start_full.check(&bss.start_full);
        hists_full.check(&bss.hists_full);
        if last {
            break lost_notices;
        }
    };
    heat.finish()?;
    report.missing().warn();
    lost_notices.report(&mut out, args.json)?;
    Ok(())
}

/// Opens the BPF object, sets its filters and the stack map's size, loads it and attaches the two tracepoints
/// (the exit first, so that no entry is timed without its exit attached).
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton_core_free::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.target_tgid = args.pid.pid.unwrap_or(0);
    ro.target_tid = args.tid.tid.unwrap_or(0);
    ro.target_lock = args.lock.unwrap_or(0);
    ro.summary = args.summary;
    ro.milliseconds = args.milliseconds;
    ro.note_cgroup = args.containers.container_label;
    if args.summary {
        // No stacks: the stack map and the process notices are not needed (one entry each, the least allowed).
        open.maps.stackmap.set_max_entries(1)?;
    } else {
        open.maps.stackmap.set_value_size(args.perf_max_stack_depth * 8)?;
        open.maps.stackmap.set_max_entries(args.stack_storage_size)?;
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let exit = attach_loaded_tracepoint(skel.object(), "syscalls", "sys_exit_futex")?;
    let enter = attach_loaded_tracepoint(skel.object(), "syscalls", "sys_enter_futex")?;
    Ok((skel, vec![exit, enter]))
}

/// How long a report waits after moving the epoch on, for waits being counted in the old one to be done.
pub(crate) const EPOCH_SETTLE: Duration = Duration::from_millis(10);
