// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funcslower against a helper whose calls are known: SLOW calls of slow_call(i, 0x1000 + i), which sleeps 30 ms
//! and returns the sum of its arguments, and QUICK calls of quick_call(i, 0x2000 + i), which sleeps 1 ms and
//! returns their product, all from outer_caller. The helper reads the clock around every call and prints it, so
//! the calls that must be shown and those that may be (a quick call the machine's load made slow) are known
//! exactly; a sleep never ends early, so no call is shorter than its sleep. The helper waits for a line on stdin,
//! so the tool is attached before the first call, and every run is filtered to the helper's PID. Kernel functions
//! run in the VM matrix (tests/tests/kernel_functions.rs); this host refuses them with one line.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::libc;
use corebpf_tests::{build_c_helper, json_lines, run_tool, Finished, KillOnDrop, Running};

const SLOW: usize = 5;
const QUICK: usize = 20;

const HELPER: &str = include_str!("calls.c");

fn helper() -> PathBuf {
    build_c_helper("funcslower-helper", HELPER, &["-O1", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls"])
}

/// One call as the helper made and timed it.
#[derive(Debug, Clone)]
struct HelperCall {
    name: String,
    a: u64,
    b: u64,
    result: u64,
    ns: u64,
}

struct Helper {
    child: KillOnDrop,
}

impl Helper {
    fn start(exe: &PathBuf) -> Helper {
        let child =
            Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("starting the helper");
        Helper { child: KillOnDrop(child) }
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }

    fn go(mut self) -> Vec<HelperCall> {
        let mut stdin = self.child.0.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        drop(stdin);
        let stdout = self.child.0.stdout.take().unwrap();
        let calls: Vec<HelperCall> = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                Some(HelperCall {
                    name: w.first()?.to_string(),
                    a: w.get(1)?.parse().ok()?,
                    b: w.get(2)?.parse().ok()?,
                    result: w.get(3)?.parse().ok()?,
                    ns: w.get(4)?.parse().ok()?,
                })
            })
            .collect();
        assert!(self.child.0.wait().unwrap().success(), "helper failed");
        assert_eq!(calls.len(), SLOW + QUICK);
        calls
    }
}

/// Runs funcslower with `-p HELPER` and `args` (`{exe}` is the helper's path) over the helper's workload.
fn trace_helper(args: &[&str], env: &[(&str, &str)], other: Option<Helper>) -> (Finished, Vec<HelperCall>, u32) {
    run_over_helper(args, env, other, false)
}

/// Like [`trace_helper`], with the tool stopped (SIGSTOP) from its attach until the helper has exited and been
/// reaped: it reads every event only once the process is gone, as a tool on a busy machine may.
fn trace_exited_helper(args: &[&str]) -> (Finished, Vec<HelperCall>, u32) {
    run_over_helper(args, &[], None, true)
}

fn run_over_helper(
    args: &[&str],
    env: &[(&str, &str)],
    other: Option<Helper>,
    hold_tool: bool,
) -> (Finished, Vec<HelperCall>, u32) {
    let exe = helper();
    let helper = Helper::start(&exe);
    let pid = helper.pid();
    let mut all: Vec<String> = vec!["-p".to_owned(), pid.to_string()];
    all.extend(args.iter().map(|a| a.replace("{exe}", &exe.display().to_string())));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut run = Running::start_with_env("funcslower", &all, env);
    if all.contains(&"-j") || all.contains(&"-f") {
        run.wait_attached(Duration::from_secs(60));
    } else {
        run.wait_for_line("Tracing", Duration::from_secs(60));
    }
    if hold_tool {
        run.signal(libc::SIGSTOP);
    }
    let other = other.map(|o| std::thread::spawn(move || o.go()));
    let calls = helper.go();
    if let Some(other) = other {
        other.join().unwrap();
    }
    if hold_tool {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the helper was not reaped");
        run.signal(libc::SIGCONT);
    }
    (stop(run), calls, pid)
}

/// Stops the tool once the last events have had time to reach it; it must exit cleanly and detach.
fn stop(run: Running) -> Finished {
    std::thread::sleep(Duration::from_millis(300));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The calls that must be shown above `threshold_ns` and how many more may be (slow by the machine's load).
fn must_and_may(calls: &[HelperCall], names: &[&str], threshold_ns: u64) -> (Vec<HelperCall>, usize) {
    let sleep = |c: &HelperCall| if c.name == "slow_call" { 30_000_000 } else { 1_000_000 };
    let traced: Vec<&HelperCall> = calls.iter().filter(|c| names.contains(&c.name.as_str())).collect();
    let must: Vec<HelperCall> = traced.iter().filter(|c| sleep(c) >= threshold_ns).map(|c| (*c).clone()).collect();
    let may = traced.iter().filter(|c| sleep(c) < threshold_ns && c.ns >= threshold_ns).count();
    (must, may)
}

/// The event lines of the text output (after the two header lines), split into columns.
fn rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .skip(2)
        .filter(|l| !l.starts_with("    "))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn slow_calls_are_shown_with_pid_func_rval_and_args() {
    let (done, calls, pid) = trace_helper(&["-m", "10", "-a", "2", "{exe}:slow_call", "{exe}:quick_call"], &[], None);
    let exe = helper().display().to_string();
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "Tracing function calls slower than 10 ms... Ctrl+C to quit.");
    assert_eq!(lines[1], "COMM           PID    LAT(ms)             RVAL FUNC ARGS");
    let (must, may) = must_and_may(&calls, &["slow_call", "quick_call"], 10_000_000);
    let rows = rows(&done.stdout);
    let slow: Vec<&Vec<String>> = rows.iter().filter(|r| r[4].ends_with(":slow_call")).collect();
    assert_eq!(slow.len(), must.len(), "{}", done.stdout);
    assert!(rows.len() - slow.len() <= may, "{may} quick calls may be slow:\n{}", done.stdout);
    for (row, call) in slow.iter().zip(&must) {
        assert_eq!(row[0], "funcslower-hel", "{}", done.stdout);
        assert_eq!(row[1], pid.to_string());
        let lat: f64 = row[2].parse().unwrap();
        assert!(lat >= 30.0 && lat <= call.ns as f64 / 1e6 + 0.01, "{lat} ms for a call of {} ns", call.ns);
        assert_eq!(u64::from_str_radix(&row[3], 16).unwrap(), call.result);
        assert_eq!(row[4], format!("{exe}:slow_call"));
        assert_eq!(row[5..], [format!("{:#x}", call.a), format!("{:#x}", call.b)]);
    }
}

#[test]
fn microseconds_and_uprobes_show_every_quick_call() {
    for env in [&[][..], &[("COREBPF_ATTACH", "uprobe")][..]] {
        let (done, calls, pid) = trace_helper(&["-v", "-u", "500", "{exe}:quick_call"], env, None);
        assert!(done.stdout.starts_with("Tracing function calls slower than 500 us..."), "{}", done.stdout);
        let rows = rows(&done.stdout);
        let (must, _) = must_and_may(&calls, &["quick_call"], 500_000);
        assert_eq!(rows.len(), must.len(), "{env:?}:\n{}", done.stdout);
        for (row, call) in rows.iter().zip(&must) {
            assert_eq!(row[1], pid.to_string());
            assert!(row[2].parse::<f64>().unwrap() >= 1000.0, "{row:?}");
            assert_eq!(u64::from_str_radix(&row[3], 16).unwrap(), call.result);
        }
        // Forced: uprobes; else uprobe_multi where the kernel has it (6.6+), else uprobes.
        let attached =
            |l: &str| if env.is_empty() { l.starts_with("attached with uprobe") } else { l == "attached with uprobe" };
        assert!(done.stderr.lines().any(attached), "{env:?}: {}", done.stderr);
    }
}

#[test]
fn json_has_exact_latencies_within_the_helpers_clock() {
    let (done, calls, pid) = trace_helper(&["-j", "-a", "2", "{exe}:slow_call"], &[], None);
    let lines = json_lines(&done.stdout);
    let (must, _) = must_and_may(&calls, &["slow_call"], 1_000_000);
    assert_eq!(lines.len(), must.len(), "{}", done.stdout);
    for (v, call) in lines.iter().zip(&must) {
        assert_eq!(v["pid"].as_u64(), Some(pid as u64));
        assert_eq!(v["tid"].as_u64(), Some(pid as u64));
        // The whole name (15 bytes); the text column keeps 14 characters, as BCC's.
        assert_eq!(v["comm"], "funcslower-help");
        assert!(v["func"].as_str().unwrap().ends_with(":slow_call"), "{v}");
        assert_eq!(v["retval"].as_u64(), Some(call.result));
        let args: Vec<u64> = v["args"].as_array().unwrap().iter().map(|a| a.as_u64().unwrap()).collect();
        assert_eq!(args, [call.a, call.b], "{v}");
        let ns = v["latency_ns"].as_u64().unwrap();
        assert!((30_000_000..=call.ns).contains(&ns), "{ns} ns for a call the helper timed at {} ns", call.ns);
    }
}

#[test]
fn user_stacks_name_the_caller_and_fold() {
    let (done, calls, _) = trace_helper(&["-U", "-m", "10", "{exe}:slow_call"], &[], None);
    let (must, _) = must_and_may(&calls, &["slow_call"], 10_000_000);
    let text = &done.stdout;
    let blocks: Vec<&str> = text.lines().filter(|l| !l.starts_with("    ")).skip(2).collect();
    assert_eq!(blocks.len(), must.len(), "{text}");
    // Each event's stack follows its line: the caller, then main.
    assert_eq!(text.matches("\n    outer_caller\n").count(), must.len(), "{text}");
    assert_eq!(text.matches("\n    main\n").count(), must.len(), "{text}");

    // Folded, read only after the helper has exited: its maps, saved at the start (-p), still name its frames.
    let (done, _, _) = trace_exited_helper(&["-f", "-U", "-m", "10", "{exe}:slow_call"]);
    let folded: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(folded.len(), must.len(), "{}", done.stdout);
    for line in folded {
        assert!(line.starts_with("funcslower-help;") && line.ends_with(" 1"), "{line}");
        assert!(line.contains(";main;outer_caller"), "{line}");
    }
}

/// Without -p, a process whose only slow call is its last act (it exits as soon as the call returns): the BPF side
/// reported the process at the call's entry, so its maps were saved while the call ran, and its frames are named.
#[test]
fn a_process_that_exits_after_its_only_call_has_its_frames_named() {
    let exe = helper();
    let mut child =
        KillOnDrop(Command::new(&exe).arg("once").stdin(Stdio::piped()).spawn().expect("starting the helper"));
    let pattern = format!("{}:patient_call", exe.display());
    let mut run = Running::start("funcslower", &["-f", "-U", "-m", "100", &pattern]);
    run.wait_attached(Duration::from_secs(60));
    child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.0.wait().unwrap().success(), "helper failed");
    let done = stop(run);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    assert!(lines[0].starts_with("funcslower-help;") && lines[0].ends_with(" 1"), "{}", lines[0]);
    assert!(lines[0].contains(";main;outer_caller"), "{}", lines[0]);
}

#[test]
fn time_columns_and_pid_filter() {
    let other = Helper::start(&helper());
    let (done, calls, pid) = trace_helper(&["-t", "-m", "10", "{exe}:slow_call"], &[], Some(other));
    let (must, _) = must_and_may(&calls, &["slow_call"], 10_000_000);
    assert!(done.stdout.lines().nth(1).unwrap().starts_with("TIME       COMM"), "{}", done.stdout);
    let shown = rows(&done.stdout);
    assert_eq!(shown.len(), must.len(), "{}", done.stdout);
    let first: f64 = shown[0][0].parse().unwrap();
    assert_eq!(first, 0.0);
    for row in &shown {
        assert_eq!(row[2], pid.to_string(), "another process's call:\n{}", done.stdout);
    }
    // Each slow call starts after the previous one's 30 ms.
    for pair in shown.windows(2) {
        let (a, b): (f64, f64) = (pair[0][0].parse().unwrap(), pair[1][0].parse().unwrap());
        assert!(b >= a + 0.030, "{}", done.stdout);
    }

    let (done, _, _) = trace_helper(&["-T", "-m", "10", "{exe}:slow_call"], &[], None);
    for row in rows(&done.stdout) {
        let b = row[0].as_bytes();
        assert!(b.len() == 8 && b[2] == b':' && b[5] == b':', "{row:?}");
    }
}

#[test]
fn bad_input_gets_one_clear_line() {
    for (args, code, needle) in [
        (&["no_such_function_at_all_xyz"][..], 1, "no_such_function_at_all_xyz"),
        (&["c:no_such_function_at_all_xyz"][..], 1, "no_such_function_at_all_xyz"),
        (&["t:syscalls:sys_enter_getppid"][..], 1, "funcslower times functions"),
        (&["-m", "-1", "c:getpid"][..], 2, ""),
        (&["-m", "1", "-u", "1", "c:getpid"][..], 2, "cannot be used with"),
        (&["-a", "7", "c:getpid"][..], 2, "-a"),
        (&["-f", "c:getpid"][..], 2, "-U"),
        (&["-T", "-t", "c:getpid"][..], 2, "cannot be used with"),
        (&["-p", "999999999", "c:getpid"][..], 1, "no process"),
        (&[][..], 2, ""),
        (&["vfs_read"][..], 1, ""),
        (&["c:getpid", "vfs_read"][..], 1, ""),
    ] {
        let done = run_tool("funcslower", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {done:?}");
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
        assert!(done.stderr.starts_with("funcslower: ") && done.stderr.contains(needle), "{args:?}: {}", done.stderr);
    }
}
