// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ucalls against processes whose calls are known: a Java program (HotSpot's extended probes on) calling outer()
//! 3 times, each calling middle() 4 times, each calling inner() 5 times (so 3, 12 and 60 calls, and each method's
//! total time within its caller's); a native helper making a known number of getppid() system calls (-S; the
//! kernel matrix's test, whose guests have no Java). Exact counts in text and JSON, over one report and summed
//! over several; -T; the refusals of runtimes that would fire nothing (a JVM without the flag, CPython 3.11);
//! bad input.

use std::collections::BTreeMap;
use std::process::Command;

use corebpf_tests::runtimes::{assert_call_probes_refused, trace_native_helper, trace_workload, Workload};
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// The Java workload's calls: outer() OUTER times, each middle() MIDDLE times, each inner() INNER times.
const OUTER: u32 = 3;
const MIDDLE: u32 = 4;
const INNER: u32 = 5;
/// The helper's getppid() calls.
const SYSCALLS: usize = 1000;

/// The expected calls of the workload's methods, by name.
fn expected() -> BTreeMap<String, u64> {
    let outer = u64::from(OUTER);
    let middle = outer * u64::from(MIDDLE);
    let inner = middle * u64::from(INNER);
    [("CorebpfCalls.outer", outer), ("CorebpfCalls.middle", middle), ("CorebpfCalls.inner", inner)]
        .into_iter()
        .map(|(n, c)| (n.to_string(), c))
        .collect()
}

/// Runs ucalls with `args` (after the Java workload's PID) while the workload makes its calls.
fn trace_java(args: &[&str]) -> (Finished, u32) {
    trace_workload(TOOL, Workload::java_calls(OUTER, MIDDLE, INNER, 0), args)
}

/// The rows of every text table: (method, calls, time).
fn table_rows(stdout: &str) -> Vec<(String, u64, Option<f64>)> {
    stdout
        .lines()
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("Tracing ")
                && !l.starts_with("METHOD ")
                && !l.starts_with("Attached ")
                && !l.starts_with("Detaching ")
        })
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols[0].to_string(), cols[1].parse().unwrap(), cols.get(2).map(|t| t.parse().unwrap()))
        })
        .collect()
}

#[test]
fn java_calls_are_counted_exactly() {
    let (done, pid) = trace_java(&["-l", "java"]);
    done.assert_success();
    let mut lines = done.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("Tracing calls in process {pid} (language: java)... Ctrl-C to quit.").as_str())
    );
    assert_eq!(lines.next(), Some(""));
    assert_eq!(lines.next().map(str::trim_end), Some(format!("{:<50} {:>8}", "METHOD", "# CALLS").as_str()));
    let ours: BTreeMap<String, u64> =
        table_rows(&done.stdout).into_iter().filter(|r| r.0.starts_with("CorebpfCalls.")).map(|r| (r.0, r.1)).collect();
    assert_eq!(ours, expected(), "output:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn json_latency_sums_over_intervals_and_nests() {
    // No -l: the language is found from the executable; reports every second, summed.
    let (done, _) = trace_java(&["-j", "-L", "1"]);
    done.assert_success();
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    let mut times: BTreeMap<String, u64> = BTreeMap::new();
    let lines = json_lines(&done.stdout);
    let reports: std::collections::BTreeSet<&str> = lines.iter().map(|l| l["time"].as_str().unwrap()).collect();
    assert!(!reports.is_empty(), "output:\n{}", done.stdout);
    for line in &lines {
        let name = line["name"].as_str().unwrap().to_string();
        if line["kind"] == "method" && name.starts_with("CorebpfCalls.") {
            *calls.entry(name.clone()).or_default() += line["calls"].as_u64().unwrap();
            *times.entry(name).or_default() += line["total_ns"].as_u64().unwrap();
        }
    }
    assert_eq!(calls, expected(), "output:\n{}", done.stdout);
    // Each outer() call contains its middle() calls, each middle() its inner() calls.
    let t = |n: &str| times[&format!("CorebpfCalls.{n}")];
    assert!(t("outer") >= t("middle") && t("middle") >= t("inner") && t("inner") > 0, "times: {times:?}");
}

/// Runs the getppid() helper under ucalls with `args` (after its PID); returns ucalls' output.
fn trace_syscalls(args: &[&str]) -> Finished {
    let flags = ["-O1", &format!("-DCALLS={SYSCALLS}")];
    let exe = build_c_helper("ucalls_getppid", include_str!("getppid_loop.c"), &flags);
    trace_native_helper(TOOL, &exe, args)
}

/// The system calls of a native process (-S with no language): the kernel matrix's test.
#[test]
fn system_calls_are_counted_exactly() {
    let done = trace_syscalls(&["-l", "none", "-S", "-T", "1"]);
    done.assert_success();
    assert!(done.stdout.starts_with("Attached kernel tracepoints for syscall tracing.\n"), "{}", done.stdout);
    assert!(done.stdout.ends_with("Detaching kernel probes, please wait...\n"), "{}", done.stdout);
    let rows = table_rows(&done.stdout);
    assert_eq!(rows, vec![("getppid".to_string(), SYSCALLS as u64, None)], "output:\n{}", done.stdout);

    let done = trace_syscalls(&["-l", "none", "-S", "-L", "-j"]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    let getppid: Vec<_> = lines.iter().filter(|l| l["name"] == "getppid").collect();
    assert_eq!(getppid.len(), 1, "output:\n{}", done.stdout);
    assert_eq!(getppid[0]["kind"], "syscall");
    assert_eq!(getppid[0]["calls"], SYSCALLS as u64, "output:\n{}", done.stdout);
    assert!(getppid[0]["total_ns"].as_u64() > Some(0));
}

#[test]
fn runtimes_that_fire_no_call_probes_are_refused() {
    assert_call_probes_refused(TOOL);
}

#[test]
fn bad_input_is_one_line() {
    let done = run_tool(TOOL, &["999999999", "-l", "java"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);

    let mut sleeper = KillOnDrop(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = sleeper.0.id().to_string();
    // A process that is not Java; one with no language and no -S.
    for args in [vec![pid.as_str(), "-l", "java"], vec![pid.as_str()], vec![pid.as_str(), "-l", "none"]] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(1), "{args:?}: stderr: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: stderr: {}", done.stderr);
    }
    let _ = sleeper.0.kill();

    for args in [vec![], vec!["1", "-l", "cobol"], vec!["notapid"], vec!["1", "-T", "0"], vec!["1", "x"]] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: stderr: {}", done.stderr);
    }
}

/// `--prometheus` with -L on the Java workload: each of its methods' calls is exactly its counter, and each
/// method's time is within its caller's; promtool accepts the exposition.
#[test]
fn prometheus_counts_every_java_call() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let mut workload = Workload::java_calls(OUTER, MIDDLE, INNER, 0);
    let (tool, addr) = serving(TOOL, &[&workload.pid().to_string(), "-l", "java", "-L"]);
    workload.go();
    let text = scrape(&addr);
    promtool_accepts(&text);
    let mut times = Vec::new();
    for (name, calls) in expected() {
        let series = |family: &str| format!("corebpf_ucalls_{family}{{kind=\"method\",name=\"{name}\"}}");
        assert_eq!(sample(&text, &series("calls_total")), Some(calls as f64), "{name}: {text}");
        times.push((calls, sample(&text, &series("call_time_seconds_total")).expect("a time")));
    }
    // inner (60 calls) within middle (12) within outer (3).
    times.sort_by_key(|t| std::cmp::Reverse(t.0));
    assert!(times[0].1 <= times[1].1 && times[1].1 <= times[2].1 && times[0].1 > 0.0, "{times:?}\n{text}");
    tool.signal(libc::SIGTERM);
    let done = tool.finish(std::time::Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
}
