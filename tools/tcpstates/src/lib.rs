// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpstates: trace TCP state changes, with the time each socket spent in the state it left (BCC's tool, CO-RE).
//!
//! The BPF side watches `sock:inet_sock_set_state` through the state tracking tcplife and tcpconnlat share
//! (`bpf/include/sockstate.bpf.h`), remembers when each socket last changed state and sends one record per change
//! through a ring buffer; the family and port filters run in the kernel. This front end prints each change in BCC's
//! columns (default, wide, CSV) or as JSON lines, and reports on stderr what the kernel side could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata,
};
use common::host::Host;
use common::output::sockevents::{FamilyArgs, Layout, PortArgs, Style};
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::consts::MAX_PORTS;
use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Change, Printer};

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per TCP state change, with how long the socket spent in the state it left.
#[derive(Debug, Parser)]
#[command(name = "tcpstates", version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the time of day (HH:MM:SS)
    #[arg(short = 'T', long = "time")]
    time: bool,
    /// Start each line with the seconds since the first change printed
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Widen the address columns to fit IPv6 addresses, and add the IP column
    #[arg(short = 'w', long)]
    wide: bool,
    /// Print comma-separated values instead of aligned columns
    #[arg(short = 's', long)]
    csv: bool,
    #[command(flatten)]
    ports: PortArgs,
    /// Refused (BCC's journal logging): pipe the output to systemd-cat to get the lines into the journal
    #[arg(short = 'Y', long)]
    journal: bool,
    #[command(flatten)]
    family: FamilyArgs,
    /// Print JSON lines: an object per state change, times exact
    #[arg(short = 'j', long, conflicts_with_all = ["wide", "csv"])]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// What the multicall binary knows of the tool: its entry and its attach ladder.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    if args.journal {
        // BCC's -Y writes each change to the journal through Python's systemd module; this binary has no journal
        // client, and a usage error is better than silently printing to stdout alone.
        let tool = common::identity::invoked_name();
        eprintln!("{tool}: -Y (systemd journal) is not supported: pipe the output to systemd-cat (see --help)");
        return ExitCode::from(2);
    }
    host.bpf_main(args.verbose, |signals| tcpstates(args, signals))
}

fn tcpstates(args: Args, signals: Signals) -> Result<()> {
    args.ports.check(MAX_PORTS)?;
    let ((skel, _link), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let layout = Layout::from_flags(args.csv, args.wide);
    let mut printer = Printer::new(Style { layout, json: args.json, clock: args.time, since_first: args.timestamp });
    let mut out = Output::new();
    printer.write_header(&mut out)?;

    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "state changes")
        .also_dropped(&bss.last_full, "state durations", "socket map full")
        .print(&signals, &mut out, args.json, |out, data| {
            let event: bpf::types::event = common::attach::maps::from_bytes(data);
            match Change::from_event(&event) {
                Some(change) => Ok(printer.write(out, &change)?),
                None => Ok(()),
            }
        })?;
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the program of one attach mechanism, loads and attaches it.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Link)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.target_family = args.family.af();
    (rodata.filter_lport, rodata.filter_rport) = args.ports.switches();

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // The port maps are filled before attaching, so no change slips past an empty filter.
    args.ports.fill(&skel.maps.lports, &skel.maps.rports)?;
    let link = attach_loaded_tracepoint(skel.object(), "sock", "inet_sock_set_state")?;
    Ok((skel, link))
}
