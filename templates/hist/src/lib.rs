// SPDX-License-Identifier: Apache-2.0 OR MIT
//! template: the sizes read() returns, as a log2 histogram per process name. It is the canonical shape of a tool,
//! small enough to read in one sitting: copy this folder to start a new tool (the README's "Adding a tool").
//!
//! The BPF side (`template.bpf.c`) counts each successful read() into a histogram keyed by the process name; this
//! side parses BCC-style flags, loads the BPF object with the first attach mechanism of `TOOL.attach` that works,
//! fills the filters before anything is attached, and hands the cumulative histograms to the shared report of
//! histograms per name (`common::output::namedhist`), which prints them every interval as BCC would, or as JSON.

mod bpf;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, load_first_working};
use common::attach::maps::{c_string, hash_entries, DropCounter};
use common::cli::filter::open_filtered;
use common::cli::IntervalCount;
use common::host::Host;
use common::output::hist::Log2Hist;
use common::output::namedhist::{self, Layout};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::{hist, name_key};
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: plain C structs of integers and chars, generated from template.h.
unsafe impl plain::Plain for hist {}
unsafe impl plain::Plain for name_key {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

const LAYOUT: Layout = Layout { what: "read() sizes", header: "Process Name", field: "comm", unit: "bytes" };

/// Summarize the sizes read() returns as a histogram per process name.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Include timestamp on output
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// JSON output: one object per process name per interval
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

/// What the multicall binary knows of the tool: its entry and its attach ladder (the mechanisms it can use, best
/// first; `corebpf-tools features` lists them and `COREBPF_ATTACH` forces one).
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| trace(args, signals))
}

fn trace(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    let mut hists_full = DropCounter::new("reads", "too many process names");
    namedhist::run(&signals, &args.every, &LAYOUT, args.json, args.timestamp, || {
        if let Some(bss) = skel.maps.bss_data.as_ref() {
            hists_full.check(&bss.hists_full);
        }
        let entries: Vec<(name_key, hist)> = hash_entries(&skel.maps.hists)?;
        Ok(entries
            .into_iter()
            .map(|(k, h)| (c_string(&k.comm), Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: 0 }))
            .collect())
    })
}

/// Opens the BPF object with the task filter written in, loads it and attaches its one program.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let link = attach_loaded_tracepoint(skel.object(), "syscalls", "sys_exit_read")?;
    Ok((skel, vec![link]))
}
