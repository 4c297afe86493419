// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Probe specifications of the multi-tools (argdist, trace), parsed in Rust into the parameters of generic,
//! prebuilt BPF programs (`bpf/include/probe.bpf.h`): no compiler at run time.
//!
//! A spec names where to probe ([`spec`]: a tracepoint, a user function's entry or return by uprobe, a kernel
//! function's by fentry/fexit or kprobe: [`attach`]), and expressions and a filter over what is there. [`fields`]
//! resolves names: tracepoint fields from tracefs `format` files, function arguments by position with the C type of the
//! spec's signature ([`ctype`]), `$retval`, `$latency`, `$PID`, `$TID`, `$UID`. [`plan`] turns the expressions and the
//! filter ([`filter`]: comparisons joined by `&&` and `||`) into a [`plan::Plan`]: the values to fetch (source, size,
//! signedness, string kind) and the comparisons over them, which a tool copies into its object's rodata. Anything
//! outside this grammar is a [`SpecError`]: one line naming the part that cannot be taken, exit 2.

/// Returns `Err(SpecError)` from a format string.
macro_rules! spec_bail {
    ($($arg:tt)*) => { return Err($crate::probe::SpecError(format!($($arg)*))) };
}

pub mod attach;
pub mod ctype;
pub mod fields;
pub mod filter;
pub mod kfunc;
pub mod plan;
pub mod printf;
pub mod spec;

use std::fmt;

/// A spec the tools cannot take: a usage error (exit status 2), one line naming the part at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

pub type SpecResult<T> = Result<T, SpecError>;

/// Prints a spec error as the tool's one line on stderr and exits with status 2 (nothing is attached yet).
pub fn usage_exit(err: &SpecError) -> ! {
    eprintln!("{}: {err}", crate::tool::invoked_name());
    std::process::exit(2);
}

/// Fills the generic probe's rodata (`bpf/include/probe.bpf.h`: `target_tgid`, `target_tid`, `fetches`, `cmps`,
/// `need_start`, `retval_slot`) of a tool's skeleton from a [`plan::Plan`] and the spec's [`attach::Site`]. A macro, because each tool's skeleton has its own
/// rodata type and its own `crate::bpf::consts` (from `src/probe.h`, a link to `bpf/include/probe.h`, where the
/// codes are defined once).
// `crate::bpf::consts` is the calling tool's, on purpose.
#[allow(clippy::crate_in_macro_def)]
#[macro_export]
macro_rules! probe_rodata {
    ($ro:expr, $plan:expr, $site:expr, $pid:expr, $tid:expr) => {{
        use crate::bpf::consts as pc;
        use $crate::probe::fields::{Source, StrKind};
        use $crate::probe::filter::Op;
        use $crate::probe::plan::Rhs;
        let ro = $ro;
        let plan: &$crate::probe::plan::Plan = $plan;
        ro.target_tgid = $pid.unwrap_or(0);
        ro.target_tid = $tid.unwrap_or(0);
        ro.n_fetch = plan.fetches.len() as u32;
        for (slot, f) in ro.fetches.iter_mut().zip(&plan.fetches) {
            let (src, offset) = match f.source {
                Source::Record(off) => (pc::SRC_RECORD, off),
                Source::Arg(n) => (pc::SRC_ARG, n),
                Source::Retval => (pc::SRC_RETVAL, 0),
                Source::Latency => (pc::SRC_LATENCY, 0),
                Source::Pid => (pc::SRC_PID, 0),
                Source::Tid => (pc::SRC_TID, 0),
                Source::Uid => (pc::SRC_UID, 0),
            };
            slot.src = src as u32;
            slot.offset = offset;
            slot.size = f.size;
            let string = match f.string {
                None => 0,
                Some(StrKind::User) => pc::F_STR_USER,
                Some(StrKind::Kernel) => pc::F_STR_KERNEL,
                Some(StrKind::DataLoc) => pc::F_DATA_LOC,
                Some(StrKind::Inline) => pc::F_INLINE,
            };
            slot.flags = (if f.signed { pc::F_SIGNED } else { 0 } | string) as u32;
        }
        ro.n_cmps = plan.cmps.len() as u32;
        for (slot, c) in ro.cmps.iter_mut().zip(&plan.cmps) {
            slot.lhs = c.lhs as u8;
            slot.op = (match c.op {
                Op::Eq => pc::OP_EQ,
                Op::Ne => pc::OP_NE,
                Op::Lt => pc::OP_LT,
                Op::Le => pc::OP_LE,
                Op::Gt => pc::OP_GT,
                Op::Ge => pc::OP_GE,
            }) as u8;
            slot.flags = (if c.signed { pc::C_SIGNED } else { 0 } | if c.or_next { pc::C_OR_NEXT } else { 0 }) as u8;
            match c.rhs {
                Rhs::Const(v) => slot.rhs = v,
                Rhs::Fetch(i) => {
                    slot.rhs_fetch = i as u8;
                    slot.flags |= pc::C_RHS_FETCH as u8;
                }
            }
        }
        ro.need_start = plan.needs_entry();
        ro.retval_slot = $crate::probe::attach::Site::retval_slot($site);
    }};
}
