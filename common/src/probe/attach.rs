// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Where a spec attaches and how: the tracepoint (classic, through tracefs: fields are read at the offsets of its
//! format file), a user function (uprobe or uretprobe at its file offset, plus an entry uprobe for `$latency`),
//! or a kernel function: fentry or fexit (a BTF trampoline; arguments are read from its context) where the kernel
//! loads them, else a kprobe or kretprobe, each with an entry program for `$latency`. Works on any tool's object
//! whose programs follow the generic probe's names: `probe_tracepoint`, `probe_entry`, `probe_return`,
//! `probe_start` (the entry side of `$latency`), `probe_fentry`, `probe_fexit`, `probe_fentry_start` and
//! `probe_usdt` (a USDT probe of a program or library, by libbpf's USDT support).
//!
//! A tool tries the site's mechanisms in its ladder's order with [`load_first`]: each attempt opens its object,
//! fills the rodata, keeps the mechanism's programs ([`select_programs`]), loads and [`attach`]es; the kernel
//! decides (a trial load), and `COREBPF_ATTACH` can force one.

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
    Tracepoint {
        category: String,
        event: String,
    },
    User {
        binary: PathBuf,
        offset: usize,
    },
    /// A USDT probe: libbpf attaches a uprobe to each of its sites and records how to read its arguments.
    Usdt {
        binary: PathBuf,
        provider: String,
        name: String,
    },
    /// `slots`: the function's argument count when every argument fits one fentry context slot (see
    /// [`super::kfunc::kernel_arg_slots`]), which fentry and fexit need; None takes kprobes only.
    Kernel {
        function: String,
        slots: Option<u32>,
        /// Bytes into the function (kprobes only: a trampoline goes on the entry).
        offset: u64,
    },
}

impl Site {
    /// Bytes into a kernel function where its probe goes (0: the entry).
    pub fn offset(&self) -> u64 {
        match self {
            Site::Kernel { offset, .. } => *offset,
            _ => 0,
        }
    }

    /// The place of an fexit program's return value in its context (after the arguments).
    pub fn retval_slot(&self) -> u32 {
        match self {
            Site::Kernel { slots: Some(n), .. } => *n,
            _ => 0,
        }
    }
}

/// Whether the probe of `spec` at `site` runs on a user function's first instruction (an entry uprobe without an
/// offset), where the function has no frame record yet and the user stack's walk misses its caller: the BPF side
/// then reads the caller itself (`entry_caller()`, bpf/include/arch.bpf.h).
pub fn at_user_function_entry(site: &Site, spec: &Spec) -> bool {
    matches!(site, Site::User { .. }) && spec.probe == ProbeType::Entry && spec.offset == 0
}

/// Resolves the spec's site: an unknown library, function or kernel function is a spec error (exit 2).
pub fn site(spec: &Spec, pid: Option<u32>) -> SpecResult<Site> {
    let raw = &spec.raw;
    Ok(match spec.probe {
        ProbeType::Tracepoint => Site::Tracepoint { category: spec.library.clone(), event: spec.function.clone() },
        ProbeType::Usdt => usdt_site(spec, pid)?,
        _ if spec.is_user() => {
            let binary = find_binary(&spec.library, pid)
                .map_err(|e| SpecError(format!("in '{raw}': unable to find library {}: {e:#}", spec.library)))?;
            let symbols = ElfSymbols::read(&binary).map_err(|e| SpecError(format!("in '{raw}': {e:#}")))?;
            // A function's current symbol; else an IFUNC (strlen; memcpy, whose plain FUNC is only an old
            // version's), which cannot take a uprobe: say which implementation to probe; else a local function of
            // a stripped library (glibc's __strlen_evex), named by its debug file; else any version of the name.
            let current = symbols.find(&spec.function).filter(|f| !f.hidden_version || spec.function.contains('@'));
            let (start, size) = match current {
                Some(f) => (f.file_offset, f.size),
                None => {
                    if let Some(why) = crate::process::ifunc::explain(&binary, &spec.function, pid) {
                        return Err(SpecError(format!("in '{raw}': {why}")));
                    }
                    match crate::process::symbols::debug_function_offset(&binary, &spec.function) {
                        Some(at) => (at, 0),
                        None => match symbols.find(&spec.function) {
                            Some(f) => (f.file_offset, f.size),
                            None => {
                                return Err(SpecError(format!(
                                    "in '{raw}': no function '{}' in {}",
                                    spec.function,
                                    binary.display()
                                )))
                            }
                        },
                    }
                }
            };
            if spec.offset > 0 && size > 0 && spec.offset >= size {
                return Err(SpecError(format!(
                    "in '{raw}': offset {:#x} is past the end of {} ({} bytes)",
                    spec.offset, spec.function, size
                )));
            }
            Site::User { offset: start as usize + spec.offset as usize, binary }
        }
        _ => {
            if let Ok(btf) = KernelBtf::load() {
                if !btf.has_function(&spec.function) {
                    return Err(SpecError(format!("in '{raw}': no kernel function '{}'", spec.function)));
                }
            }
            Site::Kernel {
                function: spec.function.clone(),
                slots: super::kfunc::kernel_arg_slots(&spec.function),
                offset: spec.offset,
            }
        }
    })
}

/// A USDT probe's file and provider: the named library or program, or (for a library named `pthread` and the
/// like, whose probes glibc 2.34 moved into libc) the C library when the named file has no such probe.
fn usdt_site(spec: &Spec, pid: Option<u32>) -> SpecResult<Site> {
    let raw = &spec.raw;
    let named = find_binary(&spec.library, pid);
    let mut candidates: Vec<PathBuf> = named.iter().cloned().collect();
    if !spec.library.contains('/') && spec.library != "c" {
        if let Ok(libc) = find_binary("c", pid) {
            candidates.push(libc);
        }
    }
    let binary = match (&named, candidates.first()) {
        (Ok(binary), _) => binary.clone(),
        (Err(_), Some(libc)) => libc.clone(),
        (Err(e), None) => {
            return Err(SpecError(format!("in '{raw}': unable to find library {}: {e:#}", spec.library)));
        }
    };
    let mut seen = Vec::new();
    for file in &candidates {
        let probes = crate::process::elf::usdt_probes(file).unwrap_or_default();
        let wanted = |p: &&crate::process::elf::UsdtProbe| {
            p.name == spec.function && spec.provider.as_ref().is_none_or(|want| *want == p.provider)
        };
        if let Some(found) = probes.iter().find(wanted) {
            return Ok(Site::Usdt { binary: file.clone(), provider: found.provider.clone(), name: found.name.clone() });
        }
        seen.extend(probes.into_iter().map(|p| format!("{}:{}", p.provider, p.name)));
    }
    seen.sort();
    seen.dedup();
    let shown: Vec<&str> = seen.iter().take(12).map(String::as_str).collect();
    let more = if seen.len() > shown.len() { ", ..." } else { "" };
    let probes = if seen.is_empty() { "none".to_owned() } else { format!("{}{more}", shown.join(", ")) };
    Err(SpecError(format!(
        "in '{raw}': no USDT probe '{}' in {} (its probes: {probes})",
        spec.function,
        binary.display()
    )))
}

/// The mechanisms of `ladder` (a tool's attach ladder) that suit the site, in order.
pub fn mechanisms(site: &Site, ladder: &[Attach]) -> Vec<Attach> {
    let suits: &[Attach] = match site {
        Site::Tracepoint { .. } => &[Attach::Tracepoint],
        Site::User { .. } | Site::Usdt { .. } => &[Attach::Uprobe],
        Site::Kernel { .. } => &[Attach::Fentry, Attach::Kprobe],
    };
    ladder.iter().copied().filter(|a| suits.contains(a)).collect()
}

/// Tries `attempt` with each of the site's mechanisms of `ladder` that `COREBPF_ATTACH` allows, in order; the
/// first the kernel accepts wins (with `verbose`, each refusal is shown). When none does, the error is one line
/// naming the site and why each failed.
pub fn load_first<T>(
    ladder: &[Attach],
    site: &Site,
    verbose: bool,
    attempt: impl FnMut(Attach) -> Result<T>,
) -> Result<(T, Attach)> {
    let mechs = mechanisms(site, ladder);
    let allowed = crate::attach::loader::allowed(&mechs)?;
    let mut attempt = attempt;
    let mut refused = Vec::new();
    let result = crate::attach::loader::load_first_working(&allowed, false, |how| {
        let tried = attempt(how);
        if let Err(err) = &tried {
            if verbose {
                eprintln!("{how} did not load: {err:#}");
            }
            refused.push(format!("{how} ({})", err.root_cause()));
        }
        tried
    });
    match (result, site) {
        (Err(_), Site::Kernel { function, .. }) if !refused.is_empty() => bail!(
            "kernel function {function}: this kernel refused {}, which kernel function probes need; use a \
             tracepoint (t:) instead",
            refused.join(" and ")
        ),
        (result, _) => result,
    }
}

/// The programs the site needs with mechanism `how` (by name): the main one first, then the `$latency` entry.
pub fn programs(site: &Site, probe: ProbeType, latency: bool, how: Attach) -> Vec<&'static str> {
    let ret = probe == ProbeType::Return;
    let (main, start) = match (site, how) {
        (Site::Tracepoint { .. }, _) => return vec!["probe_tracepoint"],
        (Site::Usdt { .. }, _) => return vec!["probe_usdt"],
        (Site::Kernel { .. }, Attach::Fentry) => {
            (if ret { "probe_fexit" } else { "probe_fentry" }, "probe_fentry_start")
        }
        _ => (if ret { "probe_return" } else { "probe_entry" }, "probe_start"),
    };
    if latency {
        vec![main, start]
    } else {
        vec![main]
    }
}

/// Keeps only the programs of an opened object that the site needs with `how` (the others are not loaded) and
/// sets the fentry/fexit programs' target. Fails before any load when the kernel cannot have `how` for the site
/// (no kprobes; an argument fentry cannot read).
pub fn select_programs(open: &mut OpenObject, site: &Site, probe: ProbeType, latency: bool, how: Attach) -> Result<()> {
    if let Site::Kernel { function, slots, .. } = site {
        match how {
            Attach::Kprobe if !kprobes_available() => bail!("no kprobes: CONFIG_KPROBES is not set"),
            Attach::Fentry if slots.is_none() => {
                bail!("{function} has an argument that is not an integer or a pointer, or no BTF")
            }
            Attach::Fentry if site.offset() > 0 => bail!("fentry goes on a function's entry: an offset needs a kprobe"),
            _ => {}
        }
    }
    let names = programs(site, probe, latency, how);
    for mut prog in open.progs_mut() {
        let keep = prog.name().to_str().is_some_and(|n| names.contains(&n));
        prog.set_autoload(keep);
        if let (true, Site::Kernel { function, .. }, Attach::Fentry) = (keep, site, how) {
            prog.set_attach_target(0, Some(function.clone()))
                .with_context(|| format!("setting the fentry target {function}"))?;
        }
    }
    Ok(())
}

/// Attaches the loaded object's programs (kept by [`select_programs`] with the same `how`) to the site.
pub fn attach(
    object: &Object,
    site: &Site,
    spec: &Spec,
    latency: bool,
    pid: Option<u32>,
    how: Attach,
) -> Result<Vec<Link>> {
    let prog = |name: &str| {
        object.progs_mut().find(|p| p.name() == name).with_context(|| format!("no program {name} in the object"))
    };
    let ret = spec.probe == ProbeType::Return;
    let names = programs(site, spec.probe, latency, how);
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
            let link = prog(names[0])?.attach_uprobe_with_opts(pid, binary, *offset, opts);
            let kind = if ret { "uretprobe" } else { "uprobe" };
            links.push(link.with_context(|| format!("attaching a {kind} to {}", spec.function))?);
        }
        Site::Usdt { binary, provider, name } => {
            let pid = pid.map_or(-1, |p| p as i32);
            let link = prog("probe_usdt")?.attach_usdt(pid, binary, provider, name);
            links.push(link.with_context(|| format!("attaching to the USDT probe {provider}:{name}"))?);
        }
        Site::Kernel { function, .. } if how == Attach::Fentry => {
            // The entry side first, so that no return is seen without its entry.
            for name in names.iter().rev() {
                let kind = if *name == "probe_fexit" { "fexit" } else { "fentry" };
                links.push(prog(name)?.attach_trace().with_context(|| format!("attaching {kind} to {function}"))?);
            }
        }
        Site::Kernel { function, .. } => {
            if latency {
                links.push(prog("probe_start")?.attach_kprobe(false, function).context("attaching a kprobe")?);
            }
            let link = match site.offset() {
                0 => prog(names[0])?.attach_kprobe(ret, function).map_err(anyhow::Error::from),
                offset => attach_kprobe_at(&prog(names[0])?, function, offset),
            };
            links.push(link.with_context(|| format!("attaching a kprobe to {function}"))?);
        }
    }
    Ok(links)
}

/// A kprobe `offset` bytes into kernel function `function` (libbpf-rs's options have no offset; libbpf's do).
fn attach_kprobe_at(prog: &libbpf_rs::ProgramMut<'_>, function: &str, offset: u64) -> Result<Link> {
    use libbpf_rs::libbpf_sys;
    use libbpf_rs::AsRawLibbpf;
    let name = std::ffi::CString::new(function).context("a function name with a NUL")?;
    let opts = libbpf_sys::bpf_kprobe_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_kprobe_opts>() as _,
        offset: offset as _,
        ..Default::default()
    };
    // SAFETY: the program pointer is valid while `prog` is borrowed; `name` and `opts` outlive the call, which
    // copies what it keeps.
    let link =
        unsafe { libbpf_sys::bpf_program__attach_kprobe_opts(prog.as_libbpf_object().as_ptr(), name.as_ptr(), &opts) };
    match std::ptr::NonNull::new(link) {
        // SAFETY: a link libbpf just made, owned by nobody else.
        Some(link) => Ok(unsafe { Link::from_ptr(link) }),
        None => Err(std::io::Error::last_os_error()).with_context(|| format!("a kprobe at {function}+{offset:#x}")),
    }
}

/// Whether the kernel has kprobes (the perf `kprobe` event source, or tracefs' kprobe_events).
pub fn kprobes_available() -> bool {
    Path::new("/sys/bus/event_source/devices/kprobe").exists()
        || crate::attach::features::find_tracefs().is_some_and(|t| t.join("kprobe_events").exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LADDER: [Attach; 4] = [Attach::Tracepoint, Attach::Uprobe, Attach::Fentry, Attach::Kprobe];

    #[test]
    fn kernel_functions_take_fentry_then_kprobes() {
        let kernel = Site::Kernel { function: "vfs_read".into(), slots: Some(4), offset: 0 };
        assert_eq!(mechanisms(&kernel, &LADDER), vec![Attach::Fentry, Attach::Kprobe]);
        assert_eq!(programs(&kernel, ProbeType::Entry, false, Attach::Fentry), vec!["probe_fentry"]);
        assert_eq!(
            programs(&kernel, ProbeType::Return, true, Attach::Fentry),
            vec!["probe_fexit", "probe_fentry_start"]
        );
        assert_eq!(programs(&kernel, ProbeType::Return, true, Attach::Kprobe), vec!["probe_return", "probe_start"]);
        assert_eq!(kernel.retval_slot(), 4);
        let user = Site::User { binary: "/bin/true".into(), offset: 0 };
        assert_eq!(mechanisms(&user, &LADDER), vec![Attach::Uprobe]);
        assert_eq!(programs(&user, ProbeType::Entry, false, Attach::Uprobe), vec!["probe_entry"]);
    }
}
