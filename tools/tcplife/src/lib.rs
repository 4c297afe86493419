// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcplife: trace the lifespan of TCP sessions and summarize (BCC's tool, CO-RE).
//!
//! The BPF side watches `sock:inet_sock_set_state`, remembers when each socket was born and which process owns
//! it, and at close sends one record with the bytes acked and received through a ring buffer; PID, port and
//! family filters run in the kernel. This front end prints each session as it closes, in BCC's columns or as
//! JSON lines, and reports on stderr any session the kernel side could not deliver. With `--prometheus` the BPF
//! side keeps per-service histograms instead, which are served as metrics ([`metrics`]).

mod bpf;
mod metrics;
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
use common::output::sockevents::{FamilyArgs, Layout, PortArgs, Style};
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Printer, Session};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Most ports one -L or -D list may hold (the size of the BPF port maps, MAX_PORTS in tcplife.h).
const MAX_PORTS: usize = 1024;

/// One line per TCP connection when it closes: process, addresses, ports, bytes each way and how long it lasted.
#[derive(Debug, Parser)]
#[command(name = "tcplife", version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the time of day (HH:MM:SS)
    #[arg(short = 'T', long = "time")]
    time: bool,
    /// Start each line with the seconds since tracing began
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Widen the address columns to fit IPv6 addresses
    #[arg(short = 'w', long)]
    wide: bool,
    /// Print comma-separated values instead of aligned columns
    #[arg(short = 's', long)]
    csv: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    ports: PortArgs,
    #[command(flatten)]
    family: FamilyArgs,
    /// Print JSON lines: an object per connection, bytes exact
    #[arg(short = 'j', long, conflicts_with_all = ["wide", "csv"])]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcplife(args, &host, signals))
}

fn tcplife(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    args.ports.check(MAX_PORTS)?;
    let endpoint = args.export.endpoint(host, false)?;
    let ((skel, _link), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            s.map_full("births", &bss.births_full);
            s.map_full("services", &bss.services_full);
            metrics::write(s, &common::attach::maps::hash_entries(&skel.maps.services)?);
            Ok(())
        });
    }

    let layout = Layout::from_flags(args.csv, args.wide);
    let mut printer = Printer::new(Style { layout, json: args.json, clock: args.time, since_first: args.timestamp });
    let mut out = Output::new();
    printer.write_header(&mut out)?;

    EventStream::new(&skel.maps.events, &bss.lost, "sessions")
        .also_dropped(&bss.births_full, "sessions", "socket map full")
        .print(&signals, &mut out, args.json, |out, data| {
            let event: bpf::types::event = common::attach::maps::from_bytes(data);
            match Session::from_event(&event) {
                Some(session) => Ok(printer.write(out, &session)?),
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
    rodata.histograms_only = args.export.prometheus.is_some();
    (rodata.filter_lport, rodata.filter_rport) = args.ports.switches();

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // The port maps are filled before attaching, so no session slips past an empty filter.
    args.ports.fill(&skel.maps.lports, &skel.maps.rports)?;
    let link = attach_loaded_tracepoint(skel.object(), "sock", "inet_sock_set_state")?;
    Ok((skel, link))
}
