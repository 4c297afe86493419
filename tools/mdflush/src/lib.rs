// SPDX-License-Identifier: Apache-2.0 OR MIT
//! mdflush: one line per flush request an md (software RAID) array receives (BCC's tool, CO-RE).
//!
//! The BPF side (`mdflush.bpf.c`) sees each request at md_flush_request (fentry, else a kprobe, as BCC) or, where
//! kernel functions cannot be traced or the md driver is not loaded yet, as a REQ_PREFLUSH bio queued to an md
//! disk (block:block_bio_queue, tp_btf else raw_tp), and sends the task and the array's name through a ring
//! buffer. This front end prints BCC's columns (`TIME PID COMM DEVICE`) or JSON lines, and reports any request it
//! could not deliver.

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton};
use common::attach::maps::{c_string, from_bytes};
use common::host::Host;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;
use serde::Serialize;

use bpf::types::event;
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a #[repr(C)] struct of integers and char arrays; the BPF side fills every field it sends.
unsafe impl plain::Plain for event {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The md driver's function that receives every flush request of an array.
const MD_FLUSH: &str = "md_flush_request";

/// Print a line for each cache flush request an md (software RAID) array receives, with the process that sent
/// it.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Print JSON lines: an object per flush request
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// md_flush_request as BCC traces it (fentry, else a kprobe); the block layer's tracepoint where kernel functions
/// cannot be traced or the md module is not loaded.
pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| mdflush(args, signals))
}

/// One flush request, as JSON.
#[derive(Serialize)]
struct Flush {
    time: String,
    pid: u32,
    tid: u32,
    comm: Name,
    device: String,
}

/// Whether md arrays can exist on this kernel: the md driver is built in or loaded (/sys/module/md_mod, which
/// the driver's parameters make for a built-in driver too), or this kernel has it as a module to load.
fn md_driver_present() -> bool {
    if Path::new("/sys/module/md_mod").exists() {
        return true;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let dir = format!("/lib/modules/{}/kernel/drivers/md", release.trim());
    std::fs::read_dir(dir)
        .is_ok_and(|entries| entries.flatten().any(|e| e.file_name().to_string_lossy().starts_with("md-mod.ko")))
}

fn mdflush(args: Args, signals: Signals) -> Result<()> {
    // Without the driver no array can ever be made, so no line could ever come: say so rather than wait.
    if !md_driver_present() {
        bail!("this kernel has no md driver (no /sys/module/md_mod, no md-mod module to load): no md array can exist");
    }
    // The tracepoint's form: (bio) since 5.11, (q, bio) before; read once for every step of the ladder.
    let bio_queue_arity = KernelBtf::load()?.tracepoint_arity("block_bio_queue");
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, bio_queue_arity, mech))?;
    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Tracing md flush requests... Hit Ctrl-C to end.")?;
        writeln!(out, "{:<8} {:<7} {:<16} DEVICE", "TIME", "PID", "COMM")?;
        out.flush()?;
    }
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "flush requests").print(
        &signals,
        &mut out,
        args.json,
        |out, data| {
            let e: event = from_bytes(data);
            let comm = Name::from_c(&e.comm);
            let device = c_string(&e.disk);
            if args.json {
                out.json_line(&Flush { time: clock_rfc3339(), pid: e.pid, tid: e.tid, comm, device })?;
            } else {
                writeln!(out, "{:<8} {:<7} {comm:<16} {device}", clock_hms(), e.pid)?;
                out.flush()?;
            }
            Ok(())
        },
    )
}

/// Opens the BPF object, keeps the programs of one attach mechanism (on the tracepoint, the pair written for the
/// kernel's form of it, `bio_queue_arity` arguments), loads and attaches them.
fn load_and_attach(args: &Args, bio_queue_arity: Option<usize>, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let kernel_function = matches!(mech, Attach::Fentry | Attach::Kprobe);
    if kernel_function && !Path::new("/sys/module/md_mod").exists() {
        bail!("the md driver is not loaded (no /sys/module/md_mod), so {MD_FLUSH} cannot be traced");
    }
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    autoload_by_section(open.open_object_mut(), mech);
    if !kernel_function {
        let Some(arity) = bio_queue_arity else {
            bail!("this kernel has no block:block_bio_queue tracepoint");
        };
        for mut prog in open.open_object_mut().progs_mut() {
            let with_queue = prog.name().to_string_lossy().starts_with("bio_queue_q_");
            if with_queue != (arity == 2) {
                prog.set_autoload(false);
            }
        }
    }
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let p = &skel.progs;
    let link = match mech {
        Attach::Fentry => p.md_flush_fentry.attach().with_context(|| format!("attaching to {MD_FLUSH} (fentry)"))?,
        Attach::Kprobe => {
            p.md_flush_kprobe.attach_kprobe(false, MD_FLUSH).with_context(|| format!("kprobe {MD_FLUSH}"))?
        }
        _ => attach_loaded_tracepoint(skel.object(), "block", "block_bio_queue")?,
    };
    if args.verbose.on() && !kernel_function {
        eprintln!("{}: flushes counted as REQ_PREFLUSH bios queued to md disks", common::identity::invoked_name());
    }
    Ok((skel, vec![link]))
}
