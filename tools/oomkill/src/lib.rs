// SPDX-License-Identifier: Apache-2.0 OR MIT
//! oomkill: trace the kernel's out-of-memory killer (BCC's tool, CO-RE).
//!
//! The BPF side (`oomkill.bpf.c`) sends one record per OOM kill from the `oom:mark_victim` tracepoint, which runs in
//! the task that triggered the kill; this front end adds the time and `/proc/loadavg` and prints BCC's line
//! (`HH:MM:SS Triggered by PID N ("comm"), OOM kill of PID M ("comm"), P pages, loadavg: ...`) or JSON lines, and
//! reports on stderr every kill the kernel side could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, load_first_working, open_skeleton};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Kill, Printer};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Trace OOM kills: who triggered each one, which process was killed, its size and the load average
#[derive(Debug, Parser)]
#[command(name = "oomkill", version, after_help = EXAMPLES)]
struct Args {
    /// JSON output: one object per OOM kill, with the victim's memory in kB
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| oomkill(args, signals))
}

fn oomkill(args: Args, signals: Signals) -> Result<()> {
    let ((skel, _link), _mech) = load_first_working(TOOL.attach, args.verbose.on(), load_and_attach)?;

    let mut out = Output::new();
    let mut printer = Printer::new(args.json);
    printer.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "OOM kills")
        .print(&signals, &mut out, args.json, |out, data| Ok(printer.write(out, &Kill::from_bytes(data))?))
}

/// Opens the BPF object, loads it and attaches its one program on oom:mark_victim.
fn load_and_attach(mech: Attach) -> Result<(BpfSkel<'static>, Link)> {
    let open = open_skeleton::<BpfSkelBuilder>()?;
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let link = attach_loaded_tracepoint(skel.object(), "oom", "mark_victim")?;
    Ok((skel, link))
}
