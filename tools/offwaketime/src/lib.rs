//! offwaketime: summarize blocked time by off-CPU stack and waker stack (BCC's tool, CO-RE).
//!
//! On every `sched_switch` the BPF program stamps the thread switched out with the time and the stacks where it
//! blocked; on `sched_waking` the waker records its name and stacks for the thread it wakes; when the blocked
//! thread runs again, its time off CPU is added to the (blocked stacks, waker stacks) total, in microseconds. At
//! the end the stacks are named through the shared stack module (`common::output::stacks`) and printed in BCC's
//! layout (waker above `--`, target below), as folded lines (waker on top), as JSON, and/or as a flame graph.

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
use common::output::stacks::{self, Collected, FlameGraph, Palette, Sample, StackTraces, Style};
use common::output::stdout::Output;
use common::run::{self, Signals};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = "\
examples:
    offwaketime                # trace off-CPU + waker stack time until Ctrl-C
    offwaketime 5              # trace for 5 seconds only
    offwaketime -f 5           # 5 seconds, and output in folded format
    offwaketime -m 1000        # trace only events that last more than 1000 usec
    offwaketime -M 9000        # trace only events that last less than 9000 usec
    offwaketime -p 185         # only trace threads for PID 185
    offwaketime -t 188         # only trace thread 188
    offwaketime -u             # only trace user threads (no kernel)
    offwaketime -k             # only trace kernel threads (no user)
    offwaketime -U             # only show user space stacks (no kernel)
    offwaketime -K             # only show kernel space stacks (no user)
    offwaketime --flamegraph offwake.svg 10  # also draw an off-wake flame graph of 10 seconds";

/// Summarize blocked time by kernel off-CPU stack and waker stack.
#[derive(Debug, Parser)]
#[command(name = "offwaketime", version, after_help = EXAMPLES)]
struct Args {
    /// Trace these PIDS only. Can be a comma separated list of PIDS.
    #[arg(short = 'p', long = "pid", value_name = "PIDS", value_delimiter = ',', value_parser = common::cli::parse_pid,
          group = "threads")]
    pids: Option<Vec<u32>>,
    /// Trace these TIDS only. Can be a comma separated list of TIDS.
    #[arg(short = 't', long = "tid", value_name = "TIDS", value_delimiter = ',', value_parser = common::cli::parse_pid,
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
    /// The number of unique stack traces that can be stored and displayed
    #[arg(long, value_name = "N", default_value_t = 16384, value_parser = parse_map_size)]
    stack_storage_size: u32,
    #[command(flatten)]
    block_time: BlockTimeArgs,
    /// Filter on this thread state bitmask (eg, 2 == TASK_UNINTERRUPTIBLE) see include/linux/sched.h
    #[arg(long, value_name = "STATE", value_parser = clap::value_parser!(u32))]
    state: Option<u32>,
    /// Print JSON lines: one object per unique stack, with its total_us
    #[arg(short = 'j', long, conflicts_with = "folded")]
    json: bool,
    /// Also write an SVG off-wake flame graph to FILE (wakers on top of the blocked stacks)
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
        eprintln!("offwaketime: {error}");
        return ExitCode::from(2);
    }
    run::bpf_main(args.verbose, || offwaketime(args))
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

fn offwaketime(args: Args) -> Result<()> {
    let filters = filters(&args);
    filters.require_processes()?;
    let collected = Collected { user: !args.kernel_stacks_only, kernel: !args.user_stacks_only };
    let context = tracing_context(&args);
    let report = Report {
        tool: "offwaketime",
        form: Form::from_flags(args.folded, args.json),
        style: Style { delimited: args.delimited && collected.user && collected.kernel, ..Style::default() },
        graph: FlameGraph {
            title: format!("Off-Wake Time Flame Graph: {context} stacks"),
            count_name: "us".into(),
            palette: Palette::Wakeup,
        },
        per_thread: true,
        flamegraph: offcpu::flamegraph_file(args.flamegraph.as_deref())?,
    };
    let btf = KernelBtf::load()?;
    let signals = Signals::install()?;
    let ((skel, links), _) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &filters, &btf, mech))?;

    let mut out = Output::new();
    let what = format!("Tracing blocked time (us) by {context} off-CPU and waker stack");
    let mut symbolizer = offcpu::trace(&mut out, &report, &what, args.duration, &signals, &skel.maps.new_pids)?;
    drop(links); // stop tracing before reading, so the snapshot is consistent
    offcpu::report(&mut out, read_samples(&skel, collected)?, &mut symbolizer, args.verbose.on(), report)?;
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        offcpu::warn_lost(&bss.lost_blocks, &bss.lost_starts, Some(&bss.lost_notices));
    }
    Ok(())
}

/// BCC's header phrase: `user + kernel`.
fn tracing_context(args: &Args) -> String {
    let stacks = if args.user_stacks_only {
        "user"
    } else if args.kernel_stacks_only {
        "kernel"
    } else {
        "user + kernel"
    };
    stacks.to_string()
}

unsafe impl plain::Plain for bpf::types::wake_key {}

/// Reads every total with its raw stack addresses, target and waker.
fn read_samples(skel: &BpfSkel<'_>, collected: Collected) -> Result<Vec<Sample<u64>>> {
    let mut traces = StackTraces::new(&skel.maps.stackmap, collected);
    let mut samples = Vec::new();
    for (key, total) in common::attach::maps::hash_entries::<bpf::types::wake_key, u64>(&skel.maps.totals)? {
        if total > 0 {
            let mut task = |w: &bpf::types::waker| {
                let comm = common::attach::maps::c_string(&w.comm);
                traces.task(w.tgid, w.pid, comm, w.user_stack_id, w.kern_stack_id)
            };
            let target = task(&key.target);
            // No waker seen (the thread was woken before tracing began, or by no traced wakeup).
            let waker = if key.waker.pid == 0 && key.waker.user_stack_id == -1 && key.waker.kern_stack_id == -1 {
                stacks::Task {
                    pid: 0,
                    shown_id: 0,
                    comm: String::new(),
                    user: stacks::Stack::Absent,
                    kernel: stacks::Stack::Absent,
                }
            } else {
                task(&key.waker)
            };
            samples.push(Sample { task: target, waker: Some(waker), value: total });
        }
    }
    Ok(samples)
}

/// Opens and loads the BPF object with the flags' filters, fills the PID/TID maps, and attaches to sched_waking
/// and sched_switch.
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
    open.progs.sched_waking_btf.set_autoload(tp_btf);
    open.progs.sched_waking_raw.set_autoload(!tp_btf);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // Filters are in place before the program is attached.
    filters.fill_maps(&skel.maps.pids, &skel.maps.tids)?;
    let p = &skel.progs;
    // The waker first, so that no block is counted without its waker for want of the second link.
    let waking = sched::attach_programs(&p.sched_waking_btf, &p.sched_waking_raw, "sched_waking", mech)?;
    let switch = sched::attach_programs(&p.sched_switch_btf, &p.sched_switch_raw, "sched_switch", mech)?;
    Ok((skel, vec![waking, switch]))
}
