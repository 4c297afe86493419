// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biostacks: block I/O latency as a log2 histogram for each process, disk and kernel stack that started the I/O
//! (libbpf-tools' biostacks, CO-RE, on the block tracepoints).
//!
//! The BPF side (`biostacks.bpf.c`) notes each request where its submitter is current, with the stack id of the
//! kernel stack there, and at the request's completion adds its latency to the histogram of that (process, disk,
//! stack). This side resolves `-d` before loading, waits for the duration or a stop signal, then reads the
//! histograms once, names the frames through the shared symbolizer (`common::process::symbols`), drops the
//! tracing machinery's own frames (`common::stacks::tracing_frames`), adds up keys whose stacks print the same,
//! and prints them in libbpf-tools' layout or as JSON lines. With `--heatmap FILE.svg` it also reads the
//! histograms' slots every second, all of them added up, as the columns of a heat map.

mod bpf;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata, skip_tracepoint,
};
use common::attach::maps::{hash_entries, DropCounter};
use common::domain::blockdev::Disks;
use common::host::Host;
use common::output::heatmap::{sum_slots, HeatmapFile};
use common::output::hist::{log2_buckets, write_log2_hist, Bucket};
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, Output};
use common::process::symbols::{Batch, Symbolizer};
use common::run::{self, Signals};
use common::stacks::tracing_frames::is_tracing_frame;
use common::stacks::{Collected, Stack, StackTraces};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;
use serde::Serialize;

use bpf::types::{hist, stack_key};
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: plain C structs of integers and chars, generated from biostacks.h.
unsafe impl plain::Plain for hist {}
unsafe impl plain::Plain for stack_key {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Block I/O latency as a histogram for each process, disk and kernel stack that started the I/O.
#[derive(Debug, Parser)]
#[command(name = "biostacks", version, after_help = EXAMPLES)]
struct Args {
    /// Only requests to this disk (a whole disk such as sda, not a partition)
    #[arg(short = 'd', long, value_name = "DISK")]
    disk: Option<String>,
    /// Histograms in milliseconds (by default, microseconds)
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// Print JSON lines: an object per process, disk and stack
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    metrics: common::cli::ExportArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds to trace (by default, until Ctrl-C)
    #[arg(value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
}

/// The block tracepoints with their BTF types, else as raw tracepoints.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    args.milliseconds = args.metrics.display(args.milliseconds);
    host.bpf_main(args.verbose, |signals| biostacks(args, &host, signals))
}

/// One histogram as printed: a process, its disk, the named kernel stack (innermost first) and the latencies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Section {
    comm: Name,
    pid: u32,
    disk: String,
    stack: Vec<String>,
}

#[derive(Serialize)]
struct JsonSection<'a> {
    time: &'a str,
    comm: &'a Name,
    pid: u32,
    disk: &'a str,
    stack: &'a [String],
    unit: &'a str,
    buckets: Vec<Bucket>,
    count: u64,
    sum_ns: u64,
}

#[derive(Default)]
struct Totals {
    slots: Vec<u64>,
    count: u64,
    sum_ns: u64,
}

fn biostacks(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let disks = Disks::scan();
    let target_dev = args.disk.as_deref().map(|d| disks.resolve(d)).transpose()?;
    let btf = KernelBtf::load()?;
    // Where the submitter is current: block_io_start (6.5+) sees every request there; before it, block_rq_insert
    // sees those that go through a scheduler or a plug (block_rq_issue notes the rest).
    let noted_at = if btf.has_tracepoint("block_io_start") { "block_io_start" } else { "block_rq_insert" };
    let endpoint = args.metrics.endpoint(host, args.duration.is_some())?;
    let ((skel, _links), mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.filter_dev = target_dev.is_some();
        rodata.target_dev = target_dev.unwrap_or(0);
        rodata.in_ms = args.milliseconds;
        // Before 5.11 block_rq_insert and block_rq_issue also passed the request_queue, as their first argument.
        rodata.insert_has_queue = btf.tracepoint_arity("block_rq_insert") == Some(2);
        rodata.issue_has_queue = btf.tracepoint_arity("block_rq_issue") == Some(2);
        autoload_by_section(open.open_object_mut(), mech);
        for unused in ["block_io_start", "block_rq_insert"].into_iter().filter(|&t| t != noted_at) {
            skip_tracepoint(open.open_object_mut(), unused);
        }
        let skel: BpfSkel<'static> = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
        // The note first, then the issue, then the completion: a request attached halfway is simply not counted.
        let links: Vec<Link> = [noted_at, "block_rq_issue", "block_rq_complete"]
            .into_iter()
            .map(|name| attach_loaded_tracepoint(skel.object(), "block", name))
            .collect::<Result<_>>()?;
        Ok((skel, links))
    })?;

    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            let (sections, lost) = read_sections(&skel, &disks, args.verbose.on())?;
            metrics(s, &sections);
            let bss = skel.maps.bss_data.as_ref().context("the BPF object has no .bss")?;
            s.map_full("hists", &bss.hists_full);
            s.lost_events_total("kernel stacks", lost);
            Ok(())
        });
    }

    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Tracing block I/O with init stacks. Hit Ctrl-C to end.")?;
        out.flush()?;
    }
    let unit = if args.milliseconds { "msecs" } else { "usecs" };
    let mut heat = HeatmapFile::open(args.metrics.heatmap.as_deref(), "Block I/O latency (biostacks)", unit)?;
    // One report at the end; with a heat map, a column every second until then.
    let (every, ticks) = match heat {
        Some(_) => (Some(Duration::from_secs(1)), args.duration),
        None => (args.duration.map(Duration::from_secs), Some(1)),
    };
    run::run_intervals(&signals, every, ticks, |tick| {
        if let Some(heat) = heat.as_mut() {
            let entries: Vec<(stack_key, hist)> = hash_entries(&skel.maps.hists)?;
            heat.push(&sum_slots(entries.iter().map(|(_, h)| &h.slots[..])));
        }
        if tick != run::Tick::Last {
            return Ok(());
        }
        let mut full = DropCounter::new("requests", "too many process, disk and stack keys");
        if let Some(bss) = skel.maps.bss_data.as_ref() {
            full.check(&bss.hists_full);
        }
        let (sections, lost) = read_sections(&skel, &disks, args.verbose.on())?;
        if lost > 0 {
            eprintln!("WARNING: {lost} stack traces could not be displayed (the stack map was full).");
        }
        if args.json {
            let timestamp = clock_rfc3339();
            for (s, t) in &sections {
                out.json_line(&JsonSection {
                    time: &timestamp,
                    comm: &s.comm,
                    pid: s.pid,
                    disk: &s.disk,
                    stack: &s.stack,
                    unit,
                    buckets: log2_buckets(&t.slots),
                    count: t.count,
                    sum_ns: t.sum_ns,
                })?;
            }
            return Ok(());
        }
        for (s, t) in &sections {
            writeln!(out, "{:<14.14} {:<6} {:<7}", s.comm, s.pid, s.disk)?;
            for frame in &s.stack {
                writeln!(out, "{frame}")?;
            }
            write_log2_hist(&mut out, &t.slots, unit)?;
            writeln!(out)?;
        }
        out.flush()?;
        Ok(())
    })?;
    heat.as_ref().map_or(Ok(()), HeatmapFile::finish)
}

/// `--prometheus`: each (process name, disk, stack)'s cumulative histogram as
/// `corebpf_biostacks_io_latency_seconds`, its stack folded outermost first (`a;b;c`, as BCC's folded output);
/// the PID is left out, so the processes of one name add up and series outlive them.
fn metrics(s: &mut common::output::metrics::Snapshot, sections: &BTreeMap<Section, Totals>) {
    use common::output::metrics::HistogramValue;
    const NAME: &str = "io_latency";
    const HELP: &str = "Block I/O latency, per process name, disk and the kernel stack that started the I/O";
    const LABELS: &[&str] = &["comm", "device", "stack"];
    s.declare_histogram_seconds(NAME, HELP, LABELS);
    for (section, t) in sections {
        let folded = section.stack.iter().rev().map(String::as_str).collect::<Vec<_>>().join(";");
        let value = HistogramValue::from_log2_slots(&t.slots, t.sum_ns, 1000);
        s.histogram_seconds(
            NAME,
            HELP,
            LABELS,
            vec![section.comm.text().into_owned(), section.disk.clone(), folded],
            value,
        );
    }
}

/// Reads every histogram, names its stack and adds up those that print the same; also says how many stacks
/// were lost (the stack map was full).
fn read_sections(skel: &BpfSkel<'_>, disks: &Disks, verbose: bool) -> Result<(BTreeMap<Section, Totals>, u64)> {
    let entries: Vec<(stack_key, hist)> = hash_entries(&skel.maps.hists)?;
    let mut traces = StackTraces::new(&skel.maps.stacks, Collected { user: false, kernel: true });
    let stacks: Vec<Stack<u64>> =
        entries.iter().map(|(k, _)| traces.task(k.pid, k.pid, Name::default(), -1, k.kern_stack_id).kernel).collect();
    let mut batch = Batch::new();
    for stack in &stacks {
        if let Stack::Frames(addrs) = stack {
            batch.add_kernel(addrs.iter().enumerate().map(|(i, &a)| common::stacks::symbolize::lookup_addr(i, a)));
        }
    }
    let resolved = batch.resolve(&Symbolizer::new());
    if verbose {
        resolved.report_unresolved();
    }
    let mut lost = 0u64;
    let mut sections: BTreeMap<Section, Totals> = BTreeMap::new();
    for ((key, h), stack) in entries.iter().zip(&stacks) {
        let names: Vec<String> = match stack {
            Stack::Frames(addrs) => addrs
                .iter()
                .enumerate()
                .map(|(i, &a)| resolved.kernel_name(common::stacks::symbolize::lookup_addr(i, a)).to_string())
                .skip_while(|name| is_tracing_frame(name))
                .collect(),
            Stack::Lost(_) => {
                lost += 1;
                vec!["[Missing Kernel Stack]".to_string()]
            }
            _ => vec!["[Missing Kernel Stack]".to_string()],
        };
        let disk = match disks.name(key.dev) {
            "?" => "Unknown".to_string(),
            name => name.to_string(),
        };
        let section = Section { comm: Name::from_c(&key.comm), pid: key.pid, disk, stack: names };
        let totals = sections.entry(section).or_default();
        if totals.slots.is_empty() {
            totals.slots = vec![0; h.slots.len()];
        }
        for (sum, n) in totals.slots.iter_mut().zip(h.slots.iter()) {
            *sum += n;
        }
        totals.count += h.count;
        totals.sum_ns += h.sum_ns;
    }
    Ok((sections, lost))
}
