// SPDX-License-Identifier: Apache-2.0 OR MIT
//! exitsnoop: trace process exits, with their age and exit code or fatal signal (BCC's tool, CO-RE).
//!
//! The BPF side (`exitsnoop.bpf.c`) sends one record per process, when its last thread ends (or per thread), from
//! `sched:sched_process_exit` (tp_btf, else raw_tp, else the classic tracepoint), filtered in the kernel by PID,
//! cgroup and failure; this front end keeps one record of each process (two threads ending at once can both
//! report it) and prints
//! BCC's columns (`[TIME-TZ] [LABEL] PCOMM PID PPID TID AGE(s) EXIT_CODE`) or JSON lines, and reports on stderr
//! every exit the kernel side could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::path::PathBuf;
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
use report::{Exit, Printer, Processes, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Trace process exits (normal exits and fatal signals), with each process's age
#[derive(Debug, Parser)]
#[command(name = "exitsnoop", version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the time of day (local time)
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Start each line with the time of day in UTC (implies -t)
    #[arg(long)]
    utc: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Start each line with this label (`exit` if none is given)
    #[arg(long, value_name = "LABEL", num_args = 0..=1, default_missing_value = "exit")]
    label: Option<String>,
    /// Show failed exits only: a non-zero exit code or a fatal signal
    #[arg(short = 'x', long)]
    failed: bool,
    /// Show the exit of every thread, not only each process's end
    #[arg(short = 'T', long = "per-thread", alias = "threaded")]
    per_thread: bool,
    /// Show processes in this cgroup (v2 directory) only
    #[arg(short = 'c', long = "cgroup", value_name = "CGROUP_PATH")]
    cgroup: Option<PathBuf>,
    /// JSON output: one object per exit, with the age in nanoseconds
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| exitsnoop(args, signals))
}

fn exitsnoop(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let ((skel, _link), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, cgroup.as_ref(), mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(Style {
        json: args.json,
        timestamp: args.timestamp || args.utc,
        utc: args.utc,
        label: args.label.clone(),
    });
    printer.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let mut processes = Processes::default();
    let per_thread = args.per_thread;
    EventStream::new(&skel.maps.events, &bss.lost, "exits").print(&signals, &mut out, args.json, |out, data| {
        let exit = Exit::from_bytes(data);
        if per_thread || processes.first_report(&exit) {
            printer.write(out, &exit)?;
        }
        Ok(())
    })
}

/// Opens the BPF object, sets its filters, keeps the program of one attach mechanism, loads and attaches it.
fn load_and_attach(args: &Args, cgroup: Option<&std::fs::File>, mech: Attach) -> Result<(BpfSkel<'static>, Link)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.per_thread = args.per_thread;
    ro.failed_only = args.failed;
    ro.filter_cgroup = cgroup.is_some();
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }
    let link = attach_loaded_tracepoint(skel.object(), "sched", "sched_process_exit")?;
    Ok((skel, link))
}
