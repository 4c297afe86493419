// SPDX-License-Identifier: Apache-2.0 OR MIT
//! futexctn against a helper whose contention is known (tests/contend.c): each round, THREADS threads block on
//! a pthread mutex the main thread holds (it checks /proc/self/task/*/syscall until each sleeps in futex() on it)
//! and then take it one after the other, so each makes exactly one FUTEX_WAIT on the mutex that blocked and was
//! woken: THREADS * ROUNDS contended waits, on the address the helper prints, from a stack through its
//! `contender` function. The tool is filtered by the helper's PID, so other processes cannot disturb the counts.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::time::Duration;

use corebpf_tests::pipe::assert_head_1_ends_cleanly;
use corebpf_tests::*;

const TOOL: &str = "futexctn";
const THREADS: u64 = 4;
const ROUNDS: u64 = 5;

/// The helper, started and waiting for its go byte: its process, stdin, stdout and the mutex's address.
struct Helper {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
    lock: String,
}

impl Helper {
    fn start() -> Helper {
        Helper::start_pausing(0)
    }

    fn start_pausing(pause_ms: u32) -> Helper {
        let exe =
            build_c_helper("contend", include_str!("contend.c"), &["-O1", "-g", "-fno-omit-frame-pointer", "-pthread"]);
        let mut child = Command::new(&exe)
            .args([THREADS.to_string(), ROUNDS.to_string(), pause_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the helper");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let lock = line.strip_prefix("lock ").expect("the helper's lock line").trim().to_string();
        Helper { child: KillOnDrop(child), stdin, stdout, lock }
    }

    fn pid(&self) -> String {
        self.child.0.id().to_string()
    }

    /// Lets the helper run its rounds; returns the contended waits it made.
    fn run(&mut self) -> u64 {
        self.stdin.as_mut().unwrap().write_all(b"g").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let waits = line.strip_prefix("waits ").expect("the helper's waits line").trim().parse().unwrap();
        line.clear();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n");
        waits
    }

    fn finish(mut self) {
        drop(self.stdin.take());
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
    }
}

/// Runs the tool on the helper's PID with `extra` arguments around the helper's rounds; stops it with `signal`.
fn traced(extra: &[&str], signal: i32) -> (Finished, Helper, u64) {
    traced_with(|_| extra.iter().map(|s| s.to_string()).collect(), signal)
}

/// [`traced`], with the extra arguments made from the helper's lock address.
fn traced_with(extra: impl FnOnce(&str) -> Vec<String>, signal: i32) -> (Finished, Helper, u64) {
    traced_helper(Helper::start(), extra, signal)
}

fn traced_helper(mut helper: Helper, extra: impl FnOnce(&str) -> Vec<String>, signal: i32) -> (Finished, Helper, u64) {
    let mut args = vec!["-p".to_string(), helper.pid()];
    args.extend(extra(&helper.lock));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut run = Running::start(TOOL, &args);
    run.wait_attached(Duration::from_secs(20));
    let waits = helper.run();
    assert_eq!(waits, THREADS * ROUNDS, "the helper's own count");
    run.signal(signal);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    (done, helper, waits)
}

/// The text report's entries: (comm, id in brackets, lock, contended, stack lines).
fn entries(text: &str) -> Vec<(String, u32, String, u64, Vec<String>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some((who, rest)) = l.split_once("] lock ") else { continue };
        let (comm, id) = who.rsplit_once('[').unwrap();
        let mut words = rest.split_whitespace();
        let lock = words.next().unwrap().to_string();
        assert_eq!(words.next(), Some("contended"), "{l}");
        let n = words.next().unwrap().parse().unwrap();
        let mut stack = Vec::new();
        if lines.get(i + 1) == Some(&"    -") {
            stack = lines[i + 2..].iter().take_while(|s| **s != "    -").map(|s| s.trim().to_string()).collect();
        }
        found.push((comm.to_string(), id.parse().unwrap(), lock, n, stack));
    }
    found
}

#[test]
fn per_thread_entries_count_every_contended_wait_with_its_stack() {
    let (done, helper, waits) = traced(&[], libc::SIGINT);
    let found: Vec<_> = entries(&done.stdout).into_iter().filter(|e| e.2 == helper.lock).collect();
    assert_eq!(found.iter().map(|e| e.3).sum::<u64>(), waits, "{}", done.stdout);
    // One entry per contending thread (each waited once), each thread a different one.
    assert_eq!(found.len() as u64, waits, "{}", done.stdout);
    for (comm, _, _, n, stack) in &found {
        assert!(comm.starts_with("contend"), "{comm}");
        assert_eq!(*n, 1);
        assert!(stack.iter().any(|f| f == "contender"), "no contender frame: {stack:?}\n{}", done.stdout);
    }
    let mut tids: Vec<u32> = found.iter().map(|e| e.1).collect();
    tids.dedup();
    assert_eq!(tids.len() as u64, waits);
    assert_eq!(hist_total(&done.stdout), entries(&done.stdout).iter().map(|e| e.3).sum::<u64>());
    helper.finish();
    done.assert_no_programs_left();
}

#[test]
fn summary_json_is_one_exact_histogram_per_lock() {
    let (done, helper, waits) = traced(&["-s", "-j"], libc::SIGTERM);
    let lines = json_lines(&done.stdout);
    let ours: Vec<_> = lines.iter().filter(|v| v["lock"] == helper.lock.as_str()).collect();
    assert_eq!(ours.len(), 1, "{}", done.stdout);
    let v = ours[0];
    assert_eq!(v["contended"], waits);
    assert_eq!(v["pid"].as_u64(), Some(helper.child.0.id() as u64));
    assert!(v.get("tid").is_none() && v.get("user_stack").is_none(), "{v}");
    assert_eq!(v["unit"], "usecs");
    let buckets: u64 = v["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(buckets, waits, "{v}");
    assert_eq!(v["total"].as_u64().unwrap(), v["total_ns"].as_u64().unwrap() / 1000 - slack(v, waits), "{v}");
    assert!(v["min"].as_u64() <= v["avg"].as_u64() && v["avg"].as_u64() <= v["max"].as_u64(), "{v}");
    helper.finish();
}

/// `total` sums each wait rounded down to microseconds; `total_ns / 1000` rounds the sum: they differ by less
/// than one per wait.
fn slack(v: &serde_json::Value, waits: u64) -> u64 {
    let d = v["total_ns"].as_u64().unwrap() / 1000 - v["total"].as_u64().unwrap();
    assert!(d < waits, "{v}");
    d
}

#[test]
fn lock_filter_keeps_that_address_only() {
    // The address without its 0x, as libbpf-tools takes it too.
    let (done, helper, waits) = traced_with(|lock| vec!["-s".into(), "-l".into(), lock[2..].into()], libc::SIGINT);
    let found = entries(&done.stdout);
    assert_eq!(found.len(), 1, "{}", done.stdout);
    assert_eq!((found[0].2.as_str(), found[0].3), (helper.lock.as_str(), waits), "{}", done.stdout);
    // An address the helper never waits on: nothing.
    let (done, _, _) = traced(&["-s", "-l", "0x10"], libc::SIGINT);
    assert!(entries(&done.stdout).is_empty(), "{}", done.stdout);
}

#[test]
fn interval_reports_take_each_wait_once() {
    // Rounds 400 ms apart, reports every second: the waits spread over several reports, none counted twice.
    let (done, helper, waits) =
        traced_helper(Helper::start_pausing(400), |_| ["-s", "-j", "1"].map(String::from).to_vec(), libc::SIGINT);
    let ours: Vec<_> = json_lines(&done.stdout).into_iter().filter(|v| v["lock"] == helper.lock.as_str()).collect();
    assert!(ours.len() >= 2, "one report only:\n{}", done.stdout);
    assert_eq!(ours.iter().map(|v| v["contended"].as_u64().unwrap()).sum::<u64>(), waits, "{}", done.stdout);
}

#[test]
fn milliseconds_and_timestamp_layout() {
    let (done, helper, waits) = traced(&["-s", "-m", "-T"], libc::SIGHUP);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "Summarize futex contention latency, hit ctrl-c to exit", "{}", done.stdout);
    assert_eq!(lines[1], "", "{}", done.stdout);
    assert!(lines[2].len() == 8 && lines[2].as_bytes()[2] == b':', "{}", done.stdout);
    let ours: Vec<_> = entries(&done.stdout).into_iter().filter(|e| e.2 == helper.lock).collect();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].1, helper.child.0.id(), "-s shows the process");
    assert_eq!(ours[0].3, waits);
    assert!(done.stdout.contains(" avg msecs [max: "), "{}", done.stdout);
    assert!(done.stdout.contains("     msecs               : count     distribution"), "{}", done.stdout);
}

#[test]
fn bad_input_and_closed_pipe() {
    for args in [&["-l", "zz"][..], &["-l", "0"], &["--perf-max-stack-depth", "0"], &["-p", "x"], &["1", "0"]] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
    }
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert_head_1_ends_cleanly(TOOL, "1", "Summarize futex contention latency");
}

/// `--prometheus`: every contended wait is in the process name's histogram once, and stays there (a second scrape
/// with no new waits reads the same totals, although the kernel side forgets what it hands over).
#[test]
fn prometheus_histogram_counts_every_wait_once() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let mut helper = Helper::start();
    let (tool, addr) = serving(TOOL, &["-p", &helper.pid()]);
    let waits = helper.run();
    assert_eq!(waits, THREADS * ROUNDS, "the helper's own count");
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", helper.pid())).unwrap().trim_end().to_string();
    let first = scrape(&addr);
    promtool_accepts(&first);
    let count = format!("corebpf_futexctn_wait_seconds_count{{comm=\"{comm}\"}}");
    assert_eq!(sample(&first, &count), Some(waits as f64), "{first}");
    let inf = format!("corebpf_futexctn_wait_seconds_bucket{{le=\"+Inf\",comm=\"{comm}\"}}");
    assert_eq!(sample(&first, &inf), Some(waits as f64), "{first}");
    let sum = sample(&first, &format!("corebpf_futexctn_wait_seconds_sum{{comm=\"{comm}\"}}")).expect("a sum");
    assert!(sum > 0.0, "{first}");
    let second = scrape(&addr);
    assert_eq!(sample(&second, &count), Some(waits as f64), "{second}");
    helper.finish();
    tool.signal(libc::SIGTERM);
    tool.finish(Duration::from_secs(20)).assert_success();
}

/// `--heatmap`: a column per report, each the sum of that report's histograms. Rounds 400 ms apart spread the
/// waits over several one-second reports; the non-empty columns, in order, hold exactly the buckets of the JSON
/// lines of each report (JSON prints nothing for a report without waits), and every wait is in one cell.
#[test]
fn heat_map_columns_are_the_reports_waits() {
    let svg = std::env::temp_dir().join(format!("corebpf-heatmap-futexctn-{}.svg", std::process::id()));
    let svg_arg = svg.to_str().unwrap().to_string();
    let (done, helper, waits) = traced_helper(
        Helper::start_pausing(400),
        |_| vec!["-s".into(), "-j".into(), "--heatmap".into(), svg_arg.clone(), "1".into()],
        libc::SIGINT,
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    let lines = json_lines(&done.stdout);
    let ours: u64 =
        lines.iter().filter(|v| v["lock"] == helper.lock.as_str()).map(|v| v["contended"].as_u64().unwrap()).sum();
    assert_eq!(ours, waits, "{}", done.stdout);
    let reports = json_bucket_sums(&lines, "time");
    assert!(reports.len() >= 2, "one report only:\n{}", done.stdout);
    assert_eq!(heatmap_non_empty_columns(&text), reports, "{}\n{text}", done.stdout);
    assert!(text.contains("(usecs)"), "the unit is on the axis");
    helper.finish();
}
