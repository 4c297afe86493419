// SPDX-License-Identifier: Apache-2.0 OR MIT
//! javagc against a Java program calling System.gc() a known number of times: one line per collection with the
//! program's PID, in text and JSON, beside libbpf-tools' javagc in the same run where it is installed; bad input.

use std::time::Duration;

use corebpf_tests::runtimes::Workload;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const GCS: usize = 3;
const ANCHOR: &str = "/usr/sbin/javagc";

/// Runs javagc (and, if `anchor`, libbpf-tools' javagc beside it) on a Java workload making GCS collections;
/// returns ours and the anchor's output, and the workload's PID.
fn trace(args: &[&str], anchor: bool) -> (Finished, Option<String>, u32) {
    let mut workload = Workload::java(GCS as u32, 0);
    let pid = workload.pid().to_string();
    let mut all = vec!["-p", pid.as_str(), "-t", "0"];
    all.extend_from_slice(args);
    let mut run = Running::start(TOOL, &all);
    run.wait_attached(Duration::from_secs(60));
    let twin = anchor.then(|| corebpf_tests::anchor::Anchor::start("javagc", &["-p", &pid, "-t", "0"], "GC TIME"));
    workload.go();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    (done, twin.map(|t| t.finish()), pid.parse().unwrap())
}

/// The PIDs of the rows of text output (libbpf-tools' layout: TIME CPU PID GC-TIME).
fn row_pids(stdout: &str) -> Vec<u32> {
    stdout.lines().skip(2).map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap()).collect()
}

#[test]
fn one_line_per_collection_beside_libbpf_tools() {
    let anchor = std::path::Path::new(ANCHOR).exists();
    let (done, twin, pid) = trace(&[], anchor);
    done.assert_success();
    let mut lines = done.stdout.lines();
    assert_eq!(lines.next(), Some("Tracing javagc time... Hit Ctrl-C to end."));
    assert_eq!(lines.next().map(str::trim_end), Some("TIME     CPU     PID     GC TIME"));
    assert_eq!(row_pids(&done.stdout), vec![pid; GCS], "output:\n{}", done.stdout);
    if let Some(twin) = twin {
        assert_eq!(row_pids(&twin), vec![pid; GCS], "libbpf-tools' javagc:\n{twin}");
    }
    done.assert_no_programs_left();
}

#[test]
fn json_lines_carry_exact_durations() {
    let (done, _, pid) = trace(&["-j"], false);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), GCS, "output:\n{}", done.stdout);
    for line in lines {
        assert_eq!(line["pid"], pid);
        assert_eq!(line["full"], true, "System.gc() is a full collection: {line}");
        assert!(line["duration_ns"].as_u64() > Some(0), "{line}");
    }
}

#[test]
fn bad_input_is_one_line() {
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    // A process that is not Java.
    let me = std::process::id().to_string();
    let done = run_tool(TOOL, &["-p", &me]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    assert!(done.stderr.contains("no hotspot USDT probes"), "stderr: {}", done.stderr);
    for args in [vec![], vec!["-p", "x"], vec!["-p", "1", "-t", "x"]] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: stderr: {}", done.stderr);
    }
}
