// SPDX-License-Identifier: Apache-2.0 OR MIT
//! uflow against a Java program (HotSpot's extended probes on) whose calls are known: outer() 3 times, each
//! calling middle() 4 times, each calling inner() 5 times. Filtered to its class (-C), the flow is exactly that
//! sequence of entries and returns, each at its depth; -M keeps one method; text and JSON; the refusals of runtimes
//! that would fire nothing; bad input.

use std::process::Command;

use corebpf_tests::runtimes::{assert_call_probes_refused, trace_workload, Workload};
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const OUTER: u32 = 3;
const MIDDLE: u32 = 4;
const INNER: u32 = 5;
const CLASS: &str = "CorebpfCalls";

/// The expected flow of the workload's calls: (depth, is_return, method), depths from the first outer() at 1.
fn expected() -> Vec<(u32, bool, &'static str)> {
    let mut flow = Vec::new();
    for _ in 0..OUTER {
        flow.push((1, false, "outer"));
        for _ in 0..MIDDLE {
            flow.push((2, false, "middle"));
            for _ in 0..INNER {
                flow.push((3, false, "inner"));
                flow.push((3, true, "inner"));
            }
            flow.push((2, true, "middle"));
        }
        flow.push((1, true, "outer"));
    }
    flow
}

/// Runs uflow with `args` (after the workload's PID) while the workload makes its calls.
fn trace(args: &[&str]) -> (Finished, u32) {
    trace_workload(TOOL, Workload::java_calls(OUTER, MIDDLE, INNER, 0), args)
}

#[test]
fn the_flow_of_nested_calls_is_exact() {
    // -C keeps the workload's class: main() is CorebpfCalls' too, so the depths start under it.
    let (done, pid) = trace(&["-l", "java", "-C", CLASS, "-M", "o"]);
    done.assert_success();
    let mut lines = done.stdout.lines();
    assert_eq!(lines.next(), Some(format!("Tracing method calls in java process {pid}... Ctrl-C to quit.").as_str()));
    assert_eq!(lines.next(), Some("CPU PID    TID    TIME(us) METHOD"));
    // -M o: only outer(), entered and left OUTER times at the top of the flow.
    let calls: Vec<String> = lines.map(|l| l.split_whitespace().skip(4).collect::<Vec<_>>().join(" ")).collect();
    let mut want = Vec::new();
    for _ in 0..OUTER {
        want.push(format!("-> {CLASS}.outer"));
        want.push(format!("<- {CLASS}.outer"));
    }
    assert_eq!(calls, want, "output:\n{}", done.stdout);
    for line in done.stdout.lines().skip(2) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[1], pid.to_string(), "{line}");
    }
}

#[test]
fn json_flow_has_every_entry_and_return_at_its_depth() {
    // No -l: the language is found from the executable.
    let (done, pid) = trace(&["-j", "-C", CLASS]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    let ours: Vec<&serde_json::Value> = lines.iter().filter(|l| l["method"] != "main").collect();
    // main() is entered before uflow attaches and returns never (the program halts): depths count from it.
    let base = ours.first().map(|l| l["depth"].as_u64().unwrap() - 1).unwrap_or(0) as u32;
    let flow: Vec<(u32, bool, String)> = ours
        .iter()
        .map(|l| {
            assert_eq!(l["pid"], pid);
            assert_eq!(l["class"], CLASS);
            (l["depth"].as_u64().unwrap() as u32 - base, l["event"] == "return", l["method"].as_str().unwrap().into())
        })
        .collect();
    let want: Vec<(u32, bool, String)> = expected().into_iter().map(|(d, r, m)| (d, r, m.to_string())).collect();
    assert_eq!(flow, want, "output:\n{}", done.stdout);
}

#[test]
fn runtimes_that_fire_no_call_probes_are_refused() {
    assert_call_probes_refused(TOOL);
}

#[test]
fn bad_input_is_one_line() {
    let done = run_tool(TOOL, &["-l", "java", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    let mut sleeper = KillOnDrop(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = sleeper.0.id().to_string();
    for args in [vec!["-l", "java", pid.as_str()], vec![pid.as_str()]] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(1), "{args:?}: stderr: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: stderr: {}", done.stderr);
    }
    let _ = sleeper.0.kill();
    let long = "x".repeat(200);
    for args in [vec![], vec!["-l", "cobol", "1"], vec!["notapid"], vec!["-C", long.as_str(), "1"]] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: stderr: {}", done.stderr);
    }
}
