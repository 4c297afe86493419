// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biosnoop: trace block I/O, one line per request with the process that issued it (BCC's tool, CO-RE).
//!
//! The BPF side follows each block request from the moment it is first seen in the issuing task's context
//! (block_io_start, else block_rq_insert, else block_rq_issue) to its completion, with the disk and cgroup
//! filters applied there, and sends one record per completed request through a ring buffer. This front end
//! prints BCC's columns (`TIME(s) COMM PID DISK T SECTOR BYTES [P] [QUE(ms)] LAT(ms)`) or JSON lines, and reports
//! any request it could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata, skip_tracepoint,
};
use common::domain::blockdev::{Disks, RqFlagNames, RqOps};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Io, Printer, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per completed block I/O request: process, disk, sector, size and latency.
#[derive(Debug, Parser)]
#[command(name = "biosnoop", version, after_help = EXAMPLES)]
struct Args {
    /// Add the time a request waited in the I/O scheduler (column QUE) and count it in the latency
    #[arg(short = 'Q', long = "queue")]
    queue: bool,
    /// Only requests to this disk (a whole disk such as sda, not a partition)
    #[arg(short = 'd', long, value_name = "DISK")]
    disk: Option<String>,
    /// Add a column saying whether each request starts where the disk's previous one ended (S) or elsewhere (R)
    #[arg(short = 'P', long)]
    pattern: bool,
    /// Add a column with each request's flags (e.g. Sync-Write)
    #[arg(short = 'e', long = "extended_fields")]
    extended_fields: bool,
    /// Only I/O submitted by tasks of this cgroup (a cgroup directory)
    #[arg(short = 'c', long = "cgroup", value_name = "CGROUP_PATH")]
    cgroup: Option<PathBuf>,
    /// Hide requests that took less than this many milliseconds
    #[arg(short = 'm', long = "min", value_name = "MIN")]
    min: Option<u64>,
    /// Show the time of day (HH:MM:SS.mmm) in the first column instead of seconds since the start
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Print JSON lines: an object per request, times in nanoseconds
    #[arg(short = 'j', long)]
    json: bool,
    /// Stop after this many seconds
    #[arg(value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| biosnoop(args, signals))
}

fn biosnoop(args: Args, signals: Signals) -> Result<()> {
    let disks = Disks::scan();
    let target_dev = args.disk.as_deref().map(|d| disks.resolve(d)).transpose()?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let btf = KernelBtf::load()?;
    let verbose = args.verbose.on();
    let ((skel, _links), _mech) = load_first_working(TOOL.attach, verbose, |mech| {
        load_and_attach(&args, &btf, target_dev, cgroup.as_ref(), mech)
    })?;

    let mut out = Output::new();
    let mut printer = Printer::new(
        Style {
            json: args.json,
            queue: args.queue,
            pattern: args.pattern,
            extended: args.extended_fields,
            timestamp: args.timestamp,
        },
        disks,
        RqFlagNames::from_btf(&btf),
        RqOps::from_btf(&btf),
    );
    printer.write_header(&mut out)?;

    // A duration too large for the clock is as good as none (it is range-checked at parsing, too).
    let deadline = args.duration.and_then(|d| Instant::now().checked_add(Duration::from_secs(d)));
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "I/Os")
        .also_dropped(&bss.reqs_full, "I/Os", "too many in flight")
        .run(
        &signals,
        &mut out,
        args.json,
        || deadline.is_some_and(|d| Instant::now() >= d),
        |out, data| Ok(printer.write(out, &Io::from_bytes(data))?),
    )?;
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(
    args: &Args,
    btf: &KernelBtf,
    target_dev: Option<u32>,
    cgroup: Option<&std::fs::File>,
    mech: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.filter_cgroup = cgroup.is_some();
    rodata.filter_dev = target_dev.is_some();
    rodata.target_dev = target_dev.unwrap_or(0);
    rodata.min_ns = args.min.unwrap_or(0).saturating_mul(1_000_000);
    // Before 5.11 these tracepoints also passed the request_queue, as the first argument.
    rodata.insert_has_queue = btf.tracepoint_arity("block_rq_insert") == Some(2);
    rodata.issue_has_queue = btf.tracepoint_arity("block_rq_issue") == Some(2);
    // block_io_start (6.5+) sees every request in its submitter's context; block_rq_merge (5.x) forgets merged ones.
    let io_start = btf.has_tracepoint("block_io_start");
    let merge = btf.has_tracepoint("block_rq_merge");
    rodata.have_io_start = io_start;
    if args.verbose.on() && !io_start {
        let tool = common::identity::invoked_name();
        eprintln!("{tool}: no block_io_start tracepoint; the issuing process is taken at insert or issue");
    }

    RqOps::from_btf(btf).set_rodata(open.open_object_mut());
    autoload_by_section(open.open_object_mut(), mech);
    if !io_start {
        skip_tracepoint(open.open_object_mut(), "block_io_start");
    }
    if !merge {
        skip_tracepoint(open.open_object_mut(), "block_rq_merge");
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    // Filters are in place before the first program is attached, so no I/O from outside the cgroup is traced.
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }

    // The order closes the attach window. With block_io_start, it goes first: a request that starts once it is
    // attached is seen there (an entry left by a completion missed meanwhile is overwritten when its request is
    // reused). Without it, block_rq_complete goes first, so that every request followed is seen to complete.
    let mut wanted = Vec::new();
    wanted.push(if io_start { "block_io_start" } else { "block_rq_complete" });
    if merge {
        wanted.push("block_rq_merge");
    }
    wanted.extend(["block_rq_insert", "block_rq_issue"]);
    if io_start {
        wanted.push("block_rq_complete");
    }
    let links = wanted
        .into_iter()
        .map(|name| attach_loaded_tracepoint(skel.object(), "block", name))
        .collect::<Result<Vec<_>>>()?;
    Ok((skel, links))
}
