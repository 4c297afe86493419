// SPDX-License-Identifier: Apache-2.0 OR MIT
//! drsnoop: trace the memory reclaim tasks do themselves while they wait for memory (BCC's tool, CO-RE).
//!
//! The BPF side (`drsnoop.bpf.c`) times each system-wide direct reclaim and, unless `--global-only`, each reclaim a
//! task does in its memory cgroup at the cgroup's limit, and sends one record when it ends, filtered in the kernel
//! by PID, TID and UID; this front end filters by name, prints BCC's columns (`[TIME(s)] [UID] COMM PID LAT(ms)
//! PAGES [FREE(KB)]`) or JSON lines, and reports on stderr every reclaim the kernel side could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata, skip_tracepoint,
};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Printer, Reclaim, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Trace direct memory reclaim: each time a task frees memory itself before its allocation can go on, how long
/// it waited and how many pages it freed
#[derive(Debug, Parser)]
#[command(name = "drsnoop", version, after_help = EXAMPLES)]
// The shared tid filter (common::cli::filter), with what it means for this tool.
#[command(mut_arg("tid", |a| a.help("Trace this thread only (the column is then TID)")))]
struct Args {
    /// Start each line with the seconds since the first reclaim seen (TIME(s))
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Add a UID column
    #[arg(short = 'U', long = "print-uid")]
    print_uid: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    tid: common::cli::filter::TidArg,
    /// Trace this user only (a UID or a user name)
    #[arg(short = 'u', long, value_parser = common::cli::parse_uid)]
    uid: Option<u32>,
    /// Stop after this many seconds
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
    /// Show only processes whose name contains NAME
    #[arg(short = 'n', long, value_name = "NAME")]
    name: Option<String>,
    /// Add a FREE(KB) column: the system's free memory when the line is printed (BCC's -v)
    #[arg(short = 'e', long)]
    extended: bool,
    /// Only system-wide direct reclaim, as BCC and libbpf-tools (not a memory cgroup's reclaim at its limit)
    #[arg(short = 'G', long = "global-only")]
    global_only: bool,
    /// JSON output: one object per reclaim, with exact nanoseconds
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| drsnoop(args, signals))
}

fn drsnoop(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    args.tid.tid.map(common::cli::require_thread).transpose()?;
    if args.name.as_deref() == Some("") {
        bail!("the name given to -n is empty");
    }
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(Style {
        json: args.json,
        timestamp: args.timestamp,
        uid: args.print_uid,
        tid: args.tid.tid.is_some(),
        free: args.extended,
    });
    let deadline = args.duration.and_then(|d| Instant::now().checked_add(Duration::from_secs(d)));
    printer.write_header(&mut out, args.duration)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "reclaims").because("ring buffer or start map full").run(
        &signals,
        &mut out,
        args.json,
        || deadline.is_some_and(|d| Instant::now() >= d),
        |out, data| {
            let r = Reclaim::from_bytes(data);
            if args.name.as_deref().is_some_and(|n| !r.comm.text().contains(n)) {
                return Ok(());
            }
            Ok(printer.write(out, &r)?)
        },
    )
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter().tid(args.tid))?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.filter_uid = args.uid.is_some();
    ro.target_uid = args.uid.unwrap_or(0);
    autoload_by_section(open.open_object_mut(), mech);
    let mut hooks = vec!["mm_vmscan_direct_reclaim_end", "mm_vmscan_direct_reclaim_begin"];
    if args.global_only {
        skip_tracepoint(open.open_object_mut(), "mm_vmscan_memcg_reclaim_begin");
        skip_tracepoint(open.open_object_mut(), "mm_vmscan_memcg_reclaim_end");
    } else {
        hooks.extend(["mm_vmscan_memcg_reclaim_end", "mm_vmscan_memcg_reclaim_begin"]);
    }
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    // Ends before starts: a reclaim under way at attach time is not half-seen.
    let links = hooks
        .into_iter()
        .map(|tp| attach_loaded_tracepoint(skel.object(), "vmscan", tp))
        .collect::<Result<Vec<_>>>()?;
    Ok((skel, links))
}
