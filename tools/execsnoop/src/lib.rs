// SPDX-License-Identifier: Apache-2.0 OR MIT
//! execsnoop: trace new processes via exec() syscalls (BCC's tool, CO-RE).
//!
//! The BPF side follows execve and execveat from entry to return in the calling thread, copies the file name and
//! the argv the caller passed at entry (what was not in memory then, from the new program at return), reads the
//! parent PID and name from the task, and sends one record per exec through a ring buffer; UID, parent-PID and cgroup filters and the drop of failed execs run in the kernel. This front end applies the
//! regular expressions of `-n` and `-l` (as BCC does, in user space), prints BCC's columns or JSON lines, and
//! reports on stderr every exec the kernel side could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, load_first_working, open_skeleton, rodata};
use common::cli::parse_pid;
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;
use regex_lite::Regex;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Exec, Printer, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per program started with execve() or execveat(): command, PIDs, return value and arguments.
#[derive(Debug, Parser)]
#[command(name = "execsnoop", version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the time of day (HH:MM:SS)
    #[arg(short = 'T', long)]
    time: bool,
    /// Start each line with the seconds since tracing began
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Show calls that failed as well (they print a negative return value)
    #[arg(short = 'x', long)]
    fails: bool,
    /// Only programs started by this user (a UID or a user name)
    #[arg(short = 'u', long, value_name = "USER", value_parser = common::cli::parse_uid)]
    uid: Option<u32>,
    /// Print each argument in double quotes
    #[arg(short = 'q', long)]
    quote: bool,
    /// Only print calls whose command name matches this regular expression
    #[arg(short = 'n', long, value_parser = parse_regex)]
    name: Option<Regex>,
    /// Only print calls where some argument matches this regular expression
    #[arg(short = 'l', long, value_parser = parse_regex)]
    line: Option<Regex>,
    /// Add a UID column
    #[arg(short = 'U', long = "print-uid")]
    print_uid: bool,
    /// Add a column with the CPU the call ran on
    #[arg(short = 'C', long = "print-cpu")]
    print_cpu: bool,
    /// Add a PARENT column: the command name of the caller's parent
    #[arg(short = 'M', long = "print-pcomm")]
    print_pcomm: bool,
    /// Print at most this many arguments per call (default 20); more are shown as "..."
    #[arg(long = "max-args", value_name = "MAX_ARGS", default_value = "20", value_parser = parse_max_args)]
    max_args: u32,
    /// Only programs started by children of this process (PPID)
    #[arg(short = 'P', long, value_name = "PPID", value_parser = parse_pid)]
    ppid: Option<u32>,
    /// Only programs started by tasks of this cgroup (a cgroup directory)
    #[arg(short = 'c', long = "cgroup", value_name = "CGROUP_PATH")]
    cgroup: Option<PathBuf>,
    /// Print JSON lines: an object per call, with its arguments as an array
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| execsnoop(args, signals))
}

fn parse_regex(s: &str) -> Result<Regex, String> {
    Regex::new(s).map_err(|e| format!("'{s}' is not a regular expression: {e}"))
}

fn parse_max_args(s: &str) -> Result<u32, String> {
    let max = bpf::consts::TOTAL_MAX_ARGS;
    match s.parse::<u32>() {
        Ok(n @ 1..) if n as usize <= max => Ok(n),
        _ => Err(format!("'{s}' is not a number of arguments from 1 to {max}")),
    }
}

fn execsnoop(args: Args, signals: Signals) -> Result<()> {
    args.ppid.map(common::cli::require_process).transpose()?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, cgroup.as_ref(), mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(Style {
        json: args.json,
        clock: args.time,
        timestamp: args.timestamp,
        uid: args.print_uid,
        cpu: args.print_cpu,
        pcomm: args.print_pcomm,
        quote: args.quote,
    });
    printer.write_header(&mut out)?;

    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "execs")
        .also_dropped(&bss.inflight_full, "execs", "too many in flight")
        .print(&signals, &mut out, args.json, |out, data| {
            let exec = Exec::from_bytes(data, args.max_args as usize);
            if args.name.as_ref().is_some_and(|re| !re.is_match(&exec.comm.text()))
                || args.line.as_ref().is_some_and(|re| !re.is_match(&exec.args.join(" ")))
            {
                return Ok(());
            }
            Ok(printer.write(out, &exec)?)
        })?;
    Ok(())
}

/// Opens the BPF object, sets its filters, loads it and attaches the four syscall tracepoints and
/// sched_process_exec (which follows an exec from a thread other than the main one).
fn load_and_attach(args: &Args, cgroup: Option<&std::fs::File>, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.max_args = args.max_args;
    rodata.filter_uid = args.uid.is_some();
    rodata.target_uid = args.uid.unwrap_or(0);
    rodata.target_ppid = args.ppid.unwrap_or(0);
    rodata.filter_cgroup = cgroup.is_some();
    rodata.fails = args.fails;
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    // The cgroup filter is in place before the first program is attached.
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }
    let p = &skel.progs;
    let links = [
        (&p.execve_exit, "syscalls", "sys_exit_execve"),
        (&p.execveat_exit, "syscalls", "sys_exit_execveat"),
        (&p.exec_rekey, "sched", "sched_process_exec"),
        (&p.execve_enter, "syscalls", "sys_enter_execve"),
        (&p.execveat_enter, "syscalls", "sys_enter_execveat"),
    ]
    .into_iter()
    .map(|(prog, category, name)| attach_tracepoint(prog, category, name, mech))
    .collect::<Result<Links>>()?;
    Ok((skel, links))
}
