// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Probe specifications of the multi-tools (argdist, trace), parsed in Rust into the parameters of generic,
//! prebuilt BPF programs (`bpf/include/probe.bpf.h`): no compiler at run time.
//!
//! A spec names where to probe ([`spec`]: a tracepoint, a user function's entry or return by uprobe, a kernel
//! function's by fentry/fexit or kprobe: [`attach`]), and expressions and a filter over what is there, in C
//! ([`expr`]). [`fields`] resolves names: tracepoint fields from tracefs `format` files, function arguments by
//! position with the C type of the spec's signature ([`ctype`]) or the kernel's BTF ([`kfunc`]), struct members
//! through pointers ([`members`]), `$retval`, `$latency`, `$PID`, `$TID`, `$UID`. [`plan`] compiles the
//! expressions and the filter into a [`plan::Plan`]: the values to fetch (source, size, signedness, string kind,
//! pointers to follow) and a small stack machine's instructions over them, which a tool copies into its object's
//! rodata. Anything outside this grammar is a [`SpecError`]: one line naming the part that cannot be taken, exit 2.

/// Returns `Err(SpecError)` from a format string.
macro_rules! spec_bail {
    ($($arg:tt)*) => { return Err($crate::probe::SpecError(format!($($arg)*))) };
}

pub mod attach;
pub mod ctype;
pub mod expr;
pub mod fields;
pub mod kfunc;
pub mod members;
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
    eprintln!("{}: {err}", crate::identity::invoked_name());
    std::process::exit(2);
}

/// Fills the generic probe's rodata (`bpf/include/probe.bpf.h`: `target_tgid`, `target_tid`, `fetches`,
/// `entry_fetches`, `insns`, `lits`, `need_start`, `retval_slot`) of a tool's skeleton from a [`plan::Plan`] and the
/// spec's [`attach::Site`]. A macro, because each tool's skeleton has its own rodata type and its own
/// `crate::bpf::consts` (from `src/probe.h`, a link to `bpf/include/probe.h`, where the codes are defined once).
// `crate::bpf::consts` is the calling tool's, on purpose.
#[allow(clippy::crate_in_macro_def)]
#[macro_export]
macro_rules! probe_rodata {
    ($ro:expr, $plan:expr, $site:expr, $pid:expr, $tid:expr) => {{
        use crate::bpf::consts as pc;
        use $crate::probe::expr::{BinOp, UnOp};
        use $crate::probe::fields::{Fetch, Source, StrKind};
        use $crate::probe::plan::Insn;
        const _: () = assert!(pc::MAX_DEREF == $crate::probe::fields::MAX_DEREF);
        let ro = $ro;
        let plan: &$crate::probe::plan::Plan = $plan;
        ro.target_tgid = $pid.unwrap_or(0);
        ro.target_tid = $tid.unwrap_or(0);
        let fill = |slot: &mut crate::bpf::types::fetch, f: &Fetch| {
            let (src, offset) = match f.source {
                Source::Record(off) => (pc::SRC_RECORD, off),
                Source::Arg(n) => (pc::SRC_ARG, n),
                Source::Retval => (pc::SRC_RETVAL, 0),
                Source::Latency => (pc::SRC_LATENCY, 0),
                Source::Pid => (pc::SRC_PID, 0),
                Source::Tid => (pc::SRC_TID, 0),
                Source::Uid => (pc::SRC_UID, 0),
                Source::Entry(n) => (pc::SRC_ENTRY, n),
                Source::UsdtArg(n) => (pc::SRC_USDT, n),
                Source::Task => (pc::SRC_TASK, 0),
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
                Some(StrKind::Comm) => pc::F_COMM,
            };
            let deref = if f.deref.user { pc::F_DEREF_USER } else { 0 } | if f.deref.address { pc::F_ADDR } else { 0 };
            slot.flags = (if f.signed { pc::F_SIGNED } else { 0 } | string | deref) as u32;
            slot.n_deref = f.deref.len as u32;
            slot.deref = f.deref.offsets;
        };
        ro.n_fetch = plan.fetches.len() as u32;
        for (slot, f) in ro.fetches.iter_mut().zip(&plan.fetches) {
            fill(slot, f);
        }
        ro.n_entry = plan.entry_fetches.len() as u32;
        for (slot, f) in ro.entry_fetches.iter_mut().zip(&plan.entry_fetches) {
            fill(slot, f);
        }
        ro.n_insns = plan.insns.len() as u32;
        for (slot, insn) in ro.insns.iter_mut().zip(&plan.insns) {
            let signed_flag = |s: bool| if s { pc::IF_SIGNED as u8 } else { 0 };
            let (op, arg, flags, imm) = match *insn {
                Insn::Val(i) => (pc::I_VAL, i as u8, 0, 0),
                Insn::Imm(v) => (pc::I_IMM, 0, 0, v),
                Insn::StrCmp { fetch, lit, len } => (pc::I_STRCMP, fetch as u8, lit as u8, len as i64),
                Insn::Cast { size, signed } => (pc::I_CAST, size as u8, signed_flag(signed), 0),
                Insn::Unary(UnOp::Neg) => (pc::I_NEG, 0, 0, 0),
                Insn::Unary(UnOp::Not) => (pc::I_NOT, 0, 0, 0),
                Insn::Unary(UnOp::BitNot) => (pc::I_BNOT, 0, 0, 0),
                Insn::Binary { op, signed } => {
                    let code = match op {
                        BinOp::Mul => pc::I_MUL,
                        BinOp::Div => pc::I_DIV,
                        BinOp::Mod => pc::I_MOD,
                        BinOp::Add => pc::I_ADD,
                        BinOp::Sub => pc::I_SUB,
                        BinOp::Shl => pc::I_SHL,
                        BinOp::Shr => pc::I_SHR,
                        BinOp::Lt => pc::I_LT,
                        BinOp::Le => pc::I_LE,
                        BinOp::Gt => pc::I_GT,
                        BinOp::Ge => pc::I_GE,
                        BinOp::Eq => pc::I_EQ,
                        BinOp::Ne => pc::I_NE,
                        BinOp::BitAnd => pc::I_AND,
                        BinOp::BitXor => pc::I_XOR,
                        BinOp::BitOr => pc::I_OR,
                        BinOp::And => pc::I_LAND,
                        BinOp::Or => pc::I_LOR,
                    };
                    (code, 0, signed_flag(signed), 0)
                }
                Insn::Out(i) => (pc::I_OUT, i as u8, 0, 0),
                Insn::Keep => (pc::I_KEEP, 0, 0, 0),
            };
            slot.op = op as u8;
            slot.arg = arg;
            slot.flags = flags;
            slot.imm = imm;
        }
        for (slot, lit) in ro.lits.iter_mut().zip(&plan.lits) {
            for (b, c) in slot.iter_mut().zip(lit.bytes()) {
                *b = c as _;
            }
        }
        ro.need_start = plan.needs_entry();
        ro.retval_slot = $crate::probe::attach::Site::retval_slot($site);
    }};
}
