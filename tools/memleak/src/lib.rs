// SPDX-License-Identifier: Apache-2.0 OR MIT
//! memleak: the allocations not yet freed, grouped by the call stack that made them, every interval (BCC's tool,
//! CO-RE).
//!
//! User mode (`-p PID`, or `-c COMMAND`, which is started here and held before exec until the probes are in):
//! uprobes on the C library's allocators (entry for the size, return for the address) and on free/munmap
//! ([`user`]). Kernel mode (no process): the kmem tracepoints, or the percpu ones with `--percpu`. The BPF side
//! (`memleak.bpf.c`) keeps every outstanding allocation by address with its size, time and stack id, and running
//! totals per stack; [`report`] reads them each interval, names the frames with the shared symbolizer and prints
//! BCC's layout or JSON lines; or, with `--prometheus`, the per-stack totals are served as gauges ([`metrics`]).

mod bpf;
mod child;
mod metrics;
mod report;
mod user;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata,
};
use common::attach::maps::DropCounter;
use common::host::Host;
use common::output::stdout::Output;
use common::process::symbols::{process_notices, Symbolizer};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Report, SortKey};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Show outstanding allocations (made and not yet freed) by call stack, in one process or in the kernel
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
// The shared pid filter (common::cli::filter), with what it means for this tool.
#[command(mut_arg("pid", |a| a.help("The process to trace; without it (and without -c), the kernel's allocations are traced")))]
struct Args {
    /// The process to trace; without it (and without -c), the kernel's allocations are traced
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print a line for every allocator call and free as it happens
    #[arg(short = 't', long, conflicts_with_all = ["prometheus", "json"])]
    trace: bool,
    /// Also list each outstanding allocation's address and size
    #[arg(short = 'a', long = "show-allocs")]
    show_allocs: bool,
    /// Leave out allocations younger than this many milliseconds
    #[arg(short = 'o', long, value_name = "OLDER", default_value_t = 500)]
    older: u64,
    /// Start this command (split at spaces) and trace its allocations
    #[arg(short = 'c', long, value_name = "COMMAND", conflicts_with = "pid")]
    command: Option<String>,
    /// Print only the per-stack totals kept in the kernel (no per-allocation ages, no -a)
    #[arg(long)]
    combined_only: bool,
    /// Kernel mode: an address allocated again without a free seen in between is counted once (user mode always
    /// does this)
    #[arg(long)]
    wa_missing_free: bool,
    /// Record only about one allocation in this many, to lower the overhead
    #[arg(short = 's', long, value_name = "SAMPLE_RATE", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    sample_rate: u64,
    /// Show only this many stacks, the largest
    #[arg(short = 'T', long, value_name = "TOP", default_value_t = 10)]
    top: usize,
    /// Record only allocations of at least this many bytes
    #[arg(short = 'z', long, value_name = "MIN_SIZE")]
    min_size: Option<u64>,
    /// Record only allocations of at most this many bytes
    #[arg(short = 'Z', long, value_name = "MAX_SIZE")]
    max_size: Option<u64>,
    /// The library (or program) whose allocator functions are probed
    #[arg(short = 'O', long, value_name = "OBJ", default_value = "c")]
    obj: String,
    /// Kernel mode: trace the percpu allocator instead of kmalloc, slab caches and pages
    #[arg(long, conflicts_with_all = ["pid", "command"])]
    percpu: bool,
    /// Order of the stacks: size or count
    #[arg(long, value_enum, default_value_t = SortKey::Size)]
    sort: SortKey,
    /// A prefix of the allocator's function names (as jemalloc's je_malloc)
    #[arg(long, value_name = "PREFIX")]
    symbols_prefix: Option<String>,
    /// JSON lines: one object per stack per interval
    #[arg(short = 'j', long)]
    json: bool,
    /// Size of the stack trace map (entries); stacks beyond it cannot be shown
    #[arg(long, default_value_t = 16384, value_parser = clap::value_parser!(u32).range(1..=1 << 24))]
    stack_storage_size: u32,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds between reports (5 if not given)
    #[arg(value_parser = common::cli::parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many reports (by default, run until Ctrl-C)
    #[arg(value_parser = common::cli::parse_positive_u64)]
    count: Option<u64>,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::UprobeMulti, Attach::Uprobe, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    if let (Some(min), Some(max)) = (args.min_size, args.max_size) {
        if min > max {
            common::cli::usage_error("min size (-z) can't be greater than max size (-Z)");
        }
    }
    if args.top == 0 {
        common::cli::usage_error("-T must be at least 1");
    }
    host.bpf_main(args.verbose, |signals| memleak(args, &host, signals))
}

/// What is traced: one process (its PID, and the held child of -c) or the kernel.
enum Target {
    Process { pid: u32, child: Option<child::Held> },
    Kernel,
}

fn memleak(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.count.is_some())?;
    let mut out = Output::new();
    let mut target = match (&args.command, args.pid.pid) {
        (Some(command), _) => {
            use std::io::Write;
            let held = child::Held::fork(command)?;
            if !args.json && endpoint.is_none() {
                writeln!(out, "Executing '{command}' and tracing the resulting process.")?;
                out.flush()?;
            }
            Target::Process { pid: held.pid(), child: Some(held) }
        }
        (None, Some(pid)) => {
            common::cli::require_process(pid)?;
            Target::Process { pid, child: None }
        }
        (None, None) => Target::Kernel,
    };
    let verbose = args.verbose.on();

    let ((skel, _links), mech) = match &target {
        Target::Process { pid, child } => {
            // The held child has not exec'd yet: its libraries are the system's.
            let seen = if child.is_some() { None } else { Some(*pid) };
            let functions = user::Functions::find(&args.obj, seen, args.symbols_prefix.as_deref())?;
            let ladder: Vec<Attach> =
                TOOL.attach.iter().copied().filter(|m| matches!(m, Attach::UprobeMulti | Attach::Uprobe)).collect();
            let ((skel, links), mech) = load_first_working(&ladder, verbose, |mech| {
                let skel = load(&args, mech, Some(*pid))?;
                let links = functions.attach(&skel, mech, *pid)?;
                Ok((skel, links))
            })?;
            if verbose {
                eprintln!("probing {} allocator functions of {} ({mech})", functions.len(), functions.path().display());
            }
            ((skel, links), mech)
        }
        Target::Kernel => load_first_working(&[Attach::Tracepoint], verbose, |mech| attach_kernel(&args, mech))?,
    };

    if !args.json && endpoint.is_none() {
        use std::io::Write;
        match &target {
            Target::Process { pid, .. } => writeln!(out, "Attaching to pid {pid}, Ctrl+C to quit.")?,
            Target::Kernel => writeln!(out, "Attaching to kernel allocators, Ctrl+C to quit.")?,
        }
        out.flush()?;
    }
    let pid = match &mut target {
        Target::Process { pid, child } => {
            if let Some(held) = child.as_mut() {
                held.release()?;
            }
            Some(*pid)
        }
        Target::Kernel => None,
    };

    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let collected = common::stacks::Collected { user: pid.is_some(), kernel: pid.is_none() };
        let mut names = common::output::stackseries::StackNames::new(collected, false);
        return endpoint.serve(&signals, |s| {
            s.map_full("allocs", &bss.lost_allocs);
            s.map_full("combined_allocs", &bss.lost_combined);
            s.map_full("pending", &bss.lost_pending);
            metrics::write(s, &mut names, &skel.maps.combined_allocs, &skel.maps.stack_traces, pid)
        });
    }
    let mut symbolizer = Symbolizer::new();
    match &target {
        // Its maps now, so that its frames are named even if it exits before the first report.
        Target::Process { pid, child: None } => drop(symbolizer.remember_process(*pid)),
        // The command has only just been released: its maps are saved at the first report.
        Target::Process { .. } => {}
        Target::Kernel => symbolizer.preload_kernel(),
    }
    let mut report = Report::new(report::Layout {
        pid,
        top: args.top,
        sort: args.sort,
        show_allocs: args.show_allocs,
        combined_only: args.combined_only,
        min_age_ns: args.older.saturating_mul(1_000_000),
        json: args.json,
        verbose,
    });
    let mut lost = [
        (DropCounter::new("allocations", "the map of outstanding allocations was full"), &bss.lost_allocs),
        (DropCounter::new("allocations from the per-stack totals", "too many stacks"), &bss.lost_combined),
        (DropCounter::new("allocator calls", "too many calls in flight"), &bss.lost_pending),
    ];
    let events = EventStream::new(&skel.maps.events, &bss.lost_events, "trace lines");
    let mut lost_notices = None;
    let interval = Duration::from_secs(args.interval.unwrap_or(5));
    let start = Instant::now();
    let mut done = 0u64;
    // The traced process (-p or -c) has ended: its last report, a line that says so, and the end.
    let exited = || pid.is_some_and(common::process::has_exited);
    loop {
        let deadline = u32::try_from(done.saturating_add(1))
            .ok()
            .and_then(|n| interval.checked_mul(n))
            .and_then(|d| start.checked_add(d));
        let until = || deadline.is_some_and(|d| Instant::now() >= d) || exited();
        let stopped = if args.trace {
            let mut printer = |data: &[u8]| report::write_trace(&mut out, data);
            events.poll(&signals, until, &mut printer)?;
            signals.stopped()
        } else if pid.is_none() {
            signals.sleep_until(deadline)
        } else {
            let notices = process_notices(&skel.maps.new_pids, &bss.lost_notices);
            let lost = symbolizer.remember_noticed(&signals, &notices, until)?;
            lost_notices = Some(lost);
            signals.stopped()
        };
        if signals.stdout_gone() {
            return Ok(());
        }
        // BCC exits at Ctrl-C without a last report.
        if stopped {
            break;
        }
        done += 1;
        if let Some(pid) = pid {
            symbolizer.remember_process(pid);
        }
        let ended = exited();
        report.write(&mut out, &skel, &mut symbolizer)?;
        for (counter, value) in &mut lost {
            counter.check(value);
        }
        if let (true, Some(pid)) = (ended, pid) {
            if !args.json {
                use std::io::Write;
                writeln!(out, "Process {pid} exited.")?;
                out.flush()?;
            }
            break;
        }
        if args.count.is_some_and(|c| done >= c) {
            break;
        }
    }
    for (counter, value) in &mut lost {
        counter.check(value);
    }
    if let Some(lost) = lost_notices {
        lost.report(&mut out, args.json)?;
    }
    Ok(())
}

/// Opens the BPF object with the options' filters (user mode: process `pid`), keeps the programs of `mech` and
/// loads it.
fn load(args: &Args, mech: Attach, pid: Option<u32>) -> Result<BpfSkel<'static>> {
    let user_mode = pid.is_some();
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.min_size = args.min_size.unwrap_or(0);
    ro.max_size = args.max_size.unwrap_or(u64::MAX);
    ro.sample_every_n = args.sample_rate;
    // SAFETY: sysconf has no preconditions.
    ro.page_size = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    ro.user_stacks = user_mode;
    ro.trace_all = args.trace;
    ro.wa_missing_free = args.wa_missing_free;
    ro.target_tgid = pid.unwrap_or(0);
    open.maps.stack_traces.set_max_entries(args.stack_storage_size)?;
    if !user_mode {
        // Entries allocated on demand come from kmalloc, which kernel mode traces: every insert would feed the
        // maps more allocations of their own. Preallocated maps allocate nothing while tracing (as BCC's).
        open.maps.allocs.set_map_flags(0)?;
        open.maps.combined_allocs.set_map_flags(0)?;
    }
    autoload_by_section(open.open_object_mut(), mech);
    if !user_mode {
        let skip: &[&str] = if args.percpu {
            &["kmalloc", "kmem_cache_alloc", "kmalloc_node", "kmem_cache_alloc_node", "kfree", "kmem_cache_free"]
        } else {
            &["percpu_alloc_percpu", "percpu_free_percpu"]
        };
        let mut skip: Vec<&str> = skip.to_vec();
        if args.percpu {
            skip.extend(["mm_page_alloc", "mm_page_free"]);
        } else {
            // Separate tracepoints only before 6.1.
            for name in ["kmalloc_node", "kmem_cache_alloc_node"] {
                if !tracepoint_exists("kmem", name) {
                    skip.push(name);
                }
            }
        }
        for name in skip {
            common::attach::loader::skip_tracepoint(open.open_object_mut(), name);
        }
    }
    open.load().with_context(|| format!("loading the BPF programs ({mech})"))
}

fn tracepoint_exists(category: &str, name: &str) -> bool {
    common::attach::features::tracefs().is_ok_and(|t| t.join("events").join(category).join(name).exists())
}

/// Kernel mode: loads and attaches the kmem (or percpu) tracepoints.
fn attach_kernel(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    if args.percpu && !tracepoint_exists("percpu", "percpu_alloc_percpu") {
        anyhow::bail!("this kernel has no percpu:percpu_alloc_percpu tracepoint (--percpu)");
    }
    let skel = load(args, mech, None)?;
    let names: &[(&str, &str)] = if args.percpu {
        &[("percpu", "percpu_alloc_percpu"), ("percpu", "percpu_free_percpu")]
    } else {
        &[
            ("kmem", "kmalloc"),
            ("kmem", "kmalloc_node"),
            ("kmem", "kmem_cache_alloc"),
            ("kmem", "kmem_cache_alloc_node"),
            ("kmem", "kfree"),
            ("kmem", "kmem_cache_free"),
            ("kmem", "mm_page_alloc"),
            ("kmem", "mm_page_free"),
        ]
    };
    let mut links = Vec::new();
    for (category, name) in names {
        if name.ends_with("_node") && !tracepoint_exists(category, name) {
            continue;
        }
        links.push(attach_loaded_tracepoint(skel.object(), category, name)?);
    }
    Ok((skel, links))
}
