// SPDX-License-Identifier: Apache-2.0 OR MIT
//! fsdist: the latency of one file system's reads, writes, opens, fsyncs and getattrs (ext4, xfs, btrfs, nfs) as a
//! log2 histogram per operation (libbpf-tools' fsdist, CO-RE; BCC's ext4dist, xfsdist, btrfsdist and nfsdist by
//! name).
//!
//! The BPF side is `bpf/include/fsop.bpf.h`'s operation timer (shared with fsslower), attached by
//! `common::domain::fsop` to the file system's functions (fentry/fexit, else kprobes) or, where kernel functions
//! cannot be traced, to the system calls' tracepoints filtered by the file's file system; fsdist.bpf.c adds each
//! operation to its cumulative histogram. This front end prints what each interval added in libbpf-tools' layout,
//! JSON lines, or serves the histograms to Prometheus.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{load_first_working, rodata};
use common::attach::maps::DropCounter;
use common::cli::filter::open_filtered;
use common::cli::IntervalCount;
use common::domain::fsop::{FsType, Op, Plan};
use common::host::Host;
use common::output::heatmap::{sum_slots, HeatmapFile};
use common::output::stdout::Output;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Clock, Report};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// File system operation latency as log2 histograms: read, write, open, fsync and getattr.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// The file system to trace (ext4dist, xfsdist, btrfsdist and nfsdist choose it by their name)
    #[arg(short = 't', long = "type", value_enum, value_name = "FS")]
    fs: Option<FsType>,
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    #[command(flatten)]
    options: Options,
}

/// BCC's command line, which the tool takes under BCC's names (ext4dist, xfsdist, btrfsdist, nfsdist): each
/// interval's report starts with the time of day (`HH:MM:SS:`) unless -T (--notimestamp) asks not to.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = BCC_EXAMPLES)]
struct BccArgs {
    /// Leave out the time of day above each interval's report
    #[arg(short = 'T', long)]
    notimestamp: bool,
    #[command(flatten)]
    options: Options,
}

/// What both command lines give, past the file system and the time line.
#[derive(Debug, clap::Args)]
struct Options {
    /// Use milliseconds for the histogram buckets instead of microseconds
    #[arg(short = 'm', long)]
    milliseconds: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per operation per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::ExportArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

/// The examples of BCC's command line (the tool's name in them becomes the one it was started under).
const BCC_EXAMPLES: &str = "Examples:
    fsdist            # the file system of this name, until Ctrl-C
    fsdist 1 10       # a report each second, ten times, each under the time of day
    fsdist -T 1       # the same, without the time of day
    fsdist -m 5       # milliseconds, every 5 seconds
    fsdist -p 181     # process 181 only";

/// The file system's functions through fentry/fexit, else kprobes (libbpf-tools' hooks); where kernel functions
/// cannot be traced, every system call at raw_syscalls' sys_enter and sys_exit (tp_btf, else raw_tp), kept when
/// the file's file system is the one traced.
pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    // Under a BCC name the command line is BCC's; under fsdist (or an unknown name), libbpf-tools'.
    let bcc_fs = argv.first().and_then(|a| FsType::from_invoked_name(&a.to_string_lossy(), "dist"));
    let (fs, clock, mut options) = match bcc_fs {
        Some(fs) => {
            let BccArgs { notimestamp, options } = common::cli::parse(argv, &host);
            let clock = if options.every.interval.is_some() && !notimestamp { Clock::Bcc } else { Clock::None };
            (Some(fs), clock, options)
        }
        None => {
            let Args { fs, timestamp, options } = common::cli::parse(argv, &host);
            (fs, if timestamp { Clock::Libbpf } else { Clock::None }, options)
        }
    };
    options.milliseconds = options.export.display(options.milliseconds);
    let fs = fs.or_else(|| FsType::from_invoked_name(common::identity::invoked_name(), "dist")).unwrap_or_else(|| {
        common::cli::usage_error("no file system to trace: give one with -t (btrfs, ext4, nfs or xfs)")
    });
    host.bpf_main(options.verbose, |signals| fsdist(options, fs, clock, &host, signals))
}

fn fsdist(args: Options, fs: FsType, clock: Clock, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    fs.require_registered()?;
    let endpoint = args.export.endpoint(host, args.every.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, fs, mech))?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let report = Report::new(fs, args.milliseconds);
    let read = || report::read_hists(&bss.hists);

    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            s.map_full("fsop_calls", &bss.fsop_calls_full);
            report.metrics(s, &read());
            Ok(())
        });
    }
    let mut out = Output::new();
    if !args.json {
        use std::io::Write;
        writeln!(out, "Tracing {} operation latency... Hit Ctrl-C to end.", fs.name())?;
        out.flush()?;
    }
    let unit = report.unit();
    let title = format!("{} operation latency", fs.name());
    let mut heat = HeatmapFile::open(args.export.heatmap.as_deref(), &title, unit)?;
    let mut full = DropCounter::new("operations from the histograms", "too many in progress at once");
    let mut before = report::empty();
    run_intervals(&signals, args.every.interval(), args.every.count, |_| {
        let now = read();
        if let Some(heat) = heat.as_mut() {
            heat.push(&sum_slots(now.iter().map(|h| &h.slots[..])));
        }
        let added = report::since(&now, &before);
        before = now;
        full.check(&bss.fsop_calls_full);
        if args.json {
            report.write_json(&mut out, &added)
        } else {
            report.write_text(&mut out, &added, clock)
        }
    })?;
    heat.map(|h| h.finish()).transpose()?;
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the programs of `mech` for the file system's operations, loads
/// and attaches them.
fn load_and_attach(args: &Options, fs: FsType, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let plan = Plan::new(fs, mech, &Op::ALL)?;
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.in_ms = args.milliseconds;
    ro.fsop_magic = fs.magic();
    ro.fsop_self_tgid = std::process::id();
    plan.prepare(open.open_object_mut())?;
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = plan.attach(skel.object())?;
    if args.verbose.on() {
        eprintln!("{}: tracing {}", common::identity::invoked_name(), plan.describe());
    }
    Ok((skel, links))
}
