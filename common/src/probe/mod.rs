//! Probe specifications of the multi-tools (argdist, trace), parsed in Rust into the parameters of generic,
//! prebuilt BPF programs (`bpf/include/probe.bpf.h`): no compiler at run time.
//!
//! A spec names where to probe ([`spec`]: a tracepoint, a user function's entry or return by uprobe, a kernel
//! function's by kprobe), and expressions and a filter over what is there. [`fields`] resolves names: tracepoint
//! fields from tracefs `format` files, function arguments by position with the C type of the spec's signature
//! ([`ctype`]), `$retval`, `$latency`, `$PID`, `$TID`, `$UID`. [`plan`] turns the expressions and the filter
//! ([`filter`]: comparisons joined by `&&` and `||`) into a [`plan::Plan`]: the values to fetch (source, size,
//! signedness, string kind) and the comparisons over them, which a tool copies into its object's rodata.
//! Anything outside this grammar is a [`SpecError`]: one line naming the part that cannot be taken, exit 2.

/// Returns `Err(SpecError)` from a format string.
macro_rules! spec_bail {
    ($($arg:tt)*) => { return Err($crate::probe::SpecError(format!($($arg)*))) };
}

pub mod ctype;
pub mod fields;
pub mod filter;
pub mod plan;
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
