//! offcputime: summarize off-CPU time by stack trace (BCC's tool, CO-RE).
//!
//! On every `sched_switch` the BPF program stamps the thread switched out with the time and the stacks where it
//! blocked, and adds the time off CPU of the thread switched in to its (thread, stacks) total, in microseconds.
//! At the end the unique stacks are named through the shared stack module (`common::output::stacks`) and printed
//! in BCC's layout, as folded lines, as JSON, and/or as a blue off-CPU flame graph.

mod bpf;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{load_first_working, open_skeleton, rodata};
use common::attach::sched::{self, BlockFilters, BlockTimeArgs, ThreadFilters};
use common::output::offcpu::{self, Form, Report};
use common::output::stacks::{Collected, FlameGraph, Palette, Sample, StackTraces, Style};
use common::output::stdout::Output;
use common::run::{self, Signals};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;

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
    #[command(flatten)]
    block_time: BlockTimeArgs,
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
    if let Some(error) = filters(&args).usage_error(args.user_stacks_only) {
        eprintln!("offcputime: {error}");
        return ExitCode::from(2);
    }
    run::bpf_main(args.verbose, || offcputime(args))
}

/// The flags' filters, applied in BPF.
fn filters(args: &Args) -> BlockFilters {
    args.block_time.filters(ThreadFilters {
        pids: args.pids.clone(),
        tids: args.tids.clone(),
        user_threads_only: args.user_threads_only,
        kernel_threads_only: args.kernel_threads_only,
        state: args.state,
    })
}

fn offcputime(args: Args) -> Result<()> {
    let filters = filters(&args);
    filters.require_processes()?;
    let collected = Collected { user: !args.kernel_stacks_only, kernel: !args.user_stacks_only };
    let context = tracing_context(&args);
    let report = Report {
        tool: "offcputime",
        form: Form::from_flags(args.folded, args.json),
        style: Style {
            delimited: args.delimited && collected.user && collected.kernel,
            annotate_kernel: false,
            offsets: args.offset,
        },
        graph: FlameGraph {
            title: format!("Off-CPU Time Flame Graph: {context}"),
            count_name: "us".into(),
            palette: Palette::Io,
        },
        per_thread: true,
        flamegraph: offcpu::flamegraph_file(args.flamegraph.as_deref())?,
    };
    let btf = KernelBtf::load()?;
    let signals = Signals::install()?;
    let ((skel, links), _) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &filters, &btf, mech))?;

    let mut out = Output::new();
    let what = format!("Tracing off-CPU time (us) of {context}");
    let mut symbolizer = offcpu::trace(&mut out, &report, &what, args.duration, &signals, &skel.maps.new_pids)?;
    drop(links); // stop tracing before reading, so the snapshot is consistent
    offcpu::report(&mut out, read_samples(&skel, collected)?, &mut symbolizer, args.verbose.on(), report)?;
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        offcpu::warn_lost(&bss.lost_blocks, &bss.lost_starts, Some(&bss.lost_notices));
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
fn load_and_attach(
    args: &Args,
    filters: &BlockFilters,
    btf: &KernelBtf,
    mech: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.user_stacks_only = args.user_stacks_only;
    ro.kernel_stacks_only = args.kernel_stacks_only;
    common::set_block_filters!(ro, filters, btf);
    let maps = &mut open.maps;
    maps.stackmap.set_max_entries(args.stack_storage_size)?;
    filters.size_maps(&mut maps.pids, &mut maps.tids)?;
    let tp_btf = mech == Attach::TpBtf;
    open.progs.sched_switch_btf.set_autoload(tp_btf);
    open.progs.sched_switch_raw.set_autoload(!tp_btf);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // Filters are in place before the program is attached.
    filters.fill_maps(&skel.maps.pids, &skel.maps.tids)?;
    let p = &skel.progs;
    let link = sched::attach_programs(&p.sched_switch_btf, &p.sched_switch_raw, "sched_switch", mech)?;
    Ok((skel, vec![link]))
}
