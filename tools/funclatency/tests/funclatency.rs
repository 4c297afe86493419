// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funclatency against a helper whose calls are known: NAPS_1MS calls of a function that sleeps 1 ms and
//! NAPS_20MS of one that sleeps 20 ms, timed by the helper itself (CLOCK_MONOTONIC around each call), and a
//! recursive function called WALKS times with depth 4. The helper waits for a line on stdin, so the tool is
//! attached before the first call. Kernel functions (fentry, kprobe_multi, kprobes) run in the VM matrix
//! (tests/tests/kernel_functions.rs); this host refuses them with one line.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use corebpf_tests::libc;
use corebpf_tests::{build_c_helper, hist_rows, json_lines, run_tool, Finished, KillOnDrop, Running};

const NAPS_1MS: u64 = 40;
const NAPS_20MS: u64 = 8;
const WALKS: u64 = 5;
/// walk(3) recurses to walk(0): four levels a call.
const WALK_LEVELS: u64 = 4;

const HELPER: &str = include_str!("naps.c");

fn helper() -> PathBuf {
    build_c_helper("funclatency-helper", HELPER, &["-O1", "-fno-omit-frame-pointer"])
}

/// A started helper, waiting for `go`.
struct Helper {
    child: KillOnDrop,
}

impl Helper {
    fn start(exe: &PathBuf) -> Helper {
        let child: Child =
            Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("starting the helper");
        Helper { child: KillOnDrop(child) }
    }

    fn pid(&self) -> String {
        self.child.0.id().to_string()
    }

    /// Runs the workload; returns the helper's own total of nanoseconds in each nap function.
    fn go(mut self) -> BTreeMap<String, u64> {
        let mut stdin = self.child.0.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        drop(stdin);
        let stdout = self.child.0.stdout.take().unwrap();
        let totals = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| {
                let (name, ns) = l.split_once(' ')?;
                Some((name.to_owned(), ns.parse().ok()?))
            })
            .collect();
        assert!(self.child.0.wait().unwrap().success(), "helper failed");
        totals
    }
}

/// Starts funclatency with `args` (and `-p` the helper) on the helper's `pattern`, runs the helper's workload,
/// stops the tool. The totals hold the helper's own time in each nap function, and its PID under `pid`.
fn time_helper(args: &[&str], env: &[(&str, &str)]) -> (Finished, BTreeMap<String, u64>) {
    time_helper_beside(args, env, None)
}

/// [`time_helper`], with `other` (another helper, not filtered in) making its calls while the tool traces.
fn time_helper_beside(args: &[&str], env: &[(&str, &str)], other: Option<Helper>) -> (Finished, BTreeMap<String, u64>) {
    let exe = helper();
    let helper = Helper::start(&exe);
    let pid = helper.pid();
    let mut all: Vec<String> = args.iter().map(|a| a.replace("{exe}", &exe.display().to_string())).collect();
    all.splice(0..0, ["-p".to_owned(), pid.clone()]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut run = Running::start_with_env("funclatency", &all, env);
    if all.contains(&"-j") {
        run.wait_attached(Duration::from_secs(60));
    } else {
        run.wait_for_line("Tracing", Duration::from_secs(60));
    }
    if let Some(other) = other {
        other.go();
    }
    let mut totals = helper.go();
    totals.insert("pid".into(), pid.parse().unwrap());
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    (done, totals)
}

/// The `Function = name` sections of the text output, each as its histogram rows (low, high, count).
fn sections(stdout: &str) -> BTreeMap<String, Vec<(u64, u64, u64)>> {
    let mut out = BTreeMap::new();
    for part in stdout.split("\nFunction = ").skip(1) {
        let (name, rest) = part.split_once('\n').unwrap();
        let body = rest.split("\n\n").next().unwrap_or("");
        out.insert(name.trim().to_owned(), hist_rows(body));
    }
    out
}

fn total(rows: &[(u64, u64, u64)]) -> u64 {
    rows.iter().map(|r| r.2).sum()
}

/// BCC's closing line: (avg, total, count).
fn avg_line(stdout: &str) -> (u64, u64, u64) {
    let line = stdout.lines().find(|l| l.starts_with("avg = ")).unwrap_or_else(|| panic!("no avg line:\n{stdout}"));
    let nums: Vec<u64> =
        line.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).map(|w| w.parse().unwrap()).collect();
    (nums[0], nums[1], nums[2])
}

#[test]
fn each_function_gets_its_calls_in_the_right_buckets() {
    let (done, totals) = time_helper(&["-u", "-F", "{exe}:nap_*"], &[]);
    // With -p, BCC heads each user function's histogram `Function = name [PID]`.
    let s: BTreeMap<String, _> = sections(&done.stdout)
        .into_iter()
        .map(|(heading, rows)| match heading.strip_suffix(&format!(" [{}]", totals["pid"])) {
            Some(name) => (name.to_owned(), rows),
            None => panic!("heading {heading:?} lacks [PID]:\n{}", done.stdout),
        })
        .collect();
    assert_eq!(s.keys().collect::<Vec<_>>(), ["nap_1ms", "nap_20ms"], "{}", done.stdout);
    assert_eq!(total(&s["nap_1ms"]), NAPS_1MS, "{}", done.stdout);
    assert_eq!(total(&s["nap_20ms"]), NAPS_20MS, "{}", done.stdout);
    // A sleep never ends early: every call is at least as long as its sleep.
    for (low, high, count) in &s["nap_1ms"] {
        assert!(*count == 0 || *high >= 1000, "a 1 ms call in {low} -> {high} usecs:\n{}", done.stdout);
    }
    for (low, high, count) in &s["nap_20ms"] {
        assert!(*count == 0 || *high >= 20_000, "a 20 ms call in {low} -> {high} usecs:\n{}", done.stdout);
    }
    // BCC's closing line is over all functions. Its total lies between the time the calls slept and the helper's
    // own clock around the calls, which also holds the probes' cost (large in an emulated guest).
    let (avg, total_us, count) = avg_line(&done.stdout);
    assert_eq!(count, NAPS_1MS + NAPS_20MS);
    let helper_us = (totals["nap_1ms"] + totals["nap_20ms"]) / 1000;
    let slept_us = NAPS_1MS * 1000 + NAPS_20MS * 20_000;
    assert!(
        (slept_us..=helper_us).contains(&total_us),
        "total {total_us} us, not between the {slept_us} us slept and the helper's {helper_us} us:\n{}",
        done.stdout
    );
    assert_eq!(avg, total_us / count);
    assert!(done.stdout.trim_end().ends_with("Detaching..."), "{}", done.stdout);
}

#[test]
fn json_has_exact_sums_that_match_the_helpers_clock() {
    let (done, totals) = time_helper(&["-j", "-F", "{exe}:nap_*"], &[]);
    let lines = json_lines(&done.stdout);
    let mut seen = BTreeMap::new();
    for v in &lines {
        assert_eq!(v["unit"], "nsecs");
        let f = v["function"].as_str().unwrap().to_owned();
        let e = seen.entry(f).or_insert((0u64, 0u64));
        e.0 += v["count"].as_u64().unwrap();
        e.1 += v["sum_ns"].as_u64().unwrap();
        let buckets: u64 = v["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(buckets, v["count"].as_u64().unwrap(), "{v}");
        assert_eq!(v["pid"].as_u64(), Some(totals["pid"]), "-p: {v}");
    }
    assert_eq!(seen["nap_1ms"].0, NAPS_1MS, "{}", done.stdout);
    assert_eq!(seen["nap_20ms"].0, NAPS_20MS, "{}", done.stdout);
    // Each function's exact sum lies between the time its calls slept and the helper's clock around them.
    for (f, slept_ns) in [("nap_1ms", NAPS_1MS * 1_000_000), ("nap_20ms", NAPS_20MS * 20_000_000)] {
        let (ours, theirs) = (seen[f].1, totals[f]);
        assert!(
            (slept_ns..=theirs).contains(&ours),
            "{f}: {ours} ns, not between {slept_ns} ns and the helper's {theirs} ns"
        );
    }
}

#[test]
fn one_histogram_without_f_and_uprobes_count_the_same() {
    for env in [&[][..], &[("COREBPF_ATTACH", "uprobe")][..]] {
        let (done, _) = time_helper(&["-m", "{exe}:nap_*"], env);
        assert!(!done.stdout.contains("Function ="), "{}", done.stdout);
        let rows = hist_rows(&done.stdout);
        assert_eq!(total(&rows), NAPS_1MS + NAPS_20MS, "{env:?}:\n{}", done.stdout);
        assert!(done.stdout.contains("     msecs               : count     distribution"), "{}", done.stdout);
    }
}

#[test]
fn recursion_times_the_innermost_call_or_the_outermost_levels() {
    let (done, _) = time_helper(&["{exe}:walk"], &[]);
    assert_eq!(total(&hist_rows(&done.stdout)), WALKS, "innermost calls only:\n{}", done.stdout);
    let (done, _) = time_helper(&["-l", "2", "{exe}:walk"], &[]);
    assert_eq!(total(&hist_rows(&done.stdout)), WALKS * 2, "-l 2:\n{}", done.stdout);
    let (done, _) = time_helper(&["-l", "8", "{exe}:walk"], &[]);
    assert_eq!(total(&hist_rows(&done.stdout)), WALKS * WALK_LEVELS, "-l 8:\n{}", done.stdout);
}

#[test]
fn pid_filter_excludes_another_process() {
    let exe = helper();
    let other = Helper::start(&exe);
    let (done, _) = time_helper_beside(&["{exe}:nap_20ms"], &[], Some(other));
    assert_eq!(total(&hist_rows(&done.stdout)), NAPS_20MS, "{}", done.stdout);
}

#[test]
fn bad_input_gets_one_clear_line() {
    for (args, code, needle) in [
        (&["no_such_function_at_all_xyz"][..], 1, "no_such_function_at_all_xyz"),
        (&["c:no_such_function_at_all_xyz"][..], 1, "no_such_function_at_all_xyz"),
        (&["t:syscalls:sys_enter_getppid"][..], 1, "funclatency times functions"),
        (&["-u", "-m", "c:getpid"][..], 2, "cannot be used with"),
        (&["-l", "0", "c:getpid"][..], 2, "-l"),
        (&["-p", "999999999", "c:getpid"][..], 1, "no process"),
        // This host refuses kernel functions; the line says what still works, as funccount's does.
        (&["vfs_read"][..], 1, "; user functions (LIB:FUNC) can still be traced"),
    ] {
        let done = run_tool("funclatency", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {done:?}");
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
        assert!(done.stderr.starts_with("funclatency: ") && done.stderr.contains(needle), "{args:?}: {}", done.stderr);
    }
}

#[test]
fn prometheus_serves_each_functions_histogram() {
    let exe = helper();
    let helper = Helper::start(&exe);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let pattern = format!("{}:nap_*", exe.display());
    let mut run = Running::start("funclatency", &["-F", "-p", &helper.pid(), "--prometheus", &listen, &pattern]);
    run.wait_for_line("Serving Prometheus metrics", Duration::from_secs(60));
    helper.go();
    let (status, body) = corebpf_tests::http_get(&listen, "/metrics", None);
    assert_eq!(status, 200, "{body}");
    let value = |series: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in:\n{body}"))
    };
    let count = "corebpf_funclatency_call_latency_seconds_count";
    assert_eq!(value(&format!("{count}{{function=\"nap_1ms\"}}")), NAPS_1MS as f64);
    assert_eq!(value(&format!("{count}{{function=\"nap_20ms\"}}")), NAPS_20MS as f64);
    // Buckets in seconds at powers of two of the unit (nsecs): no 20 ms call at or below 2^24 ns.
    let bucket =
        |le: &str| format!("corebpf_funclatency_call_latency_seconds_bucket{{le=\"{le}\",function=\"nap_20ms\"}}");
    assert_eq!(value(&bucket("0.016777216")), 0.0);
    assert_eq!(value(&bucket("+Inf")), NAPS_20MS as f64);
    // Self metrics: no call missed or untimed.
    assert_eq!(value("corebpf_lost_events_total{tool=\"funclatency\",what=\"missed_calls\"}"), 0.0);
    assert_eq!(value("corebpf_map_full_total{tool=\"funclatency\",map=\"start\"}"), 0.0);
    let sum = value("corebpf_funclatency_call_latency_seconds_sum{function=\"nap_20ms\"}");
    assert!(sum >= NAPS_20MS as f64 * 0.020, "sum {sum} s for {NAPS_20MS} calls of 20 ms");
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
}

#[test]
fn heat_map_columns_add_up_to_the_calls() {
    let svg = corebpf_tests::ScratchFile::new("funclatency.svg");
    let svg_arg = svg.0.display().to_string();
    let (done, _) = time_helper(&["-u", "-i", "1", "--heatmap", &svg_arg, "{exe}:nap_*"], &[]);
    let text = std::fs::read_to_string(&svg.0).unwrap();
    assert!(text.starts_with("<svg") || text.starts_with("<?xml"), "{}", &text[..100.min(text.len())]);
    let cells = corebpf_tests::heatmap_cells(&text);
    let total: u64 = cells.iter().map(|c| c.2).sum();
    assert_eq!(total, NAPS_1MS + NAPS_20MS, "heat map cells:\n{cells:?}\n{}", done.stdout);
    // The text's intervals and the heat map's columns are the same reads.
    assert_eq!(total, total_of_intervals(&done.stdout));
}

fn total_of_intervals(stdout: &str) -> u64 {
    hist_rows(stdout).iter().map(|r| r.2).sum()
}
