// SPDX-License-Identifier: Apache-2.0 OR MIT
//! What a tool is to the multicall binary `corebpf-tools` and to its own `main.rs`.
//!
//! Every tool crate's library exports `pub const TOOL: common::tool::Tool = common::tool!(main, [ladder]);` where
//! `main` takes the command line (argv[0] first) and returns the exit status, and the ladder lists the attach
//! mechanisms it tries, the one list its loader and `corebpf-tools features` read. The tool's own `main.rs` is
//! the same one line in every tool (`tool::TOOL.run_from_env()`), and the multicall binary calls the same entry
//! with the name it was invoked by, so help, `--version`, usage errors and error lines name the tool as the user
//! typed it ([`invoked_name`]).

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::sync::OnceLock;

use crate::attach::features::Attach;

/// One tool: its name and one-line description (from its Cargo.toml) and its entry point.
#[derive(Clone, Copy)]
pub struct Tool {
    /// The tool's name, as BCC names it (`biolatency`): the crate's package name.
    pub name: &'static str,
    /// One line saying what it shows: the crate's `description`.
    pub about: &'static str,
    /// Runs the tool with a full command line (argv[0] first) and returns its exit status.
    pub main: fn(Vec<OsString>) -> ExitCode,
    /// The attach mechanisms the tool can use, cheapest first within each family (`corebpf-tools features`
    /// shows, per family, the first one this kernel offers).
    pub attach: &'static [Attach],
}

impl Tool {
    /// Runs the tool with this process's own command line (what a tool's `main.rs` does).
    pub fn run_from_env(&self) -> ExitCode {
        (self.main)(std::env::args_os().collect())
    }
}

/// The [`Tool`] of the calling crate: name and description from its Cargo.toml, `$main` its entry point, and
/// the attach mechanisms it tries, cheapest first: `tool!(main, [Attach::TpBtf, Attach::RawTp])`. There is no
/// form without a ladder; toolset's `every_tool_declares_its_attach_ladder` test refuses an empty one.
#[macro_export]
macro_rules! tool {
    ($main:path, [$($attach:expr),* $(,)?]) => {
        $crate::tool::Tool {
            name: env!("CARGO_PKG_NAME"),
            about: env!("CARGO_PKG_DESCRIPTION"),
            main: $main,
            attach: &[$($attach),*],
        }
    };
}

static INVOKED: OnceLock<String> = OnceLock::new();

thread_local! {
    /// The name of the tool running on this thread, where one process runs several tools on threads of their own
    /// (`corebpf-tools exporter`): each names itself in its error lines.
    static THREAD_INVOKED: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// The suffix Debian and Ubuntu give BCC's tools (`biolatency-bpfcc`), so that a link of that name, or that name
/// given to the multicall binary, runs the tool a script written for those packages expects.
pub const DEBIAN_BCC_SUFFIX: &str = "-bpfcc";

/// `name` without Debian's `-bpfcc` suffix, if it has one.
pub fn without_debian_suffix(name: &str) -> &str {
    name.strip_suffix(DEBIAN_BCC_SUFFIX).unwrap_or(name)
}

/// Records the name the tool was invoked by: the file name of argv[0] (`bpf-biolatency` for an installed link,
/// `biolatency` when run through `corebpf-tools biolatency`). Called once per tool by [`crate::cli::parse`].
pub fn set_invoked_name(argv0: Option<&OsString>, fallback: &str) -> &'static str {
    let name = argv0
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| fallback.to_owned());
    if crate::output::exporter::active() {
        // One leaked name per tool start of the exporter (a few bytes per reload).
        let name: &'static str = Box::leak(name.into_boxed_str());
        THREAD_INVOKED.with(|t| t.set(Some(name)));
        return name;
    }
    INVOKED.get_or_init(|| name).as_str()
}

static COMMIT: OnceLock<&'static str> = OnceLock::new();

/// Records the git commit the binary was built from (the multicall binary's build script finds it; "unknown"
/// outside a git checkout), for `--version`.
pub fn set_build_commit(commit: &'static str) {
    let _ = COMMIT.set(commit);
}

/// The git commit recorded with [`set_build_commit`], if known.
pub fn build_commit() -> Option<&'static str> {
    COMMIT.get().copied().filter(|c| !c.is_empty() && *c != "unknown")
}

/// What `--version` prints after the tool's name: the version, then the commit built (when known) and the
/// version of libbpf linked in, e.g. `0.1.0 (commit eaec2093f631, libbpf 1.7)`.
pub fn version_line() -> String {
    // SAFETY: libbpf_version_string returns a pointer to a static, NUL-terminated string.
    let libbpf = unsafe { std::ffi::CStr::from_ptr(libbpf_rs::libbpf_sys::libbpf_version_string()) };
    let libbpf = libbpf.to_string_lossy();
    let libbpf = libbpf.trim_start_matches('v');
    match COMMIT.get().filter(|c| !c.is_empty() && **c != "unknown") {
        Some(commit) => format!("{} (commit {commit}, libbpf {libbpf})", env!("CARGO_PKG_VERSION")),
        None => format!("{} (libbpf {libbpf})", env!("CARGO_PKG_VERSION")),
    }
}

/// The name the tool was invoked by, for messages (`biolatency: no disk named sdz`).
pub fn invoked_name() -> &'static str {
    if let Some(name) = THREAD_INVOKED.with(|t| t.get()) {
        return name;
    }
    INVOKED.get().map(String::as_str).unwrap_or("corebpf-tools")
}
