// SPDX-License-Identifier: Apache-2.0 OR MIT
//! klockstat: kernel mutex and rw-semaphore statistics per caller, how long tasks waited for each lock and how
//! long they held it (libbpf-tools' tool and BCC's, CO-RE).
//!
//! The BPF side (`klockstat.bpf.c`) times each lock from the lock functions (fentry/fexit, else kprobes), or,
//! where the kernel cannot trace functions, each contended acquisition from the `lock:contention_begin/end`
//! tracepoints (waits only: nothing there says when a lock is released). It keeps cumulative statistics per kernel
//! stack (per thread with -P); this side names the caller, the first frame outside the lock functions, adds up
//! the stacks that print the same, and prints libbpf-tools' two tables every interval, or JSON lines
//! (`report.rs`).

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::links::Links;
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata};
use common::attach::maps::DropCounter;
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::run::{self, Signals, Tick};
use libbpf_rs::skel::{OpenSkel, Skel};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Report, Sort};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Kernel mutex and rw-semaphore statistics: wait and hold times per caller, or per thread
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    tid: common::cli::filter::TidArg,
    /// Only callers whose function name starts with FUNC
    #[arg(short = 'c', long, value_name = "FUNC")]
    caller: Option<String>,
    /// Only this lock: a kernel symbol (cgroup_mutex) or an address (0xffff...)
    #[arg(short = 'L', long, value_name = "LOCK")]
    lock: Option<String>,
    /// Print at most this many callers (or threads) per table
    #[arg(short = 'n', long = "locks", value_name = "NR_LOCKS", value_parser = clap::value_parser!(u64).range(1..))]
    locks: Option<u64>,
    /// Kernel frames printed per caller, the caller included; above 1, also who had the longest time
    #[arg(short = 's', long = "stacks", value_name = "NR_STACKS", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=127))]
    stacks: u32,
    /// Order of the tables: acq_max, acq_total or acq_count for waits, hld_max, hld_total or hld_count for holds
    /// (one of each, separated by a comma; default acq_max,hld_max)
    #[arg(short = 'S', long = "sort", value_name = "SORT", value_parser = report::parse_sort)]
    sort: Option<Sort>,
    /// Trace for this many seconds, then print and stop
    #[arg(short = 'd', long, value_name = "SECONDS", value_parser = common::cli::parse_positive_u64)]
    duration: Option<u64>,
    /// Print the statistics every this many seconds
    #[arg(short = 'i', long, value_name = "SECONDS", value_parser = common::cli::parse_positive_u64)]
    interval: Option<u64>,
    /// Start each interval's statistics from zero (by default they add up over the run)
    #[arg(short = 'R', long)]
    reset: bool,
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Statistics per thread (TID and command) instead of per caller
    #[arg(short = 'P', long = "per-thread")]
    per_thread: bool,
    /// Room for this many distinct kernel stacks (BCC's option; default 16384); a full map is counted and said
    #[arg(long = "stack-storage-size", value_name = "N", default_value_t = 16384,
          value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    stack_storage_size: u32,
    /// Print JSON lines: an object per caller (or thread) per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    metrics: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// The lock functions give waits and holds (fentry/fexit, else kprobes, as libbpf-tools); the contention
/// tracepoints give the waits of contended acquisitions where functions cannot be traced.
pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

/// The lock functions a kernel must have for the function paths (the object's other lock functions are skipped
/// where the kernel lacks them; a kernel with CONFIG_DEBUG_LOCK_ALLOC has mutex_lock_nested instead).
const REQUIRED_FUNCTIONS: [&str; 2] = ["mutex_lock", "mutex_unlock"];

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    if args.per_thread && args.stacks != 1 {
        common::cli::usage_error("--per-thread and --stacks cannot be used together");
    }
    if args.reset && args.metrics.prometheus.is_some() {
        common::cli::usage_error("--prometheus serves counters that only grow: it cannot be used with --reset");
    }
    host.bpf_main(args.verbose, |signals| klockstat(args, &host, signals))
}

/// The reports' interval and how many there are: -d alone is one report at its end; -d with -i, as many
/// intervals as fit in the duration.
fn schedule(args: &Args) -> (Option<Duration>, Option<u64>) {
    match (args.duration, args.interval) {
        (Some(d), None) => (Some(Duration::from_secs(d)), Some(1)),
        (Some(d), Some(i)) => {
            let i = i.min(d);
            (Some(Duration::from_secs(i)), Some((d / i).max(1)))
        }
        (None, Some(i)) => (Some(Duration::from_secs(i)), None),
        (None, None) => (None, None),
    }
}

fn klockstat(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.pid.or(args.tid.tid).map(common::cli::require_process).transpose()?;
    let lock = args.lock.as_deref().map(report::resolve_lock).transpose()?;
    let timed = args.duration.is_some() || args.interval.is_some();
    let endpoint = args.metrics.endpoint(host, timed)?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, lock, mech))?;
    // Said in each text report where the hold table would be (JSON: hold is null).
    let holds = matches!(mech, Attach::Fentry | Attach::Kprobe).then_some(()).ok_or_else(|| {
        format!(
            "Hold times are not shown: the lock functions are not traced (attached with {mech}), and the lock \
             tracepoints see only contended waits."
        )
    });
    let mut out = Output::new();
    if !args.json && args.metrics.prometheus.is_none() {
        use std::io::Write;
        writeln!(out, "Tracing mutex/sem lock events...  Hit Ctrl-C to end")?;
        out.flush()?;
    }
    let mut report = Report {
        sort: args.sort.unwrap_or_default(),
        caller: args.caller.clone(),
        locks: args.locks.unwrap_or(u64::MAX),
        stacks: args.stacks as usize,
        per_thread: args.per_thread,
        reset: args.reset,
        timestamp: args.timestamp,
        json: args.json,
        holds,
        verbose: args.verbose.on(),
        missing: 0,
    };
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            report.metrics(s, &skel)?;
            let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
            s.map_full("inflight", &bss.inflight_full);
            s.map_full("stats", &bss.stats_full);
            s.lost_events_total("kernel stacks", report.missing);
            Ok(())
        });
    }
    let mut inflight_full = DropCounter::new("lock acquisitions", "too many locks in flight");
    let mut stats_full = DropCounter::new("lock acquisitions", "too many callers or threads");
    let (interval, count) = schedule(&args);
    let result = run::run_intervals(&signals, interval, count, |tick| {
        report.write(&mut out, &skel)?;
        if let Some(bss) = skel.maps.bss_data.as_deref() {
            inflight_full.check(&bss.inflight_full);
            stats_full.check(&bss.stats_full);
        }
        if tick == Tick::Last && !args.json {
            use std::io::Write;
            writeln!(out, "Exiting trace of mutex/sem locks")?;
            out.flush()?;
        }
        Ok(())
    });
    report.warn_missing();
    result
}

/// Opens the BPF object, sets its filters, keeps the programs of `mech` (only those whose lock function this
/// kernel has), loads and attaches them: returns and unlocks first, so that no lock is followed from a start whose
/// end nobody sees.
fn load_and_attach(args: &Args, lock: Option<u64>, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter().tid(args.tid))?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.target_lock = lock.unwrap_or(0);
    ro.per_thread = args.per_thread;
    open.maps.stackmap.set_max_entries(if args.per_thread { 1 } else { args.stack_storage_size })?;
    autoload_by_section(open.open_object_mut(), mech);
    if matches!(mech, Attach::Fentry | Attach::Kprobe) {
        let has: Box<dyn Fn(&str) -> bool> = if mech == Attach::Fentry {
            let btf = KernelBtf::load()?;
            Box::new(move |f| btf.has_function(f))
        } else {
            let functions = common::attach::kernel_functions::traceable_functions()?;
            Box::new(move |f| functions.contains(f))
        };
        for f in REQUIRED_FUNCTIONS {
            if !has(f) {
                bail!("this kernel has no {f} to trace ({mech})");
            }
        }
        for mut prog in open.open_object_mut().progs_mut() {
            let section = prog.section().to_string_lossy().into_owned();
            if let Some((_, target)) = section.split_once('/') {
                if prog.autoload() && !has(target) {
                    prog.set_autoload(false);
                }
            }
        }
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = match mech {
        Attach::Fentry | Attach::Kprobe => {
            let mut links = Links::default();
            for first in [true, false] {
                for prog in skel.object().progs_mut().filter(|p| p.autoload()) {
                    let section = prog.section().to_string_lossy().into_owned();
                    let ends = section.starts_with("fexit/")
                        || section.starts_with("kretprobe/")
                        || section.ends_with("unlock")
                        || section.contains("/up_");
                    if ends == first {
                        links.push(prog.attach().with_context(|| format!("attaching {section}"))?);
                    }
                }
            }
            links
        }
        _ => Links::from(vec![
            attach_loaded_tracepoint(skel.object(), "lock", "contention_end")?,
            attach_loaded_tracepoint(skel.object(), "lock", "contention_begin")?,
        ]),
    };
    Ok((skel, links))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(argv: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("klockstat").chain(argv.iter().copied())).unwrap()
    }

    #[test]
    fn duration_and_interval_make_the_schedule() {
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(schedule(&args(&[])), (None, None));
        assert_eq!(schedule(&args(&["-d", "5"])), (secs(5), Some(1)));
        assert_eq!(schedule(&args(&["-i", "2"])), (secs(2), None));
        assert_eq!(schedule(&args(&["-d", "5", "-i", "2"])), (secs(2), Some(2)));
        assert_eq!(schedule(&args(&["-d", "2", "-i", "5"])), (secs(2), Some(1)));
    }
}
