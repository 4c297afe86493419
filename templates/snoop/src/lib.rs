// SPDX-License-Identifier: Apache-2.0 OR MIT
//! template: one line per chdir() call, with the process, the result and the directory asked for.
//!
//! The template of an event tool (a "snoop": one record per event, through a ring buffer), to copy when starting
//! one (`make new-tool NAME=x KIND=snoop`). The BPF side (src/template.bpf.c) follows each chdir() from its entry
//! to its return through the syscalls tracepoints, filtered by the task filter (`-p`) in the kernel, and sends one
//! record per call; this front end prints a line or a JSON object per record, and what was lost at the end. Every
//! step that is the same in every tool is common's: the host runs the body with its stop signals caught
//! ([`Host::bpf_main`]), the task filter checks itself and is written into the object before it loads
//! ([`open_filtered`]), the attach ladder is tried in order ([`load_first_working`]), and the event stream polls,
//! drains and reports losses ([`EventStream`]).

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, load_first_working};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Chdir, Printer};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per chdir() call: process, result and directory
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per call, with the error's name when it failed
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// The attach mechanisms the tool tries, cheapest first (one here: the system call's tracepoints).
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| trace(args, signals))
}

fn trace(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    let mut out = Output::new();
    let mut printer = Printer::new(args.json);
    printer.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "calls")
        .also_dropped(&bss.inflight_full, "calls", "too many in flight")
        .print(&signals, &mut out, args.json, |out, data| Ok(printer.write(out, &Chdir::from_bytes(data))?))
}

/// Opens the BPF object with the task filter written in, loads it and attaches the exit before the entry, so that
/// no call is kept at its entry with nobody to take it.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let mut links = Links::default();
    links.push(attach_tracepoint(&skel.progs.chdir_exit, "syscalls", "sys_exit_chdir", mech)?);
    links.push(attach_tracepoint(&skel.progs.chdir_enter, "syscalls", "sys_enter_chdir", mech)?);
    Ok((skel, links))
}
