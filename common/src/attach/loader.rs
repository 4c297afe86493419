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
use libbpf_rs::{ErrorKind, Link, OpenObject, PrintLevel, ProgramMut};

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

/// The read-only data (`const volatile` options) of an opened skeleton: `rodata(&mut open.maps.rodata_data)?`.
pub fn rodata<'a, T>(data: &'a mut Option<&mut T>) -> Result<&'a mut T> {
    data.as_deref_mut().context("the BPF object has no read-only data (no const volatile options)")
}

/// Routes libbpf's messages to stderr with `-v` (debug detail with `-vv`), and silences them otherwise.
pub fn init_libbpf_log(verbosity: u8) {
    fn print(_level: PrintLevel, msg: String) {
        eprint!("libbpf: {}", msg.strip_prefix("libbpf: ").unwrap_or(&msg));
    }
    match verbosity {
        0 => libbpf_rs::set_print(None),
        1 => libbpf_rs::set_print(Some((PrintLevel::Info, print))),
        _ => libbpf_rs::set_print(Some((PrintLevel::Debug, print))),
    };
}

/// The mechanisms of `preferred` that `COREBPF_ATTACH` allows, in order.
pub fn allowed(preferred: &[Attach]) -> Result<Vec<Attach>> {
    let Ok(forced) = std::env::var(FORCE_ATTACH_ENV) else {
        return Ok(preferred.to_vec());
    };
    let wanted: Vec<&str> = forced.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let chosen: Vec<Attach> = preferred.iter().copied().filter(|a| wanted.contains(&a.name())).collect();
    if chosen.is_empty() {
        let names: Vec<&str> = preferred.iter().map(|a| a.name()).collect();
        bail!("{FORCE_ATTACH_ENV}={forced} allows none of this tool's attach mechanisms ({})", names.join(", "));
    }
    Ok(chosen)
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

/// Attaches a program written for tracepoint `category:name` with `mech`: `tp_btf` (target set at load),
/// `raw_tp`, or the classic `tracepoint` (which needs tracefs, mounted here if it is not yet).
pub fn attach_tracepoint(prog: &ProgramMut<'_>, category: &str, name: &str, mech: Attach) -> Result<Link> {
    let link = match mech {
        Attach::TpBtf => prog.attach(),
        Attach::RawTp => prog.attach_raw_tracepoint(name),
        Attach::Tracepoint => {
            crate::attach::features::tracefs()?;
            prog.attach_tracepoint(libbpf_rs::TracepointCategory::Custom(category.into()), name)
        }
        other => bail!("{other} is not a way to attach to a tracepoint"),
    };
    link.with_context(|| format!("attaching to tracepoint {category}:{name} ({mech})"))
}
