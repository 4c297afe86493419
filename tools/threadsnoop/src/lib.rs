// SPDX-License-Identifier: Apache-2.0 OR MIT
//! threadsnoop: list new threads as pthread_create() starts them, with the start routine's name (BCC's tool,
//! CO-RE).
//!
//! A uprobe on `pthread_create` in the system's C library (glibc 2.34+ has it in libc.so.6; older systems in
//! libpthread.so.0) sends one ring-buffer record per call (`threadsnoop.bpf.c`): the caller, and the start
//! routine's address with the file mapped there. This front end names the routine with blazesym: through the
//! creating process's memory maps while it lives, else through the recorded file and offset ([`names`]), else
//! prints the address in hex as BCC does; and prints BCC's `TIME(ms) PID COMM FUNC` columns or JSON lines.
//! uprobe_multi (6.6+) is tried first, then a classic uprobe.

mod bpf;
mod names;
mod report;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{autoload_by_section, load_first_working, open_skeleton};
use common::attach::uprobe;
use common::host::Host;
use common::output::stdout::Output;
use common::process::procmaps;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The probed function.
const FUNCTION: &str = "pthread_create";

/// List new threads as pthread_create() starts them, with each start routine's name
#[derive(Debug, Parser)]
#[command(name = "threadsnoop", version, after_help = EXAMPLES)]
struct Args {
    /// JSON output: one object per new thread, with exact times and the routine's address
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::UprobeMulti, Attach::Uprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| threadsnoop(args, signals))
}

fn threadsnoop(args: Args, signals: Signals) -> Result<()> {
    let (library, offset) = pthread_library()?;
    let ((skel, _link), mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        let (skel, with_file) = match load(mech, true) {
            Ok(skel) => (skel, true),
            Err(_) if mech == Attach::Uprobe => (load(mech, false)?, false),
            Err(err) => return Err(err),
        };
        if args.verbose.on() && !with_file {
            eprintln!(
                "this kernel cannot look up mappings (bpf_find_vma): routines of exited processes print as addresses"
            );
        }
        let prog = match (mech, with_file) {
            (Attach::UprobeMulti, _) => &skel.progs.pthread_create_multi,
            (_, true) => &skel.progs.pthread_create_entry,
            (_, false) => &skel.progs.pthread_create_entry_nofile,
        };
        let link: Link = uprobe::attach(prog, mech, None, &library, offset, false)?;
        Ok((skel, link))
    })?;
    if args.verbose.on() {
        eprintln!("probing {FUNCTION} at offset {offset:#x} of {} ({mech})", library.display());
    }

    let mut out = Output::new();
    let mut report = Report::new(args.json, args.verbose.on());
    report.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "thread creations").print(
        &signals,
        &mut out,
        args.json,
        |out, data| report.write_event(out, data),
    )
}

/// The library that defines pthread_create, and its offset there: the system's C library (glibc 2.34+, musl),
/// else libpthread.so.0 (older glibc).
fn pthread_library() -> Result<(PathBuf, u64)> {
    let mut tried = Vec::new();
    let candidates = [procmaps::system_libc().ok(), procmaps::system_library("libpthread.so.0")];
    for library in candidates.into_iter().flatten() {
        if let Some(offset) = uprobe::function_offset(&library, FUNCTION)? {
            return Ok((library, offset));
        }
        tried.push(library.display().to_string());
    }
    if tried.is_empty() {
        bail!("cannot find the system C library (libc.so.6) or libpthread.so.0");
    }
    bail!("no {FUNCTION} in {}", tried.join(" or "))
}

/// Opens the BPF object, keeps the program of mechanism `mech` (the one that records the routine's file if
/// `with_file`, else the copy for kernels before 5.13 that does not) and loads it.
fn load(mech: Attach, with_file: bool) -> Result<BpfSkel<'static>> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    autoload_by_section(open.open_object_mut(), mech);
    let (keep_off, name) = if with_file {
        (&mut open.progs.pthread_create_entry_nofile, "")
    } else {
        (&mut open.progs.pthread_create_entry, " without mapping lookup")
    };
    keep_off.set_autoload(false);
    open.load().with_context(|| format!("loading the BPF program ({mech}{name})"))
}
