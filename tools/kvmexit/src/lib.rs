// SPDX-License-Identifier: Apache-2.0 OR MIT
//! kvmexit: KVM's VM exits counted per exit reason (BCC's tool, CO-RE).
//!
//! The BPF side (`kvmexit.bpf.c`) counts each kvm:kvm_exit event per (process, thread, vendor, exit reason); this
//! side resolves the thread filters (-t, -T, -v's vCPU thread), fills them before attaching, waits for the
//! duration or a signal, and prints the counts once in BCC's layouts: per thread for every VM, folded into one
//! list per process (-p) or thread (-t, -v), or per thread of one process (-a) or of a TID list (-T); or as JSON.

mod bpf;
mod reasons;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, load_first_working, open_skeleton_core_free, rodata};
use common::attach::maps::{hash_entries, DropCounter};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{self, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore, MapFlags};
use serde::Serialize;

use bpf::types::exit_key;
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a plain C struct of integers, generated from kvmexit.h.
unsafe impl plain::Plain for exit_key {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Count KVM's VM exits by exit reason, for every VM or one process, thread or vCPU, and print them at the end.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
// The shared pid filter (common::cli::filter), with what it means for this tool.
#[command(mut_arg("pid", |a| a.help("Only the exits of this process (the VMM, QEMU's PID)")))]
struct Args {
    /// Count for this many seconds, then print (default: until Ctrl-C)
    #[arg(value_name = "DURATION", value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only the exits of this thread (a vCPU thread)
    #[arg(short = 't', long, value_name = "TID", value_parser = common::cli::parse_pid,
          conflicts_with_all = ["tids", "vcpu", "alltids"])]
    tid: Option<u32>,
    /// Only the exits of these threads, a comma-separated list (TID,TID,...), printed per thread
    #[arg(short = 'T', long, value_name = "TIDS", value_parser = parse_tid_list, conflicts_with_all = ["vcpu", "alltids"])]
    tids: Option<TidList>,
    /// Only the exits of this vCPU of -p's process (its thread named "CPU N/KVM", as QEMU names them)
    #[arg(short = 'v', long, value_name = "VCPU", requires = "pid", conflicts_with = "alltids")]
    vcpu: Option<u32>,
    /// With -p: print the counts of each of its threads instead of their sum
    #[arg(short = 'a', long, requires = "pid")]
    alltids: bool,
    /// Accepted for BCC's flag (it limits BCC's post-processing threads); this tool reads its counts in one pass
    #[arg(short = 'm', long = "max-parallelism", value_name = "N", value_parser = common::cli::parse_positive_u64)]
    max_parallelism: Option<u64>,
    /// Show libbpf's messages as the program loads (BCC: the compiler's warnings)
    #[arg(short = 'd', long)]
    debug: bool,
    /// Print JSON lines: an object per row, with the exact count
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    metrics: common::cli::MetricsArgs,
    /// Say on stderr which attach path was taken (no short form: -v is BCC's --vcpu)
    #[arg(long)]
    verbose: bool,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    let libbpf = if args.debug { 2 } else { 0 };
    host.bpf_main(common::cli::Verbose { level: libbpf }, |signals| kvmexit(args, &host, signals))
}

/// -T's threads (one value to clap, which would take a bare Vec for a repeated flag).
#[derive(Debug, Clone)]
struct TidList(Vec<u32>);

/// A comma-separated list of TIDs, without spaces (BCC's -T).
fn parse_tid_list(s: &str) -> Result<TidList, String> {
    let tids = s.split(',').map(common::cli::parse_pid).collect::<Result<Vec<u32>, String>>()?;
    if tids.len() > bpf::consts::MAX_TIDS {
        return Err(format!("at most {} TIDs", bpf::consts::MAX_TIDS));
    }
    Ok(TidList(tids))
}

/// How the counts are printed (BCC's layouts).
enum Layout {
    /// PID, TID, reason, count: every thread of every VM.
    Threads,
    /// Reason, count, most first: one process's threads folded together (-p).
    Process,
    /// Reason, count, most first: one thread (-t, or -p with -v).
    Thread(u32),
    /// TID, reason, count: each thread of one process (-p -a).
    ProcessThreads,
    /// TID, reason, count: each thread of a list (-T).
    TidList,
}

impl Layout {
    fn column_prefix(&self) -> &'static str {
        match self {
            Layout::Threads => "PID      TID      ",
            Layout::ProcessThreads => "TID      ",
            Layout::TidList => "TIDS     ",
            Layout::Process | Layout::Thread(_) => "",
        }
    }
}

/// One printed row, as JSON.
#[derive(Serialize)]
struct Row {
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    /// The vendor module's exit-reason numbering: vmx or svm.
    isa: String,
    reason: u32,
    name: String,
    count: u64,
}

/// The thread of process `pid` that runs vCPU `vcpu`: QEMU names it "CPU <n>/KVM".
fn vcpu_thread(pid: u32, vcpu: u32) -> Result<u32> {
    let dir = format!("/proc/{pid}/task");
    let wanted = format!("CPU {vcpu}/");
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        let entry = entry?;
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.starts_with(&wanted) {
            if let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
                return Ok(tid);
            }
        }
    }
    bail!("PID {pid} has no thread of vCPU {vcpu} (named \"CPU {vcpu}/KVM\", as QEMU names them)")
}

fn kvmexit(args: Args, host: &Host, signals: Signals) -> Result<()> {
    if let Some(pid) = args.pid.pid {
        common::cli::require_process(pid)?;
    }
    let mut tids: Vec<u32> = args.tids.as_ref().map(|l| l.0.clone()).unwrap_or_default();
    tids.extend(args.tid);
    if let (Some(pid), Some(vcpu)) = (args.pid.pid, args.vcpu) {
        tids.push(vcpu_thread(pid, vcpu)?);
    }
    for &tid in &tids {
        common::cli::require_thread(tid)?;
    }
    if !cfg!(target_arch = "x86_64") {
        bail!(
            "the exit reasons it decodes are x86's (VMX and SVM): KVM's exits on {} are not decoded",
            std::env::consts::ARCH
        );
    }
    if !Path::new("/sys/module/kvm").exists() {
        bail!("KVM is not loaded (no kvm module), so there is no kvm:kvm_exit tracepoint to count exits at");
    }
    let endpoint = args.metrics.endpoint(host, args.duration.is_some())?;
    let ((skel, _link), mech) =
        load_first_working(TOOL.attach, args.verbose, |mech| load_and_attach(args.pid.pid, &tids, mech))?;
    if Path::new("/sys/module/kvm_pvm").exists() {
        eprintln!(
            "{}: this host's KVM is PVM (kvm_pvm), which does not report VM exits to kvm:kvm_exit, so no exits will \
             be counted",
            common::identity::invoked_name()
        );
    }
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            metrics(s, &hash_entries(&skel.maps.counts)?);
            let bss = skel.maps.bss_data.as_ref().context("the BPF object has no .bss")?;
            s.map_full("counts", &bss.counts_full);
            Ok(())
        });
    }
    // The layout, and the run's description for the first line (BCC's words).
    let (layout, context) = match (args.pid.pid, args.tid, &args.tids, args.vcpu, args.alltids) {
        (_, Some(tid), ..) => (Layout::Thread(tid), format!("TID {tid}")),
        (_, _, Some(list), ..) => {
            let quoted: Vec<String> = list.0.iter().map(|t| format!("'{t}'")).collect();
            (Layout::TidList, format!("TIDS [{}]", quoted.join(", ")))
        }
        (Some(pid), _, _, Some(vcpu), _) => (Layout::Thread(tids[0]), format!("PID {pid} VCPU {vcpu}")),
        (Some(pid), _, _, _, true) => (Layout::ProcessThreads, format!("PID {pid} and its all threads")),
        (Some(pid), ..) => (Layout::Process, format!("PID {pid}")),
        (None, ..) => (Layout::Threads, "all threads".to_string()),
    };
    let mut out = Output::new();
    if !args.json {
        match args.duration {
            Some(secs) => {
                writeln!(out, "Display kvm exit reasons and statistics for {context} after sleeping {secs} secs.")?
            }
            None => writeln!(out, "Display kvm exit reasons and statistics for {context}... Hit Ctrl-C to end.")?,
        }
        out.flush()?;
    }
    let mut full = DropCounter::new("VM exits", "too many thread and exit reason pairs");
    run::run_intervals(&signals, args.duration.map(Duration::from_secs), Some(1), |_| {
        if let Some(bss) = skel.maps.bss_data.as_ref() {
            full.check(&bss.counts_full);
        }
        let entries: Vec<(exit_key, u64)> = hash_entries(&skel.maps.counts)?;
        if args.duration.is_none() && !args.json {
            writeln!(out)?;
        }
        print(&mut out, &layout, args.json, &entries)?;
        Ok(())
    })
}

/// `--prometheus`: the exits so far per VM process and exit reason, `corebpf_kvmexit_exits_total{pid,reason}` (the
/// reason by name, in the vendor's numbering: VMX and SVM name some alike, e.g. HLT; `isa` says which).
fn metrics(s: &mut common::output::metrics::Snapshot, entries: &[(exit_key, u64)]) {
    const HELP: &str = "VM exits of KVM guests, per VMM process and exit reason";
    const LABELS: &[&str] = &["pid", "isa", "reason"];
    s.declare_counter("exits", HELP, LABELS);
    for (k, n) in entries {
        let values = vec![k.tgid.to_string(), reasons::isa_name(k.isa), reasons::name(k.isa, k.reason)];
        s.counter("exits", HELP, LABELS, values, *n);
    }
}

/// Prints the counts once, in `layout` (or as JSON lines).
fn print(out: &mut Output, layout: &Layout, json: bool, entries: &[(exit_key, u64)]) -> Result<()> {
    let rows: Vec<Row> = match layout {
        Layout::Process | Layout::Thread(_) => {
            // Folded over threads, most frequent first (ties: the higher reason first, as BCC sorts).
            let mut folded: BTreeMap<(u32, u32), u64> = BTreeMap::new();
            for (k, n) in entries {
                *folded.entry((k.isa, k.reason)).or_default() += n;
            }
            let mut v: Vec<((u32, u32), u64)> = folded.into_iter().collect();
            v.sort_by_key(|&((_, reason), count)| std::cmp::Reverse((count, reason)));
            let (pid, tid) = match (layout, entries.first()) {
                (Layout::Thread(tid), _) => (None, Some(*tid)),
                (_, Some((k, _))) => (Some(k.tgid), None),
                _ => (None, None),
            };
            v.into_iter().map(|((isa, reason), count)| row(pid, tid, isa, reason, count)).collect()
        }
        Layout::Threads | Layout::ProcessThreads | Layout::TidList => {
            let mut v: Vec<&(exit_key, u64)> = entries.iter().collect();
            v.sort_by_key(|(k, _)| (k.tgid, k.tid, k.isa, k.reason));
            v.into_iter().map(|(k, n)| row(Some(k.tgid), Some(k.tid), k.isa, k.reason, *n)).collect()
        }
    };
    if json {
        for r in &rows {
            out.json_line(r)?;
        }
        return Ok(());
    }
    writeln!(out, "{}{:<35} COUNT", layout.column_prefix(), "KVM_EXIT_REASON")?;
    for r in &rows {
        match layout {
            Layout::Threads => {
                writeln!(out, "{:<8} {:<8} {:<35} {:<8}", r.pid.unwrap_or(0), r.tid.unwrap_or(0), r.name, r.count)?
            }
            Layout::ProcessThreads | Layout::TidList => {
                writeln!(out, "{:<8} {:<35} {:<8}", r.tid.unwrap_or(0), r.name, r.count)?
            }
            Layout::Process | Layout::Thread(_) => writeln!(out, "{:<35} {:<8}", r.name, r.count)?,
        }
    }
    out.flush()?;
    Ok(())
}

fn row(pid: Option<u32>, tid: Option<u32>, isa: u32, reason: u32, count: u64) -> Row {
    Row { pid, tid, isa: reasons::isa_name(isa), reason, name: reasons::name(isa, reason), count }
}

/// Opens the BPF object, sets the filters, loads it, fills the TID set and attaches its one program.
fn load_and_attach(pid: Option<u32>, tids: &[u32], mech: Attach) -> Result<(BpfSkel<'static>, Link)> {
    let mut open = open_skeleton_core_free::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.target_tgid = pid.unwrap_or(0);
    ro.filter_tids = !tids.is_empty();
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    for tid in tids {
        skel.maps.tids.update(&tid.to_ne_bytes(), &[1u8], MapFlags::ANY).context("filling the TID filter")?;
    }
    let link = attach_loaded_tracepoint(skel.object(), "kvm", "kvm_exit")?;
    Ok((skel, link))
}
