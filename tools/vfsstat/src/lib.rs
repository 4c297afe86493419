// SPDX-License-Identifier: Apache-2.0 OR MIT
//! vfsstat: count some VFS calls (BCC's tool, CO-RE).
//!
//! The BPF side counts calls of vfs_read, vfs_write, vfs_fsync_range, vfs_open, vfs_create, vfs_unlink, vfs_mkdir
//! and vfs_rmdir in a per-CPU array (fentry, else kprobes, as BCC), or, where the kernel allows neither, the
//! system calls that reach them (raw_syscalls:sys_exit, classified by number: see `syscalls.rs`). This front end
//! sums the CPUs every interval, takes the difference from the previous read (nothing is lost between reads) and
//! prints BCC's per-second rates (the count divided by the interval), or JSON lines with the exact counts. The
//! last interval, cut short by Ctrl-C or a signal, is divided by its true length (BCC prints none).

mod bpf;
mod report;
mod syscalls;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working};
use common::attach::maps::{percpu_counters, CounterDeltas};
use common::cli::filter::open_filtered;
use common::cli::{parse_interval_secs, parse_positive_u64};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, IntervalClock, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::consts::S_MAXSTAT;
use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Calls per second of the main VFS operations: read, write, fsync, open, create, unlink, mkdir, rmdir.
#[derive(Debug, Parser)]
#[command(name = "vfsstat", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per report, with the exact counts and the rates
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds between reports (1 if not given)
    #[arg(value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many reports
    #[arg(value_parser = parse_positive_u64, requires = "interval")]
    count: Option<u64>,
}

pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| vfsstat(args, &host, signals))
}

fn vfsstat(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let endpoint = args.export.endpoint(host, args.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            report::metrics(s, &totals(&skel)?);
            Ok(())
        });
    }

    let mut out = Output::new();
    if !args.json {
        report::write_header(&mut out)?;
    }
    let mut deltas = CounterDeltas::<S_MAXSTAT>::default();
    let interval_s = args.interval.unwrap_or(1);
    let mut clock = IntervalClock::start(Duration::from_secs(interval_s));
    run_intervals(&signals, Some(Duration::from_secs(interval_s)), args.count, |_| {
        let counts = deltas.next(totals(&skel)?);
        let length = clock.next_length();
        if args.json {
            report::write_json(&mut out, &counts, interval_s, length, mech)
        } else {
            report::write_row(&mut out, &counts, length)
        }
    })
}

/// Every counter so far, summed over the CPUs.
fn totals(skel: &BpfSkel<'static>) -> Result<[u64; S_MAXSTAT]> {
    percpu_counters(&skel.maps.stats)
}

/// The kernel functions counted, with their column (BCC's: vfs_fsync_range is where every fsync ends up).
const FUNCTIONS: [&str; S_MAXSTAT] =
    ["vfs_read", "vfs_write", "vfs_fsync_range", "vfs_open", "vfs_create", "vfs_unlink", "vfs_mkdir", "vfs_rmdir"];

/// Opens the BPF object, sets the PID filter, keeps the programs of one attach mechanism, loads and attaches them
/// (the syscall path's classes are filled in before its program is attached).
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let p = &skel.progs;
    let links = match mech {
        Attach::Fentry => {
            let progs = [
                &p.read_fentry,
                &p.write_fentry,
                &p.fsync_fentry,
                &p.open_fentry,
                &p.create_fentry,
                &p.unlink_fentry,
                &p.mkdir_fentry,
                &p.rmdir_fentry,
            ];
            progs
                .iter()
                .zip(FUNCTIONS)
                .map(|(prog, func)| prog.attach().with_context(|| format!("attaching to {func} (fentry)")))
                .collect::<Result<Vec<_>>>()?
        }
        Attach::Kprobe => {
            let progs = [
                &p.read_kprobe,
                &p.write_kprobe,
                &p.fsync_kprobe,
                &p.open_kprobe,
                &p.create_kprobe,
                &p.unlink_kprobe,
                &p.mkdir_kprobe,
                &p.rmdir_kprobe,
            ];
            progs
                .iter()
                .zip(FUNCTIONS)
                .map(|(prog, func)| prog.attach_kprobe(false, func).with_context(|| format!("kprobe {func}")))
                .collect::<Result<Vec<_>>>()?
        }
        _ => {
            syscalls::fill_classes(&skel.maps.syscall_class)?;
            vec![attach_loaded_tracepoint(skel.object(), "raw_syscalls", "sys_exit")?]
        }
    };
    Ok((skel, links))
}
