//! softirqs: summarize soft IRQ event time (BCC's tool, CO-RE).
//!
//! Times each soft IRQ from `softirq_entry` to `softirq_exit` in BPF and keeps, per vector, a count, a total and
//! a log2 histogram in a kernel map; this front end prints totals (default), counts (`-C`) or histograms (`-d`)
//! every interval in BCC's layout or as JSON lines. Vector names come from the kernel's BTF (the `*_SOFTIRQ`
//! enumerators), never from a table kept here.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{attach_tracepoint, load_first_working, open_skeleton, rodata};
use common::cli::IntervalCount;
use common::output::stdout::Output;
use common::run::{self, run_intervals, Signals};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{Link, MapCore, MapFlags};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Mode, Report};

const EXAMPLES: &str = "\
examples:
    softirqs            # sum soft irq event time
    softirqs -C         # show the number of soft irq events
    softirqs -d         # show soft irq event time as histograms
    softirqs 1 10       # print 1 second summaries, 10 times
    softirqs -NT 1      # 1s summaries, nanoseconds, and timestamps
    softirqs -c 1       # sum soft irq event time on CPU 1 only
    softirqs -j 1       # print a JSON line every second";

/// Summarize soft irq event time as histograms.
#[derive(Debug, Parser)]
#[command(name = "softirqs", version, after_help = EXAMPLES)]
struct Args {
    /// Include timestamp on output
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Output in nanoseconds
    #[arg(short = 'N', long)]
    nanoseconds: bool,
    /// Show the number of soft irq events
    #[arg(short = 'C', long, conflicts_with_all = ["dist", "nanoseconds"])]
    events: bool,
    /// Show distributions as histograms
    #[arg(short = 'd', long)]
    dist: bool,
    /// Trace this CPU only
    #[arg(short = 'c', long, value_name = "CPU")]
    cpu: Option<u32>,
    /// JSON output: one object per interval
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>) -> ExitCode {
    let args: Args = common::cli::parse(argv);
    run::bpf_main(args.verbose, || softirqs(args))
}

fn softirqs(args: Args) -> Result<()> {
    if let Some(cpu) = args.cpu {
        common::attach::perf::sampling_cpus(Some(cpu))?;
    }
    let names = report::vector_names()?;
    let signals = Signals::install()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mode = if args.events {
        Mode::Count
    } else if args.dist {
        Mode::Dist
    } else {
        Mode::Total
    };
    let mut out = Output::new();
    let mut report = Report::new(names, mode, args.nanoseconds);
    if !args.json {
        use std::io::Write;
        if args.events {
            writeln!(out, "Tracing soft irq events... Hit Ctrl-C to end.")?;
        } else {
            writeln!(out, "Tracing soft irq event time... Hit Ctrl-C to end.")?;
        }
        out.flush()?;
    }
    run_intervals(&signals, args.every.interval(), args.every.count, |_| {
        let hists = read_hists(&skel)?;
        if args.json {
            report.write_json(&mut out, hists)
        } else {
            report.write_text(&mut out, hists, args.timestamp)
        }
    })
}

/// Every vector's cumulative record, by vector number.
fn read_hists(skel: &BpfSkel<'_>) -> Result<Vec<(u32, bpf::types::hist)>> {
    let mut hists = Vec::new();
    for vec in 0..bpf::consts::MAX_VECS as u32 {
        if let Some(bytes) = skel.maps.hists.lookup(&vec.to_ne_bytes(), MapFlags::ANY)? {
            hists.push((vec, common::attach::maps::from_bytes(&bytes)));
        }
    }
    Ok(hists)
}

/// Opens the BPF object, sets its options, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.filter_cpu = args.cpu.is_some();
    rodata.target_cpu = args.cpu.unwrap_or(0);
    rodata.nsecs = args.nanoseconds;

    let progs = &mut open.progs;
    let tp_btf = mech == Attach::TpBtf;
    progs.softirq_entry_btf.set_autoload(tp_btf);
    progs.softirq_exit_btf.set_autoload(tp_btf);
    progs.softirq_entry_raw.set_autoload(!tp_btf);
    progs.softirq_exit_raw.set_autoload(!tp_btf);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;

    let p = &skel.progs;
    let wanted = if tp_btf {
        [(&p.softirq_entry_btf, "softirq_entry"), (&p.softirq_exit_btf, "softirq_exit")]
    } else {
        [(&p.softirq_entry_raw, "softirq_entry"), (&p.softirq_exit_raw, "softirq_exit")]
    };
    let links = wanted
        .into_iter()
        .map(|(prog, name)| attach_tracepoint(prog, "irq", name, mech))
        .collect::<Result<Vec<_>>>()?;
    Ok((skel, links))
}
