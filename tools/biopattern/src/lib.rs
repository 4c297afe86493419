// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biopattern: the share of random and sequential block I/O on each disk (libbpf-tools' tool, CO-RE).
//!
//! The BPF side counts each completed request of a disk as sequential when it starts where the disk's previous
//! completion ended, else random, with its bytes, in a cumulative map keyed by disk; this side resolves `-d` into a
//! filter before anything is attached, reads the map every interval and prints the difference from the previous
//! read in libbpf-tools' columns (`DISK %RND %SEQ COUNT KBYTES`, `TIME` first with -T), or as JSON lines.

mod bpf;
mod report;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata,
};
use common::attach::maps::{hash_entries, DropCounter};
use common::cli::IntervalCount;
use common::domain::blockdev::{Disks, RqOps};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};

use bpf::types::disk_pattern;
use bpf::BpfSkelBuilder;
use report::Counts;

// SAFETY: a plain C struct of integers, generated from biopattern.h.
unsafe impl plain::Plain for disk_pattern {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Random and sequential block I/O per disk: the share of each, the count and the Kbytes.
#[derive(Debug, Parser)]
#[command(name = "biopattern", version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the time of day (HH:MM:SS)
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Only requests to this disk (a whole disk such as sda, not a partition)
    #[arg(short = 'd', long, value_name = "DISK")]
    disk: Option<String>,
    /// Print JSON lines: an object per disk per report, with exact bytes
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    metrics: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

/// block_rq_complete with its BTF types, else as a raw tracepoint.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| biopattern(args, &host, signals))
}

fn biopattern(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let mut disks = Disks::scan();
    let target_dev = args.disk.as_deref().map(|d| disks.resolve(d)).transpose()?;
    // Only reads and writes are counted: the operations' numbers, from BTF.
    let ops = RqOps::from_btf(&KernelBtf::load()?);
    let endpoint = args.metrics.endpoint(host, args.every.interval.is_some())?;
    let ((skel, _link), mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.filter_dev = target_dev.is_some();
        rodata.target_dev = target_dev.unwrap_or(0);
        ops.set_rodata(open.open_object_mut());
        autoload_by_section(open.open_object_mut(), mech);
        let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
        let link = attach_loaded_tracepoint(skel.object(), "block", "block_rq_complete")?;
        Ok((skel, link))
    })?;

    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            let now: Vec<(u32, disk_pattern)> = hash_entries(&skel.maps.patterns)?;
            if now.iter().any(|(dev, _)| disks.name(*dev) == "?") {
                disks = Disks::scan();
            }
            metrics(s, &disks, &now);
            s.map_full("patterns", &bss.disks_full);
            Ok(())
        });
    }
    let mut out = Output::new();
    if !args.json {
        report::write_header(&mut out, args.timestamp)?;
    }
    let mut full = DropCounter::new("completions", "too many disks");
    let mut before: BTreeMap<u32, Counts> = BTreeMap::new();
    run_intervals(&signals, args.every.interval(), args.every.count, |_| {
        let mut rows = Vec::new();
        // Disks by device number (the kernel map's order is a hash's).
        let now: BTreeMap<u32, disk_pattern> = hash_entries(&skel.maps.patterns)?.into_iter().collect();
        if now.keys().any(|&dev| disks.name(dev) == "?") {
            disks = Disks::scan(); // a disk added since the last scan
        }
        for (dev, p) in now {
            let counts = Counts { random: p.random, sequential: p.sequential, bytes: p.bytes };
            let delta = counts.since(before.insert(dev, counts).unwrap_or_default());
            if delta.total() > 0 {
                rows.push((dev, delta));
            }
        }
        report::write_rows(&mut out, &disks, &rows, args.timestamp, args.json)?;
        full.check(&bss.disks_full);
        Ok(())
    })
}

/// `--prometheus`: each disk's cumulative completions as `corebpf_biopattern_requests_total{device,pattern}`
/// (`pattern` random or sequential; `rate()` of each over their sum is libbpf-tools' %RND and %SEQ) and their
/// bytes as `corebpf_biopattern_bytes_total{device}`.
fn metrics(s: &mut common::output::metrics::Snapshot, disks: &Disks, now: &[(u32, disk_pattern)]) {
    const REQUESTS: &str = "Completed block I/O requests, by whether each began where the disk's previous one ended";
    const BYTES: &str = "Bytes of the completed block I/O requests";
    s.declare_counter("requests", REQUESTS, &["device", "pattern"]);
    s.declare_counter("bytes", BYTES, &["device"]);
    for (dev, p) in now {
        let device = disks.name(*dev).to_string();
        for (pattern, n) in [("random", p.random), ("sequential", p.sequential)] {
            s.counter("requests", REQUESTS, &["device", "pattern"], vec![device.clone(), pattern.into()], n);
        }
        s.counter("bytes", BYTES, &["device"], vec![device], p.bytes);
    }
}
