// SPDX-License-Identifier: Apache-2.0 OR MIT
//! What this kernel and this process can do, decided from BTF, capabilities and trial loads, never from the
//! kernel version string.
//!
//! [`preflight`] runs before any BPF work: it turns "not root" and "no kernel BTF" into one clear sentence each.
//! [`KernelBtf`] answers questions about kernel types (a tracepoint's argument count, an enum's value, whether a
//! struct has a field) so that tools pick the right code path for the running kernel. [`Attach`] names the attach
//! mechanisms tools choose between, and [`tracefs`] finds or mounts tracefs for classic tracepoints.

use std::ffi::CStr;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libbpf_rs::btf::types::{Enum, Enum64, FuncProto, Typedef};
use libbpf_rs::btf::{Btf, BtfType};
use libbpf_rs::libbpf_sys;
use libbpf_rs::AsRawLibbpf;

const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Capability numbers from `linux/capability.h`.
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Checks, before anything is loaded, that this process may load BPF programs and that the kernel has BTF.
pub fn preflight() -> Result<()> {
    if !has_bpf_privileges() {
        bail!("must be run as root (or with CAP_BPF and CAP_PERFMON) to load BPF programs");
    }
    if !Path::new(VMLINUX_BTF).exists() {
        bail!("this kernel has no BTF ({VMLINUX_BTF} is missing); it needs CONFIG_DEBUG_INFO_BTF=y");
    }
    Ok(())
}

/// True if the effective capabilities allow loading and attaching tracing programs.
pub fn has_bpf_privileges() -> bool {
    let Some(caps) = effective_capabilities() else {
        return nix::unistd::geteuid().is_root();
    };
    let has = |cap: u32| caps & (1u64 << cap) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
}

fn effective_capabilities() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|line| line.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// The running kernel's BTF, for deciding code paths.
pub struct KernelBtf {
    btf: Btf<'static>,
}

impl KernelBtf {
    /// Loads `/sys/kernel/btf/vmlinux`.
    pub fn load() -> Result<Self> {
        let btf = Btf::from_vmlinux().with_context(|| format!("cannot read kernel BTF from {VMLINUX_BTF}"))?;
        Ok(KernelBtf { btf })
    }

    /// Number of arguments of raw tracepoint `name` (its `btf_trace_<name>` prototype minus the context pointer),
    /// or `None` if the kernel has no such tracepoint.
    pub fn tracepoint_arity(&self, name: &str) -> Option<usize> {
        let typedef: Typedef<'_> = self.btf.type_by_name(&format!("btf_trace_{name}"))?;
        let target = typedef.next_type()?.skip_mods_and_typedefs();
        let pointee = target.next_type()?.skip_mods_and_typedefs();
        let proto = FuncProto::try_from(pointee).ok()?;
        Some(proto.len().saturating_sub(1))
    }

    /// True if the kernel has a raw tracepoint `name`.
    pub fn has_tracepoint(&self, name: &str) -> bool {
        self.tracepoint_arity(name).is_some()
    }

    /// The value of enumerator `name` in any enum of the kernel.
    pub fn enum_value(&self, name: &str) -> Option<i64> {
        self.enum_values(&[name])[0]
    }

    /// The values of several enumerators, found in one pass over the kernel's types (a tool's start-up asks for
    /// up to 27: one pass each was 27 walks of 126,000 types with a string made for every enumerator met).
    /// Enumerators are compared as bytes where they lie in the BTF: nothing is allocated per type.
    pub fn enum_values(&self, names: &[&str]) -> Vec<Option<i64>> {
        let mut found = vec![None; names.len()];
        let btf = self.btf.as_libbpf_object().as_ptr();
        // SAFETY: `btf` stays valid while `self` lives; every id below `btf__type_cnt` names a type libbpf has
        // checked, and an enum's members (`vlen` of them) follow its header in the type section.
        let count = unsafe { libbpf_sys::btf__type_cnt(btf) };
        let name_at = |off: u32| unsafe { CStr::from_ptr(libbpf_sys::btf__name_by_offset(btf, off)) }.to_bytes();
        let mut missing = names.len();
        let mut note = |off: u32, value: i64| {
            let member = name_at(off);
            for (slot, name) in found.iter_mut().zip(names) {
                if slot.is_none() && member == name.as_bytes() {
                    *slot = Some(value);
                    missing -= 1;
                }
            }
            missing == 0
        };
        for id in 1..count {
            let ty = unsafe { &*libbpf_sys::btf__type_by_id(btf, id) };
            let (kind, vlen) = ((ty.info >> 24) & 0x1f, (ty.info & 0xffff) as usize);
            let after = unsafe { (ty as *const libbpf_sys::btf_type).add(1) };
            let done = match kind {
                libbpf_sys::BTF_KIND_ENUM => {
                    let m = unsafe { std::slice::from_raw_parts(after as *const libbpf_sys::btf_enum, vlen) };
                    m.iter().any(|e| note(e.name_off, e.val as i64))
                }
                libbpf_sys::BTF_KIND_ENUM64 => {
                    let m = unsafe { std::slice::from_raw_parts(after as *const libbpf_sys::btf_enum64, vlen) };
                    m.iter().any(|e| note(e.name_off, ((e.val_hi32 as u64) << 32 | e.val_lo32 as u64) as i64))
                }
                _ => false,
            };
            if done {
                break;
            }
        }
        found
    }

    /// The enumerators of enum type `enum_name` as (name, value) pairs.
    pub fn enum_members(&self, enum_name: &str) -> Vec<(String, i64)> {
        let Some(ty) = self.btf.type_by_name::<BtfType<'_>>(enum_name) else {
            return Vec::new();
        };
        if let Ok(e) = Enum::try_from(ty) {
            return e.iter().filter_map(|m| Some((m.name?.to_str()?.to_string(), m.value))).collect();
        }
        if let Ok(e) = Enum64::try_from(ty) {
            return e.iter().filter_map(|m| Some((m.name?.to_str()?.to_string(), m.value as i64))).collect();
        }
        Vec::new()
    }

    /// True if the kernel has a function `name` in its BTF (a candidate for fentry).
    pub fn has_function(&self, name: &str) -> bool {
        self.btf.type_by_name::<BtfType<'_>>(name).is_some_and(|t| t.kind() == libbpf_rs::btf::BtfKind::Func)
    }

    /// The first of `names` (one function under the names kernels gave it over time, newest first) that the
    /// kernel has; the error names `what` the function does and every name tried.
    pub fn first_function(&self, names: &[&'static str], what: &str) -> Result<&'static str> {
        match names.iter().copied().find(|n| self.has_function(n)) {
            Some(name) => Ok(name),
            None => bail!("the kernel has no {what} function to trace ({})", names.join(", ")),
        }
    }
}

/// Ways a tool attaches its programs, cheapest first within each family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    TpBtf,
    RawTp,
    Tracepoint,
    Fentry,
    KprobeMulti,
    Kprobe,
    UprobeMulti,
    Uprobe,
    PerfEvent,
}

impl Attach {
    /// The name used in `-v` output and in `COREBPF_ATTACH`.
    pub fn name(self) -> &'static str {
        match self {
            Attach::TpBtf => "tp_btf",
            Attach::RawTp => "raw_tp",
            Attach::Tracepoint => "tracepoint",
            Attach::Fentry => "fentry",
            Attach::KprobeMulti => "kprobe_multi",
            Attach::Kprobe => "kprobe",
            Attach::UprobeMulti => "uprobe_multi",
            Attach::Uprobe => "uprobe",
            Attach::PerfEvent => "perf_event",
        }
    }
}

impl fmt::Display for Attach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where tracefs is usually mounted, and where it is mounted if it is nowhere.
const TRACEFS_USUAL: &str = "/sys/kernel/tracing";

/// The tracefs mount point, mounting it at `/sys/kernel/tracing` if it is not mounted anywhere yet. Found once
/// per process: a tool attaching six tracepoints asks six times.
///
/// A tracefs the tool mounts is mounted in a mount namespace of the tool's own (the calling thread's, made
/// private so that nothing propagates out), so that nothing is left mounted when the tool exits, however it
/// exits: in a fresh mount namespace or a chroot, the system stays as it was. The thread that mounts it is the one
/// that attaches (libbpf reads the tracepoint IDs there).
pub fn tracefs() -> Result<PathBuf> {
    static FOUND: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(found) = FOUND.get() {
        return Ok(found.clone());
    }
    let found = match find_tracefs() {
        Some(found) => found,
        None => mount_own_tracefs()?,
    };
    Ok(FOUND.get_or_init(|| found).clone())
}

/// Mounts tracefs at its usual place in a private mount namespace of the calling thread (see [`tracefs`]).
fn mount_own_tracefs() -> Result<PathBuf> {
    use nix::mount::{mount, MsFlags};
    let target = Path::new(TRACEFS_USUAL);
    let failed = || format!("tracefs is not mounted and mounting it at {} failed", target.display());
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).with_context(failed)?;
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>).with_context(failed)?;
    mount(Some("nodev"), target, Some("tracefs"), MsFlags::empty(), None::<&str>).with_context(failed)?;
    Ok(target.to_path_buf())
}

/// Where tracefs is mounted, if it is (without mounting it): its usual place if tracefs is there, else the mount
/// table's first tracefs (or a debugfs with `tracing/events`).
pub fn find_tracefs() -> Option<PathBuf> {
    let usual = Path::new(TRACEFS_USUAL);
    if usual.join("events").is_dir() {
        return Some(usual.to_path_buf());
    }
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (_, dir, fstype) = (fields.next()?, fields.next()?, fields.next()?);
        if fstype == "tracefs" {
            return Some(PathBuf::from(dir));
        }
        if fstype == "debugfs" && Path::new(dir).join("tracing/events").is_dir() {
            return Some(Path::new(dir).join("tracing"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enumerators_are_found_in_one_pass() {
        let btf = KernelBtf::load().unwrap();
        let members = btf.enum_members("bpf_func_id");
        let (first, last) = (&members[1], members.last().unwrap());
        let found = btf.enum_values(&[first.0.as_str(), last.0.as_str(), "NO_SUCH_ENUMERATOR_X"]);
        assert_eq!(found, [Some(first.1), Some(last.1), None]);
        assert_eq!(btf.enum_value("BPF_FUNC_map_lookup_elem"), Some(1));
        // The first enum that has the name answers, as the kernel's enums are laid out.
        assert_eq!(btf.enum_values(&["BPF_FUNC_map_lookup_elem", "BPF_FUNC_map_lookup_elem"]), [Some(1), Some(1)]);
    }

    #[test]
    fn capabilities_are_read() {
        assert!(effective_capabilities().is_some());
    }

    #[test]
    fn attach_names() {
        assert_eq!(Attach::TpBtf.to_string(), "tp_btf");
        assert_eq!(Attach::KprobeMulti.name(), "kprobe_multi");
    }
}
