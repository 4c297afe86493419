// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Who is speaking: the name a tool was invoked by, for its messages, and the build it comes from, for
//! `--version` and the self metrics.
//!
//! [`crate::cli::parse`] records the name once per tool start ([`set_invoked_name`]): the file name of argv[0]
//! (`bpf-biolatency` for an installed link, `biolatency` through `corebpf-tools biolatency`), so help, usage
//! errors and error lines name the tool as the user typed it. Under the exporter several tools run in one
//! process, each on a thread of its own, so there the name is the thread's.

use std::ffi::OsString;
use std::path::Path;
use std::sync::OnceLock;

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

/// Records the name the tool was invoked by: the file name of argv[0], else `fallback`. `per_thread`: the tool
/// shares its process with others (the exporter's), so the name is this thread's only.
pub fn set_invoked_name(argv0: Option<&OsString>, fallback: &str, per_thread: bool) -> &'static str {
    let name = argv0
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| fallback.to_owned());
    if per_thread {
        // One leaked name per tool start of the exporter (a few bytes per reload).
        let name: &'static str = Box::leak(name.into_boxed_str());
        THREAD_INVOKED.with(|t| t.set(Some(name)));
        return name;
    }
    INVOKED.get_or_init(|| name).as_str()
}

/// The name the tool was invoked by, for messages (`biolatency: no disk named sdz`).
pub fn invoked_name() -> &'static str {
    if let Some(name) = THREAD_INVOKED.with(|t| t.get()) {
        return name;
    }
    INVOKED.get().map(String::as_str).unwrap_or("corebpf-tools")
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
    match build_commit() {
        Some(commit) => format!("{} (commit {commit}, libbpf {libbpf})", env!("CARGO_PKG_VERSION")),
        None => format!("{} (libbpf {libbpf})", env!("CARGO_PKG_VERSION")),
    }
}
