// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpretrans: trace or count TCP retransmits (BCC's tool, CO-RE).
//!
//! The BPF side watches `tcp:tcp_retransmit_skb` (tp_btf, else raw_tp, else the classic tracepoint), reads the
//! flow from the socket and sends one record per retransmit through a ring buffer, or with `-c` counts
//! retransmits per flow in a hash map. This front end prints BCC's lines, its `-c` table, or JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata,
};
use common::host::Host;
use common::output::sockevents::{self, FamilyArgs};
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Printer, Retransmit};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per retransmitted TCP segment: addresses, ports and the connection's state.
#[derive(Debug, Parser)]
#[command(name = "tcpretrans", version, after_help = EXAMPLES)]
struct Args {
    /// Add the segment's sequence number
    #[arg(short = 's', long)]
    sequence: bool,
    /// Also show tail loss probes (TLP), the kernel's probing sends at the tail of a flight
    #[arg(short = 'l', long)]
    lossprobe: bool,
    /// Instead of a line per retransmission, count retransmissions per connection and print the counts at the end
    #[arg(short = 'c', long)]
    count: bool,
    #[command(flatten)]
    family: FamilyArgs,
    /// Print JSON lines: an object per retransmission (per connection with -c)
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    // Metrics are -c's counts, served instead of printed.
    args.count |= args.export.prometheus.is_some();
    host.bpf_main(args.verbose, |signals| tcpretrans(args, &host, signals))
}

fn tcpretrans(args: Args, host: &Host, signals: Signals) -> Result<()> {
    if args.lossprobe && !std::path::Path::new("/sys/kernel/tracing/events/tcp/tcp_send_loss_probe").exists() {
        // BCC puts a kprobe on tcp_send_loss_probe(); no kernel has a tracepoint there, and a TLP sent by it
        // reaches tcp:tcp_retransmit_skb unmarked (as an R), so a TLP cannot be told apart without that probe.
        bail!("-l needs a probe on tcp_send_loss_probe(): this kernel has no tail loss probe tracepoint");
    }
    let endpoint = args.export.endpoint(host, false)?;
    let ((skel, _link), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut out = Output::new();
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            s.map_full("flows", &bss.flows_full);
            report::metrics(s, &common::attach::maps::hash_entries(&skel.maps.flows)?);
            Ok(())
        });
    }
    if !args.json {
        println!("Tracing retransmits ... Hit Ctrl-C to end");
    }
    if args.count {
        return sockevents::count_at_exit(&signals, &skel.maps.flows, &bss.flows_full, "retransmits", |flows| {
            Ok(report::write_counts(&mut out, args.json, flows)?)
        });
    }

    let mut printer = Printer::new(args.json, args.sequence);
    printer.write_header(&mut out)?;
    let stream = EventStream::new(&skel.maps.events, &bss.lost, "retransmits");
    sockevents::poll_events(&signals, &stream, &mut out, args.json, |out, event: &bpf::types::event| {
        match Retransmit::from_event(event) {
            Some(r) => Ok(printer.write(out, &r)?),
            None => Ok(()),
        }
    })
}

/// Opens the BPF object, sets its options, keeps the program of one attach mechanism, loads and attaches it.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Link)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.target_family = args.family.af();
    ro.count = args.count;
    if !args.count {
        open.maps.flows.set_max_entries(1).context("sizing the flow map")?;
    }
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let link = attach_loaded_tracepoint(skel.object(), "tcp", "tcp_retransmit_skb")?;
    Ok((skel, link))
}
