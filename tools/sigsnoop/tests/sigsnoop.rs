// SPDX-License-Identifier: Apache-2.0 OR MIT
//! sigsnoop against a helper (tests/sender.c) that sends known signals to a child of its own: SIGUSR1 twice (the
//! second finds it pending: the child blocks it), SIGUSR2 (ignored by the child), a kill(pid, 0) to a PID already
//! reaped (ESRCH), tgkill and tkill with SIGUSR1 (queued on the thread, then already pending there), and SIGKILL.
//! Every run filters by the helper's PID (the sender), so concurrent tests do not disturb it. Debian's
//! libbpf-tools sigsnoop runs beside ours on the same helper and must see the same signals.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::anchor::Anchor;
use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
const SIGUSR1: i64 = 10;
const SIGUSR2: i64 = 12;
const SIGKILL: i64 = 9;

struct Helper {
    child: KillOnDrop,
    pid: u32,
    comm: String,
}

impl Helper {
    fn start() -> Helper {
        let exe = build_c_helper("sender", include_str!("sender.c"), &["-O1"]);
        let child = KillOnDrop(
            Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start the helper"),
        );
        let pid = child.0.id();
        // Its file name cut at 15 bytes (/proc/PID/comm may still hold the parent's name just after the spawn).
        let comm = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
        Helper { child, pid, comm }
    }

    /// Lets the helper send its signals and waits for it: returns its child's PID and the reaped one's.
    fn run(&mut self) -> (i64, i64) {
        self.child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut line = String::new();
        BufReader::new(self.child.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
        let pids: Vec<i64> = line.split_whitespace().map(|p| p.parse().unwrap()).collect();
        (pids[0], pids[1])
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

/// (source, sig, tpid, result) of each record sent to `targets`, in order.
fn sent(recs: &[Value], targets: &[i64]) -> Vec<(String, i64, i64, i64)> {
    recs.iter()
        .filter(|r| targets.contains(&r["tpid"].as_i64().unwrap()))
        .map(|r| {
            let f = |k: &str| r[k].as_i64().unwrap();
            (r["source"].as_str().unwrap().to_string(), f("sig"), f("tpid"), f("result"))
        })
        .collect()
}

/// The anchor's rows for `targets`: (SIG, TPID, RESULT), in order.
fn anchor_rows(text: &str, targets: &[i64]) -> Vec<(i64, i64, i64)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // TIME PID COMM SIG TPID RESULT
            let n = |i: usize| f.get(i).and_then(|s| s.parse::<i64>().ok());
            Some((n(3)?, n(4)?, n(5)?))
        })
        .filter(|&(_, tpid, _)| targets.contains(&tpid))
        .collect()
}

fn kill(sig: i64, tpid: i64, result: i64) -> (String, i64, i64, i64) {
    ("kill".into(), sig, tpid, result)
}

#[test]
fn kill_calls_with_their_results_as_libbpf_tools_sees_them() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let anchor = Anchor::start("sigsnoop", &["-k", "-p", &p], "TIME");
    let run = start(&["-k", "--json", "-p", &p]);
    let (child, dead) = h.run();
    let done = stop(run);
    let seen = anchor.finish();
    let recs = json_lines(&done.stdout);
    let expected = vec![
        kill(SIGUSR1, child, 0),
        kill(SIGUSR1, child, 0),
        kill(SIGUSR2, child, 0),
        kill(0, dead, -libc::ESRCH as i64),
        ("tgkill".into(), SIGUSR1, child, 0),
        ("tkill".into(), SIGUSR1, child, 0),
        kill(SIGKILL, child, 0),
    ];
    assert_eq!(sent(&recs, &[child, dead]), expected, "{}", done.stdout);
    for r in &recs {
        assert_eq!((r["pid"].as_u64(), r["comm"].as_str()), (Some(h.pid as u64), Some(h.comm.as_str())), "{r}");
        // The target's name is known whenever the kernel generated a signal: not for kill(dead, 0).
        let want_tcomm = if r["tpid"] == dead { Value::Null } else { Value::from(h.comm.as_str()) };
        assert_eq!(r["tcomm"], want_tcomm, "{r}");
    }
    let esrch = recs.iter().find(|r| r["tpid"] == dead).unwrap();
    assert_eq!(esrch["result_name"], "ESRCH");
    let tgkill = recs.iter().find(|r| r["source"] == "tgkill").unwrap();
    assert_eq!(tgkill["tgid"], child);

    let theirs = anchor_rows(&seen, &[child, dead]);
    let ours: Vec<(i64, i64, i64)> = expected.iter().map(|(_, s, t, r)| (*s, *t, *r)).collect();
    assert_eq!(theirs, ours, "libbpf-tools printed:\n{seen}");
}

#[test]
fn generated_signals_with_target_and_result() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let anchor = Anchor::start("sigsnoop", &["-p", &p], "TIME");
    let run = start(&["--json", "-p", &p]);
    let (child, dead) = h.run();
    let done = stop(run);
    let seen = anchor.finish();
    let recs = json_lines(&done.stdout);
    let g = |sig, result| ("generate".to_string(), sig, child, result);
    // 0 queued, 1 ignored, 2 already pending; kill(dead, 0) generates nothing.
    let expected = vec![g(SIGUSR1, 0), g(SIGUSR1, 2), g(SIGUSR2, 1), g(SIGUSR1, 0), g(SIGUSR1, 2), g(SIGKILL, 0)];
    assert_eq!(sent(&recs, &[child, dead]), expected, "{}", done.stdout);
    let mine: Vec<&Value> = recs.iter().filter(|r| r["tpid"] == child).collect();
    let groups: Vec<bool> = mine.iter().map(|r| r["group"].as_bool().unwrap()).collect();
    assert_eq!(groups, [true, true, true, false, false, true], "kill() signals the group, t(g)kill the thread");
    for r in &mine {
        assert_eq!(r["tcomm"], h.comm.as_str(), "{r}");
        assert_eq!(r["pid"], h.pid, "{r}");
    }
    let names: Vec<&str> = mine.iter().map(|r| r["result_name"].as_str().unwrap()).collect();
    assert_eq!(names, ["delivered", "already_pending", "ignored", "delivered", "already_pending", "delivered"]);

    // libbpf-tools sees the same signals to the same target (its RESULT is si_errno, 0 here).
    let theirs: Vec<(i64, i64)> = anchor_rows(&seen, &[child]).into_iter().map(|(s, t, _)| (s, t)).collect();
    let ours: Vec<(i64, i64)> = expected.iter().map(|(_, s, t, _)| (*s, *t)).collect();
    assert_eq!(theirs, ours, "libbpf-tools printed:\n{seen}");
}

#[test]
fn failed_only_signal_filter_and_names() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let failed_calls = start(&["-k", "-x", "--json", "-p", &p]);
    let failed = start(&["-x", "--json", "-p", &p]);
    let usr2 = start(&["-n", "-s", "SIGUSR2,34", "-p", &p]);
    let (child, dead) = h.run();
    let failed_calls = json_lines(&stop(failed_calls).stdout);
    let failed = json_lines(&stop(failed).stdout);
    let usr2 = stop(usr2).stdout;

    assert_eq!(sent(&failed_calls, &[child, dead]), [kill(0, dead, -libc::ESRCH as i64)]);
    let g = |sig, result| ("generate".to_string(), sig, child, result);
    assert_eq!(sent(&failed, &[child, dead]), [g(SIGUSR1, 2), g(SIGUSR2, 1), g(SIGUSR1, 2)]);

    let mut lines = usr2.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["TIME", "PID", "COMM", "SIG", "TPID", "TCOMM", "RESULT"]);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    let c = child.to_string();
    assert_eq!(rows.len(), 1, "{usr2}");
    assert_eq!(rows[0][1..], [p.as_str(), h.comm.as_str(), "SIGUSR2", c.as_str(), h.comm.as_str(), "1"], "{usr2}");
}
