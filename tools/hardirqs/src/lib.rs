//! hardirqs: summarize hard IRQ event time (BCC's tool, CO-RE).
//!
//! Times each hard IRQ handler from `irq_handler_entry` to `irq_handler_exit` in BPF and keeps, per handler name
//! (`irqaction->name`, as /proc/interrupts shows it), a count, a total and a log2 histogram in a kernel map; this
//! front end prints totals (default), counts (`-C`) or histograms (`-d`) every interval in BCC's layout or as
//! JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{attach_tracepoint, load_first_working, open_skeleton, rodata};
use common::attach::maps::DropCounter;
use common::cli::IntervalCount;
use common::output::stdout::Output;
use common::run::{self, run_intervals, Signals};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Mode, Report};

const EXAMPLES: &str = "\
examples:
    hardirqs            # sum hard irq event time
    hardirqs -C         # show the number of hard irq events
    hardirqs -d         # show hard irq event time as histograms
    hardirqs 1 10       # print 1 second summaries, 10 times
    hardirqs -NT 1      # 1s summaries, nanoseconds, and timestamps
    hardirqs -c 1       # sum hard irq event time on CPU 1 only
    hardirqs -j 1       # print a JSON line every second";

/// Summarize hard irq event time as histograms.
#[derive(Debug, Parser)]
#[command(name = "hardirqs", version, after_help = EXAMPLES)]
struct Args {
    /// Include timestamp on output
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Output in nanoseconds
    #[arg(short = 'N', long)]
    nanoseconds: bool,
    /// Show event counts instead of timing
    #[arg(short = 'C', long, conflicts_with_all = ["dist", "nanoseconds"])]
    count: bool,
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
    run::bpf_main(args.verbose, || hardirqs(args))
}

fn hardirqs(args: Args) -> Result<()> {
    if let Some(cpu) = args.cpu {
        common::attach::perf::sampling_cpus(Some(cpu))?;
    }
    let signals = Signals::install()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mode = if args.count {
        Mode::Count
    } else if args.dist {
        Mode::Dist
    } else {
        Mode::Total
    };
    let mut out = Output::new();
    let mut report = Report::new(mode, args.nanoseconds);
    if !args.json {
        use std::io::Write;
        if args.count {
            writeln!(out, "Tracing hard irq events... Hit Ctrl-C to end.")?;
        } else {
            writeln!(out, "Tracing hard irq event time... Hit Ctrl-C to end.")?;
        }
        out.flush()?;
    }
    let mut hists_full = DropCounter::new("hard irq events", "too many handler names");
    run_intervals(&signals, args.every.interval(), args.every.count, |_| {
        let hists = read_hists(&skel)?;
        if args.json {
            report.write_json(&mut out, hists)?;
        } else {
            report.write_text(&mut out, hists, args.timestamp)?;
        }
        if let Some(bss) = skel.maps.bss_data.as_ref() {
            hists_full.check(&bss.hists_full);
        }
        Ok(())
    })
}

/// Every handler name's cumulative record.
fn read_hists(skel: &BpfSkel<'_>) -> Result<Vec<(bpf::types::irq_key, bpf::types::hist)>> {
    common::attach::maps::hash_entries(&skel.maps.hists)
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
    progs.irq_handler_entry_btf.set_autoload(tp_btf);
    progs.irq_handler_exit_btf.set_autoload(tp_btf);
    progs.irq_handler_entry_raw.set_autoload(!tp_btf);
    progs.irq_handler_exit_raw.set_autoload(!tp_btf);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;

    let p = &skel.progs;
    let wanted = if tp_btf {
        [(&p.irq_handler_entry_btf, "irq_handler_entry"), (&p.irq_handler_exit_btf, "irq_handler_exit")]
    } else {
        [(&p.irq_handler_entry_raw, "irq_handler_entry"), (&p.irq_handler_exit_raw, "irq_handler_exit")]
    };
    let links = wanted
        .into_iter()
        .map(|(prog, name)| attach_tracepoint(prog, "irq", name, mech))
        .collect::<Result<Vec<_>>>()?;
    Ok((skel, links))
}
