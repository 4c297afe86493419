// SPDX-License-Identifier: Apache-2.0 OR MIT
//! wqlat: summarize kernel workqueue latency as a histogram (BCC's tool, CO-RE).
//!
//! The BPF side (`wqlat.bpf.c`) times each work item from being queued to a worker starting it
//! (`workqueue:workqueue_queue_work` to `workqueue_execute_start`; tp_btf, else raw_tp, else the classic
//! tracepoints) into cumulative log2 histograms kept in a kernel map: one, or one per workqueue (`-W`), filtered
//! in the kernel by workqueue name (`-w`). This front end prints what each interval added in BCC's layout
//! (`report.rs`), as JSON lines, or serves the histograms to Prometheus (`--prometheus`).

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata,
};
use common::attach::maps::{c_string, hash_entries, DropCounter};
use common::cli::IntervalCount;
use common::host::Host;
use common::output::heatmap::{sum_slots, HeatmapFile};
use common::output::hist::Log2Hist;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::consts::{WQ_SEARCH_ABSENT, WQ_SEARCH_PENDING, WQ_SEARCH_UNKNOWN};
use bpf::types::{hist, wq_key};
use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Report, Unit};

// SAFETY: plain C structs of integers and chars, generated from wqlat.h.
unsafe impl plain::Plain for hist {}
unsafe impl plain::Plain for wq_key {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// How long kernel work items wait from being queued until a worker starts them, as log2 histograms
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Use nanoseconds for the histogram buckets instead of microseconds
    #[arg(short = 'N', long, conflicts_with = "milliseconds")]
    nanoseconds: bool,
    /// Use milliseconds for the histogram buckets instead of microseconds
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// One histogram for each workqueue, headed by its name
    #[arg(short = 'W', long)]
    workqueues: bool,
    /// Only the workqueue of this exact name
    #[arg(short = 'w', long, value_name = "WQNAME", value_parser = parse_wqname)]
    wqname: Option<String>,
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

/// -w WQNAME: a workqueue name as the kernel keeps it (at most 31 bytes).
fn parse_wqname(s: &str) -> Result<String, String> {
    let max = bpf::consts::WQ_NAME_LEN - 1;
    match s.len() {
        0 => Err("the name is empty".into()),
        n if n > max => Err(format!("'{s}' is {n} bytes long; workqueue names have at most {max}")),
        _ => Ok(s.to_string()),
    }
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    (args.milliseconds, args.nanoseconds) =
        (args.export.display(args.milliseconds), args.export.display(args.nanoseconds));
    host.bpf_main(args.verbose, |signals| wqlat(args, &host, signals))
}

fn unit(args: &Args) -> Unit {
    if args.nanoseconds {
        Unit::Nsecs
    } else if args.milliseconds {
        Unit::Msecs
    } else {
        Unit::Usecs
    }
}

fn wqlat(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let endpoint = args.export.endpoint(host, args.every.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    if let Some(name) = args.wqname.as_ref().filter(|_| mech != Attach::Tracepoint) {
        // The BPF side looks for the name among the kernel's workqueues at the first work item queued anywhere
        // (there is one every few milliseconds on a running system); the classic tracepoint gives it no
        // workqueue to start from.
        let deadline = Instant::now() + SEARCH_WAIT;
        while searched(&skel) == WQ_SEARCH_PENDING && Instant::now() < deadline && !signals.stopped() {
            std::thread::sleep(Duration::from_millis(5));
        }
        refuse_if_absent(&skel, name)?;
    }

    let mut start_full = DropCounter::new("work items", "too many queued at once for the start map");
    let mut hists_full = DropCounter::new("work items", "too many workqueues");
    let mut read = || -> Result<Vec<(String, Log2Hist)>> {
        if let Some(bss) = skel.maps.bss_data.as_ref() {
            start_full.check(&bss.start_map_full);
            hists_full.check(&bss.hists_full);
        }
        let entries: Vec<(wq_key, hist)> = hash_entries(&skel.maps.hists)?;
        Ok(entries
            .into_iter()
            .map(|(k, h)| (c_string(&k.name), Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns }))
            .collect())
    };
    let mut report = Report::new(unit(&args), args.workqueues);

    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |snapshot| {
            if let Some(bss) = skel.maps.bss_data.as_ref() {
                snapshot.map_full("start", &bss.start_map_full);
                snapshot.map_full("hists", &bss.hists_full);
            }
            report.metrics(snapshot, read()?);
            Ok(())
        });
    }
    let mut out = Output::new();
    report.write_banner(&mut out, args.json)?;
    let mut heat = HeatmapFile::open(args.export.heatmap.as_deref(), "Workqueue latency", unit(&args).label())?;
    run_intervals(&signals, args.every.interval(), args.every.count, |_| {
        if let Some(name) = &args.wqname {
            refuse_if_absent(&skel, name)?;
        }
        let hists = read()?;
        if let Some(heat) = heat.as_mut() {
            heat.push(&sum_slots(hists.iter().map(|(_, h)| &h.slots[..])));
        }
        report.write_interval(&mut out, hists, args.json, args.timestamp)
    })?;
    heat.map(|h| h.finish()).transpose()?;
    Ok(())
}

/// How long -w waits at start-up for the BPF side's search of the workqueues (it runs when a work item is queued);
/// if none came, the search's result is checked again at each report.
const SEARCH_WAIT: Duration = Duration::from_secs(1);

/// What the BPF side's search for -w's workqueue found so far (`WQ_SEARCH_*`).
fn searched(skel: &BpfSkel<'_>) -> usize {
    skel.maps.bss_data.as_ref().map_or(WQ_SEARCH_UNKNOWN, |bss| {
        // SAFETY: a u32 of the memory-mapped .bss, written by the BPF side; read whole.
        unsafe { std::ptr::read_volatile(&bss.wq_search) as usize }
    })
}

/// -w NAME when the kernel has no workqueue of that name: an error, rather than an empty histogram.
fn refuse_if_absent(skel: &BpfSkel<'_>, name: &str) -> Result<()> {
    if searched(skel) == WQ_SEARCH_ABSENT {
        anyhow::bail!("no workqueue is named '{name}' (-W lists the workqueues that queue work)");
    }
    Ok(())
}

/// Opens the BPF object, sets its options, keeps the programs of one attach mechanism, loads and attaches them
/// (execute_start first, so that no work item is timed whose start could be missed).
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.ns_per_unit = unit(args).ns();
    ro.per_wq = args.workqueues;
    if let Some(name) = &args.wqname {
        ro.filter_wq = true;
        for (dst, src) in ro.target_wq.iter_mut().zip(name.bytes()) {
            *dst = src as _;
        }
    }
    if args.workqueues {
        open.maps.hists.set_max_entries(bpf::consts::MAX_WQS as u32)?;
    }
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = ["workqueue_execute_start", "workqueue_queue_work"]
        .into_iter()
        .map(|tp| attach_loaded_tracepoint(skel.object(), "workqueue", tp))
        .collect::<Result<Vec<_>>>()?;
    Ok((skel, links))
}
