//! gethostlatency: show the latency of getaddrinfo/gethostbyname[2] calls (BCC's tool, CO-RE).
//!
//! Uprobes on entry and uretprobes on return of the resolver functions of the C library time each call in BPF and
//! send one ring-buffer record per completed call; this front end prints them in BCC's columns or as JSON lines.
//! The C library is the traced process's own (`-p`, through `/proc/PID/root`), the system's, or the file named
//! with `-l`. Everything shared with other tools lives in `common`.

mod bpf;
mod report;

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, object_storage};
use common::attach::ring_buffer::poll_ring_buffer;
use common::output::stdout::Output;
use common::process::procmaps;
use common::run::{self, Signals};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{ErrorKind, Link, ProgramMut, UprobeOpts};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Report, FUNCS};

const EXAMPLES: &str = "\
examples:
    gethostlatency                # time getaddrinfo/gethostbyname[2] calls
    gethostlatency -p 181         # only trace PID 181 (its own libc, also inside a container)
    gethostlatency -l /usr/lib/x86_64-linux-gnu/libc.so.6   # probe this libc
    gethostlatency -j             # print JSON lines";

/// Show latency for getaddrinfo/gethostbyname[2] calls.
#[derive(Debug, Parser)]
#[command(name = "gethostlatency", version, after_help = EXAMPLES)]
struct Args {
    /// Trace this PID only
    #[arg(short = 'p', long, value_parser = common::cli::parse_pid)]
    pid: Option<u32>,
    /// The libc (or any library or executable with these functions) to probe
    #[arg(short = 'l', long, value_name = "LIBC")]
    libc: Option<PathBuf>,
    /// JSON output: one object per call, latency in nanoseconds
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main);

fn main(argv: Vec<OsString>) -> ExitCode {
    let args: Args = common::cli::parse(argv);
    run::bpf_main(args.verbose, || gethostlatency(args))
}

fn gethostlatency(args: Args) -> Result<()> {
    args.pid.map(common::cli::require_process).transpose()?;
    let libc = libc_path(&args)?;
    let signals = Signals::install()?;

    let (skel, _mech) = load_first_working(&[Attach::Uprobe], args.verbose.on(), |mech| load(&args, mech))?;
    let links = attach(&skel, args.pid, &libc)?;
    if args.verbose.on() {
        eprintln!("probing {} uprobes in {}", links.len(), libc.display());
    }

    let mut out = Output::new();
    let report = Report::new(args.json);
    report.write_header(&mut out)?;
    poll_ring_buffer(&signals, &skel.maps.events, || false, |data| report.write_call(&mut out, data))?;
    drop(links);

    if let Some(bss) = skel.maps.bss_data.as_ref() {
        if bss.lost > 0 {
            eprintln!("gethostlatency: {} calls lost: the ring buffer was full", bss.lost);
        }
        if bss.untimed > 0 {
            eprintln!("gethostlatency: {} calls not timed: too many threads inside resolver calls", bss.untimed);
        }
    }
    Ok(())
}

/// The file to probe: `-l`, else the C library of the `-p` process, else the system's; checked readable here so
/// that a bad path is one clear error.
fn libc_path(args: &Args) -> Result<PathBuf> {
    let path = match (&args.libc, args.pid) {
        (Some(path), _) => path.clone(),
        (None, Some(pid)) => procmaps::process_libc(pid)?,
        (None, None) => procmaps::system_libc()?,
    };
    let mut file = fs::File::open(&path).with_context(|| format!("cannot read libc {}", path.display()))?;
    let mut magic = [0u8; 4];
    if !file.metadata()?.is_file() || file.read_exact(&mut magic).is_err() || magic != *b"\x7fELF" {
        bail!("libc {} is not an ELF file", path.display());
    }
    Ok(path)
}

/// Opens the BPF object, sets its options and loads it.
fn load(args: &Args, mech: Attach) -> Result<BpfSkel<'static>> {
    let mut open = BpfSkelBuilder::default().open(object_storage()).context("opening the BPF object")?;
    let rodata = open.maps.rodata_data.as_deref_mut().context("BPF object has no read-only data")?;
    rodata.target_pid = args.pid.unwrap_or(0);
    open.load().with_context(|| format!("loading the BPF programs ({mech})"))
}

/// Attaches a uretprobe and a uprobe to each resolver function that `libc` has (in process `pid` only, if given).
fn attach(skel: &BpfSkel<'static>, pid: Option<u32>, libc: &Path) -> Result<Vec<Link>> {
    let pid = pid.map_or(-1, |p| p as i32);
    let p = &skel.progs;
    let entries = [
        &p.getaddrinfo_entry,
        &p.gethostbyname_entry,
        &p.gethostbyname2_entry,
        &p.gethostbyname_r_entry,
        &p.gethostbyname2_r_entry,
    ];
    // Return probes first: then every entry the BPF side records is sure to see its return.
    let mut links = Vec::new();
    let mut present = Vec::new();
    for (i, func) in FUNCS.iter().enumerate() {
        match attach_uprobe(&p.resolver_return, pid, libc, func, true) {
            Ok(link) => {
                links.push(link);
                present.push(i);
            }
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            Err(err) => {
                return Err(err).with_context(|| format!("attaching a uretprobe to {func} in {}", libc.display()))
            }
        }
    }
    if present.is_empty() {
        bail!("{} has none of the functions {}", libc.display(), FUNCS.join(", "));
    }
    for i in present {
        let link = attach_uprobe(entries[i], pid, libc, FUNCS[i], false)
            .with_context(|| format!("attaching a uprobe to {} in {}", FUNCS[i], libc.display()))?;
        links.push(link);
    }
    Ok(links)
}

/// Attaches `prog` to function `func` of `binary` by name: libbpf finds the symbol (versioned ones included).
fn attach_uprobe(
    prog: &ProgramMut<'_>,
    pid: i32,
    binary: &Path,
    func: &str,
    retprobe: bool,
) -> libbpf_rs::Result<Link> {
    let opts = UprobeOpts { func_name: Some(func.to_string()), retprobe, ..Default::default() };
    prog.attach_uprobe_with_opts(pid, binary, 0, opts)
}
