// SPDX-License-Identifier: Apache-2.0 OR MIT
//! runqslower: each scheduling delay above a threshold (BCC's tool, CO-RE).
//!
//! The BPF side (`runqslower.bpf.c`) times every task from becoming runnable (woken, created, or preempted while
//! runnable) to running on a CPU, and sends one record per wait longer than `min_us`, filtered in the kernel by
//! process, thread and name, from `sched:sched_wakeup`, `sched_wakeup_new` and `sched_switch` (tp_btf, else
//! raw_tp, else the classic tracepoints). This front end prints BCC's columns
//! (`TIME COMM TID LAT(us) [PREV COMM PREV TID]`, `report.rs`) or JSON lines, and reports on stderr every wait the
//! kernel side could not time or deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Printer, Wait};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line each time a runnable task waits longer than min_us microseconds for a CPU: task, TID, wait
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Show only waits longer than this many microseconds (default 10000; 0 shows every wait)
    #[arg(value_name = "min_us", default_value_t = 10000, hide_default_value = true, value_parser = parse_min_us)]
    min_us: u64,
    /// Add the name and TID of the task that had the CPU before (PREV COMM, PREV TID)
    #[arg(short = 'P', long)]
    previous: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    tid: common::cli::filter::TidArg,
    /// Only tasks whose name begins with COMM
    #[arg(short = 'c', long, value_name = "COMM", value_parser = parse_comm)]
    comm: Option<String>,
    /// Print JSON lines: an object per wait, the latency exact in nanoseconds too
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// min_us: microseconds, from 0 (every wait) up.
fn parse_min_us(s: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| format!("'{s}' is not a number of microseconds"))
}

/// -c COMM: a task name (at most 15 bytes, as the kernel keeps them).
fn parse_comm(s: &str) -> Result<String, String> {
    match s.len() {
        0 => Err("the name is empty".into()),
        1..=15 => Ok(s.to_string()),
        n => Err(format!("'{s}' is {n} bytes long; task names have at most 15")),
    }
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| runqslower(args, signals))
}

fn runqslower(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().tid(args.tid).exclusive().check()?;
    let btf = KernelBtf::load()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &btf, mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(args.json, args.previous);
    printer.write_header(&mut out, args.min_us)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "waits")
        .also_dropped(&bss.start_map_full, "waits", "too many runnable tasks for the start map")
        .print(&signals, &mut out, args.json, |out, data| Ok(printer.write(out, &Wait::from_bytes(data))?))?;
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them
/// (the wakeups first, so that no switch waits for a wakeup that was never timed).
fn load_and_attach(args: &Args, btf: &KernelBtf, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter().tid(args.tid))?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.min_us = args.min_us;
    if let Some(comm) = &args.comm {
        ro.filter_comm = true;
        for (dst, src) in ro.target_comm.iter_mut().zip(comm.bytes()) {
            *dst = src as _;
        }
    }
    // 5.18 added prev_state as sched_switch's fourth argument.
    ro.switch_has_state = btf.tracepoint_arity("sched_switch") == Some(4);
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = ["sched_wakeup", "sched_wakeup_new", "sched_switch"]
        .into_iter()
        .map(|tp| attach_loaded_tracepoint(skel.object(), "sched", tp))
        .collect::<Result<Vec<_>>>()?;
    Ok((skel, links))
}
