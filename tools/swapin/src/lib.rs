// SPDX-License-Identifier: Apache-2.0 OR MIT
//! swapin: pages swapped in per process, every interval (BCC's tool, CO-RE).
//!
//! The BPF side (`swapin.bpf.c`) adds each swap-in's pages to a cumulative count per (PID, task name), seen at
//! the kernel function that reads from swap (fentry, else kprobe), or where no kernel function can be traced, at
//! a tracepoint: the memory cgroup event counters (6.14+), else the block layer's bio submission. This side
//! chooses the hook from BTF, fills the block path's filters (the swap code's completion address, the swap
//! devices) before attaching, says in one line what the block path cannot see on this system, and prints each
//! interval's gains in BCC's table, as JSON lines, or serves them as Prometheus counters per process name.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata, skip_tracepoint,
};
use common::attach::maps::{hash_entries, DropCounter};
use common::cli::{parse_interval_secs, parse_positive_u64};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals, Tick};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore, MapFlags};

use bpf::types::swapin_key;
use bpf::{BpfSkel, BpfSkelBuilder};
use report::Report;

// SAFETY: a plain C struct of integers and chars, generated from swapin.h.
unsafe impl plain::Plain for swapin_key {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Count the pages each process swaps in, every interval.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Leave out the time of day (HH:MM:SS) printed before each interval's table
    #[arg(short = 'T', long)]
    notime: bool,
    /// Print JSON lines: an object per interval, with each process's exact count of pages
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds between reports (1 if not given)
    #[arg(value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many reports
    #[arg(value_parser = parse_positive_u64, requires = "interval")]
    count: Option<u64>,
}

/// The kernel function that reads from swap (BCC's hook: fentry, else a kprobe), else a tracepoint (tp_btf,
/// else raw_tp): the memory cgroup event counters where the kernel has them, else the block layer.
pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::TpBtf, Attach::RawTp]);

/// Chooses the tracepoint path's hook instead of the tool: `memcg` or `bio` (see doc.md, ENVIRONMENT).
const SOURCE_ENV: &str = "COREBPF_SWAPIN_SOURCE";

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| swapin(args, &host, signals))
}

fn swapin(args: Args, host: &Host, signals: Signals) -> Result<()> {
    match std::env::var(SOURCE_ENV).unwrap_or_default().as_str() {
        "" | "memcg" | "bio" => {}
        other => bail!("{SOURCE_ENV}={other}: use memcg or bio"),
    }
    let btf = KernelBtf::load()?;
    let endpoint = args.export.endpoint(host, args.interval.is_some())?;
    let ((skel, _links, source), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&btf, mech, args.verbose.on()))?;
    if source == Source::Bio {
        for blind in bio_blind_spots(&btf) {
            eprintln!("{}: {blind}", common::identity::invoked_name());
        }
    }
    let mut full = DropCounter::new("swapped-in pages", "too many processes at once");
    let mut report = Report::new(args.json, !args.notime);
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            if let Some(bss) = skel.maps.bss_data.as_ref() {
                s.map_full("counts", &bss.counts_full);
            }
            let totals = totals(&skel)?;
            forget(&skel, report.exited(&totals));
            report.metrics(s, &totals);
            Ok(())
        });
    }

    let mut out = Output::new();
    if !args.json {
        report::write_banner(&mut out)?;
    }
    let interval = Duration::from_secs(args.interval.unwrap_or(1));
    run_intervals(&signals, Some(interval), args.count, |tick| {
        let totals = totals(&skel)?;
        report.write(&mut out, &totals, tick == Tick::Last)?;
        forget(&skel, report.exited(&totals));
        if let Some(bss) = skel.maps.bss_data.as_ref() {
            full.check(&bss.counts_full);
        }
        Ok(())
    })?;
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        full.check(&bss.counts_full);
    }
    Ok(())
}

/// Every process's count so far.
fn totals(skel: &BpfSkel<'static>) -> Result<Vec<(swapin_key, u64)>> {
    hash_entries(&skel.maps.counts)
}

/// Deletes the counts of processes that have exited (already reported), so the map holds live ones only.
fn forget(skel: &BpfSkel<'static>, keys: Vec<swapin_key>) {
    for key in keys {
        // SAFETY: swapin_key is a plain #[repr(C)] struct; its bytes are the map's key.
        let bytes = unsafe { plain::as_bytes(&key) };
        let _ = skel.maps.counts.delete(bytes);
    }
}

/// Which tracepoint the tracepoint path hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The kernel function (not a tracepoint).
    Function,
    /// memcg:count_memcg_events, its swap-in items.
    Memcg,
    /// block:block_bio_queue, the swap code's read bios.
    Bio,
}

/// The values of the memory cgroup event items that count swap-ins: PSWPIN, ZSWPIN, SWPIN_ZERO (-1 if absent).
fn swapin_items(btf: &KernelBtf) -> [i32; 3] {
    let members = btf.enum_members("vm_event_item");
    let value = |name: &str| members.iter().find(|(n, _)| n == name).map_or(-1, |&(_, v)| v as i32);
    [value("PSWPIN"), value("ZSWPIN"), value("SWPIN_ZERO")]
}

/// Whether the memory cgroup controller is enabled (not turned off with cgroup_disable=memory): its event
/// counters, and their tracepoint, run only then.
fn memcg_enabled() -> bool {
    std::fs::read_to_string("/proc/cgroups").is_ok_and(|text| {
        text.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.first() == Some(&"memory") && f.get(3) == Some(&"1")
        })
    })
}

/// Whether the memcg tracepoint can count swap-ins here: the kernel has it (6.14+) and the controller is on.
fn memcg_available(btf: &KernelBtf) -> bool {
    btf.has_tracepoint("count_memcg_events") && swapin_items(btf)[0] >= 0 && memcg_enabled()
}

/// The tracepoint path's hook on this kernel, or the one COREBPF_SWAPIN_SOURCE names.
fn tracepoint_source(btf: &KernelBtf) -> Result<Source> {
    let memcg = memcg_available(btf);
    match std::env::var(SOURCE_ENV).unwrap_or_default().as_str() {
        "" if memcg => Ok(Source::Memcg),
        "" | "bio" => Ok(Source::Bio),
        "memcg" if memcg => Ok(Source::Memcg),
        "memcg" => bail!(
            "{SOURCE_ENV}=memcg: the kernel has no memcg:count_memcg_events tracepoint (Linux 6.14+) or the memory \
             cgroup controller is off"
        ),
        other => bail!("{SOURCE_ENV}={other}: use memcg or bio"),
    }
}

/// The address of a kernel symbol from /proc/kallsyms (None if absent or hidden).
fn kallsyms_address(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    text.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let (addr, _, sym) = (f.next()?, f.next()?, f.next()?);
        (sym == name && f.next().is_none()).then(|| u64::from_str_radix(addr, 16).ok()).flatten().filter(|&a| a != 0)
    })
}

/// An active swap area of /proc/swaps: its path and whether it is a device (not a file).
fn swap_areas() -> Vec<(String, bool)> {
    let text = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.replace("\\040", " "), f.next()? == "partition"))
        })
        .collect()
}

/// The kernel's dev_t (major << 20 | minor) of the block device at `path`.
fn kernel_dev(path: &str) -> Option<u32> {
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.file_type().is_block_device() {
        return None;
    }
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    Some((major << 20) | minor)
}

/// What the block path cannot count on this system now, one warning line each.
fn bio_blind_spots(btf: &KernelBtf) -> Vec<String> {
    let mut lines = Vec::new();
    let zswap = std::fs::read_to_string("/sys/module/zswap/parameters/enabled").unwrap_or_default();
    if zswap.trim() == "Y" || zswap.trim() == "1" {
        let instead = if memcg_available(btf) {
            "COREBPF_SWAPIN_SOURCE=memcg counts them"
        } else {
            "this kernel offers no other way without kernel-function tracing"
        };
        lines.push(format!(
            "warning: zswap is enabled: pages it hands back from its compressed pool issue no I/O and are not \
             counted ({instead})"
        ));
    }
    if btf.has_function("bdev_read_page") {
        for (path, device) in swap_areas() {
            let name = path.rsplit('/').next().unwrap_or("");
            if device && ["zram", "ram", "pmem"].iter().any(|p| name.starts_with(p)) {
                lines.push(format!(
                    "warning: swap device {path} is read without a bio on this kernel (->rw_page): its swap-ins are \
                     not counted"
                ));
            }
        }
    }
    lines
}

/// Opens the BPF object, keeps the programs of one attach mechanism (and, for tracepoints, of one hook), fills
/// its filters, loads and attaches them.
fn load_and_attach(btf: &KernelBtf, mech: Attach, verbose: bool) -> Result<(BpfSkel<'static>, Vec<Link>, Source)> {
    let (source, function) = match mech {
        Attach::Fentry | Attach::Kprobe => {
            if mech == Attach::Kprobe && !common::probe::attach::kprobes_available() {
                bail!("no kprobes (CONFIG_KPROBES is not set)");
            }
            (Source::Function, Some(btf.first_function(&["swap_read_folio", "swap_readpage"], "swap-in")?))
        }
        _ => (tracepoint_source(btf)?, None),
    };
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    autoload_by_section(open.open_object_mut(), mech);
    let end_io = match source {
        Source::Bio => {
            let end_io = kallsyms_address("end_swap_bio_read");
            if end_io.is_none() {
                bail!("end_swap_bio_read is not in /proc/kallsyms: swap reads cannot be told from other reads");
            }
            skip_tracepoint(open.open_object_mut(), "count_memcg_events");
            // The pair that matches the tracepoint's arguments: (bio) since 5.11, (q, bio) before.
            let old = btf.tracepoint_arity("block_bio_queue") == Some(2);
            let unused = if old { &mut open.progs.bio_queue_btf } else { &mut open.progs.bio_queue_q_btf };
            unused.set_autoload(false);
            let unused = if old { &mut open.progs.bio_queue_raw } else { &mut open.progs.bio_queue_q_raw };
            unused.set_autoload(false);
            end_io
        }
        Source::Memcg => {
            skip_tracepoint(open.open_object_mut(), "block_bio_queue");
            None
        }
        Source::Function => None,
    };
    if let (Attach::Fentry, Some(f)) = (mech, function) {
        open.progs.swap_read_fentry.set_attach_target(0, Some(f.to_string()))?;
    }
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.arg_is_folio = function == Some("swap_read_folio");
    [ro.item_pswpin, ro.item_zswpin, ro.item_swpin_zero] = swapin_items(btf);
    ro.swap_end_io = end_io.unwrap_or(0);
    ro.match_devs = btf.tracepoint_arity("block_bio_queue") == Some(1);
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    if source == Source::Bio {
        for dev in swap_areas().into_iter().filter(|(_, device)| *device).filter_map(|(p, _)| kernel_dev(&p)) {
            skel.maps.swap_devs.update(&dev.to_ne_bytes(), &[1], MapFlags::ANY).context("filling swap_devs")?;
        }
    }
    let p = &skel.progs;
    let links = match (mech, function) {
        (Attach::Fentry, Some(f)) => {
            vec![p.swap_read_fentry.attach().map_err(|e| anyhow!("the kernel cannot attach fentry to {f} ({e})"))?]
        }
        (_, Some(f)) => vec![p.swap_read_kprobe.attach_kprobe(false, f).with_context(|| format!("kprobe {f}"))?],
        _ => match source {
            Source::Memcg => vec![attach_loaded_tracepoint(skel.object(), "memcg", "count_memcg_events")?],
            _ => vec![attach_loaded_tracepoint(skel.object(), "block", "block_bio_queue")?],
        },
    };
    if verbose {
        match (source, function) {
            (_, Some(f)) => eprintln!("{mech}: counting the pages of each {f} call"),
            (Source::Memcg, _) => eprintln!("{mech}: counting the memcg events PSWPIN, ZSWPIN and SWPIN_ZERO"),
            _ => eprintln!("{mech}: counting read bios that end in end_swap_bio_read or read a swap device"),
        }
    }
    Ok((skel, links, source))
}
