//! offcputime: summarize off-CPU time by stack trace (BCC's tool, CO-RE).
//!
//! On every `sched_switch` the BPF program stamps the thread switched out with the time and the stacks where it
//! blocked, and adds the time off CPU of the thread switched in to its (thread, stacks) total, in microseconds.
//! At the end the unique stacks are named through the shared stack module (`common::output::stacks`) and printed
//! in BCC's layout, as folded lines, as JSON, and/or as a blue off-CPU flame graph.

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_tracepoint, load_first_working, open_skeleton, rodata};
use common::output::stacks::{self, Collected, FlameGraph, Palette, Sample, StackTraces, Style};
use common::output::stdout::Output;
use common::process::symbols::Symbolizer;
use common::run::{self, Signals};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{Link, MapCore, MapFlags};

use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = "\
examples:
    offcputime             # trace off-CPU stack time until Ctrl-C
    offcputime 5           # trace for 5 seconds only
    offcputime -f 5        # 5 seconds, and output in folded format
    offcputime -s 5        # 5 seconds, and show symbol offsets
    offcputime -m 1000     # trace only events that last more than 1000 usec
    offcputime -M 10000    # trace only events that last less than 10000 usec
    offcputime -p 185,175,165 # only trace threads for PID 185,175,165
    offcputime -t 188,120,134 # only trace threads 188,120,134
    offcputime -u          # only trace user threads (no kernel)
    offcputime -k          # only trace kernel threads (no user)
    offcputime -U          # only show user space stacks (no kernel)
    offcputime -K          # only show kernel space stacks (no user)
    offcputime --flamegraph off.svg 10  # also draw an off-CPU flame graph of 10 seconds";

/// Summarize off-CPU time by stack trace.
#[derive(Debug, Parser)]
#[command(name = "offcputime", version, after_help = EXAMPLES)]
struct Args {
    /// Trace these PIDs only, comma separated list
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',', value_parser = common::cli::parse_pid,
          group = "threads")]
    pids: Option<Vec<u32>>,
    /// Trace these TIDs only, comma separated list
    #[arg(short = 't', long = "tid", value_name = "TID", value_delimiter = ',', value_parser = common::cli::parse_pid,
          group = "threads")]
    tids: Option<Vec<u32>>,
    /// User threads only (no kernel threads)
    #[arg(short = 'u', long = "user-threads-only", group = "threads")]
    user_threads_only: bool,
    /// Kernel threads only (no user threads)
    #[arg(short = 'k', long = "kernel-threads-only", group = "threads")]
    kernel_threads_only: bool,
    /// Show stacks from user space only (no kernel space stacks)
    #[arg(short = 'U', long = "user-stacks-only", conflicts_with = "kernel_stacks_only")]
    user_stacks_only: bool,
    /// Show stacks from kernel space only (no user space stacks)
    #[arg(short = 'K', long = "kernel-stacks-only")]
    kernel_stacks_only: bool,
    /// Insert delimiter between kernel/user stacks
    #[arg(short = 'd', long)]
    delimited: bool,
    /// Output folded format
    #[arg(short = 'f', long)]
    folded: bool,
    /// Show address offsets
    #[arg(short = 's', long, conflicts_with = "folded")]
    offset: bool,
    /// The number of unique stack traces that can be stored and displayed
    #[arg(long, value_name = "N", default_value_t = 16384, value_parser = parse_map_size)]
    stack_storage_size: u32,
    /// The amount of time in microseconds over which we store traces (default 1)
    #[arg(short = 'm', long, value_name = "MIN_BLOCK_TIME", default_value_t = 1,
          value_parser = common::cli::parse_positive_u64, hide_default_value = true)]
    min_block_time: u64,
    /// The amount of time in microseconds under which we store traces (default U64_MAX)
    #[arg(short = 'M', long, value_name = "MAX_BLOCK_TIME", value_parser = common::cli::parse_positive_u64)]
    max_block_time: Option<u64>,
    /// Filter on this thread state bitmask (eg, 2 == TASK_UNINTERRUPTIBLE) see include/linux/sched.h
    #[arg(long, value_name = "STATE", value_parser = clap::value_parser!(u32))]
    state: Option<u32>,
    /// Print JSON lines: one object per unique stack, with its total_us
    #[arg(short = 'j', long, conflicts_with_all = ["folded", "offset"])]
    json: bool,
    /// Also write an SVG off-CPU flame graph to FILE
    #[arg(long, value_name = "FILE")]
    flamegraph: Option<PathBuf>,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Duration of trace, in seconds
    #[arg(value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
}

fn parse_map_size(s: &str) -> Result<u32, String> {
    let n = common::cli::parse_positive_u64(s)?;
    u32::try_from(n).map_err(|_| format!("{n} is too large"))
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>) -> ExitCode {
    let args: Args = common::cli::parse(argv);
    if let Some(max) = args.max_block_time.filter(|&max| max < args.min_block_time) {
        eprintln!("offcputime: -M {max} is below -m {} (see --help)", args.min_block_time);
        return ExitCode::from(2);
    }
    if args.kernel_threads_only && args.user_stacks_only {
        eprintln!("offcputime: displaying user stacks for kernel threads doesn't make sense (see --help)");
        return ExitCode::from(2);
    }
    run::bpf_main(args.verbose, || offcputime(args))
}

fn offcputime(args: Args) -> Result<()> {
    args.pids.iter().chain(&args.tids).flatten().try_for_each(|&id| common::cli::require_process(id))?;
    let flamegraph = stacks::create_flamegraph_file(args.flamegraph.as_deref())?.zip(args.flamegraph.as_ref());
    let btf = KernelBtf::load()?;
    let signals = Signals::install()?;
    let collected = Collected { user: !args.kernel_stacks_only, kernel: !args.user_stacks_only };

    let ((skel, links), _) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &btf, mech))?;

    let mut out = Output::new();
    let context = tracing_context(&args);
    if !args.folded && !args.json {
        let until = match args.duration {
            Some(secs) => format!(" for {secs} secs."),
            None => "... Hit Ctrl-C to end.".into(),
        };
        writeln!(out, "Tracing off-CPU time (us) of {context}{until}")?;
        out.flush()?;
    }

    // Save each process's memory maps when its first stack is taken, so it can be named even if it exits.
    let mut symbolizer = Symbolizer::new();
    let deadline = args.duration.and_then(|secs| Instant::now().checked_add(Duration::from_secs(secs)));
    common::attach::ring_buffer::poll_ring_buffer(
        &signals,
        &skel.maps.new_pids,
        || deadline.is_some_and(|d| Instant::now() >= d),
        |data| {
            if let Some(pid) = data.get(..4).and_then(|b| b.try_into().ok()).map(u32::from_ne_bytes) {
                symbolizer.remember_process(pid);
            }
            Ok(())
        },
    )?;
    drop(links); // stop tracing before reading, so the snapshot is consistent

    if !args.folded && !args.json {
        writeln!(out)?;
    }
    let samples = read_samples(&skel, collected)?;
    let missing = stacks::missing(&samples);
    let named = stacks::drop_tracing_frames(stacks::symbolize(samples, &mut symbolizer, args.verbose.on()));

    let style = Style {
        delimited: args.delimited && collected.user && collected.kernel,
        annotate_kernel: false,
        offsets: args.offset,
    };
    match flamegraph {
        Some((_, path)) if named.is_empty() => {
            let _ = std::fs::remove_file(path);
            eprintln!("offcputime: no off-CPU time traced, so no flame graph written to {}", path.display())
        }
        Some((file, path)) => {
            let graph = FlameGraph {
                title: format!("Off-CPU Time Flame Graph: {context}"),
                count_name: "us".into(),
                palette: Palette::Io,
            };
            stacks::write_flamegraph(file, &named, Style { offsets: false, ..style }, &graph)
                .with_context(|| format!("writing the flame graph to {}", path.display()))?
        }
        None => {}
    }
    if args.json {
        stacks::write_json(&mut out, &named, "total_us", true)?;
    } else if args.folded {
        stacks::write_folded(&mut out, &named, style)?;
    } else {
        stacks::write_multiline(&mut out, &named, style)?;
    }

    missing.warn();
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        use common::attach::maps::DropCounter;
        DropCounter::new("blocks", "the totals map was full").check(&bss.lost_blocks);
        DropCounter::new("blocks", "too many threads off CPU at once for the start map").check(&bss.lost_starts);
        DropCounter::new("new processes", "ring buffer full; if they exited their frames may show as [unknown]")
            .check(&bss.lost_notices);
    }
    Ok(())
}

/// BCC's header phrase: `PIDs 185,175 by user + kernel stack`.
fn tracing_context(args: &Args) -> String {
    let list = |ids: &[u32]| ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let whom = match (&args.pids, &args.tids) {
        (Some(pids), _) => format!("PIDs {}", list(pids)),
        (None, Some(tids)) => format!("TIDs {}", list(tids)),
        _ if args.user_threads_only => "user threads".into(),
        _ if args.kernel_threads_only => "kernel threads".into(),
        _ => "all threads".into(),
    };
    let stacks = if args.user_stacks_only {
        "user"
    } else if args.kernel_stacks_only {
        "kernel"
    } else {
        "user + kernel"
    };
    format!("{whom} by {stacks} stack")
}

unsafe impl plain::Plain for bpf::types::stack_key {}

/// Reads every total with its raw stack addresses.
fn read_samples(skel: &BpfSkel<'_>, collected: Collected) -> Result<Vec<Sample<u64>>> {
    let mut traces = StackTraces::new(&skel.maps.stackmap, collected);
    let mut samples = Vec::new();
    for (key, total) in common::attach::maps::hash_entries::<bpf::types::stack_key, u64>(&skel.maps.totals)? {
        if total > 0 {
            let comm = common::attach::maps::c_string(&key.comm);
            let task = traces.task(key.tgid, key.pid, comm, key.user_stack_id, key.kern_stack_id);
            samples.push(Sample { task, waker: None, value: total });
        }
    }
    Ok(samples)
}

/// Opens and loads the BPF object with the flags' filters, fills the PID/TID maps, and attaches to sched_switch.
fn load_and_attach(args: &Args, btf: &KernelBtf, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.user_stacks_only = args.user_stacks_only;
    ro.kernel_stacks_only = args.kernel_stacks_only;
    ro.user_threads_only = args.user_threads_only;
    ro.kernel_threads_only = args.kernel_threads_only;
    ro.filter_by_pid = args.pids.is_some();
    ro.filter_by_tid = args.tids.is_some();
    ro.filter_state = args.state.is_some();
    ro.state = args.state.unwrap_or(0);
    ro.min_block_us = args.min_block_time;
    ro.max_block_us = args.max_block_time.unwrap_or(u64::MAX);
    // sched_switch gained a prev_state argument in 5.18; before, the state is read from the task.
    ro.has_prev_state_arg = match btf.tracepoint_arity("sched_switch") {
        Some(4) => true,
        Some(3) => false,
        other => bail!("sched_switch has {other:?} arguments in this kernel's BTF, expected 3 or 4"),
    };
    let maps = &mut open.maps;
    maps.stackmap.set_max_entries(args.stack_storage_size)?;
    maps.pids.set_max_entries(args.pids.as_ref().map_or(1, |p| p.len() as u32))?;
    maps.tids.set_max_entries(args.tids.as_ref().map_or(1, |t| t.len() as u32))?;
    let tp_btf = mech == Attach::TpBtf;
    open.progs.sched_switch_btf.set_autoload(tp_btf);
    open.progs.sched_switch_raw.set_autoload(!tp_btf);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // Filters are in place before the program is attached.
    for (map, ids) in [(&skel.maps.pids, &args.pids), (&skel.maps.tids, &args.tids)] {
        for id in ids.iter().flatten() {
            map.update(&id.to_ne_bytes(), &[1], MapFlags::ANY).context("setting the PID filter")?;
        }
    }
    let prog = if tp_btf { &skel.progs.sched_switch_btf } else { &skel.progs.sched_switch_raw };
    let link = attach_tracepoint(prog, "sched", "sched_switch", mech)?;
    Ok((skel, vec![link]))
}
