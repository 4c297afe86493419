// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ugc against runtimes whose collections are known: a Python script calling gc.collect() a known number of
//! times, each finding a known number of objects; a Java program calling System.gc() a known number of times
//! (each a G1 collection of eight memory pools); a native helper with CPython's probes (for the kernel matrix,
//! whose guests have no Python). Exact counts, PIDs, generations and objects collected, in text and JSON; the
//! -F and -M filters; bad input.

use std::process::Command;
use std::time::Duration;

use corebpf_tests::runtimes::{trace_native_helper, Workload};
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const GCS: u32 = 7;
/// G1's memory pools, each a mem__pool__gc pair in every collection.
const G1_POOLS: usize = 8;

/// Runs ugc with `args` (the workload's PID is appended) while `workload` does its work; returns what ugc printed
/// and what the workload said.
fn trace(mut workload: Workload, args: &[&str]) -> (Finished, Vec<String>) {
    let pid = workload.pid().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.push(&pid);
    let mut run = Running::start(TOOL, &all);
    run.wait_attached(Duration::from_secs(60));
    let said = workload.go();
    run.signal(libc::SIGINT);
    (run.finish(Duration::from_secs(30)), said)
}

/// The rows of text output: (start, duration, description).
fn table_rows(stdout: &str) -> Vec<(f64, f64, String)> {
    let row = |l: &str| {
        let (start, rest) = l.split_once(' ').unwrap();
        let rest = rest.trim_start();
        let (duration, description) = rest.split_once(' ').unwrap_or((rest, ""));
        (start.parse().unwrap(), duration.parse().unwrap(), description.trim_start().to_string())
    };
    stdout.lines().skip(2).map(row).collect()
}

#[test]
fn python_collections_are_counted_with_their_objects() {
    let workload = Workload::python(GCS);
    let pid = workload.pid();
    let (done, said) = trace(workload, &["-l", "python"]);
    done.assert_success();
    let mut lines = done.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("Tracing garbage collections in python process {pid}... Ctrl-C to quit.").as_str())
    );
    assert_eq!(lines.next().map(str::trim_end), Some("START    TIME (us) DESCRIPTION"));
    let found: Vec<String> = said.iter().map(|n| format!("gen 2 GC collected {n} objects")).collect();
    let rows = table_rows(&done.stdout);
    let descriptions: Vec<String> = rows.iter().map(|r| r.2.clone()).collect();
    assert_eq!(descriptions, found, "output:\n{}", done.stdout);
    assert!(rows.iter().all(|r| r.1 > 0.0), "a collection without a duration:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn json_lines_carry_pid_generation_objects_and_duration() {
    let workload = Workload::python(GCS);
    let pid = workload.pid();
    // No -l: the language is found from the executable.
    let (done, said) = trace(workload, &["-j", "-m"]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), GCS as usize, "output:\n{}", done.stdout);
    for (line, n) in lines.iter().zip(&said) {
        assert_eq!(line["pid"], pid);
        assert_eq!(line["language"], "python");
        assert_eq!(line["probe"], "gc__start");
        assert_eq!(line["generation"], 2);
        assert_eq!(line["collected"].to_string(), *n);
        assert!(line["duration_ns"].as_u64() > Some(0), "{line}");
    }
}

#[test]
fn filters_by_description_and_by_duration() {
    let (done, said) = trace(Workload::python(GCS), &["-l", "python", "-F", "collected 3 objects"]);
    done.assert_success();
    assert_eq!(said[3], "3");
    let rows = table_rows(&done.stdout);
    assert_eq!(rows.len(), 1, "output:\n{}", done.stdout);
    assert_eq!(rows[0].2, "gen 2 GC collected 3 objects");

    // No collection of a small script lasts ten seconds.
    let (done, _) = trace(Workload::python(GCS), &["-l", "python", "-M", "10000"]);
    done.assert_success();
    assert_eq!(table_rows(&done.stdout).len(), 0, "output:\n{}", done.stdout);
}

#[test]
fn java_collections_and_their_memory_pools() {
    let workload = Workload::java(3, 0);
    let pid = workload.pid();
    // No -l: the language is found from the executable.
    let (done, _) = trace(workload, &[]);
    done.assert_success();
    assert!(
        done.stdout.starts_with(&format!("Tracing garbage collections in java process {pid}...")),
        "{}",
        done.stdout
    );
    let rows = table_rows(&done.stdout);
    let whole = rows.iter().filter(|r| r.2 == "no additional info available").count();
    assert_eq!(whole, 3, "output:\n{}", done.stdout);
    let pools: Vec<&String> = rows.iter().map(|r| &r.2).filter(|d| d.starts_with("G1 Old Generation ")).collect();
    assert_eq!(pools.len(), 3 * G1_POOLS, "output:\n{}", done.stdout);
    assert_eq!(pools.iter().filter(|d| d.starts_with("G1 Old Generation G1 Old Gen used=")).count(), 3);
    assert_eq!(rows.len(), 3 + 3 * G1_POOLS, "output:\n{}", done.stdout);

    let (done, _) = trace(Workload::java(3, 0), &["-l", "java", "-F", "G1 Eden Space", "-j"]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 3, "output:\n{}", done.stdout);
    for line in lines {
        assert_eq!(line["pool"], "G1 Eden Space");
        assert_eq!(line["manager"], "G1 Old Generation");
        assert_eq!(line["used_after"], 0, "a full collection empties Eden: {line}");
        assert!(line["max_before"].as_u64() > Some(0), "{line}");
    }
}

/// The native helper with CPython's probes: the one test the kernel matrix runs (its guests have no Python).
#[test]
fn native_program_with_python_probes() {
    let exe = build_c_helper("ugc_sdt_gc", include_str!("sdt_gc.c"), &["-O1", "-DGCS=5"]);
    let done = trace_native_helper(TOOL, &exe, &["-l", "python"]);
    done.assert_success();
    let descriptions: Vec<String> = table_rows(&done.stdout).into_iter().map(|r| r.2).collect();
    let expected: Vec<String> = (0..5).map(|i| format!("gen {} GC collected {} objects", i % 3, 10 * i)).collect();
    assert_eq!(descriptions, expected, "output:\n{}", done.stdout);
}

#[test]
fn bad_input_is_one_line() {
    let done = run_tool(TOOL, &["-l", "python", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);

    let mut sleeper = KillOnDrop(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = sleeper.0.id().to_string();
    // A process that is not Python, and one whose language cannot be told.
    for args in [vec!["-l", "python", pid.as_str()], vec![pid.as_str()]] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(1), "{args:?}: stderr: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: stderr: {}", done.stderr);
    }
    let _ = sleeper.0.kill();

    for args in [vec![], vec!["-l", "cobol", "1"], vec!["notapid"]] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: stderr: {}", done.stderr);
    }
}
