// SPDX-License-Identifier: Apache-2.0 OR MIT
//! syncsnoop: trace sync() family syscalls (BCC's tool, CO-RE).
//!
//! The BPF side records each sync, fsync, fdatasync, msync, sync_file_range and syncfs call at its entry through
//! the syscalls tracepoints the kernel has, filtered on PID in the kernel, and sends it through a ring buffer. This
//! front end prints BCC's columns (`TIME(s) COMM CALL`, the time in seconds of the monotonic clock) or JSON lines,
//! and reports any call it could not deliver.

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{
    attach_loaded_tracepoints, load_first_working, open_skeleton_core_free, rodata, skip_tracepoint,
};
use common::host::Host;
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, monotonic_ns, Output};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use serde::Serialize;

use bpf::types::event;
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a #[repr(C)] struct of integers and integer arrays; the BPF side fills every field it sends.
unsafe impl plain::Plain for event {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per system call that flushes file data to storage: sync, syncfs, fsync, fdatasync, msync or
/// sync_file_range.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per call, with its file descriptor
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

/// The calls by their CALL_* number in syncsnoop.h, as tracepoint names (and as the CALL column shows them).
const CALLS: [&str; 7] = ["sync", "fsync", "fdatasync", "msync", "sync_file_range", "syncfs", "sync_file_range2"];

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| syncsnoop(args, signals))
}

/// One call, as JSON.
#[derive(Serialize)]
struct Call<'a> {
    time: String,
    /// Seconds since tracing started (the TIME(s) column counts from boot, as BCC's).
    ts: f64,
    pid: u32,
    tid: u32,
    comm: Name,
    call: &'a str,
    /// The file descriptor, for the calls that take one.
    #[serde(skip_serializing_if = "Option::is_none")]
    fd: Option<i32>,
    /// msync's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    addr: Option<u64>,
}

fn syncsnoop(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    let mut out = Output::new();
    if !args.json {
        writeln!(out, "{:<18} {:<16} CALL", "TIME(s)", "COMM")?;
        out.flush()?;
    }
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let start_ns = monotonic_ns();
    EventStream::new(&skel.maps.events, &bss.lost, "syncs").print(&signals, &mut out, args.json, |out, data| {
        let mut e = event::default();
        // SAFETY: event is Plain (any bytes are a valid value).
        let bytes = unsafe { plain::as_mut_bytes(&mut e) };
        let n = data.len().min(bytes.len());
        bytes[..n].copy_from_slice(&data[..n]);
        let call = CALLS.get(e.call as usize).copied().unwrap_or("N/A");
        let comm = Name::from_c(&e.comm);
        if args.json {
            let takes_fd = !matches!(call, "sync" | "msync");
            out.json_line(&Call {
                time: clock_rfc3339(),
                ts: e.ts_ns.saturating_sub(start_ns) as f64 / 1e9,
                pid: e.pid,
                tid: e.tid,
                comm,
                call,
                fd: takes_fd.then_some(e.arg0 as i32),
                addr: (call == "msync").then_some(e.arg0),
            })?;
        } else {
            writeln!(out, "{:<18.9} {comm:<16} {call}", e.ts_ns as f64 / 1e9)?;
            out.flush()?;
        }
        Ok(())
    })
}

/// Opens the BPF object, sets its filter, loads it and attaches the tracepoints this kernel has (sync_file_range2
/// exists only on some architectures; any other missing one is skipped too, and named with -v).
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let tracefs = common::attach::features::tracefs()?;
    let present: Vec<&str> =
        CALLS.into_iter().filter(|c| tracefs.join(format!("events/syscalls/sys_enter_{c}")).exists()).collect();
    if present.is_empty() {
        bail!("this kernel has none of the sync syscall tracepoints (syscalls:sys_enter_{{{}}})", CALLS.join(","));
    }
    let mut open = open_skeleton_core_free::<BpfSkelBuilder>()?;
    rodata(&mut open.maps.rodata_data)?.target_tgid = args.pid.pid.unwrap_or(0);
    // Each program's section names its tracepoint: the loader keeps those of the calls this kernel has.
    for call in CALLS.into_iter().filter(|c| !present.contains(c)) {
        skip_tracepoint(open.open_object_mut(), &format!("sys_enter_{call}"));
        if args.verbose.on() {
            eprintln!(
                "{}: no tracepoint syscalls:sys_enter_{call} on this kernel; not traced",
                common::identity::invoked_name()
            );
        }
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = Links::from(attach_loaded_tracepoints(skel.object(), "syscalls")?);
    Ok((skel, links))
}
