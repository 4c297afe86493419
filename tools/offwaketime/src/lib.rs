// SPDX-License-Identifier: Apache-2.0 OR MIT
//! offwaketime: summarize blocked time by off-CPU stack and waker stack (BCC's tool, CO-RE).
//!
//! On every `sched_switch` the BPF program stamps the thread switched out with the time and the stacks where it
//! blocked; on `sched_waking` the waker records its name and stacks for the thread it wakes; when the blocked
//! thread runs again, its time off CPU is added to the (blocked stacks, waker stacks) total, in microseconds. At
//! the end the stacks are named through the shared stack module (`common::stacks`) and printed in BCC's
//! layout (waker above `--`, target below), as folded lines (waker on top), as JSON, and/or as a flame graph; or,
//! with `--prometheus`, the totals are served as a counter of seconds per blocked and waker stack ([`metrics`]).

mod bpf;
mod metrics;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_loaded_tracepoint, open_skeleton};
use common::host::Host;
use common::offcpu::sched::{BlockFilters, StackArgs, ThreadArgs};
use common::offcpu::{self, StackSkel, StackToolArgs};
use common::output::name::Name;
use common::run::Signals;
use common::stacks::{self, Collected, Palette, Sample};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::{wake_key, waker};
use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Time threads spend blocked, added up per pair of stacks: the blocked thread's and the stack that woke it.
#[derive(Debug, Parser)]
#[command(name = "offwaketime", version, after_help = EXAMPLES,
          mut_arg("pids", |a| a.value_name("PIDS")),
          mut_arg("tids", |a| a.value_name("TIDS")),
          mut_arg("flamegraph", |a| a.help("Also draw an SVG flame graph in FILE, wakers above the blocked stacks")
              .conflicts_with("prometheus")))]
struct Args {
    #[command(flatten)]
    threads: ThreadArgs,
    #[command(flatten)]
    stacks: StackArgs,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    rest: StackToolArgs,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    let filters = args.rest.filters(&args.threads);
    offcpu::start(&host, filters, args.stacks.user_stacks_only, args.rest.output.verbose, |f, signals| {
        offwaketime(args, &host, f, signals)
    })
}

fn offwaketime(args: Args, host: &Host, filters: BlockFilters, signals: Signals) -> Result<()> {
    filters.require_processes()?;
    if let Some(endpoint) = args.export.endpoint(host, args.rest.output.duration.is_some())? {
        let verbose = args.rest.output.verbose.on();
        return offcpu::serve(
            &signals,
            endpoint,
            args.stacks.collected(),
            TOOL.attach,
            verbose,
            |mech, btf| load_and_attach(&args, &filters, btf, mech),
            |s, names, skel| metrics::write(s, names, &skel.maps.totals, &skel.maps.stackmap),
        );
    }
    // BCC's header phrase: `user + kernel`.
    let stacks = args.stacks.phrase();
    let report = args.rest.output.report(
        TOOL.name,
        format!("Tracing blocked time (us) by {stacks} off-CPU and waker stack"),
        args.stacks.folded,
        args.stacks.style(),
        (format!("Off-Wake Time Flame Graph: {stacks} stacks"), Palette::Wakeup),
    )?;
    offcpu::run(&signals, report, args.stacks.collected(), TOOL.attach, |mech, btf| {
        load_and_attach(&args, &filters, btf, mech)
    })
}

unsafe impl plain::Plain for wake_key {}

impl StackSkel for BpfSkel<'_> {
    common::stack_skel_maps!();

    /// Every total with its raw stack addresses, target and waker.
    fn read_samples(&self, collected: Collected) -> Result<Vec<Sample<u64>>> {
        offcpu::read_totals(&self.maps.totals, &self.maps.stackmap, collected, |traces, key: &wake_key| {
            let mut task = |w: &waker| {
                let comm = Name::from_c(&w.comm);
                traces.task(w.tgid, w.pid, comm, w.user_stack_id, w.kern_stack_id)
            };
            let target = task(&key.target);
            // No waker seen (the thread was woken before tracing began, or by no traced wakeup).
            let waker = if key.waker.pid == 0 && key.waker.user_stack_id == -1 && key.waker.kern_stack_id == -1 {
                let absent = || stacks::Stack::Absent;
                stacks::Task { pid: 0, shown_id: 0, comm: Name::default(), user: absent(), kernel: absent() }
            } else {
                task(&key.waker)
            };
            (target, Some(waker))
        })
    }
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
    common::prepare_stack_skeleton!(open, filters, btf, mech, &args.stacks, args.rest.stack_storage_size);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // Filters are in place before the program is attached.
    filters.fill_maps(skel.object())?;
    // The waker first, so that no block is counted without its waker for want of the second link.
    let waking = attach_loaded_tracepoint(skel.object(), "sched", "sched_waking")?;
    let switch = attach_loaded_tracepoint(skel.object(), "sched", "sched_switch")?;
    Ok((skel, vec![waking, switch]))
}
