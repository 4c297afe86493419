// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcppktlat: how long received TCP data waits in a socket before a task reads it (libbpf-tools' tool, CO-RE).
//!
//! The BPF side (`tcppktlat.bpf.c`) notes when data arrives on an established socket (`tcp:tcp_probe`) and, when
//! a task copies data of that socket to user space (`tcp:tcp_rcv_space_adjust`), sends one record with the wait,
//! the task and the connection through a ring buffer; closed sockets are forgotten (`tcp:tcp_destroy_sock`). The
//! port, PID, thread and threshold filters run in the kernel. This front end prints each record in libbpf-tools'
//! columns or as JSON lines, and reports on stderr what the kernel side could not deliver.

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
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Pickup, Printer, Style};

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line each time a task reads data a TCP socket received: the task, the connection, and how long the data
/// waited between its arrival and the read.
#[derive(Debug, Parser)]
#[command(name = "tcppktlat", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    tid: common::cli::filter::TidArg,
    /// Start each line with the time of day (HH:MM:SS)
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Only sockets with this local port
    #[arg(short = 'l', long, value_name = "LPORT", value_parser = parse_port)]
    lport: Option<u16>,
    /// Only sockets with this remote port
    #[arg(short = 'r', long, value_name = "RPORT", value_parser = parse_port)]
    rport: Option<u16>,
    /// Widen the address columns to fit IPv6 addresses
    #[arg(short = 'w', long)]
    wide: bool,
    /// Print JSON lines: an object per read, the wait in exact nanoseconds
    #[arg(short = 'j', long, conflicts_with = "wide")]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Show only waits longer than this many microseconds (by default, every wait)
    #[arg(value_name = "MIN_US", value_parser = common::cli::parse_positive_u64)]
    min_us: Option<u64>,
}

/// A port to filter on, 1 to 65535.
fn parse_port(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u16>() {
        Ok(port @ 1..=u16::MAX) => Ok(port),
        _ => Err(format!("'{s}' is not a port (1-65535)")),
    }
}

/// What the multicall binary knows of the tool: its entry and its attach ladder. The three hooks are tracepoints,
/// with no kernel function to fall back on; every kernel with BTF has them and can attach a raw_tp.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcppktlat(args, signals))
}

fn tcppktlat(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    args.tid.tid.map(common::cli::require_thread).transpose()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let printer = Printer::new(Style { json: args.json, wide: args.wide, clock: args.timestamp });
    let mut out = Output::new();
    printer.write_header(&mut out)?;

    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "reads")
        .also_dropped(&bss.arrivals_full, "arrivals", "socket map full")
        .print(&signals, &mut out, args.json, |out, data| {
            let event: bpf::types::event = common::attach::maps::from_bytes(data);
            match Pickup::from_event(&event) {
                Some(pickup) => Ok(printer.write(out, &pickup)?),
                None => Ok(()),
            }
        })?;
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads them and attaches
/// them: the cleanup and the read first, so that no arrival is stored before its read can be seen.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter().tid(args.tid))?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.target_lport = args.lport.unwrap_or(0);
    ro.target_rport = args.rport.unwrap_or(0);
    ro.min_us = args.min_us.unwrap_or(0);

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let mut links = Vec::new();
    for tracepoint in ["tcp_destroy_sock", "tcp_rcv_space_adjust", "tcp_probe"] {
        links.push(attach_loaded_tracepoint(skel.object(), "tcp", tracepoint)?);
    }
    Ok((skel, links))
}
