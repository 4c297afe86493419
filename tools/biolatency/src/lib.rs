// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biolatency: summarize block device I/O latency as a histogram (BCC's tool, CO-RE).
//!
//! Times each block request from issue (or insert, with `-Q`) to completion in BPF and keeps log2 histograms in
//! a kernel map, per disk (`-D`) and/or per request flags (`-F`); this front end prints them every interval in
//! BCC's layout or as JSON lines. Everything shared with other tools lives in `common`.

mod bpf;
mod report;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata, skip_tracepoint,
};
use common::attach::maps::DropCounter;
use common::cli::IntervalCount;
use common::domain::blockdev::{Disks, RqFlagNames};
use common::host::Host;
use common::output::heatmap::{sum_slots, HeatmapFile};
use common::output::stdout::Output;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Report, Units};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Block I/O latency as log2 histograms, per disk or request flags on demand.
#[derive(Debug, Parser)]
#[command(name = "biolatency", version, after_help = EXAMPLES)]
struct Args {
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Start the clock when a request is queued to the I/O scheduler, not when it is issued to the device
    #[arg(short = 'Q', long)]
    queued: bool,
    /// Use milliseconds for the histogram buckets instead of microseconds
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// One histogram for each disk
    #[arg(short = 'D', long)]
    disks: bool,
    /// One histogram for each combination of request flags (e.g. Sync-Write)
    #[arg(short = 'F', long)]
    flags: bool,
    /// Under each histogram, also print the mean latency, the summed latency and the request count
    #[arg(short = 'e', long)]
    extension: bool,
    /// Print JSON lines: an object per histogram per report
    #[arg(short = 'j', long)]
    json: bool,
    /// Only requests to this disk (a whole disk such as sda, not a partition)
    #[arg(short = 'd', long, value_name = "DISK")]
    disk: Option<String>,
    /// Only I/O submitted by tasks of this cgroup (a cgroup directory)
    #[arg(short = 'c', long = "cgroup", value_name = "CGROUP_PATH")]
    cgroup: Option<PathBuf>,
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
    host.bpf_main(args.verbose, |signals| biolatency(args, &host, signals))
}

fn biolatency(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let disks = Disks::scan();
    let target_dev = args.disk.as_deref().map(|d| disks.resolve(d)).transpose()?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let btf = KernelBtf::load()?;
    let endpoint = args.export.endpoint(host, args.every.interval.is_some())?;

    let ((skel, _links), mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        load_and_attach(&args, &disks, &btf, target_dev, cgroup.as_ref(), mech)
    })?;

    let mut out = Output::new();
    let mut report = Report::new(
        Units::new(args.milliseconds),
        disks,
        args.flags.then(|| RqFlagNames::from_btf(&btf)),
        args.disks,
        args.extension,
    );
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        endpoint.serve(&signals, |snapshot| {
            if let Some(bss) = skel.maps.bss_data.as_ref() {
                snapshot.map_full("start", &bss.start_map_full);
            }
            report.metrics(snapshot, common::attach::maps::hash_entries(&skel.maps.hists)?);
            Ok(())
        })?;
    } else if !args.json {
        use std::io::Write;
        writeln!(out, "Tracing block device I/O... Hit Ctrl-C to end.")?;
        out.flush()?;
    }
    let unit = if args.milliseconds { "msecs" } else { "usecs" };
    let mut heat = HeatmapFile::open(args.export.heatmap.as_deref(), "Block I/O latency", unit)?;
    if args.export.prometheus.is_none() {
        run_intervals(&signals, args.every.interval(), args.every.count, |_| {
            let hists: Vec<(bpf::types::hist_key, bpf::types::hist)> =
                common::attach::maps::hash_entries(&skel.maps.hists)?;
            if let Some(heat) = heat.as_mut() {
                heat.push(&sum_slots(hists.iter().map(|(_, h)| &h.slots[..])));
            }
            if args.json {
                report.write_json(&mut out, hists)
            } else {
                report.write_text(&mut out, hists, args.timestamp)
            }
        })?;
    }

    heat.map(|h| h.finish()).transpose()?;
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        DropCounter::new("I/Os from the histograms", "too many in flight for the start map").check(&bss.start_map_full);
    }
    Ok(())
}

/// How many histograms the run can make: one, or one per disk (with room for disks added while tracing) and/or
/// per set of request flags.
fn hist_count(args: &Args, disks: &Disks) -> u32 {
    let per_disk = if args.disks { disks.len() as u64 * 2 + 16 } else { 1 };
    let per_flags = if args.flags { bpf::consts::FLAG_SETS as u64 } else { 1 };
    (per_disk * per_flags).min(bpf::consts::MAX_HISTS as u64) as u32
}

/// Opens the BPF object, sets its options, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(
    args: &Args,
    disks: &Disks,
    btf: &KernelBtf,
    target_dev: Option<u32>,
    cgroup: Option<&std::fs::File>,
    mech: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.filter_cgroup = args.cgroup.is_some();
    rodata.filter_dev = target_dev.is_some();
    rodata.target_dev = target_dev.unwrap_or(0);
    rodata.per_disk = args.disks;
    rodata.per_flags = args.flags;
    open.maps.hists.set_max_entries(hist_count(args, disks))?;
    rodata.queued = args.queued;
    rodata.millis = args.milliseconds;
    // Before 5.11 these tracepoints also passed the request_queue, as the first argument.
    rodata.insert_has_queue = btf.tracepoint_arity("block_rq_insert") == Some(2);
    rodata.issue_has_queue = btf.tracepoint_arity("block_rq_issue") == Some(2);
    // -c: where the kernel has block_io_start (6.5+), a request's cgroup is its submitter's, taken there.
    let cgroup_at_start = args.cgroup.is_some() && btf.has_tracepoint("block_io_start");
    rodata.cgroup_at_start = cgroup_at_start;

    autoload_by_section(open.open_object_mut(), mech);
    if !args.queued {
        skip_tracepoint(open.open_object_mut(), "block_rq_insert");
    }
    if !cgroup_at_start {
        skip_tracepoint(open.open_object_mut(), "block_io_start");
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    // Filters are in place before the first program is attached, so no I/O from outside the cgroup is counted.
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }

    // block_io_start first: a request that starts once it is attached is marked before it can be issued.
    let mut wanted = if cgroup_at_start { vec!["block_io_start"] } else { vec![] };
    wanted.extend(["block_rq_issue", "block_rq_complete"]);
    if args.queued {
        wanted.push("block_rq_insert");
    }
    let links = wanted
        .into_iter()
        .map(|name| attach_loaded_tracepoint(skel.object(), "block", name))
        .collect::<Result<Vec<_>>>()?;
    Ok((skel, links))
}
