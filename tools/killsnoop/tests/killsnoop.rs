// SPDX-License-Identifier: Apache-2.0 OR MIT
//! killsnoop against a helper (tests/killer.c) that makes known calls at a child of its own and at a PID already
//! reaped: kill with signal 0 (the existence probe), SIGUSR1 and SIGUSR2 (both ignored by the child, so it lives
//! on), SIGTERM to the reaped PID (ESRCH), signal 65 (EINVAL), tkill SIGUSR1, tgkill SIGUSR2, then SIGKILL; the
//! helper then exits while the tool still traces. Every run filters by the helper's PID (the sender), a process
//! started fresh for the test, so concurrent tests do not disturb it. Debian's libbpf-tools killsnoop (its
//! sigsnoop in kill mode) runs beside ours on the same helper and must see the same calls.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::anchor::Anchor;
use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
const SIGKILL: i64 = 9;
const SIGUSR1: i64 = 10;
const SIGUSR2: i64 = 12;
const SIGTERM: i64 = 15;
const ESRCH: i64 = libc::ESRCH as i64;
const EINVAL: i64 = libc::EINVAL as i64;

struct Helper {
    child: KillOnDrop,
    pid: u32,
    comm: String,
}

/// The helper's PIDs once it has run: its child (the target) and the reaped one.
struct Targets {
    child: i64,
    dead: i64,
}

impl Helper {
    fn start() -> Helper {
        let exe = build_c_helper("killer", include_str!("killer.c"), &["-O1"]);
        let child = KillOnDrop(
            Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start the helper"),
        );
        let pid = child.0.id();
        // Its file name cut at 15 bytes (/proc/PID/comm may still hold the parent's name just after the spawn).
        let comm = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
        Helper { child, pid, comm }
    }

    /// Lets the helper make its calls and waits for it to exit (each call's result checked by the helper).
    fn run(&mut self) -> Targets {
        self.child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut line = String::new();
        BufReader::new(self.child.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
        let pids: Vec<i64> = line.split_whitespace().map(|p| p.parse().unwrap()).collect();
        Targets { child: pids[0], dead: pids[1] }
    }
}

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

type Call = (String, i64, i64, i64);

fn call(name: &str, sig: i64, tpid: i64, result: i64) -> Call {
    (name.to_string(), sig, tpid, result)
}

/// Every call the helper makes, in order: (call, sig, tpid, result).
fn all_calls(t: &Targets) -> Vec<Call> {
    vec![
        call("kill", 0, t.child, 0),
        call("kill", SIGUSR1, t.child, 0),
        call("kill", SIGUSR2, t.child, 0),
        call("kill", SIGTERM, t.dead, -ESRCH),
        call("kill", 65, t.child, -EINVAL),
        call("tkill", SIGUSR1, t.child, 0),
        call("tgkill", SIGUSR2, t.child, 0),
        call("kill", SIGKILL, t.child, 0),
    ]
}

/// (call, sig, tpid, result) of each JSON record, in order.
fn json_calls(recs: &[Value]) -> Vec<Call> {
    recs.iter()
        .map(|r| {
            let f = |k: &str| r[k].as_i64().unwrap_or_else(|| panic!("no {k} in {r}"));
            (r["call"].as_str().unwrap().to_string(), f("sig"), f("tpid"), f("result"))
        })
        .collect()
}

/// The rows of text output (TIME PID COMM SIG TPID RESULT), split on white space, header excluded.
fn rows(text: &str) -> Vec<Vec<String>> {
    text.lines().skip(1).map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

#[test]
fn every_call_with_its_result_as_libbpf_tools_sees_it() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let anchor = Anchor::start("killsnoop", &["-p", &p], "TIME");
    let run = start(&["--json", "-p", &p]);
    let t = h.run();
    let done = stop(run);
    let seen = anchor.finish();
    let recs = json_lines(&done.stdout);

    assert_eq!(json_calls(&recs), all_calls(&t), "{}", done.stdout);
    for r in &recs {
        assert_eq!(r["pid"], h.pid, "{r}");
        assert_eq!(r["tid"], h.pid, "single-threaded sender: {r}");
        assert_eq!(r["comm"], h.comm.as_str(), "{r}");
        assert!(r.get("tcomm").is_none() && r.get("group").is_none(), "no sigsnoop fields: {r}");
        let want = match r["result"].as_i64().unwrap() {
            0 => "ok",
            -3 => "ESRCH",
            -22 => "EINVAL",
            other => panic!("unexpected result {other}"),
        };
        assert_eq!(r["result_name"], want, "{r}");
    }
    let tgkill = recs.iter().find(|r| r["call"] == "tgkill").unwrap();
    assert_eq!(tgkill["tgid"], t.child, "tgkill's thread group argument");
    assert!(recs.iter().filter(|r| r["call"] != "tgkill").all(|r| r.get("tgid").is_none()));

    // libbpf-tools' killsnoop: TIME PID COMM SIG TPID RESULT, the same calls in the same order.
    let theirs: Vec<(i64, i64, i64)> = rows(&seen)
        .iter()
        .filter(|f| f.len() == 6 && f[1] == p)
        .map(|f| (f[3].parse().unwrap(), f[4].parse().unwrap(), f[5].parse().unwrap()))
        .collect();
    let ours: Vec<(i64, i64, i64)> = all_calls(&t).iter().map(|(_, s, tp, r)| (*s, *tp, *r)).collect();
    assert_eq!(theirs, ours, "libbpf-tools printed:\n{seen}");
}

#[test]
fn text_output_is_bcc_columns() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let numbers = start(&["-p", &p]);
    let names = start(&["-n", "-p", &p]);
    let t = h.run();
    let numbers = stop(numbers).stdout;
    let names = stop(names).stdout;

    // BCC: "%-9s %-*s %-16s %-4s %-*s %s", the PID columns as wide as kernel.pid_max's digits plus one.
    let w = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().len() + 1;
    let header = format!("{:<9} {:<w$} {:<16} {:<4} {:<w$} RESULT", "TIME", "PID", "COMM", "SIG", "TPID");
    assert_eq!(numbers.lines().next(), Some(header.as_str()), "{numbers}");
    let expected: Vec<Vec<String>> = all_calls(&t)
        .iter()
        .map(|(_, sig, tpid, result)| {
            vec![p.clone(), h.comm.clone(), sig.to_string(), tpid.to_string(), result.to_string()]
        })
        .collect();
    let got = rows(&numbers);
    assert_eq!(got.iter().map(|r| r[1..].to_vec()).collect::<Vec<_>>(), expected, "{numbers}");
    for (line, row) in numbers.lines().skip(1).zip(&got) {
        let time = &row[0];
        assert!(time.len() == 8 && time.as_bytes()[2] == b':' && time.as_bytes()[5] == b':', "{line}");
        // Fixed columns: TIME padded to 9, PID to w, COMM to 16, SIG to 4.
        let pid_at = 10;
        assert_eq!(&line[pid_at..pid_at + p.len()], p, "{line}");
        assert_eq!(&line[pid_at + w + 1..pid_at + w + 1 + h.comm.len()], h.comm, "{line}");
    }
    let sigs: Vec<String> = rows(&names).iter().map(|r| r[3].clone()).collect();
    assert_eq!(sigs, ["0", "SIGUSR1", "SIGUSR2", "SIGTERM", "65", "SIGUSR1", "SIGUSR2", "SIGKILL"], "{names}");
}

#[test]
fn failed_target_and_signal_filters() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let failed = start(&["-x", "--json", "-p", &p]);
    let usr = start(&["-s", "0,SIGUSR2,term", "--json", "-p", &p]);
    // A target no call is aimed at (a process group): nothing.
    let nobody = start(&["-T", "-4242", "--json", "-p", &p]);
    let all = start(&["--json", "-p", &p]);
    let t = h.run();
    let failed = json_calls(&json_lines(&stop(failed).stdout));
    let usr = json_calls(&json_lines(&stop(usr).stdout));
    let nobody = stop(nobody).stdout;
    let all = json_calls(&json_lines(&stop(all).stdout));

    assert_eq!(all, all_calls(&t));
    assert_eq!(failed, [call("kill", SIGTERM, t.dead, -ESRCH), call("kill", 65, t.child, -EINVAL)]);
    assert_eq!(
        usr,
        [
            call("kill", 0, t.child, 0),
            call("kill", SIGUSR2, t.child, 0),
            call("kill", SIGTERM, t.dead, -ESRCH),
            call("tgkill", SIGUSR2, t.child, 0),
        ]
    );
    assert_eq!(nobody, "", "no call is aimed at -4242");
}

#[test]
fn target_filter_keeps_the_calls_at_one_pid() {
    // The target is the helper's first child, forked before the helper is told to go.
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let child = wait_for_child(h.pid);
    let c = child.to_string();
    let run = start(&["-T", &c, "--json", "-p", &p]);
    let t = h.run();
    assert_eq!(t.child, child as i64);
    let got = json_calls(&json_lines(&stop(run).stdout));
    let want: Vec<Call> = all_calls(&t).into_iter().filter(|c| c.2 == t.child).collect();
    assert_eq!(want.len(), 7);
    assert_eq!(got, want);
}

/// The first child the helper forks (the target of its calls): its PID, from /proc/PID/task/PID/children.
fn wait_for_child(pid: u32) -> u32 {
    let path = format!("/proc/{pid}/task/{pid}/children");
    for _ in 0..500 {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if let Some(first) = text.split_whitespace().next() {
            return first.parse().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the helper {pid} forked no child");
}

#[test]
fn bad_input_is_one_line() {
    for (args, code, needle) in [
        (&["-s", "NOPE"][..], 2, "'NOPE' is not a signal"),
        (&["-s", "65"][..], 2, "is not a signal"),
        (&["-T", "abc"][..], 2, "'abc' is not a PID"),
        (&["-p", "0"][..], 2, "PID"),
        (&["-p", "4194304"][..], 1, "4194304"),
    ] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.trim_end().lines().count(), 1, "{args:?}: one line:\n{}", done.stderr);
        assert!(done.stderr.contains(needle), "{args:?}: {}", done.stderr);
        assert_eq!(done.stdout, "", "{args:?}");
    }
}
