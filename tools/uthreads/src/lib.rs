// SPDX-License-Identifier: Apache-2.0 OR MIT
//! uthreads: threads of one Java or C process as they start, and Java threads as they end, from the runtime's
//! USDT probes (BCC's tool, CO-RE).
//!
//! The language (`-l`, or guessed from the process) picks the probes ([`Language::thread_probes`]): HotSpot's
//! `thread__start/stop` in `libjvm.so` for Java, and for every language glibc's `pthread_start`, which only a C
//! library built with SystemTap's probes has (Debian's has not: then `-l c` and `-l none` are refused in one line,
//! and Java is traced without it). One BPF program (`uthreads.bpf.c`) is attached to every probe, told which it
//! is by the USDT cookie; this side names a pthread's start routine with blazesym and prints BCC's
//! `TIME ID TYPE DESCRIPTION` columns, or JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, open_skeleton};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use common::runtime::{self, Language, RuntimeProbes, ThreadKind};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;

use bpf::{consts, BpfSkel, BpfSkelBuilder};
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Trace thread starts (and Java thread ends) in one process through its runtime's USDT probes
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// The process's language; none: only its C library's pthread starts (default: guessed from the process)
    #[arg(short = 'l', long, value_name = "LANGUAGE", value_parser = ["c", "java", "none"])]
    language: Option<String>,
    #[command(flatten)]
    pid: common::cli::filter::TargetPid,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// JSON output: one object per thread event, with exact times and IDs
    #[arg(short = 'j', long)]
    json: bool,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Uprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| uthreads(args, signals))
}

/// The files of the process whose probes are attached, with the probes of each.
struct Targets {
    /// The language named in the banner (`none` for pthreads only).
    label: &'static str,
    sets: Vec<(RuntimeProbes, Vec<runtime::ThreadProbe>)>,
}

fn uthreads(args: Args, signals: Signals) -> Result<()> {
    common::cli::require_process(args.pid.pid)?;
    let targets = targets(&args)?;
    if args.verbose.on() {
        for (found, probes) in &targets.sets {
            let names: Vec<&str> = probes.iter().map(|p| p.name).collect();
            eprintln!("{} of process {} in {}", names.join(", "), args.pid.pid, found.file.display());
        }
    }
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&targets, mech))?;

    let mut out = Output::new();
    let mut report = Report::new(args.pid.pid, args.json);
    report.write_header(&mut out, targets.label)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "thread events")
        .print(&signals, &mut out, args.json, |out, data| report.write_event(out, data))
}

/// The probes to attach for the language asked for (or guessed): Java's thread probes, and glibc's pthread_start
/// where the C library has it (required for `-l c` and `-l none`, which have nothing else).
fn targets(args: &Args) -> Result<Targets> {
    let language = match args.language.as_deref() {
        Some("none") => None,
        Some(name) => Some(name.parse::<Language>().map_err(|e| anyhow!(e))?),
        None => runtime::detect(args.pid.pid, &[Language::Java, Language::C]),
    };
    let mut sets = Vec::new();
    if language == Some(Language::Java) {
        let found = runtime::find_probes(args.pid.pid, Language::Java)?;
        let probes = Language::Java.thread_probes();
        found.require(&probes.iter().map(|p| p.name).collect::<Vec<_>>())?;
        sets.push((found, probes.to_vec()));
    }
    let pthread = Language::C.thread_probes();
    match runtime::find_probes(args.pid.pid, Language::C) {
        Ok(found) if found.has(pthread[0].name) => sets.push((found, pthread.to_vec())),
        _ if !sets.is_empty() => {
            if args.verbose.on() {
                eprintln!(
                    "the C library of process {} has no libc:pthread_start probe: pthreads not traced",
                    args.pid.pid
                );
            }
        }
        _ => bail!(
            "process {} has no libc:pthread_start USDT probe (its C library was built without SystemTap probes, as \
             Debian's glibc is): its pthread starts cannot be traced",
            args.pid.pid
        ),
    }
    let label = language.map_or("none", Language::name);
    Ok(Targets { label, sets })
}

/// The USDT cookie of a probe: what it marks.
fn cookie(kind: ThreadKind) -> u64 {
    (match kind {
        ThreadKind::Pthread => consts::KIND_PTHREAD,
        ThreadKind::JavaStart => consts::KIND_JAVA_START,
        ThreadKind::JavaStop => consts::KIND_JAVA_STOP,
    }) as u64
}

/// Loads the BPF object and attaches its program to every thread probe.
fn load_and_attach(targets: &Targets, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let open = open_skeleton::<BpfSkelBuilder>()?;
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let mut links = Vec::new();
    for (found, probes) in &targets.sets {
        for probe in probes {
            links.push(found.attach(&skel.progs.uthreads_probe, probe.name, cookie(probe.kind))?);
        }
    }
    Ok((skel, links))
}
