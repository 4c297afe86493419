// SPDX-License-Identifier: Apache-2.0 OR MIT
//! gethostlatency: show the latency of getaddrinfo/gethostbyname[2] calls (BCC's tool, CO-RE).
//!
//! Uprobes on entry and uretprobes on return of the resolver functions of the C library time each call in BPF and
//! send one ring-buffer record per completed call; this front end prints them in BCC's columns or as JSON lines.
//! The C library is the traced process's own (`-p`, through `/proc/PID/root`), the system's (glibc, else musl),
//! or the file named with `-l` (absolute, relative to the current directory, or a library name the loader finds).
//! Where the kernel has uprobe_multi (6.6+) two links cover every function (entries, returns); else a uprobe per
//! function. Either way the links detach in parallel (common::attach::links). Everything shared lives in `common`.

mod bpf;
mod report;

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{autoload_by_section, load_first_working};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::process::elf::ElfSymbols;
use common::process::procmaps;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{Link, ProgramMut, UprobeMultiOpts, UprobeOpts};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Report, FUNCS};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per host name lookup through libc (getaddrinfo, gethostbyname, gethostbyname2) with its latency.
#[derive(Debug, Parser)]
#[command(name = "gethostlatency", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// The C library to probe: a path (absolute, or relative to the current directory) or a name the loader can
    /// find; any library or program that defines the lookup functions works
    #[arg(short = 'l', long, value_name = "LIBC")]
    libc: Option<PathBuf>,
    /// Print JSON lines: an object per lookup, latency in nanoseconds
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::UprobeMulti, Attach::Uprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| gethostlatency(args, signals))
}

fn gethostlatency(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let libc = libc_path(&args)?;
    let funcs = resolver_functions(&libc)?;

    let ((skel, links), mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        let skel = load(&args, mech)?;
        let links = attach(&skel, mech, args.pid.pid, &libc, &funcs)?;
        Ok((skel, links))
    })?;
    if args.verbose.on() {
        let names: Vec<&str> = funcs.iter().map(|&(i, _)| FUNCS[i]).collect();
        eprintln!("probing {} in {} ({} {mech} links)", names.join(", "), libc.display(), links.len());
    }

    let mut out = Output::new();
    let report = Report::new(args.json);
    report.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "calls")
        .print(&signals, &mut out, args.json, |out, data| report.write_call(out, data))?;
    drop(links);

    if bss.untimed > 0 {
        let tool = common::identity::invoked_name();
        eprintln!("{tool}: {} calls not timed: too many threads inside resolver calls", bss.untimed);
    }
    Ok(())
}

/// The file to probe: `-l`, else the C library of the `-p` process, else the system's; checked readable here so
/// that a bad path is one clear error.
fn libc_path(args: &Args) -> Result<PathBuf> {
    let path = match (&args.libc, args.pid.pid) {
        (Some(path), _) => procmaps::user_library_path(path).context("-l")?,
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

/// The resolver functions `libc` has, as (index in [`FUNCS`], file offset); fails if it has none. A statically
/// linked program is named as such.
fn resolver_functions(libc: &Path) -> Result<Vec<(usize, u64)>> {
    let symbols = ElfSymbols::read_named(libc, &FUNCS)?;
    let find = |name: &str| {
        let mut named = symbols.functions().iter().filter(|f| f.name == name);
        named.clone().find(|f| !f.hidden_version).or_else(|| named.next()).map(|f| f.file_offset)
    };
    let funcs: Vec<(usize, u64)> =
        FUNCS.iter().enumerate().filter_map(|(i, name)| find(name).map(|offset| (i, offset))).collect();
    if funcs.is_empty() {
        bail!("{} has none of the functions {}", libc.display(), FUNCS.join(", "));
    }
    Ok(funcs)
}

/// Opens the BPF object, sets its options, keeps the programs of mechanism `mech` and loads it.
fn load(args: &Args, mech: Attach) -> Result<BpfSkel<'static>> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    autoload_by_section(open.open_object_mut(), mech);
    open.load().with_context(|| format!("loading the BPF programs ({mech})"))
}

/// Attaches the return and entry programs to `funcs` of `libc` (in process `pid` only, if given), return probes
/// first: then every entry the BPF side records is sure to see its return.
fn attach(
    skel: &BpfSkel<'static>,
    mech: Attach,
    pid: Option<u32>,
    libc: &Path,
    funcs: &[(usize, u64)],
) -> Result<Links> {
    let pid = pid.map_or(-1, |p| p as i32);
    let p = &skel.progs;
    if mech == Attach::UprobeMulti {
        let multi = |prog: &ProgramMut<'_>, retprobe: bool| {
            let opts = UprobeMultiOpts {
                offsets: funcs.iter().map(|&(_, offset)| offset as usize).collect(),
                cookies: funcs.iter().map(|&(i, _)| i as u64).collect(),
                retprobe,
                ..Default::default()
            };
            prog.attach_uprobe_multi_with_opts(pid, libc, "", opts)
                .with_context(|| format!("attaching uprobe_multi to {}", libc.display()))
        };
        let returns = multi(&p.resolver_return_multi, true)?;
        let entries = multi(&p.resolver_entry_multi, false)?;
        return Ok(Links::from(vec![returns, entries]));
    }
    let entries = [
        &p.getaddrinfo_entry,
        &p.gethostbyname_entry,
        &p.gethostbyname2_entry,
        &p.gethostbyname_r_entry,
        &p.gethostbyname2_r_entry,
    ];
    let mut links = Links::default();
    for &(i, offset) in funcs {
        links.push(
            attach_uprobe(&p.resolver_return, pid, libc, offset, true)
                .with_context(|| format!("attaching a uretprobe to {} in {}", FUNCS[i], libc.display()))?,
        );
    }
    for &(i, offset) in funcs {
        links.push(
            attach_uprobe(entries[i], pid, libc, offset, false)
                .with_context(|| format!("attaching a uprobe to {} in {}", FUNCS[i], libc.display()))?,
        );
    }
    Ok(links)
}

/// Attaches `prog` at file offset `offset` of `binary`.
fn attach_uprobe(
    prog: &ProgramMut<'_>,
    pid: i32,
    binary: &Path,
    offset: u64,
    retprobe: bool,
) -> libbpf_rs::Result<Link> {
    let opts = UprobeOpts { retprobe, ..Default::default() };
    prog.attach_uprobe_with_opts(pid, binary, offset as usize, opts)
}
