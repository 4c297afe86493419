// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpconnlat: how long the handshake of each outgoing TCP connection takes (BCC's tool, CO-RE).
//!
//! The BPF side watches `sock:inet_sock_set_state` through the state tracking tcplife and tcpstates share
//! (`bpf/include/sockstate.bpf.h`): the change CLOSE -> SYN_SENT, made inside connect(), names the connecting task
//! and starts the clock; SYN_SENT -> ESTABLISHED stops it and sends one record through a ring buffer (the PID,
//! family and minimum-latency filters run in the kernel). This front end prints each connect in BCC's columns or
//! as JSON lines, and reports on stderr what the kernel side could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::sockevents::FamilyArgs;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Connect, Printer, Style};

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per outgoing TCP connection once its handshake completes: process, addresses, port, handshake time.
#[derive(Debug, Parser)]
#[command(name = "tcpconnlat", version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the seconds since the first connect printed
    #[arg(short = 't', long)]
    timestamp: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Add a column with the local port (LPORT)
    #[arg(short = 'L', long)]
    lport: bool,
    #[command(flatten)]
    family: FamilyArgs,
    /// Print JSON lines: an object per connect, latency exact
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Show only connects that took at least this many milliseconds (fractions allowed: 0.1 is 100 us)
    #[arg(value_name = "MIN_MS", value_parser = parse_min_ms)]
    min_ms: Option<f64>,
}

/// The threshold: a number of milliseconds, not negative (BCC's `positive_float`).
fn parse_min_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms >= 0.0 => Ok(ms),
        _ => Err(format!("'{s}' is not a number of milliseconds (such as 1 or 0.1)")),
    }
}

/// What the multicall binary knows of the tool: its entry and its attach ladder.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcpconnlat(args, signals))
}

fn tcpconnlat(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _link), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut printer = Printer::new(Style { json: args.json, lport: args.lport, since_first: args.timestamp });
    let mut out = Output::new();
    printer.write_header(&mut out)?;

    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "connects")
        .also_dropped(&bss.openers_full, "connects", "socket map full")
        .print(&signals, &mut out, args.json, |out, data| {
            let event: bpf::types::event = common::attach::maps::from_bytes(data);
            match Connect::from_event(&event) {
                Some(connect) => Ok(printer.write(out, &connect)?),
                None => Ok(()),
            }
        })?;
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the program of one attach mechanism, loads and attaches it.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Link)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.target_family = args.family.af();
    // BCC keeps whole microseconds of the threshold: int(ms * 1000).
    rodata.min_us = (args.min_ms.unwrap_or(0.0) * 1000.0) as u64;

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let link = attach_loaded_tracepoint(skel.object(), "sock", "inet_sock_set_state")?;
    Ok((skel, link))
}
