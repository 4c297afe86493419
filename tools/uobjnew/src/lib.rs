// SPDX-License-Identifier: Apache-2.0 OR MIT
//! uobjnew: the allocations of one process counted per type (for C, per block size) with their bytes, every
//! interval or at the end (BCC's tool, CO-RE).
//!
//! The language (`-l`, or guessed from the process) picks the hook: the runtime's allocation USDT probe (HotSpot's
//! `object__alloc`, which fires only with `-XX:+ExtendedDTraceProbes`; a JVM known to lack it is refused in one
//! line), Ruby's `object__create`, Tcl's `obj__create`, or for C a uprobe on the process's `malloc`. The BPF side
//! (`uobjnew.bpf.c`) keeps cumulative counts; this side differences them every interval and prints BCC's
//! `NAME/TYPE # ALLOCS # BYTES` table (largest last, cut to -C or -S), or JSON lines.

mod bpf;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, open_skeleton};
use common::attach::maps::{c_string, hash_entries, DropCounter};
use common::attach::uprobe;
use common::host::Host;
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, Output};
use common::process::procmaps;
use common::run::{self, Signals};
use common::runtime::{self, Language, RuntimeProbes};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore};
use serde::Serialize;

use bpf::types::{alloc_key, alloc_val};
use bpf::{consts, BpfSkel, BpfSkelBuilder};

// SAFETY: #[repr(C)] structs of integers and a char array, generated from uobjnew.h.
unsafe impl plain::Plain for alloc_key {}
unsafe impl plain::Plain for alloc_val {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The languages uobjnew knows, C last (what remains), as `-l` takes them.
const LANGUAGES: [Language; 4] = [Language::Java, Language::Ruby, Language::Tcl, Language::C];

/// Count the allocations of a process per type (per block size for C), with their bytes
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// The process's language (default: guessed from the process)
    #[arg(short = 'l', long, value_name = "LANGUAGE", value_parser = ["c", "java", "ruby", "tcl"])]
    language: Option<String>,
    #[command(flatten)]
    pid: common::cli::filter::TargetPid,
    /// Seconds between reports (default: one report at Ctrl-C)
    #[arg(value_name = "INTERVAL", value_parser = common::cli::parse_interval_secs)]
    interval: Option<u64>,
    /// Show only this many types: those allocated most often
    #[arg(short = 'C', long = "top-count", value_name = "TOP_COUNT", value_parser = common::cli::parse_positive_u64)]
    top_count: Option<u64>,
    /// Show only this many types: those with the most bytes allocated
    #[arg(short = 'S', long = "top-size", value_name = "TOP_SIZE", value_parser = common::cli::parse_positive_u64,
          conflicts_with = "top_count")]
    top_size: Option<u64>,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// JSON output: one object per type per report, with exact counts and bytes
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Uprobe]);

#[derive(Serialize)]
struct JsonType<'a> {
    /// When the report was made (RFC 3339, local time): the rows of one report share it.
    time: &'a str,
    /// The type's name, or for C `block size N`.
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    block_size: Option<u64>,
    allocs: u64,
    bytes: u64,
}

/// Where the allocations are hooked.
enum Hook {
    /// A runtime's allocation probe, with its cookie.
    Usdt(RuntimeProbes, &'static str, u64),
    /// malloc in the process's C library.
    Malloc(std::path::PathBuf, u64),
}

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| uobjnew(args, &host, signals))
}

fn uobjnew(args: Args, host: &Host, signals: Signals) -> Result<()> {
    common::cli::require_process(args.pid.pid)?;
    let language = match &args.language {
        Some(name) => name.parse::<Language>().map_err(|e| anyhow!(e))?,
        None => runtime::detect(args.pid.pid, &LANGUAGES)
            .ok_or_else(|| anyhow!("cannot tell the language of process {}: name it with -l", args.pid.pid))?,
    };
    let hook = hook(args.pid.pid, language)?;
    let endpoint = args.export.endpoint(host, args.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(args.pid.pid, &hook, mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
            s.map_full("allocs", &bss.types_full);
            metrics(s, &skel.maps.allocs, language)
        });
    }

    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Tracing allocations in process {} (language: {language})... Ctrl-C to quit.", args.pid.pid)?;
        out.flush()?;
    }
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let mut types_full = DropCounter::new("allocations", "too many distinct types");
    let mut last: HashMap<(u64, String), (u64, u64)> = HashMap::new();
    run::run_intervals(&signals, args.interval.map(Duration::from_secs), None, |_| {
        types_full.check(&bss.types_full);
        let mut rows = Vec::new();
        for (k, v) in hash_entries::<alloc_key, alloc_val>(&skel.maps.allocs)? {
            // Escaped (the traced program names its classes), in JSON too: one name per row.
            let name = Name::from_c(&k.name).shown();
            let before = last.insert((k.size, name.clone()), (v.allocs, v.bytes)).unwrap_or((0, 0));
            let (allocs, bytes) = (v.allocs.saturating_sub(before.0), v.bytes.saturating_sub(before.1));
            if allocs > 0 {
                let name = if language == Language::C { format!("block size {}", k.size) } else { name };
                rows.push((name, k.size, allocs, bytes));
            }
        }
        let top = if let Some(n) = args.top_count {
            rows.sort_by(|a, b| (a.2, a.3, &a.0).cmp(&(b.2, b.3, &b.0)));
            Some(n)
        } else {
            rows.sort_by(|a, b| (a.3, a.2, &a.0).cmp(&(b.3, b.2, &b.0)));
            args.top_size
        };
        if let Some(n) = top {
            rows.drain(..rows.len().saturating_sub(usize::try_from(n).unwrap_or(usize::MAX)));
        }
        if args.json {
            let timestamp = clock_rfc3339();
            for (name, size, allocs, bytes) in &rows {
                let block_size = (language == Language::C).then_some(*size);
                out.json_line(&JsonType { time: &timestamp, name, block_size, allocs: *allocs, bytes: *bytes })?;
            }
        } else {
            writeln!(out)?;
            writeln!(out, "{:<30} {:>8} {:>12}", "NAME/TYPE", "# ALLOCS", "# BYTES")?;
            for (name, _, allocs, bytes) in &rows {
                writeln!(out, "{name:<30} {allocs:>8} {bytes:>12}")?;
            }
        }
        out.flush()?;
        Ok(())
    })
}

/// The hook of `language` in process `pid`, or one line saying why it cannot be traced.
/// `--prometheus`: the cumulative map as `corebpf_uobjnew_allocations_total` and
/// `corebpf_uobjnew_allocated_bytes_total`, labelled `type` as NAME/TYPE shows it (the class, or for C
/// `block size N`). The map only grows (one entry per type), so neither counter goes back.
fn metrics(s: &mut common::output::metrics::Snapshot, allocs: &impl MapCore, language: Language) -> Result<()> {
    const ALLOCS: &str = "Objects (or C blocks) allocated by the traced process";
    const BYTES: &str = "Bytes those allocations asked for";
    s.declare_counter("allocations", ALLOCS, &["type"]);
    s.declare_counter("allocated_bytes", BYTES, &["type"]);
    for (k, v) in hash_entries::<alloc_key, alloc_val>(allocs)? {
        let name = if language == Language::C { format!("block size {}", k.size) } else { c_string(&k.name) };
        s.counter("allocations", ALLOCS, &["type"], vec![name.clone()], v.allocs);
        s.counter("allocated_bytes", BYTES, &["type"], vec![name], v.bytes);
    }
    Ok(())
}

fn hook(pid: u32, language: Language) -> Result<Hook> {
    let (probe, cookie) = match language {
        Language::C => {
            let libc = procmaps::process_libc(pid)?;
            let offset = uprobe::function_offset(&libc, "malloc")?
                .with_context(|| format!("{} has no malloc", libc.display()))?;
            return Ok(Hook::Malloc(libc, offset));
        }
        Language::Java => ("object__alloc", consts::ALLOC_JAVA),
        Language::Ruby => ("object__create", consts::ALLOC_RUBY),
        Language::Tcl => ("obj__create", consts::ALLOC_TCL),
        other => bail!("uobjnew does not trace {other}"),
    };
    let found = runtime::find_probes(pid, language)?;
    found.require(&[probe])?;
    if language == Language::Java {
        runtime::require_java_flag(pid, "DTraceAllocProbes", "allocations")?;
    }
    Ok(Hook::Usdt(found, probe, cookie as u64))
}

/// Loads the BPF object and attaches its program for the hook.
fn load_and_attach(pid: u32, hook: &Hook, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let open = open_skeleton::<BpfSkelBuilder>()?;
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let link = match hook {
        Hook::Usdt(found, probe, cookie) => found.attach(&skel.progs.uobjnew_usdt, probe, *cookie)?,
        Hook::Malloc(libc, offset) => uprobe::attach(&skel.progs.uobjnew_malloc, mech, Some(pid), libc, *offset, false)
            .with_context(|| format!("attaching to malloc in {}", libc.display()))?,
    };
    Ok((skel, vec![link]))
}
