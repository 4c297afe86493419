// SPDX-License-Identifier: Apache-2.0 OR MIT
//! klockstat against a helper that contends on a known kernel mutex (tests/pipelock.c: 8 threads writing into
//! one pipe take the pipe's mutex in the kernel's pipe write function): with -p, the pipe writer is a caller with
//! waits, each row's numbers hold together (max <= total, count >= 1), only the helper's threads are seen, -n
//! limits the rows, -c keeps the caller asked for, -L the pipe's mutex only; where fentry traces the lock
//! functions, every write is one acquisition and one hold at least. Bad input and a closed pipe end cleanly.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::pipe::assert_head_1_ends_cleanly;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// The helper's writes into its pipe in a round: 8 threads of 2000.
const WRITES: u64 = 8 * 2000;

/// Starts the helper, then the tool on its PID with `-i 1` and `extra`, lets the helper contend until the tool
/// prints a line containing `needle`, stops the helper, then the tool; returns what the tool printed and the
/// helper's PID.
fn trace_helper(extra: &[&str], needle: &str) -> (Finished, u32) {
    trace_helper_beside(extra, needle, false)
}

/// [`trace_helper`]; with `beside`, a second klockstat (on this test's own PID) attaches once the first has, and
/// stops while the helper contends: where the lock functions are traced with fentry, each
/// attach and detach rebuilds their trampolines, so the first tool's stacks hold trampoline addresses that no
/// longer exist when it prints them.
fn trace_helper_beside(extra: &[&str], needle: &str, beside: bool) -> (Finished, u32) {
    let exe = build_c_helper("pipelock", include_str!("pipelock.c"), &["-O1", "-pthread"]);
    let child = Command::new(&exe).stdin(Stdio::piped()).spawn().expect("start pipelock");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id();
    wait_sleeping(pid, Duration::from_secs(10));
    let pid_arg = pid.to_string();
    let mut args = vec!["-p", pid_arg.as_str(), "-i", "1"];
    args.extend_from_slice(extra);
    let mut run = Running::start(TOOL, &args);
    // Attaching kprobes to some thirty lock functions takes seconds in an emulated guest, more beside other tests
    // (once over 60 s on a host busy with builds).
    run.wait_attached(Duration::from_secs(180));
    let own_pid = std::process::id().to_string();
    // Not through kprobes: some thirty more of them took over a minute to attach in an emulated guest, and
    // kprobes have no trampolines to rebuild.
    let beside = beside && std::env::var("COREBPF_ATTACH").as_deref() != Ok("kprobe");
    let second = beside.then(|| {
        let mut second = Running::start(TOOL, &["-p", &own_pid]);
        second.wait_attached(Duration::from_secs(60));
        second
    });
    let mut stdin = helper.0.stdin.take().unwrap();
    stdin.write_all(b"g").unwrap();
    run.wait_for_line(needle, Duration::from_secs(60));
    if let Some(second) = second {
        second.signal(libc::SIGINT);
        second.finish(Duration::from_secs(60)).assert_success();
    }
    drop(stdin);
    assert!(helper.0.wait().unwrap().success(), "the helper failed");
    run.signal(libc::SIGINT);
    // Its last report and the detach of its probes take seconds in a loaded emulated guest.
    (run.finish(Duration::from_secs(60)), pid)
}

/// The pipe writer's name on this kernel: anon_pipe_write since 6.16, pipe_write before.
fn pipe_writer() -> &'static str {
    let syms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    if syms.lines().any(|l| l.split_whitespace().nth(2) == Some("anon_pipe_write")) {
        "anon_pipe_write"
    } else {
        "pipe_write"
    }
}

fn is_pipe_writer(caller: &str) -> bool {
    caller.starts_with("pipe_write+") || caller.starts_with("anon_pipe_write+")
}

/// The tables of text output, in order: each a header and its rows (caller, count), with -s 1.
fn tables(text: &str) -> Vec<(String, Vec<(String, u64)>)> {
    let mut tables: Vec<(String, Vec<(String, u64)>)> = Vec::new();
    for line in text.lines() {
        if line.contains("Avg Wait") || line.contains("Avg Hold") {
            tables.push((line.to_string(), Vec::new()));
            continue;
        }
        if line.starts_with("Hold times are not shown") {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let (Some((_, rows)), true) = (tables.last_mut(), fields.len() >= 7 && !line.is_empty()) {
            // caller, avg (2 words), count, max (2), total (2)
            rows.push((fields[0].to_string(), fields[3].parse().unwrap()));
        }
    }
    tables
}

#[test]
fn pipe_writers_contend_on_the_pipe_mutex() {
    let (done, _) = trace_helper(&[], "pipe_write+");
    done.assert_success();
    assert!(done.stdout.starts_with("Tracing mutex/sem lock events"), "{}", done.stdout);
    assert!(done
        .stdout
        .contains("\n                               Caller  Avg Wait    Count   Max Wait   Total Wait\n"));
    let tables = tables(&done.stdout);
    let (_, rows) = tables.iter().rev().find(|(h, _)| h.contains("Avg Wait")).expect("a wait table");
    let writers: u64 = rows.iter().filter(|(c, _)| is_pipe_writer(c)).map(|(_, n)| n).sum();
    assert!(writers >= 1, "no wait in the pipe writer:\n{}", done.stdout);
    // Either a hold table or, where only the contention tracepoints are attached, the line that says why not.
    let hold_tables = tables.iter().filter(|(h, _)| h.contains("Avg Hold")).count();
    let no_holds = done.stdout.matches("\nHold times are not shown: the lock functions are not traced").count();
    assert!((hold_tables == 0) != (no_holds == 0), "{}", done.stdout);
    assert!(done.stdout.ends_with("Exiting trace of mutex/sem locks\n"), "{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn json_rows_hold_together_and_belong_to_the_helper() {
    json_rows_check(false);
}

/// [`json_rows_hold_together_and_belong_to_the_helper`] beside a second klockstat, as two people tracing one
/// machine would: with fentry, its attach and detach rebuild the trampolines the first one's stacks pass through.
/// (Apart, because each trampoline rebuild waits for an RCU-tasks grace period, which takes seconds in an emulated
/// guest: the matrix's ci tier runs the test above, its full tier this one.)
#[test]
fn json_rows_beside_a_second_klockstat() {
    json_rows_check(true);
}

fn json_rows_check(beside: bool) {
    let (done, pid) = trace_helper_beside(&["-j", "-v"], "pipe_write+", beside);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert!(!lines.is_empty(), "no rows:\n{}", done.stdout);
    // Each report holds the run's totals so far: the largest of each caller's counts is its last.
    let mut writer_waits = std::collections::BTreeMap::new();
    let mut writer_holds = std::collections::BTreeMap::new();
    let holds_known = !lines[0]["hold"].is_null();
    for l in &lines {
        let wait = &l["wait"];
        let (count, total, max) =
            (wait["count"].as_u64().unwrap(), wait["total_ns"].as_u64().unwrap(), wait["max_ns"].as_u64().unwrap());
        assert!(count >= 1 && max <= total, "{l}");
        assert_eq!(wait["max_pid"].as_u64(), Some(u64::from(pid)), "a task not of the helper: {l}");
        let caller = l["caller"].as_str().unwrap();
        if is_pipe_writer(caller) {
            assert!(total > 0, "{l}");
            let w = writer_waits.entry(caller.to_string()).or_insert(0);
            *w = count.max(*w);
            if holds_known {
                let hold = &l["hold"];
                assert!(hold["max_ns"].as_u64() <= hold["total_ns"].as_u64(), "{l}");
                let h = writer_holds.entry(caller.to_string()).or_insert(0);
                *h = hold["count"].as_u64().unwrap().max(*h);
            }
        }
    }
    let writer_waits: u64 = writer_waits.values().sum();
    let writer_holds: u64 = writer_holds.values().sum();
    assert!(writer_waits >= 1, "no wait in the pipe writer:\n{}", done.stdout);
    if done.stderr.contains("attached with fentry") {
        // fentry/fexit see every acquisition: each write takes the pipe's mutex once at least. (A kretprobe can
        // miss returns when more tasks sleep in the lock function than it has instances, so not with kprobes.)
        assert!(writer_waits >= WRITES, "{writer_waits} acquisitions for {WRITES} writes:\n{}", done.stdout);
        assert!(writer_holds >= WRITES, "{writer_holds} holds for {WRITES} writes:\n{}", done.stdout);
    }
    if holds_known {
        assert!(writer_holds >= 1, "no hold in the pipe writer:\n{}", done.stdout);
    } else {
        assert!(lines.iter().all(|l| l["hold"].is_null()), "{}", done.stdout);
    }
}

#[test]
fn top_n_limits_rows_and_caller_prefix_filters() {
    let (done, _) = trace_helper(&["-n", "1"], "Avg Wait");
    done.assert_success();
    let tables = tables(&done.stdout);
    assert!(tables.iter().all(|(_, rows)| rows.len() <= 1), "-n 1 printed more rows:\n{}", done.stdout);
    assert!(tables.iter().any(|(_, rows)| rows.len() == 1), "no rows:\n{}", done.stdout);

    let writer = pipe_writer();
    let (done, pid) = trace_helper(&["-c", writer, "-s", "3"], &format!("{writer}+"));
    done.assert_success();
    let lines: Vec<&str> = done.stdout.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("Avg Wait") || line.contains("Avg Hold") {
            // The row under each header is the caller -c asked for, then 2 more frames, then who waited longest.
            let caller = lines[i + 1].split_whitespace().next().unwrap();
            assert!(caller.starts_with(&format!("{writer}+")), "-c let {caller} through:\n{}", done.stdout);
            assert!(lines[i + 4].contains(&format!("Max PID {pid}, COMM ")), "{}", done.stdout);
        }
    }
}

#[test]
fn per_thread_rows_are_the_helpers_threads() {
    let (done, pid) = trace_helper(&["-P", "-j"], "\"tid\"");
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert!(!lines.is_empty(), "no rows:\n{}", done.stdout);
    for l in &lines {
        // Each row is one thread: its longest wait was its own, and the thread was the helper's.
        assert_eq!(l["wait"]["max_tid"], l["tid"], "{l}");
        assert_eq!(l["wait"]["max_pid"].as_u64(), Some(u64::from(pid)), "a thread not of the helper: {l}");
        assert!(l["wait"]["count"].as_u64() >= Some(1));
    }
}

#[test]
fn unknown_pid_is_one_line_and_exit_1() {
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
}

#[test]
fn bad_options_are_usage_errors() {
    for args in [&["-P", "-s", "2"][..], &["-S", "acq_min"], &["-n", "0"], &["-d", "0"]] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
    }
    let done = run_tool(TOOL, &["-L", "no_such_lock_anywhere"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
}

#[test]
fn closed_pipe_ends_cleanly() {
    assert_head_1_ends_cleanly(TOOL, "-i 1", "Tracing mutex/sem lock events");
}

#[test]
fn lock_filter_keeps_only_that_lock() {
    let exe = build_c_helper("pipelock", include_str!("pipelock.c"), &["-O1", "-pthread"]);
    let child = Command::new(&exe).stdin(Stdio::piped()).spawn().expect("start pipelock");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id().to_string();
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    let mut stdin = helper.0.stdin.take().unwrap();
    stdin.write_all(b"g").unwrap();
    // A first run finds the pipe's mutex: the lock of the pipe writer's longest wait.
    let mut run = Running::start(TOOL, &["-p", &pid, "-j", "-i", "1"]);
    run.wait_for_line("pipe_write+", Duration::from_secs(60));
    run.signal(libc::SIGINT);
    let first = run.finish(Duration::from_secs(20));
    let lock = json_lines(&first.stdout)
        .iter()
        .find(|l| l["caller"].as_str().is_some_and(is_pipe_writer))
        .map(|l| l["wait"]["max_lock"].as_str().unwrap().to_string())
        .expect("the pipe writer's lock");
    // The second, with -L, sees that lock only.
    let mut run = Running::start(TOOL, &["-p", &pid, "-L", &lock, "-j", "-i", "1"]);
    // Attaching kprobes to some thirty lock functions takes seconds in an emulated guest, more beside other tests.
    run.wait_attached(Duration::from_secs(60));
    run.wait_for_line("pipe_write+", Duration::from_secs(60));
    drop(stdin);
    assert!(helper.0.wait().unwrap().success(), "the helper failed");
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert!(!lines.is_empty());
    for l in &lines {
        assert_eq!(l["wait"]["max_lock"].as_str(), Some(lock.as_str()), "another lock than -L {lock}: {l}");
    }
}

/// `--prometheus`: the pipe writer's waits are counters of its function (no offset), with their time; holds are
/// served exactly where hold times are known (the lock functions traced), and promtool accepts the exposition.
#[test]
fn prometheus_counts_the_pipe_writers_waits() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let exe = build_c_helper("pipelock", include_str!("pipelock.c"), &["-O1", "-pthread"]);
    let child = Command::new(&exe).stdin(Stdio::piped()).spawn().expect("start pipelock");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id();
    wait_sleeping(pid, Duration::from_secs(10));
    let (tool, addr) = serving(TOOL, &["-p", &pid.to_string()]);
    let mut stdin = helper.0.stdin.take().unwrap();
    stdin.write_all(b"g").unwrap();
    let writer = pipe_writer();
    let waits = format!("corebpf_klockstat_waits_total{{caller=\"{writer}\"}}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = scrape(&addr);
        if sample(&text, &waits).is_some_and(|n| n >= 1.0) {
            break text;
        }
        assert!(std::time::Instant::now() < deadline, "no wait of {writer} in 60 s:\n{text}");
        std::thread::sleep(Duration::from_millis(300));
    };
    drop(stdin);
    assert!(helper.0.wait().unwrap().success(), "the helper failed");
    promtool_accepts(&text);
    let seconds = format!("corebpf_klockstat_wait_seconds_total{{caller=\"{writer}\"}}");
    assert!(sample(&text, &seconds).is_some_and(|s| s > 0.0), "{text}");
    assert!(!text.contains(&format!("caller=\"{writer}+0x")), "{text}");
    let holds = format!("corebpf_klockstat_holds_total{{caller=\"{writer}\"}}");
    if text.contains("# TYPE corebpf_klockstat_holds_total counter") {
        assert!(sample(&text, &holds).is_some_and(|n| n >= 1.0), "{text}");
    } else {
        assert!(!text.contains("corebpf_klockstat_hold"), "{text}");
    }
    tool.signal(libc::SIGTERM);
    tool.finish(Duration::from_secs(60)).assert_success();
}
