// SPDX-License-Identifier: Apache-2.0 OR MIT
//! uthreads against processes whose threads are known: a Java program starting and joining a known number of
//! named threads (each one `start` and one `stop` line, with the same IDs), and a native helper firing glibc's
//! `pthread_start` probe in each of a known number of threads (the C path, which Debian's glibc cannot give: it
//! has no probes; also the kernel matrix's test, whose guests have no Java). Exact counts, names, IDs and TIDs,
//! in text and JSON; bad input.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::runtimes::{trace_workload, Workload};
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// Threads the workloads start.
const THREADS: usize = 6;
/// The Java workload's thread names: this prefix and the thread's index.
const WORKER: &str = "corebpf-worker-";

/// Runs uthreads with `args` (after the Java workload's PID) while the workload starts its threads.
fn trace_java(args: &[&str]) -> (Finished, u32) {
    trace_workload(TOOL, Workload::java(0, THREADS as u32), args)
}

/// The rows of text output: (time, ID, type, description).
fn table_rows(stdout: &str) -> Vec<(f64, String, String, String)> {
    let row = |l: &str| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols[0].parse().unwrap(), cols[1].to_string(), cols[2].to_string(), cols[3..].join(" "))
    };
    stdout.lines().skip(2).map(row).collect()
}

/// The workers' (type, ID) rows by thread name.
fn workers(rows: &[(f64, String, String, String)]) -> BTreeMap<String, Vec<(String, String)>> {
    let mut by_name: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for (_, id, kind, name) in rows.iter().filter(|r| r.3.starts_with(WORKER)) {
        by_name.entry(name.clone()).or_default().push((kind.clone(), id.clone()));
    }
    by_name
}

#[test]
fn each_java_thread_starts_and_stops_once() {
    let (done, pid) = trace_java(&["-l", "java"]);
    done.assert_success();
    let mut lines = done.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("Tracing thread events in process {pid} (language: java)... Ctrl-C to quit.").as_str())
    );
    assert_eq!(lines.next().map(str::trim_end), Some("TIME     ID               TYPE     DESCRIPTION"));
    let by_name = workers(&table_rows(&done.stdout));
    let expected: Vec<String> = (0..THREADS).map(|i| format!("{WORKER}{i}")).collect();
    assert_eq!(by_name.keys().cloned().collect::<Vec<_>>(), expected, "output:\n{}", done.stdout);
    let mut java_ids = Vec::new();
    for (name, events) in &by_name {
        let kinds: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(kinds, ["start", "stop"], "{name}: output:\n{}", done.stdout);
        assert_eq!(events[0].1, events[1].1, "{name}: its start and stop IDs differ:\n{}", done.stdout);
        let (runtime, native) = events[0].1.strip_prefix("R=").unwrap().split_once("/N=").unwrap();
        assert!(native.parse::<u32>().unwrap() > 0, "{name}: {}", events[0].1);
        java_ids.push(runtime.parse::<u64>().unwrap());
    }
    java_ids.dedup();
    assert_eq!(java_ids.len(), THREADS, "Java IDs repeat:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn json_lines_carry_ids_and_the_native_thread() {
    // No -l: the language is found from the executable.
    let (done, pid) = trace_java(&["-j"]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    let ours: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["description"].as_str().is_some_and(|d| d.starts_with(WORKER))).collect();
    assert_eq!(ours.len(), 2 * THREADS, "output:\n{}", done.stdout);
    for i in 0..THREADS {
        let name = format!("{WORKER}{i}");
        let mine: Vec<&&serde_json::Value> = ours.iter().filter(|l| l["description"] == name.as_str()).collect();
        assert_eq!(mine.len(), 2, "{name}: output:\n{}", done.stdout);
        assert_eq!(mine[0]["type"], "start");
        assert_eq!(mine[1]["type"], "stop");
        for line in &mine {
            assert_eq!(line["pid"], pid);
            // HotSpot fires both probes in the thread itself, and its native ID is its TID.
            assert_eq!(line["native_id"], line["tid"], "{line}");
            assert_eq!(line["runtime_id"], mine[0]["runtime_id"], "{line}");
        }
        assert!(mine[0]["ts"].as_f64() <= mine[1]["ts"].as_f64());
    }
}

/// The native helper with glibc's pthread_start probe: the C path, and the one test the kernel matrix runs.
#[test]
fn native_pthreads_with_libc_probes() {
    let flags = ["-O1", "-pthread", &format!("-DTHREADS={THREADS}")];
    let exe = build_c_helper("uthreads_sdt_pthread", include_str!("sdt_pthread.c"), &flags);
    let child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start helper");
    let mut helper = KillOnDrop(child);
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    let pid = helper.0.id().to_string();
    let mut run = Running::start(TOOL, &["-l", "c", &pid]);
    run.wait_attached(Duration::from_secs(60));
    helper.0.stdin.take().unwrap().write_all(b"g").unwrap();
    let mut tids = Vec::new();
    for line in BufReader::new(helper.0.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "done" {
            break;
        }
        tids.push(line);
    }
    assert!(helper.0.wait().unwrap().success());
    assert_eq!(tids.len(), THREADS);
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    assert!(done.stdout.starts_with(&format!("Tracing thread events in process {pid} (language: c)...")));
    let rows = table_rows(&done.stdout);
    assert_eq!(rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(), tids, "output:\n{}", done.stdout);
    for row in &rows {
        assert_eq!(row.2, "pthread", "output:\n{}", done.stdout);
        assert!(row.3.starts_with("worker_routine [uthreads_sdt_pthread"), "output:\n{}", done.stdout);
    }
}

#[test]
fn bad_input_is_one_line() {
    let done = run_tool(TOOL, &["-l", "java", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);

    let mut sleeper = KillOnDrop(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = sleeper.0.id().to_string();
    // A process that is not Java; and pthreads where the C library has no probe (Debian's glibc).
    let done = run_tool(TOOL, &["-l", "java", &pid]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    assert!(done.stderr.contains("no hotspot USDT probes"), "stderr: {}", done.stderr);
    let libc_has_probe = std::fs::read(format!("/lib/{}-linux-gnu/libc.so.6", std::env::consts::ARCH))
        .is_ok_and(|elf| elf.windows(b"pthread_start\0".len()).any(|w| w == b"pthread_start\0"));
    if !libc_has_probe {
        for args in [vec!["-l", "c", pid.as_str()], vec!["-l", "none", pid.as_str()], vec![pid.as_str()]] {
            let done = run_tool(TOOL, &args);
            assert_eq!(done.status.code(), Some(1), "{args:?}: stderr: {}", done.stderr);
            assert_eq!(done.stderr.lines().count(), 1, "{args:?}: stderr: {}", done.stderr);
            assert!(done.stderr.contains("libc:pthread_start"), "{args:?}: stderr: {}", done.stderr);
        }
    }
    let _ = sleeper.0.kill();

    for args in [vec![], vec!["-l", "python", "1"], vec!["notapid"]] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: stderr: {}", done.stderr);
    }
}
