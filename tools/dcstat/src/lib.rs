// SPDX-License-Identifier: Apache-2.0 OR MIT
//! dcstat: directory entry cache (dcache) statistics every interval (BCC's tool, CO-RE).
//!
//! The BPF side (`dcstat.bpf.c`) counts dcache lookups, slow-path lookups and misses in a per-CPU array, with
//! fentry/fexit on lookup_fast, d_lookup and d_alloc_parallel, else kprobes and kretprobes; no tracepoint fires
//! there, so on a kernel with neither the tool says so in one line. This side sums the CPUs every interval,
//! differences the cumulative counts and prints BCC's per-second rows and hit ratio, JSON lines with the exact
//! counts, or the counts as Prometheus counters.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{autoload_by_section, load_first_working};
use common::attach::maps::{percpu_counters, CounterDeltas};
use common::cli::filter::open_filtered;
use common::cli::{parse_interval_secs, parse_positive_u64};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, IntervalClock, Signals};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;

use bpf::consts::S_MAXSTAT;
use bpf::{BpfSkel, BpfSkelBuilder};

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Directory entry cache lookups, slow lookups and misses per second, with the hit ratio.
#[derive(Debug, Parser)]
#[command(name = "dcstat", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per report, with the exact counts and the rates
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
    #[arg(value_parser = parse_positive_u64, requires = "interval")]
    count: Option<u64>,
}

/// What the multicall binary knows of the tool: its entry and its attach ladder.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| dcstat(args, &host, signals))
}

fn dcstat(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let endpoint = args.export.endpoint(host, args.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))
            .context("needs fentry or kprobes on lookup_fast, d_lookup and d_alloc_parallel")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, libbpf_rs::skel::Skel::object(&skel));
        return endpoint.serve(&signals, |s| {
            report::metrics(s, &totals(&skel)?);
            Ok(())
        });
    }

    let mut out = Output::new();
    if !args.json {
        report::write_header(&mut out)?;
    }
    let mut deltas = CounterDeltas::<S_MAXSTAT>::default();
    let interval_s = args.interval.unwrap_or(1);
    let mut clock = IntervalClock::start(Duration::from_secs(interval_s));
    run_intervals(&signals, Some(Duration::from_secs(interval_s)), args.count, |_| {
        let counts = deltas.next(totals(&skel)?);
        let length = clock.next_length();
        if args.json {
            report::write_json(&mut out, &counts, interval_s, length)
        } else {
            report::write_row(&mut out, &counts, length)
        }
    })
}

/// Every counter so far, summed over the CPUs.
fn totals(skel: &BpfSkel<'static>) -> Result<[u64; S_MAXSTAT]> {
    percpu_counters(&skel.maps.stats)
}

/// Opens the BPF object, sets the PID filter, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    if mech == Attach::Kprobe && !common::probe::attach::kprobes_available() {
        bail!("no kprobes (CONFIG_KPROBES is not set)");
    }
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    autoload_by_section(open.open_object_mut(), mech);
    let skel = match open.load() {
        Ok(skel) => skel,
        Err(err) if mech == Attach::Fentry => bail!("refused by the kernel: {err}"),
        Err(err) => return Err(err).with_context(|| format!("loading the BPF program ({mech})")),
    };
    let p = &skel.progs;
    let links = match mech {
        Attach::Fentry => [
            (&p.lookup_fast_fentry, "lookup_fast"),
            (&p.d_lookup_fexit, "d_lookup"),
            (&p.d_alloc_parallel_fexit, "d_alloc_parallel"),
        ]
        .into_iter()
        .map(|(prog, func)| prog.attach().map_err(|e| anyhow!("the kernel cannot attach fentry to {func} ({e})")))
        .collect::<Result<Vec<_>>>()?,
        _ => [
            (&p.lookup_fast_kprobe, false, "lookup_fast"),
            (&p.d_lookup_kprobe, false, "d_lookup"),
            (&p.d_lookup_kretprobe, true, "d_lookup"),
            (&p.d_alloc_parallel_kprobe, false, "d_alloc_parallel"),
            (&p.d_alloc_parallel_kretprobe, true, "d_alloc_parallel"),
        ]
        .into_iter()
        .map(|(prog, ret, func)| prog.attach_kprobe(ret, func).with_context(|| format!("kprobe {func}")))
        .collect::<Result<Vec<_>>>()?,
    };
    Ok((skel, links))
}
