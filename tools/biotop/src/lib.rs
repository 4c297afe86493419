// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biotop: block device I/O by process, refreshed every interval like top (BCC's tool, CO-RE, with libbpf-tools'
//! -s and -r).
//!
//! The BPF side adds every completed block request to a cumulative row keyed by the process that submitted it,
//! the direction and the disk (requests, bytes, time from issue to completion); this front end reads the rows
//! every interval, takes the difference from the previous read, forgets the rows of processes that are gone, and
//! prints BCC's screen (a loadavg line and `PID COMM D MAJ MIN DISK I/O Kbytes AVGms`, sorted) or JSON lines;
//! or, with `--prometheus`, serves the rows as counters per process name, disk and direction ([`metrics`]).

mod bpf;
mod metrics;
mod report;

use std::collections::HashMap;
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata};
use common::attach::maps::{from_bytes, DropCounter};
use common::cli::filter::open_filtered;
use common::cli::{parse_interval_secs, parse_positive_u64};
use common::domain::blockdev::{Disks, RqOps, SubmitterNotes};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{self, run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore, MapFlags};

use bpf::types::{io_key, io_stat};
use bpf::{BpfSkel, BpfSkelBuilder};
use common::output::topscreen::Screen;
use report::Row;

// SAFETY: plain C structs of integers and chars, generated from biotop.h.
unsafe impl plain::Plain for io_key {}
unsafe impl plain::Plain for io_stat {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// What the rows are sorted by (largest first): requests plus bytes plus microseconds (libbpf-tools' default),
/// requests, bytes (BCC's only order) or the time from issue to completion, summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Sort {
    All,
    Io,
    Bytes,
    Time,
}

/// Block I/O by process, refreshed like top: requests, Kbytes and average time per process and disk.
#[derive(Debug, Parser)]
#[command(name = "biotop", version, after_help = EXAMPLES)]
struct Args {
    /// Print each report below the previous one instead of clearing the screen
    #[arg(short = 'C', long)]
    noclear: bool,
    /// Print at most this many rows per report
    #[arg(short = 'r', long, alias = "rows", value_name = "ROWS", default_value = "20", value_parser = parse_positive_u64)]
    maxrows: u64,
    /// Order rows by bytes, by requests (io), by summed time, or by all three added up (all)
    #[arg(short = 's', long, value_enum, default_value = "bytes")]
    sort: Sort,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per row per report, bytes and time exact
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds between reports (1 if not given)
    #[arg(value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many reports
    #[arg(value_parser = parse_positive_u64)]
    count: Option<u64>,
}

/// The block tracepoints with their BTF types, else as raw tracepoints.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| biotop(args, &host, signals))
}

fn biotop(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let btf = KernelBtf::load()?;
    // Where the submitter is current: block_io_start (6.5+) sees every request there; before it, block_rq_insert
    // sees those that go through a scheduler or a plug (the rest are issued by their submitter).
    let notes = SubmitterNotes::new(&btf);
    let ops = RqOps::from_btf(&btf);
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.count.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &btf, notes, mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let mut totals = metrics::Totals::new(ops.clone());
        return endpoint.serve(&signals, |s| {
            let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
            s.map_full("starts", &bss.starts_full);
            s.map_full("rows", &bss.rows_full);
            totals.write(s, &skel.maps.rows)
        });
    }
    let interval = args.interval.unwrap_or(1);

    let mut out = Output::new();
    if !args.json {
        use std::io::Write;
        writeln!(out, "Tracing... Output every {interval} secs. Hit Ctrl-C to end")?;
        out.flush()?;
    }
    let screen = Screen::from_flags(args.noclear, args.sort, args.maxrows);
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let mut full = DropCounter::new("requests", "too many requests in flight or rows (processes and disks)");
    let mut before: HashMap<Vec<u8>, io_stat> = HashMap::new();
    let mut disks = Disks::scan();
    run_intervals(&signals, Some(Duration::from_secs(interval)), args.count, |tick| {
        // The raw keys too: a row is deleted by its bytes.
        let mut now = Vec::new();
        for id in skel.maps.rows.keys() {
            if let Some(value) = skel.maps.rows.lookup(&id, MapFlags::ANY).context("reading the rows map")? {
                now.push((from_bytes::<io_key>(&id), from_bytes::<io_stat>(&value), id));
            }
        }
        if now.iter().any(|(k, _, _)| disks.name(report::dev(k)) == "?") {
            disks = Disks::scan(); // a disk added since the last scan
        }
        let mut rows = Vec::new();
        for (key, stat, id) in now {
            let earlier = before.insert(id.clone(), stat).unwrap_or_default();
            if stat.io > earlier.io {
                rows.push(Row::new(&key, &stat, &earlier, &disks, &ops));
            } else if !std::path::Path::new(&format!("/proc/{}", key.pid)).exists() {
                // Unchanged over an interval and its process gone: forget the row, so that a long run keeps to
                // the processes that live.
                let _ = skel.maps.rows.delete(&id);
                before.remove(&id);
            }
        }
        if args.json {
            report::write_json(&mut out, &rows)?;
        } else {
            screen.write(&mut out, rows)?;
            if tick == run::Tick::Last {
                use std::io::Write;
                writeln!(out, "Detaching...")?;
                out.flush()?;
            }
        }
        full.check_all([&bss.starts_full, &bss.rows_full]);
        Ok(())
    })
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(
    args: &Args,
    btf: &KernelBtf,
    notes: SubmitterNotes,
    mech: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    // Before 5.11 block_rq_insert and block_rq_issue also passed the request_queue, as their first argument.
    rodata.insert_has_queue = btf.tracepoint_arity("block_rq_insert") == Some(2);
    rodata.issue_has_queue = btf.tracepoint_arity("block_rq_issue") == Some(2);
    RqOps::from_btf(btf).set_rodata(open.open_object_mut());
    autoload_by_section(open.open_object_mut(), mech);
    notes.prepare(open.open_object_mut())?;
    let skel: BpfSkel<'static> = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    // The note first, so that no request issued between the two is counted without its submitter.
    let links = [notes.at, "block_rq_issue", "block_rq_complete"]
        .into_iter()
        .map(|name| attach_loaded_tracepoint(skel.object(), "block", name))
        .collect::<Result<_>>()?;
    Ok((skel, links))
}
