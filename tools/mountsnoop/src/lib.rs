// SPDX-License-Identifier: Apache-2.0 OR MIT
//! mountsnoop: trace mount(2), umount(2) and the new mount API (fsopen, fsconfig, fsmount, move_mount), with the
//! caller's mount namespace, decoded flags and result (libbpf-tools' tool, CO-RE).
//!
//! The BPF side follows each call from entry to return through the syscalls tracepoints (those the kernel has),
//! filters on PID in the kernel, and sends one record per call through a ring buffer. This front end prints
//! libbpf-tools' line (`COMM PID TID MNT_NS CALL`, the call written as in C) or its detailed mode, or JSON lines,
//! and reports any call it could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Call, Printer, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per mount(), umount(), fsopen(), fsconfig(), fsmount() or move_mount() call, written as C
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Start each line with the time of day (HH:MM:SS)
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Print each call as a block of fields, one a line, with its latency
    #[arg(short = 'd', long)]
    detailed: bool,
    /// Print JSON lines: an object per call, flags by name too
    #[arg(short = 'j', long, conflicts_with = "detailed")]
    json: bool,
    /// Show the caller's parent process too: its command (PCOMM) and PID (PPID)
    #[arg(short = 'P', long = "parent_process", alias = "parent-process")]
    parent_process: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| mountsnoop(args, signals))
}

fn mountsnoop(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut out = Output::new();
    let style =
        Style { json: args.json, timestamp: args.timestamp, detailed: args.detailed, parent: args.parent_process };
    let mut printer = Printer::new(style);
    printer.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "calls")
        .also_dropped(&bss.inflight_full, "calls", "too many in flight")
        .print(&signals, &mut out, args.json, |out, data| {
            Ok(printer.write(out, &Call::from_bytes(data, args.parent_process))?)
        })?;
    Ok(())
}

/// The calls by tracepoint name. mount and umount exist on every kernel; the new mount API came in 5.2 and an
/// architecture may lack a call, so each of the others is traced where its tracepoint exists.
const CALLS: [&str; 6] = ["mount", "umount", "fsopen", "fsconfig", "fsmount", "move_mount"];
const REQUIRED: [&str; 2] = ["mount", "umount"];

/// Opens the BPF object, sets its PID filter, loads it and attaches the tracepoints this kernel has: every exit
/// first, then the entries, so that no entry is left without its return.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let tracefs = common::attach::features::tracefs()?;
    let present: Vec<&str> =
        CALLS.into_iter().filter(|c| tracefs.join(format!("events/syscalls/sys_enter_{c}")).exists()).collect();
    if let Some(missing) = REQUIRED.iter().find(|c| !present.contains(c)) {
        bail!("this kernel has no tracepoint syscalls:sys_enter_{missing} (CONFIG_FTRACE_SYSCALLS is off?)");
    }
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    rodata(&mut open.maps.rodata_data)?.parent_process = args.parent_process;
    {
        let p = &mut open.progs;
        for (call, prog) in CALLS.iter().zip([
            &mut p.mount_enter,
            &mut p.umount_enter,
            &mut p.fsopen_enter,
            &mut p.fsconfig_enter,
            &mut p.fsmount_enter,
            &mut p.move_mount_enter,
        ]) {
            prog.set_autoload(present.contains(call));
        }
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let p = &skel.progs;
    let mut links = Links::default();
    for call in &present {
        links.push(attach_tracepoint(&p.mount_exit, "syscalls", &format!("sys_exit_{call}"), mech)?);
    }
    for (call, prog) in CALLS.iter().zip([
        &p.mount_enter,
        &p.umount_enter,
        &p.fsopen_enter,
        &p.fsconfig_enter,
        &p.fsmount_enter,
        &p.move_mount_enter,
    ]) {
        if present.contains(call) {
            links.push(attach_tracepoint(prog, "syscalls", &format!("sys_enter_{call}"), mech)?);
        } else if args.verbose.on() {
            eprintln!(
                "{}: no tracepoint syscalls:sys_enter_{call} on this kernel; not traced",
                common::identity::invoked_name()
            );
        }
    }
    Ok((skel, links))
}
