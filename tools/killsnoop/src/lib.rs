// SPDX-License-Identifier: Apache-2.0 OR MIT
//! killsnoop: trace signals sent by the kill, tkill and tgkill system calls, with the call's result (BCC's tool,
//! CO-RE).
//!
//! The kernel side is `bpf/include/killcalls.bpf.h`, shared with sigsnoop -k: the three calls followed from entry
//! to return through the syscalls tracepoints, with the sender PID, target PID, signal and failure filters in the
//! kernel. This front end prints BCC's columns (`TIME PID COMM SIG TPID RESULT`) or JSON lines, and reports on
//! stderr every call the kernel side could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{load_first_working, open_skeleton_core_free, rodata};
use common::domain::killcalls::{self, SignalEvent, SignalSet};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::Printer;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per kill(), tkill() or tgkill() call: who signals whom with what, and the call's result
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
// The shared pid filter (common::cli::filter), with what it means for this tool.
#[command(mut_arg("pid", |a| a.help("Only calls made by this process (the sender's PID)")))]
struct Args {
    /// Only calls that failed (a negative result)
    #[arg(short = 'x', long)]
    failed: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only calls whose target argument is this number, as given (negative for a process group)
    #[arg(short = 'T', long, value_name = "TPID", allow_negative_numbers = true, value_parser = parse_tpid)]
    tpid: Option<i32>,
    /// Only these signals: numbers or names, separated by commas (0,9,TERM,SIGUSR1; 0 is the existence
    /// probe kill(pid, 0))
    #[arg(short = 's', long, value_name = "SIGNAL", value_parser = |s: &str| SignalSet::parse(s, true))]
    signal: Option<SignalSet>,
    /// Print signal names (SIGKILL) in the SIG column instead of numbers
    #[arg(short = 'n', long)]
    name: bool,
    /// Does nothing; accepted as libbpf-tools' killsnoop (its sigsnoop in kill mode) takes it
    #[arg(short = 'k', long)]
    kill: bool,
    /// Print JSON lines: an object per call
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| killsnoop(args, signals))
}

/// A target PID as kill(2) takes it: any integer but 0 is a process (or, negative, a process group); 0 is the
/// caller's own process group and -1 every process it may signal, both valid targets too.
fn parse_tpid(s: &str) -> Result<i32, String> {
    s.parse::<i32>().map_err(|_| format!("'{s}' is not a PID (an integer, negative for a process group)"))
}

fn killsnoop(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(args.json, args.name);
    printer.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "calls")
        .also_dropped(&bss.inflight_full, "calls", "too many calls in flight")
        .print(&signals, &mut out, args.json, |out, data| Ok(printer.write(out, &SignalEvent::from_bytes(data))?))?;
    Ok(())
}

/// Opens the BPF object, sets its filters, loads it and attaches the six syscall tracepoints (exits first).
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_skeleton_core_free::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.target_tgid = args.pid.pid.unwrap_or(0);
    ro.failed_only = args.failed;
    ro.filter_tpid = args.tpid.is_some();
    ro.target_tpid = args.tpid.unwrap_or(0);
    ro.filter_sig = args.signal.is_some();
    let set = args.signal.unwrap_or_default();
    ro.sig_mask = set.mask;
    ro.sig_zero = set.zero;
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = Links::from(killcalls::attach(skel.object())?);
    Ok((skel, links))
}
