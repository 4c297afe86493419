// SPDX-License-Identifier: Apache-2.0 OR MIT
//! exitsnoop against helpers (tests/exiter.c) whose ends are known: one exits with code 3 after 200 ms, one is
//! killed with SIGKILL after 200 ms, one dies of SIGSEGV (no core: its RLIMIT_CORE is 0), one exits 0, one ends a
//! thread before it exits. Each record must carry the helper's PID, TID, parent (this test), exit code or signal,
//! and an age between the helper's own sleep and the time from before its spawn to after its reaping. Only the
//! helpers' PIDs are looked at, so concurrent tests do not disturb these. Debian's libbpf-tools exitsnoop runs
//! beside ours and must see the same exits.

use std::io::Write;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::anchor::Anchor;
use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
const MS: u64 = 200;

/// A helper that ended: its PID, its process name, and how long it lived at most (spawn to reaped).
struct Ended {
    pid: u32,
    comm: String,
    most: Duration,
}

/// Runs one helper in `mode` (`code3`, `zero`, `segv`, `wait` (then SIGKILL), `thread`) with a sleep of `ms`,
/// and reaps it.
fn run_helper(mode: &str, ms: u64) -> Ended {
    let exe = build_c_helper("exiter", include_str!("exiter.c"), &["-O1", "-pthread"]);
    let comm = comm_of(&exe);
    let spawned = Instant::now();
    let mut child = KillOnDrop(
        Command::new(exe).args([mode, &ms.to_string()]).stdin(Stdio::piped()).spawn().expect("start the helper"),
    );
    let pid = child.0.id();
    child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    if mode == "wait" {
        thread::sleep(Duration::from_millis(ms));
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    child.0.wait().unwrap();
    Ended { pid, comm, most: spawned.elapsed() }
}

/// The process name of a program run from `exe`: its file name, cut at 15 bytes (reading /proc/PID/comm just
/// after the spawn may still see the parent's name, before the exec).
fn comm_of(exe: &std::path::Path) -> String {
    exe.file_name().unwrap().to_string_lossy().chars().take(15).collect()
}

/// Starts the tool with `args` and waits until it is attached.
fn start(args: &[&str]) -> Running {
    let mut run = Running::start(TOOL, args);
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

fn records_of(recs: &[Value], pid: u32) -> Vec<&Value> {
    recs.iter().filter(|r| r["pid"] == pid).collect()
}

/// The single record of process `h`, checked for its IDs, parent, name and age (at least `least_ms`).
fn one_record<'a>(recs: &'a [Value], h: &Ended, least_ms: u64) -> &'a Value {
    let mine = records_of(recs, h.pid);
    assert_eq!(mine.len(), 1, "one exit of {}: {mine:?}", h.pid);
    let r = mine[0];
    assert_eq!(r["tid"], h.pid, "{r}");
    assert_eq!(r["ppid"], std::process::id(), "{r}");
    assert_eq!(r["comm"], h.comm.as_str(), "{r}");
    let age = r["age_ns"].as_u64().unwrap();
    assert!(age >= least_ms * 1_000_000, "age {age} ns below the helper's sleep of {least_ms} ms: {r}");
    assert!(age <= h.most.as_nanos() as u64, "age {age} ns above the helper's whole life {:?}: {r}", h.most);
    r
}

/// The anchor's row for `pid`: (PPID, TID, AGE(s), EXIT_CODE text).
fn anchor_row(text: &str, pid: u32) -> Option<(u32, u32, f64, String)> {
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // TIME PCOMM PID PPID TID AGE(s) EXIT_CODE...
        (f.len() >= 7 && f[2] == pid.to_string())
            .then(|| (f[3].parse().unwrap(), f[4].parse().unwrap(), f[5].parse().unwrap(), f[6..].join(" ")))
    })
}

#[test]
fn each_exit_with_its_code_signal_and_age_as_libbpf_tools_sees_it() {
    build_c_helper("exiter", include_str!("exiter.c"), &["-O1", "-pthread"]);
    let anchor = Anchor::start("exitsnoop", &["-t"], "PCOMM");
    let run = start(&["--json"]);
    let code3 = run_helper("code3", MS);
    let killed = run_helper("wait", MS);
    let segv = run_helper("segv", MS);
    let zero = run_helper("zero", 0);
    let done = stop(run);
    let seen = anchor.finish();
    let recs = json_lines(&done.stdout);

    let r = one_record(&recs, &code3, MS);
    assert_eq!((r["exit_code"].as_u64(), r["signal"].as_u64(), r["status"].as_u64()), (Some(3), Some(0), Some(0x300)));
    let r = one_record(&recs, &killed, MS);
    assert_eq!(
        (r["exit_code"].as_u64(), r["signal"].as_u64(), r["core_dumped"].as_bool()),
        (Some(0), Some(9), Some(false))
    );
    let r = one_record(&recs, &segv, MS);
    assert_eq!(
        (r["exit_code"].as_u64(), r["signal"].as_u64(), r["core_dumped"].as_bool()),
        (Some(0), Some(11), Some(false))
    );
    let r = one_record(&recs, &zero, 0);
    assert_eq!((r["exit_code"].as_u64(), r["signal"].as_u64()), (Some(0), Some(0)));

    for (h, outcome) in [(&code3, "code 3"), (&killed, "signal 9 "), (&segv, "signal 11 "), (&zero, "0")] {
        let ours = records_of(&recs, h.pid)[0];
        let (ppid, tid, age, text) =
            anchor_row(&seen, h.pid).unwrap_or_else(|| panic!("libbpf-tools did not see {}:\n{seen}", h.pid));
        assert_eq!((ppid, tid), (std::process::id(), h.pid), "{seen}");
        assert!(text.starts_with(outcome), "libbpf-tools says {text:?} for {}", h.pid);
        let our_age = ours["age_ns"].as_u64().unwrap() as f64 / 1e9;
        assert!((our_age - age).abs() <= 0.011, "ages differ: ours {our_age}, libbpf-tools {age}");
    }
}

#[test]
fn text_columns_failed_only_label_and_time() {
    build_c_helper("exiter", include_str!("exiter.c"), &["-O1", "-pthread"]);
    let run = start(&["-x", "--utc", "--label"]);
    let code3 = run_helper("code3", 0);
    let segv = run_helper("segv", 0);
    let zero = run_helper("zero", 0);
    let done = stop(run);
    let mut lines = done.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["TIME-UTC", "LABEL", "PCOMM", "PID", "PPID", "TID", "AGE(s)", "EXIT_CODE"]);
    let row = |pid: u32| {
        done.stdout.lines().find(|l| l.split_whitespace().nth(3) == Some(pid.to_string().as_str())).map(str::to_string)
    };
    let me = std::process::id();
    let line = row(code3.pid).unwrap_or_else(|| panic!("no row for {}:\n{}", code3.pid, done.stdout));
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f[0].len(), "12:34:56.789".len(), "{line}");
    let (pid, ppid) = (code3.pid.to_string(), me.to_string());
    let want = ["exit", code3.comm.as_str(), pid.as_str(), ppid.as_str(), pid.as_str(), f[6], "code", "3"];
    assert_eq!(f[1..], want, "{line}");
    let line = row(segv.pid).unwrap_or_else(|| panic!("no row for {}:\n{}", segv.pid, done.stdout));
    assert!(line.ends_with(" signal 11 (SEGV)"), "{line}");
    assert_eq!(row(zero.pid), None, "-x shows a successful exit:\n{}", done.stdout);
}

#[test]
fn per_thread_shows_each_thread_and_pid_filters() {
    build_c_helper("exiter", include_str!("exiter.c"), &["-O1", "-pthread"]);
    let exe = build_c_helper("exiter", include_str!("exiter.c"), &["-O1", "-pthread"]);
    // The helper waits on stdin, so the tools can be started on its PID before its thread exists.
    let mut child = KillOnDrop(Command::new(exe).args(["thread", "100"]).stdin(Stdio::piped()).spawn().unwrap());
    let pid = child.0.id();
    let p = pid.to_string();
    let threads = start(&["--json", "--per-thread", "-p", &p]);
    let process = start(&["--json", "-p", &p]);
    child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.0.wait().unwrap().success());
    let other = run_helper("zero", 0);
    let threads = json_lines(&stop(threads).stdout);
    let process = json_lines(&stop(process).stdout);

    assert_eq!(threads.len(), 2, "the thread and the process: {threads:?}");
    assert!(threads.iter().all(|r| r["pid"] == pid && r["exit_code"] == 0 && r["signal"] == 0), "{threads:?}");
    // The thread and the main thread, in either order: pthread_join() returns once the thread has released its
    // memory, which can be before the thread reaches sched_process_exit.
    let worker = threads.iter().find(|r| r["tid"] != pid).unwrap_or_else(|| panic!("no thread: {threads:?}"));
    assert!(threads.iter().any(|r| r["tid"] == pid), "no main thread: {threads:?}");
    assert!(worker["age_ns"].as_u64().unwrap() >= 100_000_000, "{threads:?}");

    assert_eq!(process.len(), 1, "only the process's end: {process:?}");
    assert_eq!(process[0]["tid"], pid);
    assert!(records_of(&process, other.pid).is_empty());
}

/// Issue 53, item 3: the main thread ends with pthread_exit() at once and another thread calls exit(5) MS later.
/// The process ends then, with code 5, at the age of its whole life: one record, under -x too (BCC reports code 0
/// at the main thread's end instead). The text line says the same; with --per-thread both threads are there.
#[test]
fn a_process_ends_with_its_last_thread_and_its_code() {
    build_c_helper("exiter", include_str!("exiter.c"), &["-O1", "-pthread"]);
    let json = start(&["--json"]);
    let failed = start(&["-x"]);
    let threads = start(&["--json", "--per-thread"]);
    let h = run_helper("leader_first", MS);
    let recs = json_lines(&stop(json).stdout);
    let text = stop(failed).stdout;
    let threads = json_lines(&stop(threads).stdout);

    let r = one_record(&recs, &h, MS);
    assert_eq!((r["exit_code"].as_u64(), r["signal"].as_u64(), r["status"].as_u64()), (Some(5), Some(0), Some(0x500)));
    let lines: Vec<&str> = text.lines().filter(|l| l.split_whitespace().nth(1) == Some(&h.pid.to_string())).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].trim_end().ends_with("code 5"), "{text}");

    let mine = records_of(&threads, h.pid);
    assert_eq!(mine.len(), 2, "the main thread and the other: {mine:?}");
    let main = mine.iter().find(|r| r["tid"] == h.pid).unwrap_or_else(|| panic!("no main thread: {mine:?}"));
    assert_eq!(main["exit_code"], 0, "{mine:?}");
    let other = mine.iter().find(|r| r["tid"] != h.pid).unwrap_or_else(|| panic!("no other thread: {mine:?}"));
    assert_eq!(other["exit_code"], 5, "{mine:?}");
}
