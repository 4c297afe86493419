// SPDX-License-Identifier: Apache-2.0 OR MIT
//! opensnoop: trace open() syscalls (BCC's tool, CO-RE).
//!
//! The BPF side follows open, openat and openat2 from entry to return, filters on PID, TID, UID, cgroup, flags and
//! failure in the kernel, and sends one record per call through a ring buffer, with the names of the directories
//! above a relative path's base under `-F` (read from the dentry chain). This front end applies `-n` (a substring
//! of the command name, as BCC), prints BCC's columns or JSON lines, and reports any call it could not deliver.

mod bpf;
mod report;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, load_first_working, open_skeleton, open_skeleton_core_free, rodata};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Open, Printer, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per open(), openat() or openat2() call: process, file descriptor or error, and path.
#[derive(Debug, Parser)]
#[command(name = "opensnoop", version, after_help = EXAMPLES)]
struct Args {
    /// Add a first column with the seconds since tracing began
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Add a UID column
    #[arg(short = 'U', long = "print-uid")]
    print_uid: bool,
    /// Show only the calls that failed
    #[arg(short = 'x', long)]
    failed: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    #[command(flatten)]
    tid: common::cli::filter::TidArg,
    /// Only calls made by this user (UID)
    #[arg(short = 'u', long, value_parser = clap::value_parser!(u32).range(0..u32::MAX as i64))]
    uid: Option<u32>,
    /// Stop after this many seconds
    #[arg(short = 'd', long, value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
    /// Only calls from tasks whose command name contains this text
    #[arg(short = 'n', long)]
    name: Option<String>,
    /// Add FLAGS and MODE columns: the open flags and the mode given for a new file, in octal
    #[arg(short = 'e', long = "extended_fields")]
    extended_fields: bool,
    /// Only calls whose flags include this one (a name such as O_WRONLY or O_CREAT)
    #[arg(short = 'f', long = "flag_filter", value_name = "FLAG_FILTER", value_parser = report::parse_flag)]
    flag_filter: Vec<u64>,
    /// Print relative paths joined to the caller's working directory, so that every path is absolute
    #[arg(short = 'F', long = "full-path")]
    full_path: bool,
    /// Only calls made by tasks of this cgroup (a cgroup directory)
    #[arg(short = 'c', long = "cgroup", value_name = "CGROUP_PATH")]
    cgroup: Option<PathBuf>,
    /// Print JSON lines: an object per call, with the error's name when it failed
    #[arg(short = 'j', long)]
    json: bool,
    /// Size of the ring buffer the calls are sent through, in pages: a power of two (calls beyond a full
    /// buffer are counted as lost)
    #[arg(short = 'b', long = "buffer-pages", value_name = "BUFFER_PAGES", default_value_t = DEFAULT_BUFFER_PAGES,
          value_parser = parse_buffer_pages)]
    buffer_pages: u32,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// 4 MiB of 4 KiB pages: BCC's 64 pages lose calls in bursts that this keeps.
const DEFAULT_BUFFER_PAGES: u32 = 1024;

/// `-b`: pages of the ring buffer, a power of two (as BCC requires), at most 1 GiB of them.
fn parse_buffer_pages(s: &str) -> Result<u32, String> {
    let max = (1u64 << 30) / page_size();
    match s.trim().parse::<u64>() {
        Ok(n) if n.is_power_of_two() && n <= max => Ok(n as u32),
        _ => Err(format!("'{s}' is not a power of two from 1 to {max}")),
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| opensnoop(args, signals))
}

fn opensnoop(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    args.tid.tid.map(common::cli::require_thread).transpose()?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let verbose = args.verbose.on();
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, verbose, |mech| load_and_attach(&args, cgroup.as_ref(), mech))?;

    let mut out = Output::new();
    let mut printer = Printer::new(Style {
        json: args.json,
        timestamp: args.timestamp,
        uid: args.print_uid,
        tid: args.tid.tid.is_some(),
        extended: args.extended_fields,
        full_path: args.full_path,
    });
    printer.write_header(&mut out)?;

    // A duration too large for the clock is as good as none (it is range-checked at parsing, too).
    let deadline = args.duration.and_then(|d| Instant::now().checked_add(Duration::from_secs(d)));
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "opens")
        .also_dropped(&bss.inflight_full, "opens", "too many in flight")
        .run(
            &signals,
            &mut out,
            args.json,
            || deadline.is_some_and(|d| Instant::now() >= d),
            |out, data| {
                let open = Open::from_bytes(data);
                if args.name.as_ref().is_some_and(|n| !open.comm.text().contains(n.as_str())) {
                    return Ok(());
                }
                Ok(printer.write(out, &open)?)
            },
        )?;
    Ok(())
}

/// Opens the BPF object, sets its filters, loads it and attaches the syscall tracepoints (open and openat2 where
/// the kernel has them: arm64 has no open, kernels before 5.6 no openat2).
fn load_and_attach(args: &Args, cgroup: Option<&std::fs::File>, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    // Without -F no program loaded relocates against kernel types: libbpf need not read the kernel's BTF.
    let mut open =
        if args.full_path { open_skeleton::<BpfSkelBuilder>()? } else { open_skeleton_core_free::<BpfSkelBuilder>()? };
    open.maps.events.set_max_entries((u64::from(args.buffer_pages) * page_size()) as u32)?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.target_tgid = args.pid.pid.unwrap_or(0);
    rodata.self_tgid = std::process::id();
    rodata.target_tid = args.tid.tid.unwrap_or(0);
    rodata.filter_uid = args.uid.is_some();
    rodata.target_uid = args.uid.unwrap_or(0);
    rodata.filter_cgroup = cgroup.is_some();
    rodata.flag_mask = args.flag_filter.iter().fold(0, |m, f| m | f);
    rodata.failed_only = args.failed;
    // Each exit has a variant with -F's path walk; only the one in use is loaded (and CO-RE-relocated).
    let full = args.full_path;
    let p = &mut open.progs;
    for (plain, with_path) in [
        (&mut p.open_exit, &mut p.open_exit_full),
        (&mut p.openat_exit, &mut p.openat_exit_full),
        (&mut p.openat2_exit, &mut p.openat2_exit_full),
    ] {
        plain.set_autoload(!full);
        with_path.set_autoload(full);
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    // The cgroup filter is in place before the first program is attached.
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }
    let p = &skel.progs;
    let exit = |plain, with_path| if full { with_path } else { plain };
    let mut links = Links::default();
    // Exits first, so that no entry is left without its return.
    for (prog, name, required) in [
        (exit(&p.openat_exit, &p.openat_exit_full), "sys_exit_openat", true),
        (exit(&p.open_exit, &p.open_exit_full), "sys_exit_open", false),
        (exit(&p.openat2_exit, &p.openat2_exit_full), "sys_exit_openat2", false),
        (&p.openat_enter, "sys_enter_openat", true),
        (&p.open_enter, "sys_enter_open", false),
        (&p.openat2_enter, "sys_enter_openat2", false),
    ] {
        let tracefs = common::attach::features::tracefs()?;
        if !required && !tracefs.join("events/syscalls").join(name).exists() {
            if args.verbose.on() {
                eprintln!(
                    "{}: no tracepoint syscalls:{name} on this kernel; not traced",
                    common::identity::invoked_name()
                );
            }
            continue;
        }
        links.push(attach_tracepoint(prog, "syscalls", name, mech)?);
    }
    Ok((skel, links))
}
