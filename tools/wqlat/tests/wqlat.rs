// SPDX-License-Identifier: Apache-2.0 OR MIT
//! wqlat against a helper whose work items are known (tests/rings.c): it sets up and closes N io_uring instances,
//! and closing a ring queues exactly one work item, the ring's exit work, on the "iou_exit" workqueue (Linux
//! 6.x). With `-w iou_exit` the histogram must count exactly N work items, in text, JSON, per workqueue, through
//! each attach path and over Prometheus; a filter on another name counts none of them. The runs that count
//! iou_exit exactly hold a file lock, so that no other test of this file closes rings meanwhile. libbpf-tools has
//! no wqlat: the side-by-side anchor is the bpftrace program of bench.toml, run here on the same rings.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
const RINGS: u64 = 37;
const WQ: &str = "iou_exit";

/// One run of the helper, and the lock that keeps other ring-closing runs of this file away meanwhile.
struct Rings {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    _lock: std::fs::File,
}

impl Rings {
    fn exe() -> std::path::PathBuf {
        build_c_helper("rings", include_str!("rings.c"), &["-O1"])
    }

    /// Starts the helper (waiting for the lock first); it waits for `go`.
    fn start(n: u64) -> Rings {
        let exe = Rings::exe();
        let lock = std::fs::File::create(std::env::temp_dir().join("corebpf-wqlat-rings.lock")).unwrap();
        // SAFETY: flock(2) on a descriptor we own; released when the file is closed.
        assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
        let mut child = KillOnDrop(
            Command::new(exe).arg(n.to_string()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap(),
        );
        let stdin = child.0.stdin.take();
        let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        Rings { child, stdin, stdout, _lock: lock }
    }

    /// Closes its rings, waits for its end, and gives the kernel's workers a moment to start the exit works.
    fn run(&mut self) {
        self.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n");
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut run = Running::start_with_env(TOOL, args, env);
    run.wait_attached(Duration::from_secs(20));
    run
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The histograms' counts, checked against their buckets and sums.
fn checked_count(h: &Value) -> u64 {
    let count = h["count"].as_u64().unwrap();
    let buckets: u64 = h["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(buckets, count, "{h}");
    assert!(h["sum_ns"].as_u64().unwrap() > 0, "{h}");
    count
}

/// Every JSON histogram of workqueue `wq` (or of the one histogram, with `wq` None): the sum of their counts.
fn json_count(recs: &[Value], wq: Option<&str>) -> u64 {
    recs.iter().filter(|r| r.get("wqname").and_then(Value::as_str) == wq).map(checked_count).sum()
}

#[test]
fn counts_each_ring_exit_exactly_in_text_and_json() {
    Rings::exe();
    let mut rings = Rings::start(RINGS);
    let text = start(&["-w", WQ], &[]);
    let json = start(&["-j", "-w", WQ], &[]);
    rings.run();
    let text = stop(text);
    let json = stop(json);

    let mut lines = text.stdout.lines();
    assert_eq!(lines.next(), Some("Tracing work queue request latency time... Hit Ctrl-C to end."));
    assert!(text.stdout.contains("\n     usecs               : count     distribution\n"), "{}", text.stdout);
    assert!(!text.stdout.contains("wqname"), "a section without -W:\n{}", text.stdout);
    assert_eq!(hist_total(&text.stdout), RINGS, "{}", text.stdout);

    let recs = json_lines(&json.stdout);
    assert_eq!(recs.len(), 1, "one histogram, one interval: {recs:?}");
    assert_eq!(recs[0]["unit"], "usecs");
    assert_eq!(json_count(&recs, None), RINGS, "{recs:?}");
}

#[test]
fn per_workqueue_sections_and_a_filter_that_excludes() {
    Rings::exe();
    let mut rings = Rings::start(RINGS);
    let sections = start(&["-W", "-w", WQ], &[]);
    let every = start(&["-j", "-W", "-N"], &[]);
    let other = start(&["-j", "-W", "-w", "events"], &[]);
    rings.run();
    let sections = stop(sections);
    let every = json_lines(&stop(every).stdout);
    let other = json_lines(&stop(other).stdout);

    let names: Vec<&str> = sections.stdout.lines().filter_map(|l| l.strip_prefix("wqname = ")).collect();
    assert_eq!(names, [WQ], "{}", sections.stdout);
    assert_eq!(hist_total(&sections.stdout), RINGS, "{}", sections.stdout);

    assert_eq!(json_count(&every, Some(WQ)), RINGS, "{every:?}");
    assert!(every.iter().all(|r| r["unit"] == "nsecs" && r["wqname"].as_str().is_some_and(|n| !n.is_empty())));
    assert!(every.iter().any(|r| r["wqname"] != WQ), "only {WQ} in the whole system: {every:?}");
    assert_eq!(json_count(&other, Some(WQ)), 0, "-w events counted {WQ}'s work items: {other:?}");
    assert!(other.iter().all(|r| r["wqname"] == "events"), "-w events counted others: {other:?}");
}

/// Issue 53 item 12: `-w` with a name no workqueue has is refused in one line that names it, exit status 1,
/// nothing on stdout (it printed an empty header and histogram and exited 0), through
/// tp_btf and raw_tp, which find the kernel's workqueues from the first work item queued.
#[test]
fn a_workqueue_name_that_does_not_exist_is_refused() {
    for attach in ["tp_btf", "raw_tp"] {
        let run = Running::start_with_env(TOOL, &["-w", "no_such_wq_53"], &[("COREBPF_ATTACH", attach)]);
        // A system queues work all the time; a sync queues some more (writeback), in case this one is idle.
        let _ = Command::new("sync").status();
        let done = run.finish(Duration::from_secs(20));
        let stderr = done.stderr.trim_end();
        assert_eq!(done.status.code(), Some(1), "{attach}: {stderr}");
        assert_eq!(stderr, "wqlat: no workqueue is named 'no_such_wq_53' (-W lists the workqueues that queue work)");
        assert!(done.stdout.is_empty(), "{attach}: {}", done.stdout);
    }
}

#[test]
fn raw_tp_and_classic_tracepoint_count_the_same() {
    Rings::exe();
    let mut rings = Rings::start(RINGS);
    let raw = start(&["-j", "-W", "-w", WQ], &[("COREBPF_ATTACH", "raw_tp")]);
    let classic = start(&["-j", "-W", "-w", WQ], &[("COREBPF_ATTACH", "tracepoint")]);
    rings.run();
    for run in [raw, classic] {
        let recs = json_lines(&stop(run).stdout);
        assert_eq!(json_count(&recs, Some(WQ)), RINGS, "{recs:?}");
    }
}

#[test]
fn every_workqueue_counts_at_least_the_ring_exits() {
    // The kernel-matrix check (any kernel: io_uring's exit work goes to a shared workqueue before iou_exit
    // existed): every work item of the whole system, per workqueue, in milliseconds.
    Rings::exe();
    let mut rings = Rings::start(RINGS);
    let run = start(&["-j", "-W", "-m"], &[]);
    rings.run();
    let recs = json_lines(&stop(run).stdout);
    let total: u64 = recs.iter().map(checked_count).sum();
    assert!(total >= RINGS, "{total} work items, fewer than the {RINGS} ring exits: {recs:?}");
    assert!(recs.iter().all(|r| r["unit"] == "msecs"), "{recs:?}");
    let names: Vec<&str> = recs.iter().map(|r| r["wqname"].as_str().unwrap()).collect();
    assert!(names.iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic())), "names: {names:?}");
}

#[test]
fn interval_count_timestamps_and_heat_map_end_by_themselves() {
    Rings::exe();
    let mut rings = Rings::start(RINGS);
    let svg = ScratchFile::new("wqlat-heatmap");
    let svg_arg = svg.0.to_str().unwrap();
    let mut run = Running::start(TOOL, &["-T", "-w", WQ, "--heatmap", svg_arg, "1", "5"]);
    run.wait_attached(Duration::from_secs(20));
    rings.run();
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    let stamps = done.stdout.lines().filter(|l| l.len() == 8 && l.as_bytes()[2] == b':').count();
    assert_eq!(stamps, 5, "five intervals, each with its time:\n{}", done.stdout);
    assert_eq!(hist_total(&done.stdout), RINGS, "{}", done.stdout);
    // The heat map: a column per interval, the same work items in its cells.
    let text = std::fs::read_to_string(&svg.0).unwrap();
    let cells = heatmap_cells(&text);
    assert!(cells.iter().all(|c| c.0 < 5), "more columns than intervals: {cells:?}");
    assert_eq!(cells.iter().map(|c| c.2).sum::<u64>(), RINGS, "{cells:?}");
}

#[test]
fn prometheus_serves_the_count_and_bpftrace_agrees() {
    Rings::exe();
    let mut rings = Rings::start(RINGS);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let mut run = Running::start(TOOL, &["-W", "-w", WQ, "--prometheus", &addr]);
    run.wait_for_line(&format!("http://{addr}/metrics"), Duration::from_secs(30));
    let program = format!(
        "tracepoint:workqueue:workqueue_queue_work /str(args->workqueue) == \"{WQ}\"/ {{ @q[args->work] = 1; }} \
         tracepoint:workqueue:workqueue_execute_start /@q[args->work]/ {{ @started = count(); delete(@q[args->work]); }} \
         BEGIN {{ printf(\"Attached\\n\"); }}"
    );
    let mut bpftrace = KillOnDrop(
        Command::new("bpftrace").args(["-e", &program]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap(),
    );
    let mut out = BufReader::new(bpftrace.0.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("Attached") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "bpftrace ended before attaching");
    }
    rings.run();
    let (status, body) = http_get(&addr, "/metrics", None);
    assert_eq!(status, 200);
    let series = format!("corebpf_wqlat_latency_seconds_count{{workqueue=\"{WQ}\"}} {RINGS}");
    assert!(body.lines().any(|l| l == series), "no {series:?} in:\n{body}");
    let done = stop(run);
    assert!(done.stderr.is_empty(), "{}", done.stderr);

    // SAFETY: kill(2) on our own child; SIGINT makes bpftrace print its maps.
    unsafe { libc::kill(bpftrace.0.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let started = rest.lines().find_map(|l| l.strip_prefix("@started: ")).map(|v| v.trim().parse::<u64>().unwrap());
    assert_eq!(started, Some(RINGS), "bpftrace:\n{rest}");
}

#[test]
fn bad_input_is_one_line() {
    assert_refused(TOOL, &["-w", "a-workqueue-name-of-forty-bytes-or-so-x"], 2, "31");
    assert_refused(TOOL, &["-N", "-m"], 2, "cannot be used with");
    assert_refused(TOOL, &["0"], 2, "0");
    assert_refused(TOOL, &["one"], 2, "one");
    assert_refused(TOOL, &["-j", "--prometheus", "127.0.0.1:0"], 2, "cannot be used with");
}
