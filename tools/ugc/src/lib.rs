// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ugc: the garbage collections of one Java, Python, Ruby or Node process, each with its duration and what the
//! runtime says about it (BCC's tool, CO-RE).
//!
//! The language (`-l`, or guessed from the process) picks the runtime's USDT provider and its begin/end probe
//! pairs ([`common::runtime`]); the file of the process that carries them is found in its memory maps. Two BPF
//! programs (`ugc.bpf.c`) are attached to every pair, told apart by the probe's USDT cookie; one event comes out
//! per finished collection at least `-M` milliseconds long, and [`report`] prints BCC's `START TIME DESCRIPTION`
//! columns (after the `-F` text filter) or JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, open_skeleton, rodata};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use common::runtime::{self, GcKind, Language, RuntimeProbes};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;

use bpf::{consts, BpfSkel, BpfSkelBuilder};
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The languages ugc knows, as `-l` takes them.
const LANGUAGES: [Language; 4] = [Language::Java, Language::Node, Language::Python, Language::Ruby];

/// Trace the garbage collections of a language runtime, each with its duration
#[derive(Debug, Parser)]
#[command(name = "ugc", version, after_help = EXAMPLES)]
struct Args {
    /// The process's language (default: guessed from its executable and libraries)
    #[arg(short = 'l', long, value_name = "LANGUAGE", value_parser = ["java", "node", "python", "ruby"])]
    language: Option<String>,
    #[command(flatten)]
    pid: common::cli::filter::TargetPid,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Durations in milliseconds (default: microseconds)
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// Show only collections lasting at least this many milliseconds
    #[arg(short = 'M', long, value_name = "MINIMUM", default_value_t = 0)]
    minimum: u64,
    /// Show only collections whose description contains this text
    #[arg(short = 'F', long, value_name = "FILTER")]
    filter: Option<String>,
    /// JSON output: one object per collection, with exact times and the runtime's fields
    #[arg(short = 'j', long)]
    json: bool,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Uprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| ugc(args, signals))
}

fn ugc(args: Args, signals: Signals) -> Result<()> {
    common::cli::require_process(args.pid.pid)?;
    let language = match &args.language {
        Some(name) => name.parse::<Language>().map_err(|e| anyhow!(e))?,
        None => runtime::detect(args.pid.pid, &LANGUAGES)
            .ok_or_else(|| anyhow!("cannot tell the language of process {}: name it with -l", args.pid.pid))?,
    };
    let found = runtime::find_probes(args.pid.pid, language)?;
    let pairs = language.gc_probes();
    for pair in pairs {
        found.require(&[pair.begin, pair.end])?;
    }
    if args.verbose.on() {
        eprintln!("{language} probes of process {} in {}", args.pid.pid, found.file.display());
    }
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &found, mech))?;

    let mut out = Output::new();
    let mut report = Report::new(language, args.pid.pid, args.milliseconds, args.filter.clone(), args.json);
    report.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "collections")
        .also_dropped(&bss.starts_full, "collections", "too many collections in progress")
        .print(&signals, &mut out, args.json, |out, data| report.write_event(out, data))
}

/// The USDT cookie of pair `index`: its index, and what its probes' arguments carry.
fn cookie(index: usize, kind: GcKind) -> u64 {
    let kind = match kind {
        GcKind::JavaPool => consts::KIND_JAVA_POOL,
        GcKind::PythonGen => consts::KIND_PYTHON_GEN,
        GcKind::NodeType => consts::KIND_NODE_TYPE,
        GcKind::Plain | GcKind::RubyMark | GcKind::RubySweep => consts::KIND_PLAIN,
    };
    index as u64 | (kind as u64) << 8
}

/// Loads the BPF object with the -M threshold and attaches its two programs to every probe pair of the runtime.
fn load_and_attach(args: &Args, found: &RuntimeProbes, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    rodata(&mut open.maps.rodata_data)?.min_ns = args.minimum.saturating_mul(1_000_000);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let mut links = Vec::new();
    for (index, pair) in found.language.gc_probes().iter().enumerate() {
        let cookie = cookie(index, pair.kind);
        links.push(found.attach(&skel.progs.ugc_begin, pair.begin, cookie)?);
        links.push(found.attach(&skel.progs.ugc_end, pair.end, cookie)?);
    }
    Ok((skel, links))
}
