// SPDX-License-Identifier: Apache-2.0 OR MIT
//! fsslower: reads, writes, opens and fsyncs of one file system (ext4, xfs, btrfs, nfs) slower than a threshold
//! (libbpf-tools' fsslower, CO-RE; BCC's ext4slower, xfsslower, btrfsslower and nfsslower by name).
//!
//! The BPF side is `bpf/include/fsop.bpf.h`'s operation timer (shared with fsdist), attached by
//! `common::domain::fsop` to the file system's functions (fentry/fexit, else kprobes) or, where kernel functions
//! cannot be traced, to the system calls' tracepoints filtered by the file's file system; fsslower.bpf.c sends one
//! record per operation above the threshold. This front end prints libbpf-tools' columns, its CSV, or JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::cli::parse_interval_secs;
use common::domain::fsop::{FsType, Op, Plan};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Printer, Slow, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// File system reads, writes, opens and fsyncs slower than a threshold, one line each.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// The file system to trace (ext4slower, xfsslower, btrfsslower and nfsslower choose it by their name)
    #[arg(short = 't', long = "type", value_enum, value_name = "FS")]
    fs: Option<FsType>,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Show operations that took longer than this many milliseconds (0: every operation)
    #[arg(short = 'm', long = "min", value_name = "MIN_MS", default_value = "10",
          value_parser = clap::value_parser!(u64).range(..=MAX_MIN_MS))]
    min_ms: u64,
    /// Stop after this many seconds
    #[arg(short = 'd', long, value_parser = parse_interval_secs)]
    duration: Option<u64>,
    /// Print comma-separated values: end time and latency in raw units, offset in bytes
    #[arg(short = 'c', long, conflicts_with = "json")]
    csv: bool,
    /// Print JSON lines: an object per operation, with its latency in nanoseconds
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// The file system's functions through fentry/fexit, else kprobes (libbpf-tools' hooks); where kernel functions
/// cannot be traced, every system call at raw_syscalls' sys_enter and sys_exit (tp_btf, else raw_tp), kept when
/// the file's file system is the one traced.
pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::TpBtf, Attach::RawTp]);

/// The largest `-m`: milliseconds whose nanoseconds fit in the BPF side's u64 (clap's refusal names this limit).
const MAX_MIN_MS: u64 = u64::MAX / 1_000_000;

/// The operations fsslower reports (getattr is fsdist's only, as in libbpf-tools).
const OPS: [Op; 4] = [Op::Read, Op::Write, Op::Open, Op::Fsync];

/// BCC's command line, which the tool takes under BCC's names (ext4slower, xfsslower, btrfsslower, nfsslower):
/// the threshold as a positional argument, `-j` for comma-separated values; `--json` is JSON under every name.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = BCC_EXAMPLES)]
struct BccArgs {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print comma-separated values: end time and latency in raw units, offset in bytes
    #[arg(short = 'j', long, conflicts_with = "json")]
    csv: bool,
    /// Print JSON lines: an object per operation, with its latency in nanoseconds
    #[arg(long)]
    json: bool,
    /// Stop after this many seconds
    #[arg(short = 'd', long, value_parser = parse_interval_secs)]
    duration: Option<u64>,
    /// Show operations that took longer than this many milliseconds (0: every operation)
    #[arg(value_name = "MIN_MS", default_value = "10", value_parser = clap::value_parser!(u64).range(..=MAX_MIN_MS))]
    min_ms: u64,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// The examples of BCC's command line (the tool's name in them becomes the one it was started under).
const BCC_EXAMPLES: &str = "Examples:
    fsslower           # operations slower than 10 ms on the file system of this name
    fsslower 1         # slower than 1 ms
    fsslower 0         # every operation
    fsslower -j 1      # comma-separated values
    fsslower -p 181    # process 181 only
    fsslower --json    # JSON lines";

impl BccArgs {
    fn into_args(self, fs: FsType) -> Args {
        let BccArgs { pid, csv, json, duration, min_ms, verbose } = self;
        Args { fs: Some(fs), pid, min_ms, duration, csv, json, verbose }
    }
}

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    // Under a BCC name the command line is BCC's; under fsslower (or an unknown name), libbpf-tools'.
    let bcc_fs = argv.first().and_then(|a| FsType::from_invoked_name(&a.to_string_lossy(), "slower"));
    let args: Args = match bcc_fs {
        Some(fs) => common::cli::parse::<BccArgs>(argv, &host).into_args(fs),
        None => common::cli::parse(argv, &host),
    };
    let fs = file_system(args.fs);
    host.bpf_main(args.verbose, |signals| fsslower(args, fs, signals))
}

/// The file system to trace: `-t`, else the one the invoked name stands for; neither is a usage error.
fn file_system(given: Option<FsType>) -> FsType {
    given.or_else(|| FsType::from_invoked_name(common::identity::invoked_name(), "slower")).unwrap_or_else(|| {
        common::cli::usage_error("no file system to trace: give one with -t (btrfs, ext4, nfs or xfs)")
    })
}

fn fsslower(args: Args, fs: FsType, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    fs.require_registered()?;
    let verbose = args.verbose.on();
    let ((skel, _links), _mech) = load_first_working(TOOL.attach, verbose, |mech| load_and_attach(&args, fs, mech))?;

    let mut out = Output::new();
    let style = if args.json {
        Style::Json
    } else if args.csv {
        Style::Csv
    } else {
        Style::Text
    };
    let mut printer = Printer::new(style);
    printer.write_header(&mut out, fs.name(), args.min_ms, args.duration)?;
    let deadline = args.duration.and_then(|d| Instant::now().checked_add(Duration::from_secs(d)));
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "operations")
        .also_dropped(&bss.fsop_calls_full, "operations", "too many in progress at once")
        .run(
            &signals,
            &mut out,
            args.json,
            || deadline.is_some_and(|d| Instant::now() >= d),
            |out, data| Ok(printer.write(out, &Slow::from_bytes(data, fs))?),
        )?;
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the programs of `mech` for the file system's operations, loads
/// and attaches them.
fn load_and_attach(args: &Args, fs: FsType, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let plan = Plan::new(fs, mech, &OPS)?;
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.min_lat_ns = args.min_ms * 1_000_000;
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
