//! A tool's output into a pipe that closes early: `tool ARGS | head -1`.

use crate::bin;

/// Runs `tool args | head -1` in a shell and checks that the line read starts with `prefix` and that the
/// pipeline (the tool, SIGPIPE or EPIPE on its next write) ended successfully.
pub fn assert_head_1_ends_cleanly(tool: &str, args: &str, prefix: &str) {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{} {args} | head -1", bin(tool).display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with(prefix), "{tool} {args} | head -1: {stdout}");
    assert!(out.status.success(), "{tool} {args} | head -1: {:?}", out.status);
}
