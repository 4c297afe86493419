// SPDX-License-Identifier: Apache-2.0 OR MIT
//! syscount: summarize syscall counts and latencies (BCC's tool, CO-RE).
//!
//! Counts every syscall as it returns (raw_syscalls sys_exit; with `-L` also sys_enter, for its time), per
//! syscall or per process (`-P`), in kernel maps filtered in BPF by PID, TID, parent, cgroup, syscall, failure
//! or errno; this front end prints the top entries of each interval in BCC's layout or as JSON lines
//! ([`report`]). Syscall and errno names come from `common::domain::syscalls`.

mod bpf;
mod exec;
mod maps;
mod report;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata, skip_tracepoint,
};
use common::attach::maps::DropCounter;
use common::cli::filter::open_filtered;
use common::cli::{parse_interval_secs, parse_positive_u64, require_process};
use common::domain::container_names::ContainerLabelArgs;
use common::domain::syscalls;
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals, Tick};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// System calls counted per call or per process, with their total latency on demand.
#[derive(Debug, Parser)]
#[command(name = "syscount", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    tid: common::cli::filter::TidArg,
    /// Only calls made by the children of this process (their parent's PID)
    #[arg(short = 'c', long, value_parser = common::cli::parse_pid)]
    ppid: Option<u32>,
    /// Only calls made by tasks of this cgroup (a cgroup v2 directory)
    #[arg(long, value_name = "CGROUP_PATH")]
    cgroup: Option<PathBuf>,
    /// Print and reset the table every this many seconds
    #[arg(short = 'i', long, value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many seconds
    #[arg(short = 'd', long, value_parser = parse_interval_secs)]
    duration: Option<u64>,
    /// Print this many rows, the largest first (by count, or by time with -L)
    #[arg(short = 'T', long, default_value_t = 10, value_parser = parse_positive_u64)]
    top: u64,
    /// Count only calls that returned an error (a negative value)
    #[arg(short = 'x', long)]
    failures: bool,
    /// Count only calls that failed with this error (a number, or a name such as ENOENT)
    #[arg(short = 'e', long, value_parser = parse_errno)]
    errno: Option<i32>,
    /// Also time the calls and sort by total time
    #[arg(short = 'L', long)]
    latency: bool,
    /// With -L, print the times in milliseconds instead of microseconds
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// One row per process instead of one per system call
    #[arg(short = 'P', long)]
    process: bool,
    /// Print the system call names this tool knows, then exit
    #[arg(short = 'l', long)]
    list: bool,
    /// Count only this system call (-l lists the names)
    #[arg(long, value_name = "SYSCALL", value_parser = parse_syscall)]
    syscall: Option<u32>,
    /// Run this command (everything after --exec is its command line, e.g. --exec ls -l /tmp) and count its
    /// system calls until it exits
    #[arg(long, value_name = "CMD", num_args = 1.., allow_hyphen_values = true, trailing_var_arg = true,
          conflicts_with = "pid")]
    exec: Option<Vec<OsString>>,
    /// JSON output: one object per interval, the top entries with exact counts and nanoseconds
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    containers: ContainerLabelArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    if args.list {
        // Needs neither privileges nor BPF.
        return host.main(list);
    }
    host.bpf_main(args.verbose, |signals| syscount(args, &host, signals))
}

/// An errno by name (`ENOENT`) or number, as BCC's `-e`.
fn parse_errno(s: &str) -> Result<i32, String> {
    syscalls::errno_number(s).ok_or_else(|| format!("couldn't map {s} to an errno"))
}

/// A syscall of this architecture by name.
fn parse_syscall(s: &str) -> Result<u32, String> {
    syscalls::number(s).ok_or_else(|| format!("syscall '{s}' not found (syscount -l lists them)"))
}

/// `-l`: the syscall names, sorted, four to a line as BCC prints them.
fn list() -> Result<()> {
    let mut names: Vec<&str> = syscalls::all().into_iter().map(|(_, name)| name).collect();
    names.sort_unstable();
    let mut out = Output::new();
    for row in names.chunks(4) {
        let cells: Vec<String> = row.iter().map(|n| format!("{n:<22}")).collect();
        writeln!(out, "{}", cells.join("   "))?;
    }
    out.flush()?;
    Ok(())
}

fn syscount(mut args: Args, host: &Host, signals: Signals) -> Result<()> {
    for pid in [args.pid.pid, args.tid.tid, args.ppid].into_iter().flatten() {
        require_process(pid)?;
    }
    // Forked before anything else (no thread exists yet), traced by its PID, run once attached.
    let mut command = args.exec.as_deref().map(exec::Command::fork).transpose()?;
    if let Some(command) = &command {
        args.pid.pid = Some(command.pid());
    }
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let mut containers = args.containers.open(args.export.prometheus.is_some(), args.process, "-P");
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.duration.is_some())?;

    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, cgroup.as_ref(), mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        if let Some(command) = command.as_mut() {
            command.start()?;
        }
        let report = Report::new(args.process, args.latency, false, args.top as usize, false);
        return endpoint.serve(&signals, |s| {
            if let Some(bss) = skel.maps.bss_data.as_ref() {
                s.map_full("processes", &bss.proc_map_full);
                s.map_full("start", &bss.start_map_full);
            }
            report.metrics(s, maps::read_totals(&skel, args.process)?, containers.as_mut());
            Ok(())
        });
    }

    let mut out = Output::new();
    if !args.json {
        let failed = if args.failures { "failed " } else { "" };
        match args.syscall {
            Some(nr) => writeln!(out, "Tracing {failed}syscall '{}'... Ctrl+C to quit.", syscalls::display_name(nr))?,
            None => writeln!(out, "Tracing {failed}syscalls, printing top {}... Ctrl+C to quit.", args.top)?,
        }
        out.flush()?;
    }
    if let Some(command) = command.as_mut() {
        command.start()?;
    }
    let mut report = Report::new(args.process, args.latency, args.milliseconds, args.top as usize, args.json);
    let mut drops = [
        DropCounter::new("syscalls from the per-process counts", "too many processes at once"),
        DropCounter::new("syscall latencies", "too many threads in syscalls at once"),
        DropCounter::new("syscalls", "their number is beyond the table"),
        DropCounter::new("32-bit (compat) syscalls", "not counted: their numbers are another table"),
    ];
    let interval = args.interval.or(args.duration);
    let count = args.duration.zip(interval).map(|(d, i)| d.div_ceil(i));
    run_intervals(&signals, interval.map(Duration::from_secs), count, |tick| {
        let totals = maps::read_totals(&skel, args.process)?;
        report.write(&mut out, totals, tick == Tick::Last)?;
        if args.process {
            // Exited processes have made their last call: forget them, so the map holds the live ones only.
            for pid in report.exited() {
                let _ = skel.maps.processes.delete(&pid.to_ne_bytes());
            }
        }
        check_drops(&skel, &mut drops);
        Ok(())
    })?;
    check_drops(&skel, &mut drops);
    Ok(())
}

/// Reports, on stderr, what the BPF side could not count.
fn check_drops(skel: &BpfSkel<'_>, drops: &mut [DropCounter; 4]) {
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        drops[0].check(&bss.proc_map_full);
        drops[1].check(&bss.start_map_full);
        drops[2].check(&bss.out_of_range);
        drops[3].check(&bss.compat_calls);
    }
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, cgroup: Option<&std::fs::File>, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter().tid(args.tid))?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.target_ppid = args.ppid.unwrap_or(0);
    rodata.filter_cgroup = cgroup.is_some();
    rodata.filter_syscall = args.syscall.is_some();
    rodata.target_syscall = args.syscall.unwrap_or(0);
    rodata.execve_nr = syscalls::number("execve").map_or(-1, i64::from);
    rodata.execveat_nr = syscalls::number("execveat").map_or(-1, i64::from);
    rodata.filter_failed = args.failures;
    rodata.filter_errno = args.errno.unwrap_or(0);
    rodata.by_process = args.process;
    rodata.latency = args.latency;
    if args.process {
        open.maps.processes.set_max_entries(bpf::consts::MAX_PROCESSES as u32)?;
    }

    autoload_by_section(open.open_object_mut(), mech);
    if !args.latency {
        skip_tracepoint(open.open_object_mut(), "sys_enter");
        skip_tracepoint(open.open_object_mut(), "sched_process_exit");
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    // Filters are in place before the first program is attached.
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }

    let object = skel.object();
    let mut links = Vec::new();
    // sys_enter first, so that every call counted with -L has its entry time.
    if args.latency {
        links.push(attach_loaded_tracepoint(object, "sched", "sched_process_exit")?);
        links.push(attach_loaded_tracepoint(object, "raw_syscalls", "sys_enter")?);
    }
    links.push(attach_loaded_tracepoint(object, "raw_syscalls", "sys_exit")?);
    Ok((skel, links))
}
