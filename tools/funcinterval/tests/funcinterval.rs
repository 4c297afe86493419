// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funcinterval against a helper whose calls are known: CALLS calls each of tick_a and tick_b, in turn, about
//! 5.5 ms apart (tick_b makes a getppid system call). The helper reads the clock just before and just after
//! every call and prints both, so each gap the tool measures is known to within the calls' own length, whatever
//! the machine's load does to the sleeps: the tests compute every expected bucket from the helper's clock. The
//! helper waits for a line on stdin, so the tool is attached before the first call, and every run is filtered to
//! the helper's PID. Kernel functions run in the VM matrix (tests/tests/kernel_functions.rs); this host refuses
//! them with one line.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::libc;
use corebpf_tests::{build_c_helper, hist_rows, json_lines, run_tool, Finished, KillOnDrop, Running};

/// Calls of each function (ticks.c's CALLS).
const CALLS: u64 = 30;
/// A margin (relative) around the helper's bounds of each gap.
const EDGE: f64 = 0.01;

const HELPER: &str = include_str!("ticks.c");

fn helper() -> PathBuf {
    build_c_helper("funcinterval-helper", HELPER, &["-O1"])
}

/// One call as the helper timed it.
#[derive(Debug, Clone)]
struct Call {
    name: String,
    before: u64,
    after: u64,
}

/// A started helper, waiting for `go`.
struct Helper {
    child: KillOnDrop,
}

impl Helper {
    fn start(exe: &PathBuf) -> Helper {
        let child =
            Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("starting the helper");
        Helper { child: KillOnDrop(child) }
    }

    fn pid(&self) -> String {
        self.child.0.id().to_string()
    }

    /// Runs the workload; returns every call with the helper's clock around it.
    fn go(mut self) -> Vec<Call> {
        let mut stdin = self.child.0.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        drop(stdin);
        let stdout = self.child.0.stdout.take().unwrap();
        let calls: Vec<Call> = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| {
                let mut w = l.split(' ');
                Some(Call {
                    name: w.next()?.to_owned(),
                    before: w.next()?.parse().ok()?,
                    after: w.next()?.parse().ok()?,
                })
            })
            .collect();
        assert!(self.child.0.wait().unwrap().success(), "helper failed");
        assert_eq!(calls.len() as u64, 2 * CALLS);
        calls
    }
}

/// What the helper's clock says the tool must show for the calls of `names`, in `ns_per_unit`.
struct Expected {
    /// For each gap, the log2 slots it may fall in (one, unless its bounds straddle an edge: the probe fires
    /// somewhere inside the call, and the helper's clock is read just outside it).
    gaps: Vec<(usize, usize)>,
    count: u64,
    /// The sum of gaps is the time from the first hit to the last: between these two, in ns.
    sum_ns: (u64, u64),
}

fn expected(calls: &[Call], names: &[&str], ns_per_unit: u64) -> Expected {
    let hits: Vec<&Call> = calls.iter().filter(|c| names.contains(&c.name.as_str())).collect();
    let gaps: Vec<(usize, usize)> = hits
        .windows(2)
        .map(|pair| {
            let low = pair[1].before.saturating_sub(pair[0].after) / ns_per_unit;
            let high = (pair[1].after - pair[0].before) / ns_per_unit;
            (slot((low as f64 * (1.0 - EDGE)) as u64), slot((high as f64 * (1.0 + EDGE)) as u64))
        })
        .collect();
    let (first, last) = (hits[0], hits[hits.len() - 1]);
    Expected { count: gaps.len() as u64, gaps, sum_ns: (last.before - first.after, last.after - first.before) }
}

fn slot(v: u64) -> usize {
    if v == 0 {
        0
    } else {
        63 - v.leading_zeros() as usize
    }
}

impl Expected {
    /// Asserts that `rows` (low, high, count) hold exactly the expected gaps.
    fn check_rows(&self, rows: &[(u64, u64, u64)], context: &str) {
        let got: BTreeMap<usize, u64> = rows.iter().filter(|r| r.2 > 0).map(|r| (slot(r.0.max(1)), r.2)).collect();
        self.check(&got, context);
    }

    /// The total is exact; each slot holds at least the gaps sure to be in it and at most those that may be.
    fn check(&self, got: &BTreeMap<usize, u64>, context: &str) {
        assert_eq!(got.values().sum::<u64>(), self.count, "total gaps:\n{context}");
        let slots =
            got.keys().chain(self.gaps.iter().map(|g| &g.0)).copied().collect::<std::collections::BTreeSet<_>>();
        for s in slots {
            let n = got.get(&s).copied().unwrap_or(0);
            let sure = self.gaps.iter().filter(|g| g.0 == s && g.1 == s).count() as u64;
            let may = self.gaps.iter().filter(|g| (g.0..=g.1).contains(&s)).count() as u64;
            assert!((sure..=may).contains(&n), "slot {s}: {n} gaps, expected {sure} to {may}:\n{context}");
        }
    }
}

/// Starts funcinterval with `-p HELPER` and `args` (`{exe}` stands for the helper's path), runs the helper's
/// workload (with `other`, an unfiltered helper, running beside it), stops the tool with `signal`.
fn trace_helper(args: &[&str], env: &[(&str, &str)], other: Option<Helper>, signal: i32) -> (Finished, Vec<Call>) {
    let exe = helper();
    let helper = Helper::start(&exe);
    let mut all: Vec<String> = vec!["-p".to_owned(), helper.pid()];
    all.extend(args.iter().map(|a| a.replace("{exe}", &exe.display().to_string())));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut run = Running::start_with_env("funcinterval", &all, env);
    if all.contains(&"-j") {
        run.wait_attached(Duration::from_secs(60));
    } else {
        run.wait_for_line("Tracing", Duration::from_secs(60));
    }
    let other = other.map(|o| std::thread::spawn(move || o.go()));
    let calls = helper.go();
    if let Some(other) = other {
        other.join().unwrap();
    }
    run.signal(signal);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    (done, calls)
}

#[test]
fn gaps_between_user_function_calls_land_in_their_buckets() {
    let (done, calls) = trace_helper(&["-u", "{exe}:tick_*"], &[], None, libc::SIGINT);
    let e = expected(&calls, &["tick_a", "tick_b"], 1000);
    assert_eq!(e.count, 2 * CALLS - 1);
    e.check_rows(&hist_rows(&done.stdout), &done.stdout);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "Tracing uprobe function for \"tick_*\"... Hit Ctrl-C to end.");
    assert!(done.stdout.contains("\n     usecs               : count     distribution\n"), "{}", done.stdout);
    assert_eq!(lines.last(), Some(&"Detaching..."), "{}", done.stdout);
}

#[test]
fn one_function_of_two_in_milliseconds_and_through_uprobes() {
    for env in [&[][..], &[("COREBPF_ATTACH", "uprobe")][..]] {
        let (done, calls) = trace_helper(&["-m", "-v", "{exe}:tick_a"], env, None, libc::SIGTERM);
        let e = expected(&calls, &["tick_a"], 1_000_000);
        assert_eq!(e.count, CALLS - 1);
        e.check_rows(&hist_rows(&done.stdout), &format!("{env:?}\n{}", done.stdout));
        assert!(done.stdout.contains("     msecs "), "{}", done.stdout);
        // Forced: uprobes; else uprobe_multi where the kernel has it (6.6+), else uprobes.
        let attached =
            |l: &str| if env.is_empty() { l.starts_with("attached with uprobe") } else { l == "attached with uprobe" };
        assert!(done.stderr.lines().any(attached), "{env:?}: {}", done.stderr);
    }
}

#[test]
fn tracepoint_hits_are_timed_like_functions() {
    let (done, calls) = trace_helper(&["-u", "t:syscalls:sys_enter_getppid"], &[], None, libc::SIGINT);
    // tick_b makes the only getppid call of the helper.
    let e = expected(&calls, &["tick_b"], 1000);
    e.check_rows(&hist_rows(&done.stdout), &done.stdout);
    assert!(done.stdout.starts_with("Tracing tracepoint for \"syscalls:sys_enter_getppid\"..."), "{}", done.stdout);
}

#[test]
fn json_sum_is_the_time_from_first_to_last_call() {
    let (done, calls) = trace_helper(&["-j", "-i", "1", "{exe}:tick_*"], &[], None, libc::SIGINT);
    let e = expected(&calls, &["tick_a", "tick_b"], 1);
    let (mut got, mut sum_ns) = (BTreeMap::new(), 0);
    for v in json_lines(&done.stdout) {
        assert_eq!(v["unit"], "nsecs");
        assert_eq!(v["pattern"].as_str().unwrap(), format!("{}:tick_*", helper().display()));
        for b in v["buckets"].as_array().unwrap() {
            let n = b["count"].as_u64().unwrap();
            if n > 0 {
                *got.entry(slot(b["low"].as_u64().unwrap().max(1))).or_default() += n;
            }
        }
        sum_ns += v["sum_ns"].as_u64().unwrap();
    }
    e.check(&got, &done.stdout);
    assert!(
        (e.sum_ns.0..=e.sum_ns.1).contains(&sum_ns),
        "sum {sum_ns} ns, not within {:?}:\n{}",
        e.sum_ns,
        done.stdout
    );
}

#[test]
fn pid_filter_leaves_out_another_process() {
    let other = Helper::start(&helper());
    let (done, calls) = trace_helper(&["-u", "{exe}:tick_b"], &[], Some(other), libc::SIGINT);
    expected(&calls, &["tick_b"], 1000).check_rows(&hist_rows(&done.stdout), &done.stdout);
}

#[test]
fn intervals_and_heat_map_lose_no_gap() {
    let svg = corebpf_tests::ScratchFile::new("funcinterval.svg");
    let svg_arg = svg.0.display().to_string();
    let (done, calls) =
        trace_helper(&["-u", "-T", "-i", "1", "--heatmap", &svg_arg, "{exe}:tick_*"], &[], None, libc::SIGHUP);
    let e = expected(&calls, &["tick_a", "tick_b"], 1000);
    // A gap that spans two reports is counted once, in the later one.
    e.check_rows(&hist_rows(&done.stdout), &done.stdout);
    let cells = corebpf_tests::heatmap_cells(&std::fs::read_to_string(&svg.0).unwrap());
    assert_eq!(cells.iter().map(|c| c.2).sum::<u64>(), e.count, "heat map cells: {cells:?}");
    let clock = |l: &str| l.len() == 8 && l.as_bytes()[2] == b':' && l.as_bytes()[5] == b':';
    assert!(done.stdout.lines().any(clock), "no HH:MM:SS line:\n{}", done.stdout);
}

#[test]
fn prometheus_serves_the_histogram_in_seconds() {
    let exe = helper();
    let helper = Helper::start(&exe);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let pattern = format!("{}:tick_*", exe.display());
    let mut run = Running::start("funcinterval", &["-m", "-p", &helper.pid(), "--prometheus", &listen, &pattern]);
    run.wait_for_line("Serving Prometheus metrics", Duration::from_secs(60));
    let calls = helper.go();
    let e = expected(&calls, &["tick_a", "tick_b"], 1);
    let (status, body) = corebpf_tests::http_get(&listen, "/metrics", None);
    assert_eq!(status, 200, "{body}");
    let value = |series: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in:\n{body}"))
    };
    let name = "corebpf_funcinterval_call_interval_seconds";
    assert_eq!(value(&format!("{name}_count")), e.count as f64);
    // Buckets at powers of two nanoseconds whatever -m says: no gap is shorter than the 5.5 ms slept.
    assert_eq!(value(&format!("{name}_bucket{{le=\"0.004194304\"}}")), 0.0);
    assert_eq!(value(&format!("{name}_bucket{{le=\"+Inf\"}}")), e.count as f64);
    let sum = value(&format!("{name}_sum"));
    let (low, high) = (e.sum_ns.0 as f64 / 1e9, e.sum_ns.1 as f64 / 1e9);
    assert!(sum >= low * 0.999 && sum <= high * 1.001, "sum {sum} s, not within {low}..{high}");
    assert_eq!(value("corebpf_lost_events_total{tool=\"funcinterval\",what=\"missed_calls\"}"), 0.0);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
}

#[test]
fn bad_input_gets_one_clear_line() {
    for (args, code, needle) in [
        (&["no_such_function_at_all_xyz"][..], 1, "no_such_function_at_all_xyz"),
        (&["c:no_such_function_at_all_xyz"][..], 1, "no_such_function_at_all_xyz"),
        (&["t:no_such_category_xyz:nothing"][..], 1, "no tracepoints matched"),
        (&["u:/bin/true:probe"][..], 1, ""),
        (&["-u", "-m", "c:getpid"][..], 2, "cannot be used with"),
        (&["-p", "999999999", "c:getpid"][..], 1, "no process"),
        (&["--prometheus", "127.0.0.1:0", "-i", "1", "c:getpid"][..], 2, "--prometheus"),
        (&["vfs_read"][..], 1, ""),
    ] {
        let done = run_tool("funcinterval", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {done:?}");
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
        assert!(done.stderr.starts_with("funcinterval: ") && done.stderr.contains(needle), "{args:?}: {}", done.stderr);
    }
}
