// SPDX-License-Identifier: Apache-2.0 OR MIT
//! sigsnoop: trace signals sent, with sender, target and result (libbpf-tools' tool, CO-RE).
//!
//! The BPF side (`sigsnoop.bpf.c`) sends one record per signal the kernel generates (`signal:signal_generate`,
//! tp_btf, else raw_tp, else the classic tracepoint), or with `-k` per kill, tkill and tgkill call (syscalls
//! tracepoints, with the call's result: the programs of `bpf/include/killcalls.bpf.h` and
//! `common::domain::killcalls`, which killsnoop shares); sender PID, signal and failure filters run in the
//! kernel. This front end
//! prints libbpf-tools' columns (`TIME PID COMM SIG TPID TCOMM RESULT`) or JSON lines, and reports on stderr every
//! signal the kernel side could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::domain::killcalls::{self, SignalEvent, SignalSet};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::Printer;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per signal sent: sender, target, signal and result; either every signal the kernel generates, or
/// the kill system calls
#[derive(Debug, Parser)]
#[command(name = "sigsnoop", version, after_help = EXAMPLES)]
struct Args {
    /// Show only signals that were not delivered (with -k, calls that returned an error)
    #[arg(short = 'x', long)]
    failed: bool,
    /// Trace the kill, tkill and tgkill system calls instead, with what each returned
    #[arg(short = 'k', long)]
    kill: bool,
    /// Print signal names (SIGKILL) rather than numbers
    #[arg(short = 'n', long)]
    name: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only these signals: numbers or names separated by commas (9,TERM,SIGUSR1)
    #[arg(short = 's', long, value_name = "SIGNAL", value_parser = |s: &str| SignalSet::parse(s, false))]
    signal: Option<SignalSet>,
    /// Print JSON lines: an object per signal
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| sigsnoop(args, signals))
}

fn sigsnoop(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(args.json, args.name);
    printer.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "signals")
        .also_dropped(&bss.inflight_full, "signals", "too many calls in flight")
        .print(&signals, &mut out, args.json, |out, data| Ok(printer.write(out, &SignalEvent::from_bytes(data))?))?;
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the signal_generate program of one attach mechanism (and the
/// syscall tracepoints with -k), loads and attaches them.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.kill_only = args.kill;
    ro.failed_only = args.failed;
    ro.filter_sig = args.signal.is_some();
    ro.sig_mask = args.signal.unwrap_or_default().mask;
    if !args.kill {
        open.maps.inflight.set_max_entries(1).context("sizing the in-flight map")?;
    }
    autoload_by_section(open.open_object_mut(), mech);
    killcalls::set_autoload(open.open_object_mut(), args.kill);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let mut links = Links::from(if args.kill { killcalls::attach(skel.object())? } else { Vec::new() });
    links.push(attach_loaded_tracepoint(skel.object(), "signal", "signal_generate")?);
    Ok((skel, links))
}
