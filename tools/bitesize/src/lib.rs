// SPDX-License-Identifier: Apache-2.0 OR MIT
//! bitesize: summarize block device I/O size as a histogram per process name (BCC's tool, CO-RE, with
//! libbpf-tools' flags).
//!
//! The BPF side counts each request issued to a block device into a log2 histogram of its size in KiB, keyed by
//! the name of the task that submitted it (BCC names whichever task issued it to the device); this side resolves the `-d` disk and the `-c` name into filters before
//! anything is attached, and hands the cumulative histograms to the shared report of histograms per name
//! (`common::output::namedhist`), which prints them every interval in BCC's layout (`Process Name = dd`) or as
//! JSON lines.

mod bpf;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata, skip_tracepoint,
};
use common::attach::maps::{c_string, hash_entries, DropCounter};
use common::cli::IntervalCount;
use common::domain::blockdev::{Disks, RqOps, SubmitterNotes};
use common::domain::container_names::ContainerLabelArgs;
use common::host::Host;
use common::output::hist::Log2Hist;
use common::output::namedhist::{self, Layout};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::{hist, name_key};
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: plain C structs of integers and chars, generated from bitesize.h.
unsafe impl plain::Plain for hist {}
unsafe impl plain::Plain for name_key {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

const LAYOUT: Layout = Layout { what: "block I/O", header: "Process Name", field: "comm", unit: "Kbytes" };

/// Block I/O request sizes as a log2 histogram for each process name.
#[derive(Debug, Parser)]
#[command(name = "bitesize", version, after_help = EXAMPLES)]
struct Args {
    /// Only requests issued by tasks with this command name
    #[arg(short = 'c', long, value_name = "COMM", value_parser = comm_filter)]
    comm: Option<[i8; bpf::consts::NAME_LEN]>,
    /// Only requests to this disk (a whole disk such as sda, not a partition)
    #[arg(short = 'd', long, value_name = "DISK")]
    disk: Option<String>,
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Print JSON lines: an object per process name per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    containers: ContainerLabelArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

/// The block tracepoints with their BTF types, else as raw tracepoints.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| bitesize(args, &host, signals))
}

/// The `-c` name as the kernel keeps it: at most 15 bytes and a NUL.
fn comm_filter(comm: &str) -> Result<[i8; bpf::consts::NAME_LEN], String> {
    let bytes = comm.as_bytes();
    if bytes.is_empty() {
        return Err("a process name is at least one byte".into());
    }
    let mut name = [0i8; bpf::consts::NAME_LEN];
    // The kernel truncates names to 15 bytes, so a longer -c matches the truncated name (as libbpf-tools does).
    for (dst, &src) in name.iter_mut().zip(bytes.iter().take(bpf::consts::NAME_LEN - 1)) {
        *dst = src as i8;
    }
    Ok(name)
}

fn bitesize(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let target_dev = args.disk.as_deref().map(|d| Disks::scan().resolve(d)).transpose()?;
    let target_comm = args.comm;
    let btf = KernelBtf::load()?;
    // Where the submitter is current: block_io_start (6.5+) sees every request there; before it, block_rq_insert
    // sees those that go through a scheduler or a plug (the rest are issued by their submitter).
    let notes = SubmitterNotes::new(&btf);
    let endpoint = args.export.endpoint(host, args.every.interval.is_some())?;
    let containers = args.containers.open_by_cgroup(endpoint.is_some());
    let ((skel, _links), mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.filter_dev = target_dev.is_some();
        rodata.target_dev = target_dev.unwrap_or(0);
        rodata.filter_comm = target_comm.is_some();
        rodata.target_comm = target_comm.unwrap_or_default();
        rodata.block_issuer_cgroup = containers.is_some();
        // Before 5.11 block_rq_insert and block_rq_issue also passed the request_queue, as their first argument.
        rodata.insert_has_queue = btf.tracepoint_arity("block_rq_insert") == Some(2);
        rodata.issue_has_queue = btf.tracepoint_arity("block_rq_issue") == Some(2);
        // Only reads and writes are counted: the operations' numbers, from BTF.
        RqOps::from_btf(&btf).set_rodata(open.open_object_mut());
        autoload_by_section(open.open_object_mut(), mech);
        // Notes taken at block_io_start are written over in place when a request struct is used again; those of
        // block_rq_insert are forgotten at completion, bitesize's only use of block_rq_complete.
        notes.prepare(open.open_object_mut())?;
        let at_completion = notes.forgotten_at_completion();
        if !at_completion {
            skip_tracepoint(open.open_object_mut(), "block_rq_complete");
        }
        let skel: BpfSkel<'static> = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
        // The note first, so that no request attached between the two is counted without its submitter.
        let links: Vec<Link> = [notes.at, "block_rq_issue", "block_rq_complete"]
            .into_iter()
            .filter(|&name| at_completion || name != "block_rq_complete")
            .map(|name| attach_loaded_tracepoint(skel.object(), "block", name))
            .collect::<Result<_>>()?;
        Ok((skel, links))
    })?;

    // Each histogram with its name and cgroup (0 without --container-label); sums in bytes (the BPF side keeps
    // them in the shared struct's sum_ns).
    let read = || -> Result<Vec<(String, u64, Log2Hist)>> {
        let entries: Vec<(name_key, hist)> = hash_entries(&skel.maps.hists)?;
        Ok(entries
            .into_iter()
            .map(|(k, h)| {
                let hist = Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns };
                (c_string(&k.comm), k.cgroup_id, hist)
            })
            .collect())
    };
    let full = skel.maps.bss_data.as_ref().map(|bss| &bss.hists_full);
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let name = ("io_size", "Block I/O request sizes, by the name of the process that submitted them");
        return namedhist::serve(endpoint, &signals, &LAYOUT, name, 1024, full, containers, read);
    }
    let mut hists_full = DropCounter::new("requests", "too many process names");
    namedhist::run(&signals, &args.every, &LAYOUT, args.json, args.timestamp, || {
        if let Some(full) = full {
            hists_full.check(full);
        }
        Ok(read()?.into_iter().map(|(name, _, hist)| (name, hist)).collect())
    })
}
