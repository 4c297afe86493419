// SPDX-License-Identifier: Apache-2.0 OR MIT
//! hardirqs: summarize hard IRQ event time (BCC's tool, CO-RE).
//!
//! Times each hard IRQ handler from `irq_handler_entry` to `irq_handler_exit` in BPF and keeps, per handler name
//! (`irqaction->name`, as /proc/interrupts shows it), a count, a total and a log2 histogram in a kernel map; the
//! IRQ time tools' shared front end (`common::output::irqtime`) prints totals (default), counts (`-C`) or
//! histograms (`-d`) every interval in BCC's layout or as JSON lines.

mod bpf;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{autoload_by_section, load_first_working, open_skeleton, rodata};
use common::attach::maps::{c_string, DropCounter};
use common::host::Host;
use common::output::hist::Log2Hist;
use common::output::irqtime::{self, Irq, IrqArgs, Kind};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::{hist, irq_key};
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: plain C structs of integers and chars, generated from hardirqs.h.
unsafe impl plain::Plain for hist {}
unsafe impl plain::Plain for irq_key {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

const KIND: Kind = Kind { words: "hard irq", field: "hardirq", array: "hardirqs", column: "HARDIRQ", width: 26 };

/// Time spent in each hardware interrupt handler, as totals or log2 histograms.
#[derive(Debug, Parser)]
#[command(name = "hardirqs", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    irq: IrqArgs,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.irq.verbose, |signals| hardirqs(args.irq.applied(), &host, signals))
}

fn hardirqs(args: IrqArgs, host: &Host, signals: Signals) -> Result<()> {
    args.check_cpu()?;
    let mut endpoint = args.endpoint(host)?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    if let Some(endpoint) = endpoint.as_mut() {
        endpoint.attached(mech, skel.object());
    }
    let full = skel.maps.bss_data.as_ref().map(|bss| &bss.hists_full);
    let mut hists_full = DropCounter::new("hard irq events", "too many handler names");
    irqtime::run(KIND, &args, &signals, endpoint, full, || {
        let hists = read_hists(&skel)?;
        if let Some(full) = full {
            hists_full.check(full);
        }
        Ok(hists)
    })
}

/// Every handler name's cumulative record.
fn read_hists(skel: &BpfSkel<'_>) -> Result<Vec<(Irq, Log2Hist)>> {
    let entries: Vec<(irq_key, hist)> = common::attach::maps::hash_entries(&skel.maps.hists)?;
    Ok(entries
        .into_iter()
        .map(|(k, h)| {
            let irq = Irq { vec: None, name: c_string(&k.name) };
            (irq, Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns })
        })
        .collect())
}

/// Opens the BPF object, sets its options, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &IrqArgs, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.filter_cpu = args.cpu.is_some();
    rodata.target_cpu = args.cpu.unwrap_or(0);
    rodata.nsecs = args.nanoseconds;

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = irqtime::attach_pair(skel.object(), ["irq_handler_entry", "irq_handler_exit"])?;
    Ok((skel, links))
}
