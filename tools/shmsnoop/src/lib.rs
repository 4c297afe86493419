// SPDX-License-Identifier: Apache-2.0 OR MIT
//! shmsnoop: trace System V shared memory syscalls (BCC's tool, CO-RE).
//!
//! The BPF side follows shmget, shmat, shmdt and shmctl from entry to return through the syscalls tracepoints,
//! filters on PID, TID and failure in the kernel, and sends one record per call through a ring buffer. This front
//! end applies `-n` (a substring of the command name, as BCC), prints BCC's columns with the arguments decoded as
//! BCC decodes them (report.rs), or JSON lines, and reports any call it could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

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
use report::{Call, Printer, Style, CALLS};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per System V shared memory call (shmget, shmat, shmdt, shmctl): caller, result and arguments.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
// The shared tid filter (common::cli::filter), with what it means for this tool.
#[command(mut_arg("tid", |a| a.help("Only calls made by this thread (TID); the first column then shows thread IDs (a TID filter takes the place of -p)")))]
struct Args {
    /// Start each line with the seconds since the first call seen
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Show only the calls that failed (a negative return value)
    #[arg(short = 'x', long)]
    failed: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    tid: common::cli::filter::TidArg,
    /// Stop after this many seconds
    #[arg(short = 'd', long, value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
    /// Only calls from tasks whose command name contains this text
    #[arg(short = 'n', long)]
    name: Option<String>,
    /// Print JSON lines: an object per call, with its arguments and the error's name when it failed
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| shmsnoop(args, signals))
}

fn shmsnoop(args: Args, signals: Signals) -> Result<()> {
    match (args.tid.tid, args.pid.pid) {
        (Some(tid), _) => common::cli::require_thread(tid)?,
        (None, Some(pid)) => common::cli::require_process(pid)?,
        (None, None) => {}
    }
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(Style { json: args.json, timestamp: args.timestamp, tid: args.tid.tid.is_some() });
    printer.write_header(&mut out)?;
    // A duration too large for the clock is as good as none (it is range-checked at parsing, too).
    let deadline = args.duration.and_then(|d| Instant::now().checked_add(Duration::from_secs(d)));
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "calls")
        .also_dropped(&bss.inflight_full, "calls", "too many in flight")
        .run(
            &signals,
            &mut out,
            args.json,
            || deadline.is_some_and(|d| Instant::now() >= d),
            |out, data| {
                let call = Call::from_bytes(data);
                // As BCC: the first call seen starts the -T clock, whether or not -n shows it.
                printer.note_time(&call);
                if args.name.as_ref().is_some_and(|n| !call.comm.text().contains(n.as_str())) {
                    return Ok(());
                }
                Ok(printer.write(out, &call)?)
            },
        )?;
    Ok(())
}

/// Opens the BPF object, sets its filters, loads it and attaches the tracepoints of the calls this kernel has
/// (architectures whose System V IPC goes through the ipc() multiplexer have none): each call's exit first, then
/// its entry, so that no entry is left without its return.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let tracefs = common::attach::features::tracefs()?;
    let present: Vec<&str> =
        CALLS.into_iter().filter(|c| tracefs.join(format!("events/syscalls/sys_enter_{c}")).exists()).collect();
    if present.is_empty() {
        bail!("this kernel has none of the shm syscall tracepoints (syscalls:sys_enter_{{{}}})", CALLS.join(","));
    }
    let mut open = open_skeleton_core_free::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    // As BCC, a thread filter replaces the process filter.
    ro.target_tid = args.tid.tid.unwrap_or(0);
    ro.target_tgid = if args.tid.tid.is_some() { 0 } else { args.pid.pid.unwrap_or(0) };
    ro.failed_only = args.failed;
    {
        let p = &mut open.progs;
        for (call, prog) in
            CALLS.iter().zip([&mut p.shmget_enter, &mut p.shmat_enter, &mut p.shmdt_enter, &mut p.shmctl_enter])
        {
            prog.set_autoload(present.contains(call));
        }
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let p = &skel.progs;
    let mut links = Links::default();
    for call in CALLS {
        if present.contains(&call) {
            links.push(attach_tracepoint(&p.shm_exit, "syscalls", &format!("sys_exit_{call}"), mech)?);
        } else if args.verbose.on() {
            eprintln!(
                "{}: no tracepoint syscalls:sys_enter_{call} on this kernel; not traced",
                common::identity::invoked_name()
            );
        }
    }
    for (call, prog) in CALLS.iter().zip([&p.shmget_enter, &p.shmat_enter, &p.shmdt_enter, &p.shmctl_enter]) {
        if present.contains(call) {
            links.push(attach_tracepoint(prog, "syscalls", &format!("sys_enter_{call}"), mech)?);
        }
    }
    Ok((skel, links))
}
