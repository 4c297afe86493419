// SPDX-License-Identifier: Apache-2.0 OR MIT
//! uflow: every method entry and return of one process, indented by the thread's call depth (BCC's tool, CO-RE).
//!
//! The language (`-l`, or guessed from the process) picks the runtime's entry and return probes and where they
//! pass the class and method ([`Language::call_probes`]); a runtime known not to fire them in this process
//! (CPython 3.11, a JVM without `-XX:+ExtendedDTraceProbes`) is refused in one line. The BPF side (`uflow.bpf.c`)
//! keeps each thread's depth, drops calls outside the -C and -M prefixes and sends one record per entry and
//! return; this side prints BCC's `CPU PID TID TIME(us) METHOD` lines with `->` and `<-` arrows, or JSON lines.

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, open_skeleton, rodata};
use common::attach::maps::from_bytes;
use common::host::Host;
use common::output::name::Name;
use common::output::stdout::monotonic_ns;
use common::output::stdout::Output;
use common::run::Signals;
use common::runtime::{self, Language, RuntimeProbes};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;
use serde::Serialize;

use bpf::types::event;
use bpf::{consts, BpfSkel, BpfSkelBuilder};

// SAFETY: a #[repr(C)] struct of integers and char arrays, generated from uflow.h.
unsafe impl plain::Plain for event {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The languages uflow knows, as `-l` takes them.
const LANGUAGES: [Language; 6] =
    [Language::Java, Language::Perl, Language::Php, Language::Python, Language::Ruby, Language::Tcl];

/// Print every method entry and return of a language runtime, indented by call depth
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// The process's language (default: guessed from the process)
    #[arg(short = 'l', long, value_name = "LANGUAGE", value_parser = ["java", "perl", "php", "python", "ruby", "tcl"])]
    language: Option<String>,
    #[command(flatten)]
    pid: common::cli::filter::TargetPid,
    /// Show only methods whose name starts with this
    #[arg(short = 'M', long, value_name = "METHOD")]
    method: Option<String>,
    /// Show only methods of classes whose name starts with this
    #[arg(short = 'C', long = "class", value_name = "CLAZZ")]
    clazz: Option<String>,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// JSON output: one object per entry or return, with its exact time and depth
    #[arg(short = 'j', long)]
    json: bool,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Uprobe]);

#[derive(Serialize)]
struct JsonCall<'a> {
    ts: f64,
    cpu: u32,
    pid: u32,
    tid: u32,
    /// `entry` or `return`.
    event: &'a str,
    depth: u32,
    class: &'a Name,
    method: &'a Name,
}

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| uflow(args, signals))
}

fn uflow(args: Args, signals: Signals) -> Result<()> {
    common::cli::require_process(args.pid.pid)?;
    for (flag, prefix, size) in [("-C", &args.clazz, consts::CLASS_LEN), ("-M", &args.method, consts::METHOD_LEN)] {
        if prefix.as_ref().is_some_and(|p| p.len() >= size) {
            common::cli::usage_error(&format!("{flag}: a prefix of at most {} bytes", size - 1));
        }
    }
    let language = match &args.language {
        Some(name) => name.parse::<Language>().map_err(|e| anyhow!(e))?,
        None => runtime::detect(args.pid.pid, &LANGUAGES)
            .ok_or_else(|| anyhow!("cannot tell the language of process {}: name it with -l", args.pid.pid))?,
    };
    let found = runtime::find_probes(args.pid.pid, language)?;
    let probes = language.call_probes().context("no call probes")?;
    found.require(&[probes.entry, probes.ret])?;
    runtime::require_call_probes_fire(&found, "method calls")?;
    if args.verbose.on() {
        eprintln!("{language} probes of process {} in {}", args.pid.pid, found.file.display());
    }
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &found, mech))?;

    let mut out = Output::new();
    let start_ns = monotonic_ns();
    if !args.json {
        writeln!(out, "Tracing method calls in {language} process {}... Ctrl-C to quit.", args.pid.pid)?;
        writeln!(out, "{:<3} {:<6} {:<6} {:<8} METHOD", "CPU", "PID", "TID", "TIME(us)")?;
        out.flush()?;
    }
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "calls")
        .also_dropped(&bss.depths_full, "call depths", "too many threads")
        .print(&signals, &mut out, args.json, |out, data| {
            let e: event = from_bytes(data);
            let (class, method) = (Name::from_c(&e.clazz), Name::from_c(&e.method));
            let time_ns = e.ts.saturating_sub(start_ns);
            if args.json {
                out.json_line(&JsonCall {
                    ts: time_ns as f64 / 1e9,
                    cpu: e.cpu,
                    pid: e.pid,
                    tid: e.tid,
                    event: if e.is_return != 0 { "return" } else { "entry" },
                    depth: e.depth,
                    class: &class,
                    method: &method,
                })?;
            } else {
                let indent = "  ".repeat(e.depth.saturating_sub(1) as usize);
                let arrow = if e.is_return != 0 { "<- " } else { "-> " };
                let call = format!("{indent}{arrow}{class}.{method}");
                writeln!(out, "{:<3} {:<6} {:<6} {:<8.3} {call}", e.cpu, e.pid, e.tid, time_ns as f64 / 1e9)?;
                out.flush()?;
            }
            Ok(())
        })
}

/// Loads the BPF object with the -C and -M prefixes and attaches it to the runtime's entry and return probes.
fn load_and_attach(args: &Args, found: &RuntimeProbes, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    if let Some(prefix) = &args.clazz {
        for (dst, b) in ro.class_prefix.iter_mut().zip(prefix.bytes()) {
            *dst = b as _;
        }
        ro.class_prefix_len = prefix.len() as u32;
    }
    if let Some(prefix) = &args.method {
        for (dst, b) in ro.method_prefix.iter_mut().zip(prefix.bytes()) {
            *dst = b as _;
        }
        ro.method_prefix_len = prefix.len() as u32;
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let probes = found.language.call_probes().context("no call probes")?;
    let cookie = probes.args.cookie();
    let links = vec![
        found.attach(&skel.progs.uflow_entry, probes.entry, cookie)?,
        found.attach(&skel.progs.uflow_return, probes.ret, cookie)?,
    ];
    Ok((skel, links))
}
