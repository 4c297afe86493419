// SPDX-License-Identifier: Apache-2.0 OR MIT
//! trace: trace functions and tracepoints and print a line per event with chosen values, printf-style (BCC's
//! tool, CO-RE, with no compiler at run time).
//!
//! Each probe is parsed by `common::probe` (`parse_trace`: the spec, the predicate, the format and its
//! arguments) into the parameters of one generic, prebuilt BPF object (`trace.bpf.c` over
//! `bpf/include/probe.bpf.h`); every object sends its events into the first one's ring buffer. Printing, -M, -n,
//! -f and -A are in [`report`].

mod bpf;
mod report;

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{open_skeleton, rodata};
use common::cli::{parse_pid, require_process};
use common::host::Host;
use common::output::stdout::Output;
use common::probe::attach::{at_user_function_entry, attach as probe_attach, load_first, select_programs, site, Site};
use common::probe::plan::{plan, Limits, Plan};
use common::probe::spec::{parse_trace, TraceSpec};
use common::probe::{usage_exit, SpecError};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use crate::bpf::consts::{LIT_MAX, MAX_ENTRY, MAX_FETCH, MAX_INSNS, MAX_LITS, MAX_OUT, MAX_STRS, STR_MAX, VM_DEPTH};
use crate::bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Print a line for each hit of the probes given (function entries, returns or tracepoints) with a printf-style
/// message.
#[derive(Debug, Parser)]
#[command(name = "trace", version, after_help = EXAMPLES)]
struct Args {
    /// Ring buffer size in pages per CPU (the buffer holds events not yet printed)
    #[arg(short = 'b', long = "buffer-pages", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    buffer_pages: u32,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only events of this thread (TID)
    #[arg(short = 'L', long, value_parser = parse_pid, conflicts_with = "pid")]
    tid: Option<u32>,
    /// Only events of this user (UID)
    #[arg(long, value_parser = clap::value_parser!(u32))]
    uid: Option<u32>,
    /// Bytes read from each string argument before it is cut
    #[arg(short = 'Z', long = "string-size", default_value_t = 80,
          value_parser = clap::value_parser!(u32).range(1..=STR_MAX as i64))]
    string_size: u32,
    /// Also trace this trace process itself (left out by default)
    #[arg(short = 'S', long = "include-self")]
    include_self: bool,
    /// Exit once this many events have been printed
    #[arg(short = 'M', long = "max-events", value_parser = clap::value_parser!(u64).range(1..))]
    max_events: Option<u64>,
    /// Add a TIME column: seconds since tracing began
    #[arg(short = 't', long)]
    timestamp: bool,
    /// With -t, print the time as seconds since the Unix epoch instead
    #[arg(short = 'u', long = "unix-timestamp", requires = "timestamp")]
    unix_timestamp: bool,
    /// Add a TIME column with the time of day (HH:MM:SS)
    #[arg(short = 'T', long)]
    time: bool,
    /// Add a CPU column
    #[arg(short = 'C', long = "print_cpu")]
    print_cpu: bool,
    /// Only events of tasks in this cgroup v2 directory or below it
    #[arg(short = 'c', long = "cgroup-path", value_name = "CGROUP_PATH")]
    cgroup_path: Option<std::path::PathBuf>,
    /// Only events of tasks whose command name contains this text
    #[arg(short = 'n', long)]
    name: Option<String>,
    /// Only events whose message contains this text
    #[arg(short = 'f', long = "msg-filter")]
    msg_filter: Option<String>,
    /// Accepted for BCC command lines and ignored: STRCMP compares text, not binary data
    #[arg(short = 'B', long = "bin_cmp")]
    bin_cmp: bool,
    /// Symbol files for user frames: accepted and ignored (each process's own mapped files name its frames)
    #[arg(short = 's', long = "sym_file_list", value_name = "SYM_FILE_LIST")]
    sym_file_list: Option<String>,
    /// Print the kernel stack of each event below it
    #[arg(short = 'K', long = "kernel-stack")]
    kernel_stack: bool,
    /// Print the user stack of each event below it
    #[arg(short = 'U', long = "user-stack")]
    user_stack: bool,
    /// With -K or -U, print each frame's address before its symbol
    #[arg(short = 'a', long)]
    address: bool,
    /// Header files to include: accepted so that BCC command lines work, and ignored, since nothing is compiled
    #[arg(short = 'I', long = "include", value_name = "header")]
    include: Vec<String>,
    /// Instead of printing each event, count identical lines and print each with its count at the end
    #[arg(short = 'A', long)]
    aggregate: bool,
    /// Print JSON lines: an object per event
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// One or more probes with an optional filter and message (the syntax is in the examples below)
    #[arg(value_name = "probe", required = true)]
    probes: Vec<String>,
}

pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Tracepoint, Attach::Uprobe, Attach::Fentry, Attach::Kprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| trace(args, signals))
}

const LIMITS: Limits = Limits {
    fetches: MAX_FETCH,
    exprs: MAX_OUT,
    insns: MAX_INSNS,
    depth: VM_DEPTH,
    lits: MAX_LITS,
    lit_max: LIT_MAX,
    entry: MAX_ENTRY,
};

/// One probe: parsed, resolved, and (later) attached.
pub struct Probe {
    pub trace: TraceSpec,
    pub plan: Plan,
    site: Site,
}

fn resolve_all(args: &Args) -> Vec<Probe> {
    let tracefs = if args.probes.iter().any(|p| p.trim_start().starts_with("t:")) {
        match common::attach::features::tracefs() {
            Ok(dir) => Some(dir),
            Err(err) => {
                eprintln!("{}: {err:#}", common::identity::invoked_name());
                std::process::exit(1);
            }
        }
    } else {
        None
    };
    let mut out = Vec::new();
    for raw in &args.probes {
        let resolved = parse_trace(raw).and_then(|trace| {
            let plan = plan(&trace.spec, tracefs.as_deref(), &LIMITS)?;
            let strings = plan.exprs.iter().filter(|e| e.ctype.string).count();
            if strings > MAX_STRS {
                return Err(SpecError(format!("in '{raw}': at most {MAX_STRS} %s arguments")));
            }
            let site = site(&trace.spec, args.pid.pid)?;
            Ok(Probe { trace, plan, site })
        });
        match resolved {
            Ok(p) => out.push(p),
            Err(err) => usage_exit(&err),
        }
    }
    out
}

/// The ring buffer's size: `pages` per CPU, a power of two.
fn ring_size(pages: u32) -> u32 {
    let cpus = libbpf_rs::num_possible_cpus().unwrap_or(1).max(1) as u64;
    let bytes = (pages as u64 * 4096 * cpus).next_power_of_two().min(1 << 30);
    bytes as u32
}

/// Loads and attaches one probe's object with mechanism `how`.
fn load(
    probe: &Probe,
    index: u32,
    args: &Args,
    cgroup: Option<&std::fs::File>,
    first: Option<&BpfSkel<'static>>,
    how: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    {
        let ro = rodata(&mut open.maps.rodata_data)?;
        common::probe_rodata!(&mut *ro, &probe.plan, &probe.site, args.pid.pid, args.tid);
        ro.probe_index = index;
        ro.exclude_tgid = if args.include_self { 0 } else { std::process::id() };
        ro.filter_uid = args.uid.is_some();
        ro.target_uid = args.uid.unwrap_or(0);
        ro.str_size = args.string_size;
        ro.filter_cgroup = cgroup.is_some();
        ro.kernel_stack = args.kernel_stack;
        ro.user_stack = args.user_stack;
        ro.at_entry = at_user_function_entry(&probe.site, &probe.trace.spec);
        let strings: Vec<u8> = probe.plan.exprs.iter().filter_map(|e| e.string_fetch).map(|f| f as u8).collect();
        ro.n_strs = strings.len() as u32;
        for (slot, f) in ro.str_fetch.iter_mut().zip(strings) {
            *slot = f;
        }
    }
    match first {
        Some(first) => open.maps.events.reuse_fd(first.maps.events.as_fd())?,
        None => open.maps.events.set_max_entries(ring_size(args.buffer_pages))?,
    }
    let latency = probe.plan.needs_entry();
    select_programs(open.open_object_mut(), &probe.site, probe.trace.spec.probe, latency, how)?;
    let skel = open.load().context("loading the BPF program")?;
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }
    let links = probe_attach(skel.object(), &probe.site, &probe.trace.spec, latency, args.pid.pid, how)?;
    Ok((skel, links))
}

fn trace(args: Args, signals: Signals) -> Result<()> {
    if let Some(pid) = args.pid.pid.or(args.tid) {
        require_process(pid)?;
    }
    let tool = common::identity::invoked_name();
    if let Some(files) = &args.sym_file_list {
        eprintln!("{tool}: -s {files} ignored: user frames are named from each process's own mapped files");
    }
    if !args.include.is_empty() {
        eprintln!("{tool}: -I {} ignored: this trace is prebuilt, nothing is compiled", args.include.join(" -I "));
    }
    let probes = resolve_all(&args);
    let cgroup = args.cgroup_path.as_deref().map(common::domain::cgroup::open).transpose()?;
    let mut skels: Vec<BpfSkel<'static>> = Vec::new();
    let mut links = Links::default();
    for (i, probe) in probes.iter().enumerate() {
        let ((skel, probe_links), how) = load_first(TOOL.attach, &probe.site, args.verbose.on(), |how| {
            load(probe, i as u32, &args, cgroup.as_ref(), skels.first(), how)
        })?;
        links.extend(probe_links);
        if args.verbose.on() {
            eprintln!("attached with {how} ({})", probe.trace.spec.raw);
        }
        skels.push(skel);
    }
    let mut out = Output::new();
    let printer = std::cell::RefCell::new(report::Printer::new(args_view(&args), &probes));
    if let Some(pid) = args.pid.pid {
        printer.borrow_mut().remember(pid);
    }
    if !args.json {
        printer.borrow().header(&mut out)?;
        out.flush()?;
    }
    let rings: Vec<&dyn libbpf_rs::MapCore> = vec![&skels[0].maps.events];
    let lost: Vec<&u64> = skels.iter().filter_map(|s| s.maps.bss_data.as_ref()).map(|b| &b.lost).collect();
    EventStream::shared(rings, lost, "events").run(
        &signals,
        &mut out,
        args.json,
        || printer.borrow().done(),
        |out, data| {
            printer.borrow_mut().event(out, data)?;
            Ok(())
        },
    )?;
    printer.borrow().finish(&mut out)?;
    out.flush()?;
    drop(links);
    Ok(())
}

fn args_view(args: &Args) -> report::Options {
    report::Options {
        timestamp: args.timestamp,
        unix_timestamp: args.unix_timestamp,
        time: args.time,
        print_cpu: args.print_cpu,
        name: args.name.clone(),
        msg_filter: args.msg_filter.clone(),
        max_events: args.max_events,
        aggregate: args.aggregate,
        json: args.json,
        kernel_stack: args.kernel_stack,
        user_stack: args.user_stack,
        address: args.address,
    }
}
