// SPDX-License-Identifier: Apache-2.0 OR MIT
//! cpudist: summarize on- and off-CPU time per task as a histogram (BCC's tool, CO-RE).
//!
//! Times each slice a task spends on a CPU (or with `-O` off it) from sched_switch alone, in BPF, into log2
//! histograms kept in a kernel map: one, or per process (`-P`) or thread (`-L`). The scheduler histogram tools' shared
//! report (`common::output::taskhist`) prints them every interval in BCC's layout or as JSON lines.

mod bpf;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
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

// SAFETY: a plain C struct of integers and chars, generated from cpudist.h.
unsafe impl plain::Plain for hist {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// How long tasks run on a CPU before leaving it (or, with -O, stay off it), as log2 histograms.
#[derive(Debug, Parser)]
#[command(name = "cpudist", version, after_help = EXAMPLES)]
struct Args {
    /// Measure the time tasks spend switched out (off-CPU) instead of on a CPU
    #[arg(short = 'O', long)]
    offcpu: bool,
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Use milliseconds for the histogram buckets instead of microseconds
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// One histogram for each process (PID)
    #[arg(short = 'P', long, conflicts_with = "tids")]
    pids: bool,
    /// One histogram for each thread (TID)
    #[arg(short = 'L', long)]
    tids: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Count the idle task's time on the CPUs too (left out by default)
    #[arg(short = 'I', long)]
    include_idle: bool,
    /// Under each histogram, also print the mean, the summed time and the number of slices
    #[arg(short = 'e', long)]
    extension: bool,
    /// Print JSON lines: an object per histogram per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::ExportArgs,
    #[command(flatten)]
    containers: common::domain::container_names::ContainerLabelArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    args.milliseconds = args.export.display(args.milliseconds);
    host.bpf_main(args.verbose, |signals| cpudist(args, &host, signals))
}

fn per(args: &Args) -> Per {
    Per::from_flags(args.pids, args.tids, false)
}

fn cpudist(args: Args, host: &Host, signals: Signals) -> Result<()> {
    if let Some(pid) = args.pid.pid {
        common::cli::require_process(pid)?;
    }
    let report = Report::new(args.milliseconds, per(&args), args.extension)
        .container_label(args.containers, args.export.prometheus.is_some());
    let endpoint = args.export.endpoint(host, args.every.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let what = if args.offcpu { "off-CPU time" } else { "on-CPU time" };
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
        let name = match args.offcpu {
            true => ("offcpu_time", "Time tasks spent switched out, from leaving a CPU to running again"),
            false => ("oncpu_time", "Time tasks ran on a CPU before switching out"),
        };
        let full = [&bss.start_map_full, &bss.hists_full];
        return taskhist::serve(endpoint, &signals, &report, name, full, entries);
    }
    let mut start_full = DropCounter::new("slices from the histograms", "too many tasks for the start map");
    let mut hists_full = DropCounter::new("slices from the histograms", "too many histograms");
    // A slice whose start sched_switch did not report is timed from the scheduler's accounting (recovered_slices),
    // except for a task outside the fair class, whose slice is lost and said here.
    let mut untraced =
        DropCounter::new("slices from the histograms", "sched_switch did not report their start (a real-time task)");
    let title = if args.offcpu { "Off-CPU time" } else { "On-CPU time" };
    let report = report.heatmap(args.export.heatmap.as_deref(), title)?;
    taskhist::run(&signals, &args.every, what, report, args.json, args.timestamp, || {
        start_full.check(&bss.start_map_full);
        hists_full.check(&bss.hists_full);
        untraced.check(&bss.missed_slices);
        entries()
    })
}

/// Opens the BPF object, sets its options, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.per = per(args) as u32;
    rodata.millis = args.milliseconds;
    rodata.offcpu = args.offcpu;
    rodata.include_idle = args.include_idle;
    if per(args) != Per::All {
        open.maps.hists.set_max_entries(bpf::consts::MAX_HISTS as u32)?;
    }

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = attach_loaded_tracepoints(skel.object(), "sched")?;
    Ok((skel, links))
}
