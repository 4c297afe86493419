// SPDX-License-Identifier: Apache-2.0 OR MIT
//! cpudist against the kernel's own account of a helper that runs 5 ms then sleeps 10 ms, K times:
//! `/proc/self/schedstat` (times run, on-CPU ns) and its involuntary context switches bound what the tool counts.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const BANNER: &str = "Tracing on-CPU time";
const K: u64 = 60;

const HELPER: &str = include_str!("cpdworker.c");

fn helper() -> PathBuf {
    build_c_helper("cpdworker", HELPER, &["-O2"])
}

struct Worker {
    child: KillOnDrop,
    out: BufReader<std::process::ChildStdout>,
    pid: u32,
}

impl Worker {
    fn start() -> Worker {
        let mut child = Command::new(helper())
            .arg(K.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("helper");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let pid = line.trim().parse().expect("helper's PID");
        Worker { child: KillOnDrop(child), out, pid }
    }

    /// Runs the loop; returns (runs, on-CPU ns, involuntary switches) over it.
    fn run(&mut self) -> (u64, u64, u64) {
        writeln!(self.child.0.stdin.as_mut().unwrap(), "go").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
        (v[0], v[1], v[2])
    }

    fn end(mut self) {
        drop(self.child.0.stdin.take());
        let _ = self.child.0.wait();
    }
}

/// Runs the worker under `cpudist args -p PID`; returns the finished run and the kernel's figures.
fn traced(args: &[&str], env: &[(&str, &str)]) -> (Finished, (u64, u64, u64)) {
    let mut worker = Worker::start();
    let pid = worker.pid.to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-p", &pid]);
    let mut run = Running::start_with_env("cpudist", &all, env);
    if args.contains(&"-j") {
        // JSON prints no banner: wait until the program is loaded and give the attach a moment.
        for _ in 0..200 {
            if !prog_ids_of(run.pid()).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        run.note_programs();
        std::thread::sleep(Duration::from_millis(300));
    } else {
        run.wait_for_line("Tracing ", Duration::from_secs(20));
    }
    // The kernel's count of the worker's runs over the whole traced window, not only its loop: the worker is
    // blocked (reading stdin) before "go" and after its report, so every slice the tool can see is in between,
    // however many preemptions a busy machine adds around the loop.
    wait_sleeping(worker.pid, Duration::from_secs(10));
    let runs_before = schedstat_runs(worker.pid);
    let (_, on_ns, ivcsw) = worker.run();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    wait_sleeping(worker.pid, Duration::from_secs(10));
    let runs = schedstat_runs(worker.pid) - runs_before;
    worker.end();
    (done, (runs, on_ns, ivcsw))
}

/// Slices in the buckets from `low` up.
fn at_least(text: &str, low: u64) -> u64 {
    hist_rows(text).iter().filter(|r| r.0 >= low).map(|r| r.2).sum()
}

fn bucket(text: &str, low: u64) -> u64 {
    hist_rows(text).iter().filter(|r| r.0 == low).map(|r| r.2).sum()
}

#[test]
fn on_cpu_slices_of_5_ms() {
    let (done, (runs, on_ns, ivcsw)) = traced(&["-e"], &[]);
    let total = hist_total(&done.stdout);
    // Each run of the loop is a slice; the "go" wake-up's slice before the loop and the report's after it may
    // be counted too.
    assert!(total + 1 >= runs && total <= runs + 3, "counted {total} slices, schedstat {runs} runs:\n{}", done.stdout);
    // Every run that was not preempted is one slice of 5 ms (bucket 4096 -> 8191 usecs), and no slice is longer
    // than a run; when nothing preempted the helper, that bucket is the mode.
    let mode = bucket(&done.stdout, 4096);
    let long = at_least(&done.stdout, 4096);
    assert!(
        mode + ivcsw >= K && long <= K + 2,
        "{mode} slices of 4-8 ms, {long} of 4 ms or more, {ivcsw} preemptions, {K} runs:\n{}",
        done.stdout
    );
    if ivcsw == 0 {
        let top = hist_rows(&done.stdout).iter().max_by_key(|r| r.2).unwrap().0;
        assert_eq!(top, 4096, "the mode is not 4096 -> 8191 usecs:\n{}", done.stdout);
    }
    // -e's total agrees with the kernel's on-CPU time of the loop (within 10% and 2 ms).
    let ext = done.stdout.lines().find_map(|l| l.strip_prefix("avg = ")).expect("-e line");
    let us: u64 = ext.split("total: ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    let on_us = on_ns / 1000;
    assert!(
        us + on_us / 10 + 2000 >= on_us && us <= on_us + on_us / 10 + 2000,
        "-e total {us} us, schedstat {on_us} us"
    );
    done.assert_no_programs_left();
}

#[test]
fn off_cpu_shows_the_10_ms_sleeps() {
    let (done, (runs, _, ivcsw)) = traced(&["-O"], &[]);
    assert!(done.stdout.starts_with("Tracing off-CPU time"), "{}", done.stdout);
    let total = hist_total(&done.stdout);
    // Every run of the traced window ends an off-CPU slice, but the first: the worker blocked before the tool
    // attached, so that slice has no start. One more of slack, as for the on-CPU slices.
    assert!(
        total + 2 >= runs && total <= runs + 3,
        "counted {total} off-CPU slices, schedstat {runs} runs:\n{}",
        done.stdout
    );
    // Each sleep is off-CPU for 10 ms or more (bucket 8192 usecs and up); only a preemption's wait can be that
    // long too. Under load a sleep can also be split in two: preempted in nanosleep after its timer is armed,
    // the helper waits on the run queue, then sleeps only what is left of the 10 ms (each such split is one of
    // the involuntary switches).
    let long = at_least(&done.stdout, 8192);
    assert!(
        long + ivcsw >= K && long <= K + ivcsw + 2,
        "{long} off-CPU slices of 8 ms or more for {K} sleeps ({ivcsw} preemptions):\n{}",
        done.stdout
    );
}

#[test]
fn per_process_names_the_helper_and_milliseconds() {
    let (done, (runs, _, _)) = traced(&["-P", "-m"], &[]);
    let section =
        done.stdout.split("\npid = ").find(|s| s.contains(" cpdworker\n")).unwrap_or_else(|| panic!("{}", done.stdout));
    assert!(section.contains("     msecs               : count     distribution"), "{}", done.stdout);
    // One slice short for the run that started before the tool attached, and one more of slack, as for the
    // other slice counts (a sched_switch now and then not seen under load: issue 31 item 6).
    assert!(
        hist_total(section) + 2 >= runs,
        "{} slices counted, schedstat {runs} runs:\n{}",
        hist_total(section),
        done.stdout
    );
    let (done, _) = traced(&["-L", "-j"], &[]);
    let lines = json_lines(&done.stdout);
    assert!(lines.iter().any(|l| l["comm"] == "cpdworker" && l["tid"].as_u64().is_some()), "{}", done.stdout);
}

#[test]
fn raw_tp_fallback_counts_the_same() {
    let (done, (runs, _, _)) = traced(&["-v"], &[("COREBPF_ATTACH", "raw_tp")]);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    let total = hist_total(&done.stdout);
    // The slack of the other slice counts: a sched_switch now and then not seen under load (issue 31 item 6).
    assert!(total + 2 >= runs && total <= runs + 3, "{total} vs {runs}:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn idle_time_only_with_dash_i() {
    // The idle tasks are PID 0: -I counts their slices, without it none (a whole-system run). A busy machine
    // (every test at once) may not idle for a while: one-second reports until an idle task shows.
    let mut run = Running::start("cpudist", &["-I", "-L", "1"]);
    run.wait_for_line(BANNER, Duration::from_secs(20));
    run.wait_for_line("tid = 0 swapper/", Duration::from_secs(60));
    run.signal(libc::SIGINT);
    run.finish(Duration::from_secs(20)).assert_success();
    let mut run = Running::start("cpudist", &["-L"]);
    run.wait_for_line(BANNER, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(!done.stdout.contains("\ntid = 0 "), "{}", done.stdout);
}

#[test]
fn bad_input_and_closed_pipe() {
    let done = run_tool("cpudist", &["-P", "-L"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let done = run_tool("cpudist", &["-p", "4194303"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    let out = Command::new("sh").arg("-c").arg(format!("{} 1 | head -1", bin("cpudist").display())).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(BANNER));
    assert!(out.status.success());
}

#[test]
fn prometheus_counts_the_slices_of_a_pid() {
    let mut worker = Worker::start();
    let pid = worker.pid.to_string();
    let (run, addr) = prom::serving("cpudist", &["-m", "-p", &pid]);
    wait_sleeping(worker.pid, Duration::from_secs(10));
    let runs_before = schedstat_runs(worker.pid);
    let (_, _, ivcsw) = worker.run();
    wait_sleeping(worker.pid, Duration::from_secs(10));
    let text = prom::scrape(&addr);
    let runs = schedstat_runs(worker.pid) - runs_before;
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    worker.end();
    prom::promtool_accepts(&text);
    let family = "corebpf_cpudist_oncpu_time_seconds";
    let total = prom::sample(&text, &format!("{family}_count")).unwrap_or_else(|| panic!("{text}")) as u64;
    // Up to 3 slices short: the loss the nextest config lists as a known flake (issue 31 item 6) showed here in
    // 2 of 4 runs (104 of 106, 120 of 123), with the text output's own test passing beside it.
    assert!(total + 3 >= runs && total <= runs + 3, "{total} slices, schedstat {runs} runs:\n{text}");
    // The 5 ms slices are in the bucket (4.096 ms, 8.192 ms] despite -m.
    let upto = |le: &str| prom::sample(&text, &format!("{family}_bucket{{le=\"{le}\"}}")).unwrap() as u64;
    let five_ms = upto("0.008192") - upto("0.004096");
    assert!(five_ms + ivcsw >= K && five_ms <= K + 2, "{five_ms} slices of 4-8 ms, {ivcsw} preemptions:\n{text}");
}
