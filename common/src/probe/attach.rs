//! Where a spec attaches and how: the tracepoint (classic, through tracefs: fields are read at the offsets of its
//! format file), a user function (uprobe or uretprobe at its file offset, plus an entry uprobe for `$latency`),
//! or a kernel function (kprobe or kretprobe, plus an entry kprobe for `$latency`). Works on any tool's object
//! whose programs follow the generic probe's names: `probe_tracepoint`, `probe_entry`, `probe_return` and
//! `probe_start` (the entry side of `$latency`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libbpf_rs::{Link, Object, OpenObject, UprobeOpts};

use super::spec::{ProbeType, Spec};
use super::{SpecError, SpecResult};
use crate::attach::features::{Attach, KernelBtf};
use crate::attach::loader::attach_tracepoint;
use crate::process::elf::{find_binary, ElfSymbols};

/// Where a spec attaches, resolved before anything is loaded.
#[derive(Debug, Clone)]
pub enum Site {
    Tracepoint { category: String, event: String },
    User { binary: PathBuf, offset: usize },
    Kernel { function: String },
}

/// Resolves the spec's site: an unknown library, function or kernel function is a spec error (exit 2).
pub fn site(spec: &Spec, pid: Option<u32>) -> SpecResult<Site> {
    let raw = &spec.raw;
    Ok(match spec.probe {
        ProbeType::Tracepoint => Site::Tracepoint { category: spec.library.clone(), event: spec.function.clone() },
        _ if spec.is_user() => {
            let binary = find_binary(&spec.library, pid)
                .map_err(|e| SpecError(format!("in '{raw}': unable to find library {}: {e:#}", spec.library)))?;
            let symbols = ElfSymbols::read(&binary).map_err(|e| SpecError(format!("in '{raw}': {e:#}")))?;
            let Some(f) = symbols.find(&spec.function) else {
                return Err(SpecError(format!("in '{raw}': no function '{}' in {}", spec.function, binary.display())));
            };
            Site::User { offset: f.file_offset as usize, binary }
        }
        _ => {
            if let Ok(btf) = KernelBtf::load() {
                if !btf.has_function(&spec.function) {
                    return Err(SpecError(format!("in '{raw}': no kernel function '{}'", spec.function)));
                }
            }
            Site::Kernel { function: spec.function.clone() }
        }
    })
}

/// The programs the site needs (by name) and the mechanism.
pub fn programs(site: &Site, probe: ProbeType, latency: bool) -> (Vec<&'static str>, Attach) {
    let how = match site {
        Site::Tracepoint { .. } => return (vec!["probe_tracepoint"], Attach::Tracepoint),
        Site::User { .. } => Attach::Uprobe,
        Site::Kernel { .. } => Attach::Kprobe,
    };
    let mut names = vec![if probe == ProbeType::Return { "probe_return" } else { "probe_entry" }];
    if latency {
        names.push("probe_start");
    }
    (names, how)
}

/// Keeps only the site's programs of an opened object (the others are not loaded), and checks that
/// `COREBPF_ATTACH` allows the mechanism. Returns the mechanism.
pub fn select_programs(open: &mut OpenObject, site: &Site, probe: ProbeType, latency: bool) -> Result<Attach> {
    let (names, how) = programs(site, probe, latency);
    crate::attach::loader::allowed(&[how])?;
    for mut prog in open.progs_mut() {
        let keep = prog.name().to_str().is_some_and(|n| names.contains(&n));
        prog.set_autoload(keep);
    }
    Ok(how)
}

/// Attaches the loaded object's programs to the site.
pub fn attach(object: &Object, site: &Site, spec: &Spec, latency: bool, pid: Option<u32>) -> Result<Vec<Link>> {
    let prog = |name: &str| {
        object.progs_mut().find(|p| p.name() == name).with_context(|| format!("no program {name} in the object"))
    };
    let ret = spec.probe == ProbeType::Return;
    let main = if ret { "probe_return" } else { "probe_entry" };
    let mut links = Vec::new();
    match site {
        Site::Tracepoint { category, event } => {
            links.push(attach_tracepoint(&prog("probe_tracepoint")?, category, event, Attach::Tracepoint)?);
        }
        Site::User { binary, offset } => {
            let pid = pid.map_or(-1, |p| p as i32);
            if latency {
                let opts = UprobeOpts { retprobe: false, ..Default::default() };
                let link = prog("probe_start")?.attach_uprobe_with_opts(pid, binary, *offset, opts);
                links.push(link.with_context(|| format!("attaching a uprobe to {}", spec.function))?);
            }
            let opts = UprobeOpts { retprobe: ret, ..Default::default() };
            let link = prog(main)?.attach_uprobe_with_opts(pid, binary, *offset, opts);
            let kind = if ret { "uretprobe" } else { "uprobe" };
            links.push(link.with_context(|| format!("attaching a {kind} to {}", spec.function))?);
        }
        Site::Kernel { function } => {
            if !kprobes_available() {
                bail!(
                    "kernel function {function}: this kernel has no kprobes (CONFIG_KPROBES is not set), which \
                     kernel function probes need; use a tracepoint (t:) instead"
                );
            }
            if latency {
                links.push(prog("probe_start")?.attach_kprobe(false, function).context("attaching a kprobe")?);
            }
            let link = prog(main)?.attach_kprobe(ret, function);
            links.push(link.with_context(|| format!("attaching a kprobe to {function}"))?);
        }
    }
    Ok(links)
}

/// Whether the kernel has kprobes (the perf `kprobe` event source, or tracefs' kprobe_events).
pub fn kprobes_available() -> bool {
    Path::new("/sys/bus/event_source/devices/kprobe").exists()
        || crate::attach::features::find_tracefs().is_some_and(|t| t.join("kprobe_events").exists())
}
