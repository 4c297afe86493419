// SPDX-License-Identifier: Apache-2.0 OR MIT
//! runqslower against a helper whose scheduling delays are known (tests/rqdelay.c): on one CPU, a SCHED_FIFO hog
//! wakes a sleeper of a lower real-time priority K times and spins MS ms after each wakeup, so each of the
//! sleeper's K wakeups waits at least MS ms, and it gets the CPU from the hog; a normal spinner on the same CPU is
//! preempted by the hog and waits too. The sleeper is woken K times and never waits otherwise above the
//! threshold (only the hog outranks it), so its K waits are exact. The helper's runs are serialized (a file lock)
//! so that no other helper's hog shares the CPU. Debian's libbpf-tools runqslower runs beside ours and must
//! see the same waits.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use corebpf_tests::anchor::Anchor;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// Wakeups of the sleeper, and the hog's spin after each, in ms.
const K: usize = 4;
const MS: u64 = 40;
/// The threshold, in us: half the spin.
const MIN_US: &str = "20000";

fn helper_exe() -> std::path::PathBuf {
    build_c_helper("rqdelay", include_str!("rqdelay.c"), &["-O1", "-pthread"])
}

/// One run of the helper: its IDs, its thread-name prefix, and the lock that keeps other runs off the CPUs.
struct Helper {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    sleeper: u32,
    hog: u32,
    spinner: u32,
    tag: String,
    _lock: std::fs::File,
}

impl Helper {
    /// Starts the helper (waiting for the lock first); it waits for `go`.
    fn start() -> Helper {
        let exe = helper_exe();
        let lock = std::fs::File::create(std::env::temp_dir().join("corebpf-runqslower-rqdelay.lock")).unwrap();
        // SAFETY: flock(2) on a descriptor we own; released when the file is closed (the helper's end).
        assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
        // SAFETY: sysconf(3) has no preconditions.
        let cpu = (unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } - 1).max(0);
        let tag = format!("rqdelay{:06}", std::process::id() % 1_000_000);
        let mut child = KillOnDrop(
            Command::new(exe)
                .args([cpu.to_string(), K.to_string(), MS.to_string(), tag.clone()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start the helper"),
        );
        let stdin = child.0.stdin.take();
        let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let ids: Vec<u32> = line.split_whitespace().map(|f| f.parse().unwrap()).collect();
        assert_eq!(ids.len(), 4, "helper said {line:?}");
        Helper { child, stdin, stdout, pid: ids[0], sleeper: ids[1], hog: ids[2], spinner: ids[3], tag, _lock: lock }
    }

    /// Lets it run its K wakeups and waits for its end.
    fn run(&mut self) {
        self.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n");
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
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

fn of_tid(recs: &[Value], tid: u32) -> Vec<&Value> {
    recs.iter().filter(|r| r["tid"] == tid).collect()
}

/// The sleeper's K waits: each at least the hog's spin, from the hog, with exact JSON numbers.
fn assert_sleeper_waits(recs: &[Value], h: &Helper) {
    let mine = of_tid(recs, h.sleeper);
    assert_eq!(mine.len(), K, "the sleeper's {K} wakeups: {recs:?}");
    for r in mine {
        let (us, ns) = (r["lat_us"].as_u64().unwrap(), r["lat_ns"].as_u64().unwrap());
        assert!(us >= MS * 1000, "a wait shorter than the hog's spin: {r}");
        assert_eq!(us, ns / 1000, "{r}");
        assert_eq!(r["pid"], h.pid, "{r}");
        assert_eq!(r["comm"], format!("{}s", h.tag), "{r}");
        assert_eq!((&r["prev_tid"], &r["prev_comm"]), (&Value::from(h.hog), &Value::from(format!("{}h", h.tag))));
    }
}

/// Every record is above the threshold.
fn assert_above_threshold(recs: &[Value]) {
    let min: u64 = MIN_US.parse().unwrap();
    for r in recs.iter().filter(|r| r.get("lost").is_none()) {
        assert!(r["lat_us"].as_u64().unwrap() > min, "at or below the threshold: {r}");
    }
}

/// The anchor's rows for thread `tid`: (LAT(us), PREV COMM, PREV TID).
fn anchor_rows(text: &str, tid: u32) -> Vec<(u64, String, u32)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // TIME COMM TID LAT(us) PREV-COMM PREV-TID
            (f.len() == 6 && f[2] == tid.to_string())
                .then(|| (f[3].parse().unwrap(), f[4].into(), f[5].parse().unwrap()))
        })
        .collect()
}

#[test]
fn each_delayed_wakeup_and_preemption_of_a_process_as_libbpf_tools_sees_it() {
    helper_exe();
    let mut h = Helper::start();
    let pid = h.pid.to_string();
    let anchor = Anchor::start("runqslower", &["-P", "-p", &pid, MIN_US], "Tracing");
    let run = start(&["--json", "-P", "-p", &pid, MIN_US], &[]);
    h.run();
    let done = stop(run);
    let seen = anchor.finish();
    let recs = json_lines(&done.stdout);

    assert_sleeper_waits(&recs, &h);
    assert_above_threshold(&recs);
    assert!(recs.iter().all(|r| r["pid"] == h.pid), "another process: {recs:?}");
    // The spinner never sleeps: the hog preempts it, and it waits at least one whole spin.
    let spins = of_tid(&recs, h.spinner);
    assert!(spins.iter().any(|r| r["lat_us"].as_u64() >= Some(MS * 1000)), "no preempted wait: {recs:?}");

    let theirs = anchor_rows(&seen, h.sleeper);
    assert_eq!(theirs.len(), K, "libbpf-tools:\n{seen}");
    let hog = (format!("{}h", h.tag), h.hog);
    assert!(theirs.iter().all(|(us, comm, tid)| *us >= MS * 1000 && (comm.clone(), *tid) == hog), "{seen}");
    assert!(anchor_rows(&seen, h.spinner).iter().any(|(us, _, _)| *us >= MS * 1000), "{seen}");
}

#[test]
fn tid_filter_in_bcc_columns_with_the_previous_task() {
    helper_exe();
    let mut h = Helper::start();
    let run = start(&["-P", "-t", &h.sleeper.to_string(), MIN_US], &[]);
    h.run();
    let done = stop(run);
    let mut lines = done.stdout.lines();
    assert_eq!(lines.next(), Some("Tracing run queue latency higher than 20000 us"));
    assert_eq!(
        lines.next(),
        Some(
            format!(
                "{:<8} {:<16} {:<6} {:>14} {:<16} {:<6}",
                "TIME", "COMM", "TID", "LAT(us)", "PREV COMM", "PREV TID"
            )
            .as_str()
        )
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), K, "only the sleeper's {K} waits:\n{}", done.stdout);
    for row in rows {
        let f: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(f[0].len(), "12:34:56".len(), "{row}");
        let lat: u64 = f[3].parse().unwrap();
        assert!(lat >= MS * 1000, "{row}");
        let want = format!(
            "{} {:<16} {:<6} {:>14} {:<16} {:<6}",
            f[0],
            format!("{}s", h.tag),
            h.sleeper,
            lat,
            format!("{}h", h.tag),
            h.hog
        );
        assert_eq!(row, want);
    }
}

#[test]
fn a_pid_filter_excludes_other_processes() {
    helper_exe();
    let mut h = Helper::start();
    // Threshold 0: every wait of another process (this test's, busy reading the tools and the helper) is shown,
    // none of the helper's may be.
    let me = std::process::id();
    let excluded = start(&["--json", "-p", &me.to_string(), "0"], &[]);
    let included = start(&["--json", "-p", &h.pid.to_string(), "0"], &[]);
    h.run();
    let excluded = json_lines(&stop(excluded).stdout);
    let included = json_lines(&stop(included).stdout);
    assert!(!excluded.is_empty(), "no wait of this test's threads");
    assert!(excluded.iter().all(|r| r["pid"] == me), "{excluded:?}");
    // The same run, seen by the filter on the helper: every wait, short ones too.
    assert!(of_tid(&included, h.sleeper).len() >= K, "{included:?}");
    assert!(included.iter().any(|r| r["lat_us"].as_u64() < Some(MS * 1000)), "threshold 0 shows short waits too");
}

#[test]
fn a_fresh_process_is_seen_from_its_first_wait_and_after_it_exits() {
    let exe = helper_exe();
    // By name: the helper's threads are named after its executable until they rename themselves, so a record of
    // a thread under that name is its first run, from its creation (sched_wakeup_new).
    let prefix: String = exe.file_name().unwrap().to_string_lossy().chars().take(7).collect();
    let run = start(&["--json", "-c", &prefix, "0"], &[]);
    let mut h = Helper::start();
    h.run();
    // The helper is gone; the tool keeps tracing until stopped.
    std::thread::sleep(Duration::from_millis(100));
    let done = stop(run);
    let recs = json_lines(&done.stdout);
    let exe_comm: String = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
    for tid in [h.sleeper, h.hog, h.spinner] {
        let first = of_tid(&recs, tid);
        assert!(first.first().is_some_and(|r| r["comm"] == exe_comm.as_str()), "no first run of {tid}: {first:?}");
    }
    assert!(recs.iter().all(|r| r["comm"].as_str().unwrap().starts_with(&prefix)), "-c lets another name by");
    let waits = of_tid(&recs, h.sleeper).into_iter().filter(|r| r["lat_us"].as_u64() >= Some(MS * 1000)).count();
    assert_eq!(waits, K, "{recs:?}");
}

#[test]
fn raw_tp_and_classic_tracepoint_paths_see_the_same_waits() {
    helper_exe();
    let mut h = Helper::start();
    let (pid, tid) = (h.pid.to_string(), h.sleeper.to_string());
    let classic = start(&["--json", "-P", "-p", &pid, MIN_US], &[("COREBPF_ATTACH", "tracepoint")]);
    let classic_tid = start(&["--json", "-P", "-t", &tid, MIN_US], &[("COREBPF_ATTACH", "tracepoint")]);
    let raw = start(&["--json", "-P", "-t", &tid, MIN_US], &[("COREBPF_ATTACH", "raw_tp")]);
    h.run();
    for run in [classic, classic_tid, raw] {
        let recs = json_lines(&stop(run).stdout);
        assert_sleeper_waits(&recs, &h);
        assert_above_threshold(&recs);
        assert!(recs.iter().all(|r| r["pid"] == h.pid), "{recs:?}");
    }
}

#[test]
fn bad_input_is_one_line() {
    assert_refused(TOOL, &["ten"], 2, "ten");
    assert_refused(TOOL, &["-p", "1", "-t", "1"], 2, "cannot be used with");
    assert_refused(TOOL, &["-c", "a-name-of-twenty-chars"], 2, "15");
    assert_refused(TOOL, &["-p", "999999999"], 1, "no process with PID 999999999");
    assert_refused(TOOL, &["-t", "999999999"], 1, "no thread with TID 999999999");
}
