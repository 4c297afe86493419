// SPDX-License-Identifier: Apache-2.0 OR MIT
//! runqlen: summarize scheduler run queue length as a histogram (BCC's tool, CO-RE).
//!
//! Samples each CPU's run queue length at 99 Hz from a perf event per CPU, in BPF, into linear histograms per
//! CPU kept in a kernel map; this front end prints them (summed, or per CPU with `-C`) or the run queue occupancy
//! (`-O`) every interval in BCC's layout or as JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, open_skeleton};
use common::attach::perf::{online_cpus, Rate, SamplingEvents};
use common::cli::IntervalCount;
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore, MapFlags};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::Report;

/// BCC's sampling rate: 99 Hz, off the beat of common timers.
const FREQUENCY: u64 = 99;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Run queue lengths sampled 99 times a second on every CPU, as a histogram.
#[derive(Debug, Parser)]
#[command(name = "runqlen", version, after_help = EXAMPLES)]
struct Args {
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Instead of the histogram, print the share of samples in which tasks were waiting (runqocc, a percentage)
    #[arg(short = 'O', long)]
    runqocc: bool,
    /// One histogram (or share) for each CPU
    #[arg(short = 'C', long)]
    cpus: bool,
    /// Print JSON lines: an object per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::PerfEvent]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| runqlen(args, &host, signals))
}

fn runqlen(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let cpus = online_cpus()?;
    let endpoint = args.export.endpoint(host, args.every.interval.is_some())?;
    let ((skel, _links), mech) = load_first_working(TOOL.attach, args.verbose.on(), |_| load_and_attach(&args, &cpus))?;

    let mut out = Output::new();
    let mut report = Report::new(args.cpus, args.runqocc);
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            report.metrics(s, read_hists(&skel, &cpus)?);
            Ok(())
        });
    }
    if !args.json {
        use std::io::Write;
        writeln!(out, "Sampling run queue length... Hit Ctrl-C to end.")?;
        out.flush()?;
    }
    run_intervals(&signals, args.every.interval(), args.every.count, |_| {
        let hists = read_hists(&skel, &cpus)?;
        if args.json {
            report.write_json(&mut out, hists)
        } else {
            report.write_text(&mut out, hists, args.timestamp)
        }
    })
}

/// Each sampled CPU's cumulative histogram.
fn read_hists(skel: &BpfSkel<'_>, cpus: &[u32]) -> Result<Vec<(u32, bpf::types::hist)>> {
    let mut hists = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        if let Some(bytes) = skel.maps.hists.lookup(&cpu.to_ne_bytes(), MapFlags::ANY)? {
            hists.push((cpu, common::attach::maps::from_bytes(&bytes)));
        }
    }
    Ok(hists)
}

/// Loads the BPF program and attaches it to a 99 Hz perf event on each online CPU.
fn load_and_attach(args: &Args, cpus: &[u32]) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let max_cpu = cpus.iter().copied().max().unwrap_or(0) as usize;
    open.maps.hists.set_max_entries((max_cpu + 1).min(bpf::consts::MAX_CPUS) as u32)?;
    let skel = open.load().context("loading the BPF program")?;

    let events = SamplingEvents::open(cpus, Rate::Frequency(FREQUENCY))?;
    if args.verbose.on() {
        eprintln!(
            "sampling {} at {FREQUENCY} Hz on CPUs {}",
            events.clock,
            common::attach::perf::format_cpu_list(cpus)
        );
    }
    let mut links = Vec::with_capacity(events.fds.len());
    for (cpu, fd) in events.fds {
        let link = skel
            .progs
            .do_sample
            .attach_perf_event(fd.as_raw_fd())
            .with_context(|| format!("attaching to the perf event of CPU {cpu}"))?;
        // The link owns the descriptor now and closes it on detach.
        let _ = fd.into_raw_fd();
        links.push(link);
    }
    Ok((skel, links))
}
