// SPDX-License-Identifier: Apache-2.0 OR MIT
//! filelife: files created and deleted while tracing, with their age (BCC's tool, CO-RE).
//!
//! The BPF side keeps each file created while tracing, by inode and device, and sends one record when a kept file
//! is unlinked: from vfs_open/vfs_create/vfs_unlink (fentry, else kprobes) where the kernel lets its functions be
//! traced, else from the open/creat and unlink system calls' tracepoints (filelife.bpf.c says how a creation and
//! the unlinked file are told there). This front end prints BCC's columns or JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, autoload_by_section, load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Death, Printer};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Files created and then deleted while tracing: who deleted each one, and how old it was.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Show each file's path from the root, read from the directories above it when it is deleted
    #[arg(short = 'F', long = "full-path")]
    full_path: bool,
    /// Print JSON lines: an object per deleted file, with its age in nanoseconds and its inode
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// vfs_open/vfs_create/vfs_unlink through fentry/fexit or kprobes (BCC's hooks); the open, creat and unlink
/// system calls' tracepoints where kernel functions cannot be traced.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| filelife(args, signals))
}

fn filelife(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    let mut out = Output::new();
    let mut printer = Printer::new(args.json);
    printer.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "deletions")
        .also_dropped(&bss.born_full, "creations", "too many files followed at once")
        .also_dropped(&bss.inflight_full, "calls", "too many in progress")
        .print(&signals, &mut out, args.json, |out, data| {
            Ok(printer.write(out, &Death::from_bytes(data, args.full_path))?)
        })?;
    Ok(())
}

/// The argument slot of `struct dentry *` in kernel function `func` and its number of arguments, from BTF.
fn dentry_slot(func: &str) -> Option<(u32, u32)> {
    let params = common::probe::kfunc::kernel_params(func)?;
    let slot = params.iter().position(|p| p.name == "dentry")?;
    Some((slot as u32, params.len() as u32))
}

/// The open-like and unlink-like system calls by tracepoint name. Which exist depends on the architecture (arm64
/// has no open, creat or unlink of its own).
const OPENS: [&str; 4] = ["open", "openat", "openat2", "creat"];
const UNLINKS: [&str; 2] = ["unlink", "unlinkat"];

/// Opens the BPF object, sets its filter and the kernel's argument layout, keeps the programs of `mech`, loads and
/// attaches them: each call's return before its start, so that no start is kept with nobody to end it.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.full_path = args.full_path;
    let mut present: Vec<&str> = Vec::new();
    let mut fexit_layout = (0, 0);
    if mech == Attach::Tracepoint {
        let tracefs = common::attach::features::tracefs()?;
        present = OPENS
            .into_iter()
            .chain(UNLINKS)
            .filter(|c| tracefs.join(format!("events/syscalls/sys_enter_{c}")).exists())
            .collect();
        if !present.contains(&"unlinkat") || !present.contains(&"openat") {
            bail!("this kernel has no syscalls:sys_enter_openat or sys_enter_unlinkat tracepoint");
        }
    } else {
        let (create, nargs) = dentry_slot("vfs_create").unwrap_or((2, 5));
        let (unlink, unlink_nargs) = dentry_slot("vfs_unlink").unwrap_or((2, 4));
        if !(1..=2).contains(&create) || create + 3 != nargs || !(1..=2).contains(&unlink) || unlink + 2 != unlink_nargs
        {
            bail!("vfs_create or vfs_unlink takes arguments this tool does not know (BTF: dentry at {create} of {nargs}, {unlink} of {unlink_nargs})");
        }
        (ro.create_dentry_arg, ro.unlink_dentry_arg) = (create, unlink);
        fexit_layout = (nargs, unlink_nargs);
    }
    autoload_by_section(open.open_object_mut(), mech);
    if mech == Attach::Fentry {
        let p = &mut open.progs;
        p.vfs_create_fexit4.set_autoload(fexit_layout.0 == 4);
        p.vfs_create_fexit5.set_autoload(fexit_layout.0 == 5);
        p.vfs_unlink_fexit3.set_autoload(fexit_layout.1 == 3);
        p.vfs_unlink_fexit4.set_autoload(fexit_layout.1 == 4);
    }
    if mech == Attach::Tracepoint {
        let p = &mut open.progs;
        for (call, prog) in [
            ("open", &mut p.open_enter),
            ("openat2", &mut p.openat2_enter),
            ("creat", &mut p.creat_enter),
            ("unlink", &mut p.unlink_enter),
        ] {
            prog.set_autoload(present.contains(&call));
        }
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let p = &skel.progs;
    let links = match mech {
        Attach::Fentry => vec![
            if fexit_layout.1 == 3 { &p.vfs_unlink_fexit3 } else { &p.vfs_unlink_fexit4 }
                .attach()
                .context("attaching to vfs_unlink (fexit)")?,
            if fexit_layout.0 == 4 { &p.vfs_create_fexit4 } else { &p.vfs_create_fexit5 }
                .attach()
                .context("attaching to vfs_create (fexit)")?,
            p.vfs_unlink_fentry.attach().context("attaching to vfs_unlink (fentry)")?,
            p.vfs_create_fentry.attach().context("attaching to vfs_create (fentry)")?,
            p.vfs_open_fentry.attach().context("attaching to vfs_open (fentry)")?,
        ],
        Attach::Kprobe => vec![
            p.vfs_unlink_kretprobe.attach_kprobe(true, "vfs_unlink").context("kretprobe vfs_unlink")?,
            p.vfs_create_kretprobe.attach_kprobe(true, "vfs_create").context("kretprobe vfs_create")?,
            p.vfs_unlink_kprobe.attach_kprobe(false, "vfs_unlink").context("kprobe vfs_unlink")?,
            p.vfs_create_kprobe.attach_kprobe(false, "vfs_create").context("kprobe vfs_create")?,
            p.vfs_open_kprobe.attach_kprobe(false, "vfs_open").context("kprobe vfs_open")?,
        ],
        _ => {
            let mut links = Vec::new();
            for call in &present {
                let exit = if UNLINKS.contains(call) { &p.unlink_exit } else { &p.open_exit };
                links.push(attach_tracepoint(exit, "syscalls", &format!("sys_exit_{call}"), mech)?);
            }
            for (call, prog) in [
                ("open", &p.open_enter),
                ("openat", &p.openat_enter),
                ("openat2", &p.openat2_enter),
                ("creat", &p.creat_enter),
                ("unlink", &p.unlink_enter),
                ("unlinkat", &p.unlinkat_enter),
            ] {
                if present.contains(&call) {
                    links.push(attach_tracepoint(prog, "syscalls", &format!("sys_enter_{call}"), mech)?);
                }
            }
            links
        }
    };
    Ok((skel, links.into()))
}
