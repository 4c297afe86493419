// SPDX-License-Identifier: Apache-2.0 OR MIT
//! runqlat: summarize run queue (scheduler) latency as a histogram (BCC's tool, CO-RE).
//!
//! Times each task from becoming runnable (woken, created, or preempted while runnable) to running on a CPU, in
//! BPF, into log2 histograms kept in a kernel map: one, or per process (`-P`), thread (`-L`) or PID namespace
//! (`--pidnss`). The scheduler histogram tools' shared report
//! (`common::output::taskhist`) prints them every interval in BCC's layout or as JSON lines.

mod bpf;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_loaded_tracepoints, autoload_by_section, load_first_working, rodata};
use common::attach::maps::{c_string, hash_entries, DropCounter};
use common::cli::filter::open_filtered;
use common::cli::IntervalCount;
use common::host::Host;
use common::output::hist::Log2Hist;
use common::output::taskhist::{self, Per, Report};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::hist;
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a plain C struct of integers and chars, generated from runqlat.h.
unsafe impl plain::Plain for hist {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// How long runnable tasks wait on a CPU's run queue before they run, as log2 histograms.
#[derive(Debug, Parser)]
#[command(name = "runqlat", version, after_help = EXAMPLES)]
struct Args {
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Use milliseconds for the histogram buckets instead of microseconds
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// One histogram for each process (PID)
    #[arg(short = 'P', long, conflicts_with_all = ["tids", "pidnss"])]
    pids: bool,
    /// One histogram for each PID namespace
    #[arg(long, conflicts_with = "tids")]
    pidnss: bool,
    /// One histogram for each thread (TID)
    #[arg(short = 'L', long)]
    tids: bool,
    /// With -P, -L or --pidnss: name the command after the ID in each histogram's heading (pid = 1234 nginx)
    #[arg(long)]
    comm: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per histogram per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::ExportArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    args.milliseconds = args.export.display(args.milliseconds);
    host.bpf_main(args.verbose, |signals| runqlat(args, &host, signals))
}

fn per(args: &Args) -> Per {
    Per::from_flags(args.pids, args.tids, args.pidnss)
}

fn runqlat(args: Args, host: &Host, signals: Signals) -> Result<()> {
    if let Some(pid) = args.pid.pid {
        common::cli::require_process(pid)?;
    }
    let btf = KernelBtf::load()?;
    let endpoint = args.export.endpoint(host, args.every.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &btf, mech))?;

    // BCC's headings are the ID alone (`pid = 1234`); --comm adds the command, as libbpf-tools' do.
    let report = Report::new(args.milliseconds, per(&args), false).comm_in_heading(args.comm);
    let entries = || -> Result<Vec<taskhist::Entry>> {
        let hists: Vec<(u32, hist)> = hash_entries(&skel.maps.hists)?;
        Ok(hists
            .into_iter()
            .map(|(k, h)| (k, c_string(&h.comm), Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns }))
            .collect())
    };
    let bss = skel.maps.bss_data.as_ref().context("the BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let full = [&bss.start_map_full, &bss.hists_full];
        let name = ("run_queue_latency", "Time runnable tasks waited on a run queue");
        return taskhist::serve(endpoint, &signals, &report, name, full, entries);
    }
    let mut start_full = DropCounter::new("waits from the histograms", "too many runnable tasks for the start map");
    let mut hists_full = DropCounter::new("waits from the histograms", "too many histograms");
    let mut untimed = DropCounter::new(
        "waits from the histograms",
        "sched_switch did not report their end, and a task outside the fair class keeps no run time to time it",
    );
    let report = report.heatmap(args.export.heatmap.as_deref(), "Run queue latency")?;
    taskhist::run(&signals, &args.every, "run queue latency", report, args.json, args.timestamp, || {
        start_full.check(&bss.start_map_full);
        hists_full.check(&bss.hists_full);
        untimed.check(&bss.untimed_waits);
        entries()
    })
}

/// Opens the BPF object, sets its options, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, btf: &KernelBtf, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.per = per(args) as u32;
    rodata.millis = args.milliseconds;
    // 5.18 added prev_state as sched_switch's fourth argument.
    rodata.switch_has_state = btf.tracepoint_arity("sched_switch") == Some(4);
    if per(args) != Per::All {
        open.maps.hists.set_max_entries(bpf::consts::MAX_HISTS as u32)?;
    }

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = attach_loaded_tracepoints(skel.object(), "sched")?;
    Ok((skel, links))
}
