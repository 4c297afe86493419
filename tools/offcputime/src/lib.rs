// SPDX-License-Identifier: Apache-2.0 OR MIT
//! offcputime: summarize off-CPU time by stack trace (BCC's tool, CO-RE).
//!
//! On every `sched_switch` the BPF program stamps the thread switched out with the time and the stacks where it
//! blocked, and adds the time off CPU of the thread switched in to its (thread, stacks) total, in microseconds.
//! At the end the unique stacks are named through the shared stack module (`common::stacks`) and printed
//! in BCC's layout, as folded lines, as JSON, and/or as a blue off-CPU flame graph; or, with `--prometheus`, the
//! totals are served as a counter of seconds per process name and folded stack ([`metrics`]).

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
use common::stacks::{Collected, Palette, Sample, Style};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::stack_key;
use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Time threads spend blocked (switched out), added up for each distinct stack trace.
#[derive(Debug, Parser)]
#[command(name = "offcputime", version, after_help = EXAMPLES,
          mut_arg("json", |a| a.conflicts_with("offset")),
          mut_arg("flamegraph", |a| a.help("Also draw the off-CPU stacks as an SVG flame graph in FILE")
              .conflicts_with("prometheus")))]
struct Args {
    #[command(flatten)]
    threads: ThreadArgs,
    #[command(flatten)]
    stacks: StackArgs,
    /// Print each symbol with its offset (symbol+0x1f)
    #[arg(short = 's', long, conflicts_with = "folded")]
    offset: bool,
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
        offcputime(args, &host, f, signals)
    })
}

fn offcputime(args: Args, host: &Host, filters: BlockFilters, signals: Signals) -> Result<()> {
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
    // BCC's header phrase: `PIDs 185,175 by user + kernel stack`.
    let context = format!("{} by {} stack", args.threads.phrase(), args.stacks.phrase());
    let report = args.rest.output.report(
        TOOL.name,
        format!("Tracing off-CPU time (us) of {context}"),
        args.stacks.folded,
        Style { offsets: args.offset, ..args.stacks.style() },
        (format!("Off-CPU Time Flame Graph: {context}"), Palette::Io),
    )?;
    offcpu::run(&signals, report, args.stacks.collected(), TOOL.attach, |mech, btf| {
        load_and_attach(&args, &filters, btf, mech)
    })
}

unsafe impl plain::Plain for stack_key {}

impl StackSkel for BpfSkel<'_> {
    common::stack_skel_maps!();

    /// Every total with its raw stack addresses.
    fn read_samples(&self, collected: Collected) -> Result<Vec<Sample<u64>>> {
        offcpu::read_totals(&self.maps.totals, &self.maps.stackmap, collected, |traces, key: &stack_key| {
            let comm = Name::from_c(&key.comm);
            (traces.task(key.tgid, key.pid, comm, key.user_stack_id, key.kern_stack_id), None)
        })
    }
}

/// Opens and loads the BPF object with the flags' filters, fills the PID/TID maps, and attaches to sched_switch.
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
    let link = attach_loaded_tracepoint(skel.object(), "sched", "sched_switch")?;
    Ok((skel, vec![link]))
}
