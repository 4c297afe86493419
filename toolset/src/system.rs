// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The facts about the system a bug report needs beside the feature trials: this build (version and commit), the
//! kernel release and architecture (the kernel's, and the one this binary was built for), and the settings that decide what BPF may do here (lockdown, unprivileged
//! BPF, perf_event_paranoid). Each is read as it is; one that cannot be read says why in its value.

use std::fs;

/// The facts, in the order printed: (name, value).
pub fn facts() -> Vec<(&'static str, String)> {
    // SAFETY: uname fills the struct it is given; an all-zero utsname is a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::uname(&mut uts) } == 0;
    let field = |chars: &[libc::c_char]| {
        let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
        if ok {
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            "unknown".into()
        }
    };
    vec![
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("commit", env!("COREBPF_COMMIT").to_string()),
        ("kernel", field(&uts.release)),
        ("arch", field(&uts.machine)),
        // The architecture this binary was built for (x86_64 or aarch64): the package to install elsewhere.
        ("built_for", std::env::consts::ARCH.to_string()),
        ("lockdown", lockdown(read("/sys/kernel/security/lockdown"))),
        ("unprivileged_bpf_disabled", read("/proc/sys/kernel/unprivileged_bpf_disabled")),
        ("perf_event_paranoid", read("/proc/sys/kernel/perf_event_paranoid")),
    ]
}

/// A one-line file's text, or why it could not be read.
fn read(path: &str) -> String {
    match fs::read_to_string(path) {
        Ok(text) => text.trim().to_string(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => format!("unknown (no {path})"),
        Err(err) => format!("unknown ({path}: {err})"),
    }
}

/// The active lockdown mode: the kernel lists every mode and brackets the one in force
/// (`none [integrity] confidentiality`).
fn lockdown(text: String) -> String {
    match text.split_whitespace().find_map(|w| w.strip_prefix('[')?.strip_suffix(']')) {
        Some(mode) => mode.to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockdown_is_the_bracketed_mode() {
        assert_eq!(lockdown("none [integrity] confidentiality".into()), "integrity");
        assert_eq!(lockdown("[none] integrity confidentiality".into()), "none");
        assert_eq!(lockdown("unknown (x)".into()), "unknown (x)");
    }
}
