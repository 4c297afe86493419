// SPDX-License-Identifier: Apache-2.0 OR MIT
//! softirqs: summarize soft IRQ event time (BCC's tool, CO-RE).
//!
//! Times each soft IRQ from `softirq_entry` to `softirq_exit` in BPF and keeps, per vector, a count, a total and
//! a log2 histogram in a kernel map; the IRQ time tools' shared front end (`common::output::irqtime`) prints
//! totals (default), counts (`-C`) or histograms (`-d`) every interval in BCC's layout or as JSON lines. Vector
//! names come from the kernel's BTF (the `*_SOFTIRQ` enumerators), never from a table kept here.

mod bpf;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{autoload_by_section, load_first_working, open_skeleton, rodata};
use common::host::Host;
use common::output::hist::Log2Hist;
use common::output::irqtime::{self, Irq, IrqArgs, Kind};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::hist;
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a plain C struct of integers, generated from softirqs.h.
unsafe impl plain::Plain for hist {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

const KIND: Kind = Kind { words: "soft irq", field: "softirq", array: "softirqs", column: "SOFTIRQ", width: 16 };

/// Time spent in each kind of software interrupt (softirq), as totals or log2 histograms.
#[derive(Debug, Parser)]
#[command(name = "softirqs", version, after_help = EXAMPLES)]
#[command(mut_arg("count_events", |a| a.long("events").help("Count the softirqs instead of timing them")))]
struct Args {
    #[command(flatten)]
    irq: IrqArgs,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.irq.verbose, |signals| softirqs(args.irq.applied(), &host, signals))
}

fn softirqs(args: IrqArgs, host: &Host, signals: Signals) -> Result<()> {
    args.check_cpu()?;
    let names = vector_names()?;
    let mut endpoint = args.endpoint(host)?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    if let Some(endpoint) = endpoint.as_mut() {
        endpoint.attached(mech, skel.object());
    }
    irqtime::run(KIND, &args, &signals, endpoint, None, || read_hists(&skel, &names))
}

/// The names of the softirq vectors by number, from the kernel's anonymous enum of `*_SOFTIRQ` enumerators
/// (`NET_RX_SOFTIRQ` → `net_rx`, as BCC prints), without its `NR_SOFTIRQS` end marker.
fn vector_names() -> Result<Vec<(u32, String)>> {
    let members = common::attach::btf_enums::enum_with_member("NET_RX_SOFTIRQ")?;
    let names: Vec<(u32, String)> = members
        .into_iter()
        .filter_map(|(name, value)| {
            let short = name.strip_suffix("_SOFTIRQ")?;
            Some((u32::try_from(value).ok()?, short.to_ascii_lowercase()))
        })
        .collect();
    if names.is_empty() {
        bail!("the kernel's BTF has no enum of softirq vectors (NET_RX_SOFTIRQ)");
    }
    Ok(names)
}

/// Every vector's cumulative record, by vector number, named.
fn read_hists(skel: &BpfSkel<'_>, names: &[(u32, String)]) -> Result<Vec<(Irq, Log2Hist)>> {
    let mut hists = Vec::new();
    for vec in 0..bpf::consts::MAX_VECS as u32 {
        // Each CPU's record of the vector, summed.
        let mut sum = Log2Hist { slots: vec![0; bpf::consts::MAX_SLOTS], count: 0, sum: 0 };
        for h in common::attach::maps::percpu_values::<hist>(&skel.maps.hists, &vec.to_ne_bytes())? {
            sum.slots.iter_mut().zip(h.slots).for_each(|(s, n)| *s += n);
            sum.count += h.count;
            sum.sum += h.sum_ns;
        }
        let known = names.iter().find(|(v, _)| *v == vec);
        if known.is_none() && sum.count == 0 {
            // An array slot past the kernel's vectors: never used.
            continue;
        }
        let name = known.map_or_else(|| format!("vec {vec}"), |(_, n)| n.clone());
        hists.push((Irq { vec: Some(vec), name }, sum));
    }
    Ok(hists)
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
    let links = irqtime::attach_pair(skel.object(), ["softirq_entry", "softirq_exit"])?;
    Ok((skel, links))
}
