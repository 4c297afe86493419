//! One object per spec: its rodata filled from the spec's plan (common::probe), loaded, and attached to a
//! tracepoint (classic, through tracefs: fields are read at the format file's offsets), a user function
//! (uprobe or uretprobe, with a uprobe at entry for `$latency`) or a kernel function (kprobe or kretprobe).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use common::attach::features::Attach;
use common::attach::loader::{attach_tracepoint, open_skeleton, rodata};
use common::probe::plan::Plan;
use common::probe::spec::{ProbeType, Spec};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{Link, UprobeOpts};

use crate::bpf::consts::*;
use crate::bpf::{BpfSkel, BpfSkelBuilder};

/// Where a spec attaches, resolved before anything is loaded.
pub enum Site {
    Tracepoint { category: String, event: String },
    User { binary: PathBuf, offset: usize },
    Kernel { function: String },
}

/// What the object is asked to keep.
pub struct Options {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub string_size: u32,
    pub hist: bool,
}

/// A loaded, attached spec.
pub struct Attached {
    pub skel: BpfSkel<'static>,
    _links: Vec<Link>,
    /// How it attached (for -v).
    pub how: Attach,
}

/// Bytes of a count key: the integers, then as many strings as the spec keeps.
pub fn key_size(strings: usize) -> usize {
    8 * MAX_KEYS + STR_MAX * strings
}

/// Loads and attaches the object of one spec.
pub fn attach(spec: &Spec, plan: &Plan, site: &Site, options: &Options) -> Result<Attached> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let strings = plan.exprs.iter().filter(|e| e.ctype.string).count();
    {
        let ro = rodata(&mut open.maps.rodata_data)?;
        common::probe_rodata!(&mut *ro, plan, options.pid, options.tid);
        ro.mode = if options.hist { MODE_HIST } else { MODE_COUNT } as u32;
        ro.n_keys = plan.exprs.len() as u32;
        ro.str_size = options.string_size;
        let mut next_str = 0u8;
        for (slot, e) in ro.keys.iter_mut().zip(&plan.exprs) {
            slot.fetch = e.fetch as u8;
            slot.size = e.ctype.size as u8;
            slot.is_signed = e.ctype.signed as u8;
            slot.str = if e.ctype.string {
                next_str += 1;
                next_str - 1
            } else {
                NONE as u8
            };
        }
    }
    open.maps.counts.set_key_size(key_size(strings) as u32)?;
    if options.hist {
        open.maps.counts.set_max_entries(1)?;
    }
    let entry = plan.needs_entry();
    let (wanted, how): (&[&str], Attach) = match (site, spec.probe) {
        (Site::Tracepoint { .. }, _) => (&["ad_tracepoint"], Attach::Tracepoint),
        (Site::User { .. }, ProbeType::Return) if entry => (&["ad_retprobe", "ad_entry"], Attach::Uprobe),
        (Site::User { .. }, ProbeType::Return) => (&["ad_retprobe"], Attach::Uprobe),
        (Site::User { .. }, _) => (&["ad_probe"], Attach::Uprobe),
        (Site::Kernel { .. }, ProbeType::Return) if entry => (&["ad_retprobe", "ad_entry"], Attach::Kprobe),
        (Site::Kernel { .. }, ProbeType::Return) => (&["ad_retprobe"], Attach::Kprobe),
        (Site::Kernel { .. }, _) => (&["ad_probe"], Attach::Kprobe),
    };
    // COREBPF_ATTACH (the kernel matrix) may force a mechanism: a spec that needs another one is refused.
    common::attach::loader::allowed(&[how])?;
    for mut prog in open.open_object_mut().progs_mut() {
        let keep = prog.name().to_str().is_some_and(|n| wanted.contains(&n));
        prog.set_autoload(keep);
    }
    let skel = open.load().context("loading the BPF program")?;
    let mut links = Vec::new();
    let pid = options.pid.map_or(-1, |p| p as i32);
    match site {
        Site::Tracepoint { category, event } => {
            links.push(attach_tracepoint(&skel.progs.ad_tracepoint, category, event, Attach::Tracepoint)?);
        }
        Site::User { binary, offset } => {
            let ret = spec.probe == ProbeType::Return;
            if entry {
                let opts = UprobeOpts { retprobe: false, ..Default::default() };
                links.push(
                    skel.progs
                        .ad_entry
                        .attach_uprobe_with_opts(pid, binary, *offset, opts)
                        .with_context(|| format!("attaching a uprobe to {}", spec.function))?,
                );
            }
            let prog = if ret { &skel.progs.ad_retprobe } else { &skel.progs.ad_probe };
            let opts = UprobeOpts { retprobe: ret, ..Default::default() };
            links.push(prog.attach_uprobe_with_opts(pid, binary, *offset, opts).with_context(|| {
                format!("attaching a {} to {}", if ret { "uretprobe" } else { "uprobe" }, spec.function)
            })?);
        }
        Site::Kernel { function } => {
            if !kprobes_available() {
                bail!(
                    "kernel function {function}: this kernel has no kprobes (CONFIG_KPROBES is not set), which \
                     p:: and r:: specs need; use a tracepoint (t:) instead"
                );
            }
            let ret = spec.probe == ProbeType::Return;
            if entry {
                links.push(skel.progs.ad_entry.attach_kprobe(false, function).context("attaching a kprobe")?);
            }
            let prog = if ret { &skel.progs.ad_retprobe } else { &skel.progs.ad_probe };
            links.push(prog.attach_kprobe(ret, function).with_context(|| format!("attaching a kprobe to {function}"))?);
        }
    }
    Ok(Attached { skel, _links: links, how })
}

/// Whether the kernel has kprobes (the perf `kprobe` event source, or tracefs' kprobe_events).
pub fn kprobes_available() -> bool {
    std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists()
        || common::attach::features::find_tracefs().is_some_and(|t| t.join("kprobe_events").exists())
}
