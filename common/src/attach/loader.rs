// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Opening, loading and attaching skeletons, with fallbacks between attach mechanisms.
//!
//! A tool lists the mechanisms it can use, cheapest first (`tp_btf` before `raw_tp`, say), and
//! [`load_first_working`] tries them in turn: each try opens a fresh skeleton, keeps the programs for that
//! mechanism, and loads; the first that the kernel accepts wins. Setting `COREBPF_ATTACH=raw_tp` (a
//! comma-separated list) restricts the choice, which is how the kernel matrix tests every fallback. libbpf's own
//! messages are shown only with `-v` ([`init_libbpf_log`]), since a failed trial load is expected and noisy.

use std::mem::MaybeUninit;

use anyhow::Context;
use anyhow::{anyhow, bail, Result};
use libbpf_rs::skel::SkelBuilder;
use libbpf_rs::{ErrorKind, Link, Object, OpenObject, PrintLevel, ProgramMut};

use crate::attach::features::Attach;

/// The environment variable that restricts attach mechanisms, e.g. `COREBPF_ATTACH=raw_tp`.
pub const FORCE_ATTACH_ENV: &str = "COREBPF_ATTACH";

/// Storage for one opened BPF object that lives as long as the process, as the tool's skeleton does.
pub fn object_storage() -> &'static mut MaybeUninit<OpenObject> {
    Box::leak(Box::new(MaybeUninit::uninit()))
}

/// Opens a tool's skeleton (`open_skeleton::<bpf::BpfSkelBuilder>()`), ready for its options to be set.
pub fn open_skeleton<B: SkelBuilder<'static> + Default>() -> Result<B::Output> {
    B::default().open(object_storage()).context("opening the BPF object")
}

/// Opens a tool's skeleton like [`open_skeleton`], for a load in which no program relocates anything against
/// kernel types (no CO-RE: `BPF_CORE_READ`, `preserve_access_index` structs), though programs left unloaded may.
///
/// libbpf reads and indexes the whole kernel BTF (5 MB; a third of a tool's start-up) whenever the object has any
/// CO-RE relocation, loaded or not. Naming an empty BTF as the CO-RE target (`btf_custom_path`) tells it there is
/// nothing to look up: it then reads the kernel's BTF only if a loaded program's type needs it (tp_btf, fentry).
/// A CO-RE relocation in a program that is loaded finds no type in the empty BTF and fails the load, so a test
/// catches the mistake of using this for such a program.
pub fn open_skeleton_core_free<B: SkelBuilder<'static> + Default>() -> Result<B::Output> {
    let opts = libbpf_rs::libbpf_sys::bpf_object_open_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_object_open_opts>() as libbpf_rs::libbpf_sys::size_t,
        btf_custom_path: empty_btf_path()?.as_ptr(),
        ..Default::default()
    };
    B::default().open_opts(opts, object_storage()).context("opening the BPF object")
}

/// A BTF with no types (its header and the empty string), in a memory file named by its `/proc/self/fd/N` path,
/// which stays open for the life of the process (libbpf parses it at load).
fn empty_btf_path() -> Result<&'static std::ffi::CStr> {
    static PATH: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
    if let Some(path) = PATH.get() {
        return Ok(path);
    }
    // struct btf_header: magic 0xEB9F, version 1, flags 0, hdr_len 24, type_off 0, type_len 0, str_off 0,
    // str_len 1; then the string section, one NUL.
    let mut btf = Vec::with_capacity(25);
    btf.extend_from_slice(&0xEB9F_u16.to_ne_bytes());
    btf.extend_from_slice(&[1, 0]);
    for word in [24u32, 0, 0, 0, 1] {
        btf.extend_from_slice(&word.to_ne_bytes());
    }
    btf.push(0);
    // SAFETY: memfd_create with a NUL-terminated name and valid flags; the result is checked.
    let fd = unsafe { libc::memfd_create(c"corebpf-empty-btf".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("creating an empty BTF for libbpf");
    }
    // SAFETY: `fd` was just created here and is owned by nothing else.
    let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    std::io::Write::write_all(&mut file, &btf).context("writing an empty BTF for libbpf")?;
    let path = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a path of digits");
    std::mem::forget(file);
    Ok(PATH.get_or_init(|| path))
}

/// The read-only data (`const volatile` options) of an opened skeleton: `rodata(&mut open.maps.rodata_data)?`.
pub fn rodata<'a, T>(data: &'a mut Option<&mut T>) -> Result<&'a mut T> {
    data.as_deref_mut().context("the BPF object has no read-only data (no const volatile options)")
}

/// Routes libbpf's messages to stderr with `-v` (debug detail with `-vv`), and silences them otherwise.
///
/// With one `-v`, libbpf's advice after a refused load ("permission error while running as root; try raising
/// 'ulimit -l'?") is left out: it is printed for any EPERM, and on a kernel that denies fentry it points the
/// wrong way, where the tool's own line says which mechanism the kernel refused. `-vv` keeps every message.
pub fn init_libbpf_log(verbosity: u8) {
    fn print(_level: PrintLevel, msg: String) {
        eprint!("libbpf: {}", msg.strip_prefix("libbpf: ").unwrap_or(&msg));
    }
    fn print_info(level: PrintLevel, msg: String) {
        if !is_memlock_advice(&msg) {
            print(level, msg);
        }
    }
    match verbosity {
        0 => libbpf_rs::set_print(None),
        1 => libbpf_rs::set_print(Some((PrintLevel::Info, print_info))),
        _ => libbpf_rs::set_print(Some((PrintLevel::Debug, print))),
    };
}

/// libbpf's guess at the cause of an EPERM load (its `pr_perm_msg`), misleading where the kernel refused the
/// program's kind (fentry here) rather than its memory.
fn is_memlock_advice(msg: &str) -> bool {
    msg.contains("try raising 'ulimit -l'")
}

/// The mechanisms of `preferred` that `COREBPF_ATTACH` allows, in order. Unset or empty, it allows them all.
pub fn allowed(preferred: &[Attach]) -> Result<Vec<Attach>> {
    let forced = std::env::var(FORCE_ATTACH_ENV).unwrap_or_default();
    let wanted: Vec<&str> = forced.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if wanted.is_empty() {
        return Ok(preferred.to_vec());
    }
    let chosen: Vec<Attach> = preferred.iter().copied().filter(|a| wanted.contains(&a.name())).collect();
    if chosen.is_empty() {
        let names: Vec<&str> = preferred.iter().map(|a| a.name()).collect();
        bail!("{FORCE_ATTACH_ENV}={forced} allows none of this tool's attach mechanisms ({})", names.join(", "));
    }
    Ok(chosen)
}

/// Whether `COREBPF_ATTACH` names `mech`: a user (or a test) asked for it, so a tool uses it even where its own
/// cost rules would pick another.
pub fn forced(mech: Attach) -> bool {
    std::env::var(FORCE_ATTACH_ENV).is_ok_and(|v| v.split(',').any(|m| m.trim() == mech.name()))
}

/// Tries `attempt` with each allowed mechanism in turn and returns the first success with the mechanism used.
/// When all fail, the error names each mechanism and why it failed; a permission error is reported as such.
pub fn load_first_working<T>(
    preferred: &[Attach],
    verbose: bool,
    mut attempt: impl FnMut(Attach) -> Result<T>,
) -> Result<(T, Attach)> {
    let mut failures = Vec::new();
    for mech in allowed(preferred)? {
        match attempt(mech) {
            Ok(value) => {
                if verbose {
                    eprintln!("attached with {mech}");
                }
                return Ok((value, mech));
            }
            Err(err) => {
                if verbose {
                    eprintln!("{mech} did not load: {err:#}");
                }
                if is_permission_error(&err) && !crate::attach::features::has_bpf_privileges() {
                    return Err(
                        err.context("permission denied loading BPF programs (need root, or CAP_BPF and CAP_PERFMON)")
                    );
                }
                failures.push(format!("{mech}: {}", root_cause(&err)));
            }
        }
    }
    Err(anyhow!("the kernel accepted none of the ways to attach ({})", failures.join("; ")))
}

fn is_permission_error(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.downcast_ref::<libbpf_rs::Error>().is_some_and(|e| e.kind() == ErrorKind::PermissionDenied))
}

fn root_cause(err: &anyhow::Error) -> String {
    err.root_cause().to_string()
}

/// The kinds of BPF program section (`SEC("kind/...")`: the part before the first `/`) that attach with `mech`.
pub fn section_kinds(mech: Attach) -> &'static [&'static str] {
    match mech {
        Attach::TpBtf => &["tp_btf"],
        Attach::RawTp => &["raw_tp", "raw_tracepoint"],
        Attach::Tracepoint => &["tracepoint", "tp"],
        Attach::Fentry => &["fentry", "fexit"],
        Attach::KprobeMulti => &["kprobe.multi", "kretprobe.multi"],
        Attach::Kprobe => &["kprobe", "kretprobe"],
        Attach::UprobeMulti => &["uprobe.multi", "uretprobe.multi"],
        Attach::Uprobe => &["uprobe", "uretprobe"],
        Attach::PerfEvent => &["perf_event"],
    }
}

/// True if a program of section `section` (`tp_btf/sched_switch`, `kprobe.multi`, ...) attaches with `mech`.
pub fn section_attaches_with(section: &str, mech: Attach) -> bool {
    let kind = section.split_once('/').map_or(section, |(kind, _)| kind);
    section_kinds(mech).contains(&kind)
}

/// Keeps the programs of `mech` and disables every other one: a program loads if its section is of a kind that
/// attaches with `mech` (`tp_btf/...` for `tp_btf`, `raw_tp/...` for `raw_tp`, ...; [`section_kinds`]). So a
/// tool whose object holds one program per mechanism (the `_btf`/`_raw` pairs of `bpf/include/tp_btf_raw.bpf.h`)
/// calls this once, `autoload_by_section(open.open_object_mut(), mech)`, instead of one `set_autoload` per
/// program, and a program added to the object is kept or left out by the same rule. Programs that run only with
/// an option can be disabled after it. Returns how many programs it keeps.
///
/// Keeping the `tp_btf` half also sets the object's `tp_args_typed` (tp_btf_raw.bpf.h), where it has one, so that
/// its `TP_READ`s read tracepoint arguments directly instead of through `bpf_probe_read_kernel`.
pub fn autoload_by_section(object: &mut OpenObject, mech: Attach) -> usize {
    let mut kept = 0;
    for mut prog in object.progs_mut() {
        let keep = section_attaches_with(&prog.section().to_string_lossy(), mech);
        prog.set_autoload(keep);
        kept += usize::from(keep);
    }
    set_rodata_flag(object, TP_ARGS_TYPED, mech == Attach::TpBtf);
    kept
}

/// The `.rodata` flag of tp_btf_raw.bpf.h that says the tracepoint arguments are typed pointers (the tp_btf half).
pub const TP_ARGS_TYPED: &str = "tp_args_typed";

/// Sets the `const volatile bool` named `name` in the object's `.rodata` to `value` ([`set_rodata`]).
pub fn set_rodata_flag(object: &mut OpenObject, name: &str, value: bool) -> bool {
    set_rodata(object, name, &[u8::from(value)])
}

/// Writes `value` into the `const volatile` variable named `name` in the object's `.rodata`, found by the
/// section's BTF, before the object is loaded; false if the object has no such variable of that size. For the
/// settings the shared BPF headers declare (the task filter, tp_args_typed), which every tool's skeleton struct
/// has too, but which common code sets for every tool.
pub fn set_rodata(object: &mut OpenObject, name: &str, value: &[u8]) -> bool {
    use libbpf_rs::btf::types::{DataSec, Var};
    use libbpf_rs::btf::Btf;
    use libbpf_rs::AsRawLibbpf;

    let offset = {
        // SAFETY: the pointer is the open object's own, valid while `object` is borrowed here.
        let raw = unsafe { object.as_libbpf_object().as_ref() };
        let Ok(Some(btf)) = Btf::from_bpf_object(raw) else { return false };
        let Some(sec) = btf.type_by_name::<DataSec>(".rodata") else { return false };
        let found = sec
            .iter()
            .find(|v| btf.type_by_id::<Var>(v.ty).and_then(|var| var.name().map(|n| n == name)).unwrap_or(false));
        match found {
            Some(v) if v.size == value.len() => v.offset as usize,
            _ => return false,
        }
    };
    for mut map in object.maps_mut() {
        if !map.name().to_string_lossy().ends_with(".rodata") {
            continue;
        }
        if let Some(bytes) = map.initial_value_mut().and_then(|data| data.get_mut(offset..offset + value.len())) {
            bytes.copy_from_slice(value);
            return true;
        }
    }
    false
}

/// The tracepoint a program's section names, with the mechanism: `tp_btf/NAME` and `raw_tp/NAME` give
/// `(mech, None, NAME)`, `tracepoint/CATEGORY/NAME` gives `(Tracepoint, Some(CATEGORY), NAME)`; None for a
/// section of another kind.
fn section_tracepoint(section: &str) -> Option<(Attach, Option<&str>, &str)> {
    let (kind, target) = section.split_once('/')?;
    let mech =
        [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint].into_iter().find(|&m| section_kinds(m).contains(&kind))?;
    match mech {
        Attach::Tracepoint => target.split_once('/').map(|(category, name)| (mech, Some(category), name)),
        _ => Some((mech, None, target)),
    }
}

/// Attaches every loaded tracepoint program of `object` (what [`autoload_by_section`] kept), in the object's
/// order, to the tracepoint its section names (category `category` for `tp_btf/NAME` and `raw_tp/NAME`, the
/// section's own for `tracepoint/CATEGORY/NAME`). A tool whose attach order matters uses
/// [`attach_loaded_tracepoint`] instead.
pub fn attach_loaded_tracepoints(object: &Object, category: &str) -> Result<Vec<Link>> {
    let mut links = Vec::new();
    for prog in object.progs_mut().filter(|p| p.autoload()) {
        let section = prog.section().to_string_lossy().into_owned();
        if let Some((mech, own, name)) = section_tracepoint(&section) {
            links.push(attach_tracepoint(&prog, own.unwrap_or(category), name, mech)?);
        }
    }
    Ok(links)
}

/// Attaches the loaded program of `object` on tracepoint `category:name` (the one of the pair that
/// [`autoload_by_section`] kept), so that a tool chooses the order of its links without choosing programs.
pub fn attach_loaded_tracepoint(object: &Object, category: &str, name: &str) -> Result<Link> {
    for prog in object.progs_mut().filter(|p| p.autoload()) {
        let section = prog.section().to_string_lossy().into_owned();
        if let Some((mech, _, target)) = section_tracepoint(&section) {
            if target == name {
                return attach_tracepoint(&prog, category, name, mech);
            }
        }
    }
    bail!("no program for tracepoint {category}:{name} was loaded")
}

/// Turns off every program of `object` on tracepoint `name` (both of a `tp_btf`/`raw_tp` pair), for a
/// tracepoint that only an option uses; call it after [`autoload_by_section`].
pub fn skip_tracepoint(object: &mut OpenObject, name: &str) {
    for mut prog in object.progs_mut() {
        let section = prog.section().to_string_lossy().into_owned();
        if section_tracepoint(&section).is_some_and(|(_, _, target)| target == name) {
            prog.set_autoload(false);
        }
    }
}

/// Attaches a program written for tracepoint `category:name` with `mech`: `tp_btf` (target set at load),
/// `raw_tp`, or the classic `tracepoint` (which needs tracefs, mounted here if it is not yet).
pub fn attach_tracepoint(prog: &ProgramMut<'_>, category: &str, name: &str, mech: Attach) -> Result<Link> {
    let link = match mech {
        Attach::TpBtf => prog.attach(),
        Attach::RawTp => prog.attach_raw_tracepoint(name),
        Attach::Tracepoint => {
            check_tracepoint_readable(&crate::attach::features::tracefs()?, category, name)?;
            prog.attach_tracepoint(libbpf_rs::TracepointCategory::Custom(category.into()), name)
        }
        other => bail!("{other} is not a way to attach to a tracepoint"),
    };
    link.with_context(|| format!("attaching to tracepoint {category}:{name} ({mech})"))
}

/// A classic tracepoint is attached by its ID, which libbpf reads from tracefs; tracefs is usually mode 0700, so a
/// tool run with CAP_BPF and CAP_PERFMON but not as root cannot read it. Says so, and what would fix it, instead
/// of a bare "Permission denied".
fn check_tracepoint_readable(tracefs: &std::path::Path, category: &str, name: &str) -> Result<()> {
    let id = tracefs.join("events").join(category).join(name).join("id");
    match std::fs::read_to_string(&id) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
            "cannot read {}: tracefs is readable by root only; run as root, add CAP_DAC_READ_SEARCH, or remount \
             tracefs with mode=0755 (mount -o remount,mode=0755 {})",
            id.display(),
            tracefs.display()
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_attach_with_their_mechanism() {
        assert!(section_attaches_with("tp_btf/sched_switch", Attach::TpBtf));
        assert!(!section_attaches_with("tp_btf/sched_switch", Attach::RawTp));
        assert!(section_attaches_with("raw_tp/sched_switch", Attach::RawTp));
        assert!(section_attaches_with("tracepoint/syscalls/sys_exit_accept", Attach::Tracepoint));
        assert!(section_attaches_with("kprobe", Attach::Kprobe));
        assert!(section_attaches_with("kretprobe/inet_csk_accept", Attach::Kprobe));
        assert!(!section_attaches_with("kprobe.multi", Attach::Kprobe));
        assert!(section_attaches_with("kprobe.multi", Attach::KprobeMulti));
        assert!(section_attaches_with("fexit/inet_csk_accept", Attach::Fentry));
        assert!(section_attaches_with("uretprobe", Attach::Uprobe));
        assert!(!section_attaches_with("uprobe.multi", Attach::Uprobe));
        assert!(section_attaches_with("perf_event", Attach::PerfEvent));
        assert!(!section_attaches_with("tp_btfx/a", Attach::TpBtf));
    }

    #[test]
    fn sections_name_their_tracepoint() {
        assert_eq!(section_tracepoint("tp_btf/sched_switch"), Some((Attach::TpBtf, None, "sched_switch")));
        assert_eq!(section_tracepoint("raw_tp/sys_exit"), Some((Attach::RawTp, None, "sys_exit")));
        assert_eq!(
            section_tracepoint("tracepoint/syscalls/sys_exit_accept"),
            Some((Attach::Tracepoint, Some("syscalls"), "sys_exit_accept"))
        );
        assert_eq!(section_tracepoint("kprobe/vfs_read"), None);
        assert_eq!(section_tracepoint("perf_event"), None);
    }
}
