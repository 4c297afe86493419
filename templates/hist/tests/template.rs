// SPDX-License-Identifier: Apache-2.0 OR MIT
//! template against a helper whose reads are known (tests/reader.c): with -p, the histogram of its process name
//! holds exactly its reads, in text and in JSON; and a PID that does not exist is one line and exit 1.

use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// The helper's reads by log2 slot low bound: the go byte and the end of file (0 -> 1), 30 of 100 bytes, 100
/// of 4096 bytes.
const EXPECTED: [(u64, u64); 3] = [(0, 2), (64, 30), (4096, 100)];

/// Starts the helper, then the tool on its PID, lets the helper read, closes its stdin (its last read, of zero
/// bytes) and stops the tool; returns what the tool printed and the helper's process name.
fn trace_helper(extra: &[&str]) -> (Finished, String) {
    let exe = build_c_helper("reader", include_str!("reader.c"), &["-O1"]);
    let child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start reader");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id().to_string();
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();

    let mut args = vec!["-p", pid.as_str()];
    args.extend_from_slice(extra);
    let mut run = Running::start(TOOL, &args);
    run.wait_attached(Duration::from_secs(20));
    go_and_wait(&mut helper.0);
    run.signal(libc::SIGINT);
    (run.finish(Duration::from_secs(20)), comm)
}

/// The non-empty slots of text output, by low bound.
fn counted(text: &str) -> Vec<(u64, u64)> {
    hist_rows(text).into_iter().filter(|&(_, _, n)| n > 0).map(|(low, _, n)| (low, n)).collect()
}

#[test]
fn counts_each_read_size_exactly() {
    let (done, comm) = trace_helper(&[]);
    done.assert_success();
    let section = format!("\nProcess Name = {comm}\n");
    assert!(done.stdout.contains(&section), "no section for the helper:\n{}", done.stdout);
    assert_eq!(counted(&done.stdout), EXPECTED, "output:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn json_holds_the_same_counts() {
    let (done, comm) = trace_helper(&["-j"]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "one process name, one interval:\n{}", done.stdout);
    assert_eq!(lines[0]["comm"], comm.as_str());
    assert_eq!(lines[0]["unit"], "bytes");
    assert_eq!(lines[0]["count"], 132);
    let slots: Vec<(u64, u64)> = lines[0]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["count"].as_u64() > Some(0))
        .map(|b| (b["low"].as_u64().unwrap(), b["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(slots, EXPECTED);
}

#[test]
fn unknown_pid_is_one_line_and_exit_1() {
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
}
