// SPDX-License-Identifier: Apache-2.0 OR MIT
//! javagc: the collections of one Java process and how long each took, from HotSpot's `gc__begin` and `gc__end`
//! USDT probes (libbpf-tools' tool, in Rust).
//!
//! The process's `libjvm.so` is found in its memory maps ([`common::runtime`]); two BPF programs
//! (`javagc.bpf.c`) time each collection per thread and send one record per collection longer than `-t`
//! microseconds; this side prints libbpf-tools' `TIME CPU PID GC TIME` columns, or JSON lines.

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, open_skeleton, rodata};
use common::attach::maps::from_bytes;
use common::host::Host;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use common::run::Signals;
use common::runtime::{self, Language, RuntimeProbes};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;
use serde::Serialize;

use bpf::types::event;
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a #[repr(C)] struct of integers, generated from javagc.h.
unsafe impl plain::Plain for event {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The probe pair timed.
const BEGIN: &str = "gc__begin";
const END: &str = "gc__end";

/// Show how long each garbage collection of a Java process takes
#[derive(Debug, Parser)]
#[command(name = "javagc", version, after_help = EXAMPLES)]
// The shared pid filter (common::cli::filter), with what it means for this tool.
#[command(mut_arg("pid", |a| a.help("The Java process to trace")))]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::RequiredPidArg,
    /// Show only collections longer than this many microseconds
    #[arg(short = 't', long = "time", value_name = "TIME", default_value_t = 1000)]
    time: u64,
    /// JSON output: one object per collection, with its exact duration
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Uprobe]);

#[derive(Serialize)]
struct JsonGc<'a> {
    time: &'a str,
    cpu: u32,
    pid: u32,
    tid: u32,
    duration_ns: u64,
    full: bool,
}

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| javagc(args, signals))
}

fn javagc(args: Args, signals: Signals) -> Result<()> {
    let pid = args.pid.pid.context("no PID")?;
    common::cli::require_process(pid)?;
    let found = runtime::find_probes(pid, Language::Java)?;
    found.require(&[BEGIN, END])?;
    if args.verbose.on() {
        eprintln!("HotSpot probes of process {pid} in {}", found.file.display());
    }
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &found, mech))?;

    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Tracing javagc time... Hit Ctrl-C to end.")?;
        writeln!(out, "{:<8} {:<7} {:<7} {:<7}", "TIME", "CPU", "PID", "GC TIME")?;
        out.flush()?;
    }
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "collections")
        .also_dropped(&bss.starts_full, "collections", "too many collections in progress")
        .print(&signals, &mut out, args.json, |out, data| {
            let e: event = from_bytes(data);
            if args.json {
                out.json_line(&JsonGc {
                    time: &clock_rfc3339(),
                    cpu: e.cpu,
                    pid: e.pid,
                    tid: e.tid,
                    duration_ns: e.elapsed_ns,
                    full: e.full != 0,
                })?;
            } else {
                writeln!(out, "{:<8} {:<7} {:<7} {:<7}", clock_hms(), e.cpu, e.pid, e.elapsed_ns / 1000)?;
                out.flush()?;
            }
            Ok(())
        })
}

/// Loads the BPF object with the -t threshold and attaches its programs to gc__begin and gc__end.
fn load_and_attach(args: &Args, found: &RuntimeProbes, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    rodata(&mut open.maps.rodata_data)?.threshold_ns = args.time.saturating_mul(1000);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = vec![found.attach(&skel.progs.javagc_begin, BEGIN, 0)?, found.attach(&skel.progs.javagc_end, END, 0)?];
    Ok((skel, links))
}
