// SPDX-License-Identifier: Apache-2.0 OR MIT
//! wakeuptime: summarize sleep to wakeup time by waker kernel stack (BCC's tool, CO-RE).
//!
//! On every `sched_switch` the BPF program stamps the thread that blocks with the time; on `sched_waking` (else
//! `sched_wakeup`), in the waker's context, it adds the time the woken thread was blocked to the total of (waker
//! kernel stack, waker name, target name), in microseconds. At the end the stacks are named through the shared
//! stack module and printed in BCC's layout (`report`), as folded lines, as JSON, and/or as a flame graph; or, with
//! `--prometheus`, the totals are served as a counter of seconds per target, waker and waker stack ([`metrics`]).

mod bpf;
mod metrics;
mod report;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_loaded_tracepoint, load_first_working, open_skeleton, skip_tracepoint};
use common::host::Host;
use common::offcpu::sched::{self, BlockFilters, BlockTimeArgs, ThreadFilters};
use common::offcpu::{self, Form};
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Time threads spend asleep, added up per stack of the thread that woke them.
#[derive(Debug, Parser)]
#[command(name = "wakeuptime", version, after_help = EXAMPLES)]
struct Args {
    /// Leave out kernel threads
    #[arg(short = 'u', long = "useronly", conflicts_with = "pid")]
    useronly: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print each frame's address and offset and say which attach path was taken (repeat for libbpf's debug messages)
    #[arg(short = 'v', long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Print one line per stack, frames joined by ";" and the time last (the input of flame graph tools)
    #[arg(short = 'f', long)]
    folded: bool,
    /// Size of the stack trace map (entries, default 16384); stacks beyond it are shown as missed
    #[arg(long, value_name = "STACK_STORAGE_SIZE", default_value_t = 16384, value_parser = sched::parse_stack_storage_size,
          hide_default_value = true)]
    stack_storage_size: u32,
    #[command(flatten)]
    block_time: BlockTimeArgs,
    /// Print JSON lines: an object per distinct waker stack, with its total_us
    #[arg(short = 'j', long, conflicts_with = "folded")]
    json: bool,
    /// Also draw an SVG flame graph of the wakeups in FILE (waker at the bottom, the woken thread above)
    #[arg(long, value_name = "FILE", conflicts_with = "prometheus")]
    flamegraph: Option<PathBuf>,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    /// Stop after this many seconds
    #[arg(value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    // The filters apply to the threads that block.
    let threads = ThreadFilters {
        pids: args.pid.pid.map(|pid| vec![pid]),
        user_threads_only: args.useronly,
        ..Default::default()
    };
    let filters = args.block_time.filters(threads);
    match filters.check_usage(false) {
        Ok(()) => host.bpf_main(common::cli::Verbose { level: args.verbose }, |signals| {
            wakeuptime(args, filters, &host, signals)
        }),
        Err(code) => code,
    }
}

fn wakeuptime(args: Args, filters: BlockFilters, host: &Host, signals: Signals) -> Result<()> {
    filters.require_processes()?;
    let endpoint = args.export.endpoint(host, args.duration.is_some())?;
    let form = Form::from_flags(args.folded, args.json);
    let flamegraph = offcpu::flamegraph_file(args.flamegraph.as_deref())?;
    let btf = KernelBtf::load()?;
    let wakeup = sched::wakeup_tracepoint(&btf)?;
    let ((skel, links), mech) =
        load_first_working(TOOL.attach, args.verbose > 0, |mech| load_and_attach(&args, &filters, &btf, wakeup, mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let collected = common::stacks::Collected { user: false, kernel: true };
        let mut names =
            common::output::stackseries::StackNames::new(collected, true).dropping(&[report::WAKEUP_FUNCTION]);
        let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
        endpoint.serve(&signals, |s| {
            s.map_full("totals", &bss.lost_blocks);
            s.map_full("starts", &bss.lost_starts);
            metrics::write(s, &mut names, &skel.maps.totals, &skel.maps.stackmap)
        })?;
        drop(links);
        return Ok(());
    }

    let report = report::report_of(form, args.duration, args.verbose > 0, flamegraph);
    let mut out = Output::new();
    offcpu::header(&mut out, form, &report.header, args.duration)?;
    signals.sleep_until(offcpu::deadline(args.duration));
    drop(links); // stop tracing before reading, so the snapshot is consistent

    let samples = report::read_samples(&skel.maps.totals, &skel.maps.stackmap)?;
    report::report(&mut out, samples, report)?;
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        offcpu::warn_lost(&bss.lost_blocks, &bss.lost_starts);
    }
    Ok(())
}

/// Opens and loads the BPF object with the flags' filters, fills the PID map, and attaches to the wakeup
/// tracepoint and sched_switch.
fn load_and_attach(
    args: &Args,
    filters: &BlockFilters,
    btf: &KernelBtf,
    wakeup: &str,
    mech: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    common::prepare_offcpu_skeleton!(open, filters, btf, mech);
    open.maps.stackmap.set_max_entries(args.stack_storage_size)?;
    // The mechanism's programs are kept by section; of its two wakeup tracepoints, only the kernel's.
    let unused = if wakeup == "sched_waking" { "sched_wakeup" } else { "sched_waking" };
    skip_tracepoint(open.open_object_mut(), unused);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // Filters are in place before the programs are attached.
    filters.fill_maps(skel.object())?;
    // The wakeups first: a stamp without its wakeup is only overwritten later, a wakeup without a stamp is ignored.
    let wakeups = attach_loaded_tracepoint(skel.object(), "sched", wakeup)?;
    let switch = attach_loaded_tracepoint(skel.object(), "sched", "sched_switch")?;
    Ok((skel, vec![wakeups, switch]))
}
