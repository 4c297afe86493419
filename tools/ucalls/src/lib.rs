// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ucalls: the method calls of one process counted per method, with their total time (-L), and its system calls
//! (-S), every interval or at the end (BCC's tool, CO-RE).
//!
//! The language (`-l`, or guessed from the process) picks the runtime's entry and return probes and where they
//! pass the class and method ([`Language::call_probes`]); a runtime known not to fire them in this process
//! (CPython 3.11, a JVM without `-XX:+ExtendedDTraceProbes`) is refused in one line
//! ([`runtime::require_call_probes_fire`]). The BPF side (`ucalls.bpf.c`) keeps cumulative counts and times per
//! method and per system call; [`report`] differences them every interval and prints BCC's `METHOD # CALLS
//! [TIME]` table, sorted and cut to `-T`, or JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::run::{self, Signals};
use common::runtime::{self, Language, RuntimeProbes};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The languages ucalls knows, as `-l` takes them.
const LANGUAGES: [Language; 6] =
    [Language::Java, Language::Perl, Language::Php, Language::Python, Language::Ruby, Language::Tcl];

/// Count the method calls of a language runtime, with their time, and the process's system calls
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::TargetPid,
    /// Seconds between reports (default: one report at Ctrl-C)
    #[arg(value_name = "INTERVAL", value_parser = common::cli::parse_interval_secs)]
    interval: Option<u64>,
    /// The process's language; none: system calls only, with -S (default: guessed from the process)
    #[arg(short = 'l', long, value_name = "LANGUAGE",
          value_parser = ["java", "perl", "php", "python", "ruby", "tcl", "none"])]
    language: Option<String>,
    /// Show only this many methods: the most called (with -L, the slowest in total)
    #[arg(short = 'T', long, value_name = "TOP", value_parser = common::cli::parse_positive_u64)]
    top: Option<u64>,
    /// Also time each call from entry to return (recursive calls included)
    #[arg(short = 'L', long)]
    latency: bool,
    /// Also count the process's system calls (with -L, timed)
    #[arg(short = 'S', long)]
    syscalls: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Times in milliseconds (default: microseconds)
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// JSON output: one object per method per report, with exact counts and nanoseconds
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Uprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| ucalls(args, &host, signals))
}

fn ucalls(args: Args, host: &Host, signals: Signals) -> Result<()> {
    common::cli::require_process(args.pid.pid)?;
    let language = match args.language.as_deref() {
        Some("none") => None,
        Some(name) => Some(name.parse::<Language>().map_err(|e| anyhow!(e))?),
        None => runtime::detect(args.pid.pid, &LANGUAGES),
    };
    let found = match language {
        Some(language) => Some(runtime::find_probes(args.pid.pid, language)?),
        None if args.syscalls => None,
        None => bail!(
            "nothing to trace in process {}: no language's call probes; use -S to count its system calls",
            args.pid.pid
        ),
    };
    if let Some(found) = &found {
        let probes = found.language.call_probes().context("no call probes")?;
        found.require(&[probes.entry, probes.ret])?;
        runtime::require_call_probes_fire(found, "method calls")?;
        if args.verbose.on() {
            eprintln!("{} probes of process {} in {}", found.language, args.pid.pid, found.file.display());
        }
    }
    let endpoint = args.export.endpoint(host, args.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, found.as_ref(), mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let report = Report::new(args.latency, false, None, false);
        return endpoint.serve(&signals, |s| {
            let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
            s.map_full("methods", &bss.methods_full);
            report.metrics(s, &skel.maps.methods, args.syscalls.then_some(&skel.maps.syscalls))
        });
    }

    let mut out = Output::new();
    let label = language.map_or("none", Language::name);
    let mut report = Report::new(args.latency, args.milliseconds, args.top, args.json);
    if !args.json {
        use std::io::Write;
        if args.syscalls {
            writeln!(out, "Attached kernel tracepoints for syscall tracing.")?;
        }
        writeln!(out, "Tracing calls in process {} (language: {label})... Ctrl-C to quit.", args.pid.pid)?;
        out.flush()?;
    }
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    run::run_intervals(&signals, args.interval.map(Duration::from_secs), None, |_| {
        report.check_drops(&bss.methods_full, &bss.untimed);
        report.print(&mut out, &skel.maps.methods, args.syscalls.then_some(&skel.maps.syscalls))
    })?;
    if args.syscalls && !args.json {
        use std::io::Write;
        writeln!(out, "Detaching kernel probes, please wait...")?;
    }
    Ok(())
}

/// Loads the BPF object for the process and attaches the runtime's call probes and, with -S, the system-call
/// tracepoints.
fn load_and_attach(args: &Args, found: Option<&RuntimeProbes>, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.latency = args.latency;
    if !args.syscalls {
        open.progs.ucalls_sys_enter.set_autoload(false);
        open.progs.ucalls_sys_exit.set_autoload(false);
    }
    // Only the programs that will be attached are loaded (-l none -S: the system calls only).
    if found.is_none() {
        open.progs.ucalls_entry.set_autoload(false);
    }
    if found.is_none() || !args.latency {
        open.progs.ucalls_return.set_autoload(false);
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let mut links = Vec::new();
    if let Some(found) = found {
        let probes = found.language.call_probes().context("no call probes")?;
        let cookie = probes.args.cookie();
        links.push(found.attach(&skel.progs.ucalls_entry, probes.entry, cookie)?);
        if args.latency {
            links.push(found.attach(&skel.progs.ucalls_return, probes.ret, cookie)?);
        }
    }
    if args.syscalls {
        links.push(attach_loaded_tracepoint(skel.object(), "raw_syscalls", "sys_enter")?);
        if args.latency {
            links.push(attach_loaded_tracepoint(skel.object(), "raw_syscalls", "sys_exit")?);
        }
    }
    Ok((skel, links))
}
