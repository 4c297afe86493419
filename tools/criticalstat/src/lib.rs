// SPDX-License-Identifier: Apache-2.0 OR MIT
//! criticalstat: long kernel sections with interrupts or preemption disabled, with their stacks (BCC's tool,
//! CO-RE).
//!
//! The BPF side times each section between the preemptirq tracepoints' disable and enable events on a CPU and
//! sends those that last at least `-d` microseconds, with the kernel stack where they ended, through a ring
//! buffer; this front end names the addresses and prints BCC's blocks, or JSON lines.
//!
//! The tracepoints exist only in kernels built with CONFIG_PREEMPTIRQ_TRACEPOINTS (which the irqsoff and preemptoff
//! tracers, lockdep and CONFIG_DEBUG_PREEMPT-style debug builds select); distribution kernels are usually built
//! without it. Whether they exist is read from the kernel's BTF (`btf_trace_irq_disable`, ...), never guessed from
//! the version; where they do not, the tool says which kernel option is missing, in one line, after checking
//! (with -v) that its programs would load.

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{
    attach_loaded_tracepoints, autoload_by_section, load_first_working, open_skeleton, rodata, skip_tracepoint,
};
use common::attach::maps::from_bytes;
use common::host::Host;
use common::output::name::Name;
use common::output::stdout::Output;
use common::process::symbols::{Symbol, Symbolizer};
use common::run::Signals;
use common::stacks::{Collected, Stack, StackTraces};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;
use serde::Serialize;

use bpf::consts::{END_CALLER, END_PARENT, START_CALLER, START_PARENT};
use bpf::types::event;
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a plain C struct of integers and chars, generated from criticalstat.h.
unsafe impl plain::Plain for event {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

const RULE: &str = "===================================";

/// Report kernel sections that kept interrupts (or preemption) disabled for long, with their kernel stacks.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Report sections with preemption disabled (instead of interrupts)
    #[arg(short = 'p', long)]
    preemptoff: bool,
    /// Report sections with interrupts disabled (the default; wins over -p)
    #[arg(short = 'i', long)]
    irqoff: bool,
    /// Report sections lasting at least this many microseconds
    #[arg(short = 'd', long, value_name = "DURATION", default_value_t = 100,
          value_parser = common::cli::parse_positive_u64)]
    duration: u64,
    /// JSON output: one object per section
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| criticalstat(args, signals))
}

/// Which sections: interrupts off (BCC's default, and its choice when both -i and -p are given) or preemption off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Irq,
    Preempt,
}

impl Kind {
    fn of(args: &Args) -> Kind {
        if args.preemptoff && !args.irqoff {
            Kind::Preempt
        } else {
            Kind::Irq
        }
    }

    /// The tracepoints of this kind, and those of the other (left unloaded).
    fn tracepoints(self) -> ([&'static str; 2], [&'static str; 2]) {
        let irq = ["irq_disable", "irq_enable"];
        let preempt = ["preempt_disable", "preempt_enable"];
        match self {
            Kind::Irq => (irq, preempt),
            Kind::Preempt => (preempt, irq),
        }
    }

    /// What BCC's banner calls it.
    fn banner(self) -> &'static str {
        match self {
            Kind::Irq => "IRQ",
            Kind::Preempt => "preempt",
        }
    }

    /// The kernel options these tracepoints need beyond CONFIG_PREEMPTIRQ_TRACEPOINTS.
    fn needs(self) -> &'static str {
        match self {
            Kind::Irq => "CONFIG_TRACE_IRQFLAGS, selected by CONFIG_IRQSOFF_TRACER or lockdep",
            Kind::Preempt => "CONFIG_TRACE_PREEMPT_TOGGLE, selected by CONFIG_PREEMPT_TRACER",
        }
    }
}

fn criticalstat(args: Args, signals: Signals) -> Result<()> {
    let kind = Kind::of(&args);
    let threshold_ns = args.duration.checked_mul(1000).context("the duration is too large")?;
    let (wanted, _) = kind.tracepoints();
    let btf = KernelBtf::load()?;
    if let Some(missing) = wanted.iter().find(|tp| !btf.has_tracepoint(tp)) {
        if args.verbose.on() {
            trial_load(kind);
        }
        bail!(
            "this kernel has no preemptirq:{missing} tracepoint: it was built without CONFIG_PREEMPTIRQ_TRACEPOINTS \
             (which needs {})",
            kind.needs()
        );
    }
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(kind, threshold_ns, mech))?;

    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Finding critical section with {} disabled for > {}us", kind.banner(), args.duration)?;
        out.flush()?;
    }
    let symbolizer = Symbolizer::new();
    symbolizer.preload_kernel();
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let stream = EventStream::new(&skel.maps.events, &bss.lost, "sections");
    let mut traces = StackTraces::new(&skel.maps.stacks, Collected { user: false, kernel: true });
    stream.print(&signals, &mut out, args.json, |out, data| {
        let e: event = from_bytes(data);
        let id = i32::try_from(e.stack_id).unwrap_or(-1);
        let stack = match traces.task(0, 0, Name::default(), -1, id).kernel {
            Stack::Frames(addrs) => Some(addrs),
            _ => None,
        };
        Ok(write_event(out, &symbolizer, &e, stack.as_deref(), args.json)?)
    })
}

/// With -v, where the tracepoints are missing: loads the raw_tp programs (which need no target to load), so the
/// kernel's verifier has checked them, and says so; there is nothing to attach them to.
fn trial_load(kind: Kind) {
    let result = (|| -> Result<()> {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        autoload_by_section(open.open_object_mut(), Attach::RawTp);
        skip_tracepoint(open.open_object_mut(), kind.tracepoints().1[0]);
        skip_tracepoint(open.open_object_mut(), kind.tracepoints().1[1]);
        open.load().context("loading the raw_tp programs")?;
        Ok(())
    })();
    match result {
        Ok(()) => {
            eprintln!("the raw_tp programs load (the verifier accepts them), but there is nothing to attach them to")
        }
        Err(err) => eprintln!("the raw_tp programs do not load either: {err:#}"),
    }
}

/// Opens the BPF object, keeps the programs of `kind` (and power:cpu_idle) for `mech`, loads and attaches them.
fn load_and_attach(kind: Kind, threshold_ns: u64, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    rodata(&mut open.maps.rodata_data)?.threshold_ns = threshold_ns;
    autoload_by_section(open.open_object_mut(), mech);
    let (_, other) = kind.tracepoints();
    for tp in other {
        skip_tracepoint(open.open_object_mut(), tp);
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    // (power:cpu_idle first, so that the idle state is known before any section is timed.)
    let links = attach_loaded_tracepoints(skel.object(), "preemptirq")?;
    Ok((skel, links))
}

fn name(sym: &Result<Symbol, String>) -> String {
    sym.as_ref().map_or_else(|_| common::process::symbols::UNKNOWN.to_string(), |s| s.name.clone())
}

fn name_offset(sym: &Result<Symbol, String>) -> String {
    sym.as_ref()
        .map_or_else(|_| common::process::symbols::UNKNOWN.to_string(), |s| format!("{}+{:#x}", s.name, s.offset))
}

#[derive(Serialize)]
struct JsonEvent<'a> {
    comm: &'a Name,
    pid: u32,
    tid: u32,
    cpu: u32,
    time_ns: u64,
    section_start: [String; 2],
    section_end: [String; 2],
    /// None: the stack was lost.
    stack: Option<Vec<String>>,
}

/// One section: BCC's block (task, time, where it started and ended, the stack), or one JSON object.
fn write_event(
    out: &mut Output,
    symbolizer: &Symbolizer,
    e: &event,
    stack: Option<&[u64]>,
    json: bool,
) -> std::io::Result<()> {
    let ends: Vec<u64> = [START_CALLER, START_PARENT, END_CALLER, END_PARENT].iter().map(|&i| e.addrs[i]).collect();
    let ends: Vec<String> = symbolizer.kernel_each(&ends).iter().map(name).collect();
    let frames: Option<Vec<String>> = stack.map(|s| symbolizer.kernel_each(s).iter().map(name_offset).collect());
    let comm = Name::from_c(&e.comm);
    if json {
        return out.json_line(&JsonEvent {
            comm: &comm,
            pid: e.pid,
            tid: e.tid,
            cpu: e.cpu,
            time_ns: e.time_ns,
            section_start: [ends[0].clone(), ends[1].clone()],
            section_end: [ends[2].clone(), ends[3].clone()],
            stack: frames,
        });
    }
    writeln!(out, "{RULE}")?;
    writeln!(out, "TASK: {comm} (pid {:5} tid {:5}) Total Time: {:<9.3}us\n", e.pid, e.tid, e.time_ns as f64 / 1000.0)?;
    writeln!(out, "Section start: {} -> {}", ends[0], ends[1])?;
    writeln!(out, "Section end:   {} -> {}", ends[2], ends[3])?;
    match frames {
        Some(frames) => {
            for f in frames {
                writeln!(out, "  {f}")?;
            }
        }
        None => writeln!(out, "NO STACK FOUND DUE TO COLLISION")?,
    }
    writeln!(out, "{RULE}")?;
    writeln!(out)?;
    out.flush()
}
