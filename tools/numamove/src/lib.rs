// SPDX-License-Identifier: Apache-2.0 OR MIT
//! numamove: NUMA-balancing page migrations and the time spent in them, every second (libbpf-tools' tool, CO-RE).
//!
//! The BPF side (`numamove.bpf.c`) counts each call of the kernel's misplaced-page migration function with the
//! time it took (fentry/fexit, else kprobes, as libbpf-tools), or, where kernel functions cannot be traced, each
//! migrate_pages() run made for NUMA balancing (the migrate tracepoints, tp_btf else raw_tp), in a per-CPU array.
//! This front end sums the CPUs every interval, takes the difference from the previous read (nothing is lost
//! between reads) and prints libbpf-tools' columns, JSON lines with the exact nanoseconds, or Prometheus counters.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working};
use common::attach::maps::{percpu_counters, CounterDeltas, DropCounter};
use common::cli::filter::open_filtered;
use common::cli::{parse_interval_secs, parse_positive_u64};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, IntervalClock, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::consts::S_MAXSTAT;
use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The misplaced-page migration function under the names kernels gave it, newest first.
const FUNCTIONS: [&str; 2] = ["migrate_misplaced_folio", "migrate_misplaced_page"];

/// Count the pages NUMA balancing moves to the node of the task that uses them, and the time spent moving them.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
// The shared pid filter (common::cli::filter), with what it means for this tool.
#[command(mut_arg("pid", |a| a.help("Only migrations made for this process (PID): NUMA balancing moves a page in the task that touched it")))]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per report, with the exact count and nanoseconds
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

/// The migration function as libbpf-tools traces it (fentry/fexit, else kprobes); the migrate tracepoints where
/// kernel functions cannot be traced.
pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| numamove(args, &host, signals))
}

/// How many NUMA nodes this machine can ever have (/sys/devices/system/node/possible; none without NUMA support).
fn possible_nodes() -> usize {
    std::fs::read_to_string("/sys/devices/system/node/possible")
        .ok()
        .and_then(|list| common::attach::perf::parse_cpu_list(&list).ok())
        .map_or(0, |nodes| nodes.len())
}

fn numamove(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    // With one node, NUMA balancing has nowhere to move a page: no migration can ever be counted.
    match possible_nodes() {
        0 => bail!("this kernel has no NUMA support (no /sys/devices/system/node/possible): no page can be migrated"),
        1 => bail!("this machine has one NUMA node (/sys/devices/system/node/possible): no page can be misplaced"),
        _ => {}
    }
    let endpoint = args.export.endpoint(host, args.interval.is_some())?;
    let btf = KernelBtf::load()?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &btf, mech))?;
    drop(btf);
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            report::metrics(s, &totals(&skel)?);
            s.map_full("starts", &bss.starts_full);
            Ok(())
        });
    }

    let mut out = Output::new();
    if !args.json {
        report::write_header(&mut out)?;
    }
    let mut full = DropCounter::new("migrations", "too many in progress at once");
    let mut deltas = CounterDeltas::<S_MAXSTAT>::default();
    let interval_s = args.interval.unwrap_or(1);
    let mut clock = IntervalClock::start(Duration::from_secs(interval_s));
    run_intervals(&signals, Some(Duration::from_secs(interval_s)), args.count, |_| {
        full.check(&bss.starts_full);
        let counts = deltas.next(totals(&skel)?);
        let length = clock.next_length();
        if args.json {
            report::write_json(&mut out, &counts, interval_s, length, mech)
        } else {
            report::write_row(&mut out, &counts)
        }
    })
}

/// Both counters so far, summed over the CPUs.
fn totals(skel: &BpfSkel<'static>) -> Result<[u64; S_MAXSTAT]> {
    percpu_counters(&skel.maps.stats)
}

/// Opens the BPF object, sets the PID filter, keeps the programs of one attach mechanism (for kernel functions,
/// aimed at the name this kernel has), loads and attaches them.
fn load_and_attach(args: &Args, btf: &KernelBtf, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let kernel_function = matches!(mech, Attach::Fentry | Attach::Kprobe);
    let function = if kernel_function {
        Some(btf.first_function(&FUNCTIONS, "NUMA misplaced-page migration")?)
    } else {
        for tp in ["mm_migrate_pages_start", "mm_migrate_pages"] {
            if !btf.has_tracepoint(tp) {
                bail!("the kernel has no migrate:{tp} tracepoint (it was added between 5.11 and 5.13)");
            }
        }
        None
    };
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    autoload_by_section(open.open_object_mut(), mech);
    if let (Attach::Fentry, Some(f)) = (mech, function) {
        open.progs.misplaced_fentry.set_attach_target(0, Some(f.to_string()))?;
        open.progs.misplaced_fexit.set_attach_target(0, Some(f.to_string()))?;
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let p = &skel.progs;
    // Ends before starts: a start seen always has its end seen too.
    let links = match (mech, function) {
        (Attach::Fentry, Some(f)) => vec![
            p.misplaced_fexit.attach().with_context(|| format!("attaching to {f} (fexit)"))?,
            p.misplaced_fentry.attach().with_context(|| format!("attaching to {f} (fentry)"))?,
        ],
        (_, Some(f)) => vec![
            p.misplaced_kretprobe.attach_kprobe(true, f).with_context(|| format!("kretprobe {f}"))?,
            p.misplaced_kprobe.attach_kprobe(false, f).with_context(|| format!("kprobe {f}"))?,
        ],
        _ => vec![
            attach_loaded_tracepoint(skel.object(), "migrate", "mm_migrate_pages")?,
            attach_loaded_tracepoint(skel.object(), "migrate", "mm_migrate_pages_start")?,
        ],
    };
    if args.verbose.on() {
        let what = function.map_or("migrate_pages() runs for NUMA balancing (migrate tracepoints)".to_string(), |f| {
            format!("calls of {f}")
        });
        eprintln!("{}: counting {what}", common::identity::invoked_name());
    }
    Ok((skel, links))
}
