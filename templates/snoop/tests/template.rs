// SPDX-License-Identifier: Apache-2.0 OR MIT
//! template against a helper whose chdir() calls are known (tests/chdirs.c): with -p, exactly its calls, each with
//! its result and directory, in text (control bytes of a name escaped) and in JSON; and a PID that does not exist
//! is one line and exit 1.

use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// The helper's failing directory, as given.
const MISSING: &str = "/no-such-dir\x1b[31m\nx";

/// Starts the helper, then the tool on its PID, lets the helper make its calls and stops the tool; returns what
/// the tool printed and the helper's PID.
fn trace_helper(extra: &[&str]) -> (Finished, u32) {
    let exe = build_c_helper("chdirs", include_str!("chdirs.c"), &["-O1"]);
    let child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start chdirs");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id();
    wait_sleeping(pid, Duration::from_secs(10));
    let pid_arg = pid.to_string();
    let mut args = vec!["-p", pid_arg.as_str()];
    args.extend_from_slice(extra);
    let mut run = Running::start(TOOL, &args);
    run.wait_attached(Duration::from_secs(20));
    go_and_wait(&mut helper.0);
    run.signal(libc::SIGINT);
    (run.finish(Duration::from_secs(20)), pid)
}

#[test]
fn shows_each_call_with_its_result_and_escaped_directory() {
    let (done, pid) = trace_helper(&[]);
    done.assert_success();
    let mut lines = done.stdout.lines();
    assert_eq!(
        lines.next().map(|h| h.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["PID", "COMM", "RET", "PATH"])
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    let ours = |ret: &str, path: &str| {
        rows.iter().filter(|r| r.first() == Some(&pid.to_string().as_str()) && r[2] == ret && r[3] == path).count()
    };
    assert_eq!(ours("0", "/"), 20, "output:\n{}", done.stdout);
    assert_eq!(ours("-2", "/no-such-dir\\033[31m\\nx"), 5, "output:\n{}", done.stdout);
    assert_eq!(rows.len(), 25, "only the helper's calls: {}", done.stdout);
    assert!(!done.stdout.contains('\x1b'), "an escape byte reached the output");
    done.assert_no_programs_left();
}

#[test]
fn json_holds_the_same_calls() {
    let (done, pid) = trace_helper(&["-j"]);
    done.assert_success();
    let calls = json_lines(&done.stdout);
    assert_eq!(calls.len(), 25, "{}", done.stdout);
    assert!(calls.iter().all(|c| c["pid"] == pid && c["time"].is_string() && c["ts"].is_f64()), "{}", done.stdout);
    let ok = calls.iter().filter(|c| c["ret"] == 0 && c["path"] == "/" && c["errno"].is_null()).count();
    let failed = calls.iter().filter(|c| c["ret"] == -2 && c["path"] == MISSING && c["errno"] == "ENOENT").count();
    assert_eq!((ok, failed), (20, 5), "{}", done.stdout);
}

#[test]
fn unknown_pid_is_one_line_and_exit_1() {
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
}
