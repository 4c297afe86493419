// SPDX-License-Identifier: Apache-2.0 OR MIT
//! softirqslower: soft IRQs that waited or ran at least a threshold (BCC's tool, CO-RE).
//!
//! The BPF side (`softirqslower.bpf.c`) times, per CPU and vector, the wait from `softirq_raise` to
//! `softirq_entry` and the run from `softirq_entry` to `softirq_exit` (tp_btf, else raw_tp, else the classic irq
//! tracepoints), and sends one record per delay of at least `min_us`, filtered in the kernel by CPU. This front
//! end names the vectors from the kernel's BTF, prints BCC's columns (`TIME STAGE SOFTIRQ LAT(us) CPU COMM`,
//! `report.rs`) or JSON lines, and reports on stderr every record the ring buffer had no room for.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton_core_free, rodata,
};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Delay, Printer};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line each time a soft IRQ waits (raised to started) or runs (started to done) min_us microseconds or more
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Show only delays of at least this many microseconds (default 10000; 0 shows every soft IRQ)
    #[arg(value_name = "min_us", default_value_t = 10000, hide_default_value = true, value_parser = parse_min_us)]
    min_us: u64,
    /// Only soft IRQs handled on this CPU
    #[arg(short = 'c', long, value_name = "CPU")]
    cpu: Option<u32>,
    /// Print JSON lines: an object per delay, exact in nanoseconds too
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// min_us: microseconds, from 0 (every soft IRQ) up to what nanoseconds in 64 bits can hold.
fn parse_min_us(s: &str) -> Result<u64, String> {
    let us = s.parse::<u64>().map_err(|_| format!("'{s}' is not a number of microseconds"))?;
    us.checked_mul(1000).map(|_| us).ok_or_else(|| format!("{us} microseconds is too long a threshold"))
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| softirqslower(args, signals))
}

fn softirqslower(args: Args, signals: Signals) -> Result<()> {
    if let Some(cpu) = args.cpu {
        common::attach::perf::sampling_cpus(Some(cpu))?;
    }
    let names = vector_names()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(args.json);
    printer.write_header(&mut out, args.min_us)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "soft IRQ delays").print(
        &signals,
        &mut out,
        args.json,
        |out, data| Ok(printer.write(out, &Delay::from_bytes(data, &names))?),
    )?;
    Ok(())
}

/// The kernel's softirq vector names by number, lower case as BCC prints them (`NET_RX_SOFTIRQ` is `net_rx`),
/// from its BTF: the anonymous enum that holds `NET_RX_SOFTIRQ`, less its `NR_SOFTIRQS` count.
fn vector_names() -> Result<Vec<String>> {
    let mut names = Vec::new();
    for (name, value) in common::attach::btf_enums::enum_with_member("NET_RX_SOFTIRQ")? {
        let (Some(short), Ok(vec)) = (name.strip_suffix("_SOFTIRQ"), usize::try_from(value)) else { continue };
        if names.len() <= vec {
            names.resize(vec + 1, String::new());
        }
        names[vec] = short.to_lowercase();
    }
    if names.is_empty() {
        bail!("the kernel's BTF names no softirq vectors (no enum holds NET_RX_SOFTIRQ)");
    }
    Ok(names)
}

/// Opens the BPF object, sets the threshold and CPU filter, keeps the programs of one attach mechanism, loads
/// them and attaches them: the raise first, then the entry, then the exit, so that every exit timed had its entry
/// seen.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton_core_free::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.min_ns = args.min_us * 1000;
    ro.filter_cpu = args.cpu.is_some();
    ro.target_cpu = args.cpu.unwrap_or(0);
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = ["softirq_raise", "softirq_entry", "softirq_exit"]
        .into_iter()
        .map(|tp| attach_loaded_tracepoint(skel.object(), "irq", tp))
        .collect::<Result<Vec<_>>>()?;
    Ok((skel, links))
}
