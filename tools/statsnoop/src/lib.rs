// SPDX-License-Identifier: Apache-2.0 OR MIT
//! statsnoop: trace stat-family syscalls (BCC's tool, CO-RE).
//!
//! The BPF side follows statfs, stat, lstat, statx, fstatat and fstat from entry to return through the syscalls
//! tracepoints (those the kernel has: the set differs by architecture), filters on PID and failure in the kernel,
//! and sends one record per call through a ring buffer. This front end prints BCC's columns or JSON lines and
//! reports any call it could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, load_first_working, open_skeleton_core_free, rodata};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Printer, Stat, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per stat-family system call: process, result and path.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the seconds since the first call shown
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Add the system call's kernel name (newfstatat, statx...)
    #[arg(short = 's', long)]
    sysname: bool,
    /// Show only the calls that failed
    #[arg(short = 'x', long)]
    failed: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per call, with the error's name when it failed
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| statsnoop(args, signals))
}

fn statsnoop(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(Style { json: args.json, timestamp: args.timestamp, sysname: args.sysname });
    printer.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "stats")
        .also_dropped(&bss.inflight_full, "stats", "too many in flight")
        .print(&signals, &mut out, args.json, |out, data| Ok(printer.write(out, &Stat::from_bytes(data))?))?;
    Ok(())
}

/// The stat-family calls by tracepoint name, with their entry programs. Which exist depends on the architecture
/// (x86_64 has all six; arm64 has no stat, lstat or fstat of its own, only fstatat and statx).
const CALLS: [&str; 6] = ["statfs", "newstat", "newlstat", "statx", "newfstatat", "newfstat"];

/// Opens the BPF object, sets its filters, loads it and attaches the tracepoints this kernel has: each call's exit
/// first, then its entry, so that no entry is left without its return.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let tracefs = common::attach::features::tracefs()?;
    let present: Vec<&str> =
        CALLS.into_iter().filter(|c| tracefs.join(format!("events/syscalls/sys_enter_{c}")).exists()).collect();
    if present.is_empty() {
        bail!("this kernel has none of the stat syscall tracepoints (syscalls:sys_enter_{{{}}})", CALLS.join(","));
    }
    let mut open = open_skeleton_core_free::<BpfSkelBuilder>()?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.target_tgid = args.pid.pid.unwrap_or(0);
    rodata.self_tgid = std::process::id();
    rodata.failed_only = args.failed;
    {
        let p = &mut open.progs;
        for (call, prog) in CALLS.iter().zip([
            &mut p.statfs_enter,
            &mut p.newstat_enter,
            &mut p.newlstat_enter,
            &mut p.statx_enter,
            &mut p.newfstatat_enter,
            &mut p.newfstat_enter,
        ]) {
            prog.set_autoload(present.contains(call));
        }
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let p = &skel.progs;
    let mut links = Links::default();
    for call in CALLS {
        if !present.contains(&call) {
            if args.verbose.on() {
                eprintln!(
                    "{}: no tracepoint syscalls:sys_enter_{call} on this kernel; not traced",
                    common::identity::invoked_name()
                );
            }
            continue;
        }
        links.push(attach_tracepoint(&p.stat_exit, "syscalls", &format!("sys_exit_{call}"), mech)?);
    }
    for (call, prog) in CALLS.iter().zip([
        &p.statfs_enter,
        &p.newstat_enter,
        &p.newlstat_enter,
        &p.statx_enter,
        &p.newfstatat_enter,
        &p.newfstat_enter,
    ]) {
        if present.contains(call) {
            links.push(attach_tracepoint(prog, "syscalls", &format!("sys_enter_{call}"), mech)?);
        }
    }
    Ok((skel, links))
}
