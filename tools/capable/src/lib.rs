// SPDX-License-Identifier: Apache-2.0 OR MIT
//! capable: trace the kernel's capability checks, one line each (BCC's tool, CO-RE).
//!
//! The BPF side (`capable.bpf.c`) sees every call of `cap_capable()` (fexit, the `capability:cap_capable`
//! tracepoint, or a kprobe pair), filters it in the kernel and sends a record through a ring buffer; on the
//! tracepoint, which has no options argument, the check's audit and set*id flags come from the capability API
//! function in its kernel stack (`common::domain::capabilities`). This front end prints BCC's columns, with the
//! verdict libbpf-tools adds, optional stacks, or JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::domain::capabilities::{function_ranges, CALLERS};
use common::domain::containers::{ContainerArgs, ContainerMaps};
use common::host::Host;
use common::output::stdout::Output;
use common::process::symbols::Symbolizer;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::Printer;

// SAFETY: a plain C struct of integers and chars, generated from capable.h.
unsafe impl plain::Plain for bpf::types::event {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Print a line for each capability check the kernel makes: who asked, for which capability, and the answer.
#[derive(Debug, Parser)]
#[command(name = "capable", version, after_help = EXAMPLES)]
struct Args {
    /// Show checks the kernel does not audit as well (AUDIT 0); also say on stderr which attach path was taken
    /// (twice: libbpf's messages too)
    #[arg(short = 'v', long, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print the kernel stack below each check
    #[arg(short = 'K', long = "kernel-stack")]
    kernel_stack: bool,
    /// Print the user-space stack below each check
    #[arg(short = 'U', long = "user-stack")]
    user_stack: bool,
    /// Add the TID and INSETID columns (INSETID 1: asked for by a set*id() call)
    #[arg(short = 'x', long)]
    extra: bool,
    #[command(flatten)]
    containers: ContainerArgs,
    /// Print each capability (with its stacks) once per process, or per cgroup with --cgroupmap
    #[arg(short = 'u', long)]
    unique: bool,
    /// Print JSON lines: an object per check
    #[arg(short = 'j', long)]
    json: bool,
}

/// Fentry (fexit) and the kprobe pair see the check's options; the tracepoint (6.14+) is there when kernel
/// functions cannot be traced, and reads them from the stack.
pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::TpBtf, Attach::RawTp, Attach::Kprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    // -v is BCC's "non-audit checks too" and says which mechanism attached; libbpf's own messages wait for -vv, so
    // that a plain -v does not fill stderr with the failed steps of the ladder.
    let libbpf = if args.verbose >= 2 { 2 } else { 0 };
    host.bpf_main(common::cli::Verbose { level: libbpf }, |signals| capable(args, signals))
}

fn capable(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let containers = args.containers.open()?;
    let callers = function_ranges(&CALLERS.map(|(name, _)| name))?;
    let debug = args.verbose > 0;
    // -U names user frames from the process's memory maps, which are gone once it exits: -p's process has them
    // saved now, before its first check (any other process on its first check, see report.rs).
    let mut symbolizer = Symbolizer::new();
    if let (true, Some(pid)) = (args.user_stack, args.pid.pid) {
        symbolizer.remember_process(pid);
    }
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, debug, |mech| load_and_attach(&args, &containers, &callers, mech))?;
    if debug && matches!(mech, Attach::TpBtf | Attach::RawTp) {
        let names: Vec<&str> = callers.iter().map(|(n, _, _)| n.as_str()).collect();
        eprintln!("audit and set*id flags read from the calling function: {}", names.join(", "));
    }

    let mut out = Output::new();
    let mut printer = Printer::new(
        report::Style {
            extra: args.extra,
            json: args.json,
            kernel_stack: args.kernel_stack,
            user_stack: args.user_stack,
        },
        symbolizer,
    );
    printer.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "capability checks")
        .also_dropped(&bss.seen_full, "--unique keys", "too many to remember: printed again")
        .also_dropped(&bss.starts_full, "capability checks", "too many in progress")
        .print(&signals, &mut out, args.json, |out, data| {
            let event: bpf::types::event = common::attach::maps::from_bytes(data);
            Ok(printer.write(out, &event, &skel.maps.stacks)?)
        })?;
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(
    args: &Args,
    containers: &ContainerMaps,
    callers: &[(String, u64, u64)],
    mech: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.verbose = args.verbose > 0;
    ro.self_tgid = std::process::id();
    ro.kernel_stack = args.kernel_stack;
    ro.user_stack = args.user_stack;
    ro.unique = match (args.unique, containers.cgroupmap.is_some()) {
        (false, _) => bpf::consts::UNIQUE_OFF,
        (true, false) => bpf::consts::UNIQUE_PID,
        (true, true) => bpf::consts::UNIQUE_CGROUP,
    } as u32;
    (ro.filter_cgroupmap, ro.filter_mntnsmap) = containers.flags();
    let options: std::collections::HashMap<&str, u32> = CALLERS.into_iter().collect();
    for (slot, (name, start, end)) in ro.callers.iter_mut().zip(callers) {
        slot.start = *start;
        slot.end = *end;
        slot.opts = options.get(name.as_str()).copied().unwrap_or(0);
    }
    ro.n_callers = callers.len().min(bpf::consts::MAX_CALLERS) as u32;
    containers.before_load(&mut open.maps.cgroupset, &mut open.maps.mount_ns_set)?;
    if !args.kernel_stack && !args.user_stack {
        open.maps.stacks.set_max_entries(1)?;
    }

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    containers.after_load(&skel.maps.cgroupset, &skel.maps.mount_ns_set)?;
    let p = &skel.progs;
    let links = match mech {
        Attach::Fentry => vec![p.cap_capable_fexit.attach().context("attaching to cap_capable (fexit)")?],
        Attach::Kprobe => vec![
            p.cap_capable_entry.attach_kprobe(false, "cap_capable").context("kprobe cap_capable")?,
            p.cap_capable_return.attach_kprobe(true, "cap_capable").context("kretprobe cap_capable")?,
        ],
        _ => vec![attach_loaded_tracepoint(skel.object(), "capability", "cap_capable")?],
    };
    Ok((skel, links))
}
