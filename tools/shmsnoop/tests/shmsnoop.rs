// SPDX-License-Identifier: Apache-2.0 OR MIT
//! shmsnoop against a helper (tests/shmcalls.c) that makes a known series of shmget, shmat, shmdt and shmctl
//! calls, three of them failing, from its main thread and two more from a second thread, and prints the key,
//! segment IDs, addresses and buffer it used. With -p its PID the tool shows exactly those calls, in order, each
//! line as BCC prints it; -x only the failures, -t only the thread's, -n by name; --json the same numbers.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// The helper's command name: its file is `shmsnoop-shmcalls-<hash>`, cut to 15 characters by the kernel.
const COMM: &str = "shmsnoop-shmcal";
const EEXIST: i64 = 17;
const EINVAL: i64 = 22;

/// What the helper printed: its process and thread, and the values its calls used and returned.
struct Helper {
    pid: u32,
    tid: u32,
    key: String,
    id: u64,
    a1: String,
    a2: String,
    ds: String,
    tid_id: u64,
}

/// Starts the helper, then one tool run per argument list (each with the given arguments), lets the helper make
/// its calls once every run is attached, and stops the runs.
fn traced(runs: &[&[&str]]) -> (Helper, Vec<Finished>) {
    let exe = build_c_helper("shmsnoop-shmcalls", include_str!("shmcalls.c"), &["-O1", "-pthread"]);
    let mut helper =
        KillOnDrop(Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start helper"));
    let pid = helper.0.id();
    let mut stdout = BufReader::new(helper.0.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let tid: u32 = line.trim().parse().expect("the helper's TID");
    let vars = |arg: &str| arg.replace("{pid}", &pid.to_string()).replace("{tid}", &tid.to_string());
    let mut running: Vec<Running> = runs
        .iter()
        .map(|args| {
            let args: Vec<String> = args.iter().map(|a| vars(a)).collect();
            Running::start(TOOL, &args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    for run in &mut running {
        run.wait_attached(Duration::from_secs(20));
    }
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(helper.0.wait().unwrap().success(), "the helper failed");
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f.len(), 6, "the helper printed {line:?}");
    let h = Helper {
        pid,
        tid,
        key: f[0].into(),
        id: f[1].parse().unwrap(),
        a1: f[2].into(),
        a2: f[3].into(),
        ds: f[4].into(),
        tid_id: f[5].parse().unwrap(),
    };
    let done = running
        .into_iter()
        .map(|run| {
            run.signal(libc::SIGINT);
            let done = run.finish(Duration::from_secs(20));
            done.assert_success();
            done.assert_no_programs_left();
            done
        })
        .collect();
    (h, done)
}

/// The helper's calls as BCC's shmsnoop prints them after the PID column: (SYS, RET, ARGs), RET as an unsigned
/// word in hexadecimal (a failure is -errno).
fn expected(h: &Helper) -> Vec<(&'static str, String, String)> {
    let hex = |v: i64| format!("{:x}", v as u64);
    let (id, key, tid_id) = (h.id as i64, &h.key, h.tid_id as i64);
    let create = format!("key: 0x{key}, size: 20000, shmflg: 0x780 (IPC_CREAT|IPC_EXCL|0600)");
    vec![
        ("SHMGET", hex(id), create.clone()),
        ("SHMGET", hex(-EEXIST), create),
        ("SHMGET", hex(id), format!("key: 0x{key}, size: 0, shmflg: 0x0")),
        ("SHMAT", h.a1.clone(), format!("shmid: 0x{id:x}, shmaddr: 0x0, shmflg: 0x1000 (SHM_RDONLY)")),
        ("SHMAT", h.a2.clone(), format!("shmid: 0x{id:x}, shmaddr: 0x0, shmflg: 0x0")),
        ("SHMDT", "0".into(), format!("shmaddr: 0x{}", h.a1)),
        ("SHMDT", "0".into(), format!("shmaddr: 0x{}", h.a2)),
        ("SHMDT", hex(-EINVAL), format!("shmaddr: 0x{}", h.a2)),
        ("SHMCTL", "0".into(), format!("shmid: 0x{id:x}, cmd: 2 (IPC_STAT), buf: 0x{}", h.ds)),
        ("SHMCTL", "0".into(), format!("shmid: 0x{id:x}, cmd: 0 (IPC_RMID), buf: 0x0")),
        ("SHMAT", hex(-EINVAL), format!("shmid: 0x{id:x}, shmaddr: 0x0, shmflg: 0x0")),
        ("SHMGET", hex(tid_id), "key: 0x0, size: 4096, shmflg: 0x1a0 (0640)".into()),
        ("SHMCTL", "0".into(), format!("shmid: 0x{tid_id:x}, cmd: 0 (IPC_RMID), buf: 0x0")),
    ]
}

/// BCC's line for a call: `%-6d %-16s %6s %16lx ARGs`.
fn line(id: u32, (sys, ret, args): &(&str, String, String)) -> String {
    format!("{id:<6} {COMM:<16} {sys:>6} {ret:>16} {args}")
}

#[test]
fn every_call_as_bcc_prints_it() {
    let (h, done) = traced(&[&["-p", "{pid}"], &["-p", "{pid}", "-n", "shmcal"], &["-p", "{pid}", "-n", "nomatch"]]);
    let want: Vec<String> = std::iter::once("PID    COMM                SYS              RET ARGs".to_string())
        .chain(expected(&h).iter().map(|c| line(h.pid, c)))
        .collect();
    let got: Vec<&str> = done[0].stdout.lines().collect();
    assert_eq!(got, want, "{}", done[0].stdout);
    // -n keeps the calls of a command name that contains the text, and none of others.
    assert_eq!(done[1].stdout, done[0].stdout);
    assert_eq!(done[2].stdout.lines().collect::<Vec<_>>(), want[..1], "{}", done[2].stdout);
}

#[test]
fn failed_only_with_timestamps_and_thread_filter() {
    let (h, done) = traced(&[&["-x", "-T", "-p", "{pid}"], &["-t", "{tid}"]]);
    let mut lines = done[0].stdout.lines();
    assert_eq!(lines.next(), Some("TIME(s)       PID    COMM                SYS              RET ARGs"));
    let failed: Vec<String> = expected(&h).iter().filter(|c| c.1.starts_with("ffff")).map(|c| line(h.pid, c)).collect();
    assert_eq!(failed.len(), 3);
    let mut last = 0.0;
    for (i, l) in lines.enumerate() {
        // BCC's -T: seconds since the first call seen, to the microsecond, in 14 columns.
        let (time, rest) = l.split_at(14);
        let secs: f64 = time.trim_end().parse().unwrap_or_else(|_| panic!("{l}"));
        assert!(time.trim_end().ends_with("000") && time.trim_end().split('.').nth(1).unwrap().len() == 9, "{l}");
        assert!(if i == 0 { time == "0.000000000   " } else { secs >= last }, "{l}");
        last = secs;
        assert_eq!(rest, failed[i], "{}", done[0].stdout);
    }
    assert_eq!(done[0].stdout.lines().count(), 4, "{}", done[0].stdout);
    // -t: the thread's two calls only, with its TID in a TID column.
    let want: Vec<String> = std::iter::once("TID    COMM                SYS              RET ARGs".to_string())
        .chain(expected(&h)[11..].iter().map(|c| line(h.tid, c)))
        .collect();
    assert_eq!(done[1].stdout.lines().collect::<Vec<_>>(), want, "{}", done[1].stdout);
}

#[test]
fn json_has_every_argument() {
    let (h, done) = traced(&[&["--json", "-p", "{pid}"]]);
    let recs = json_lines(&done[0].stdout);
    let key = i64::from_str_radix(&h.key, 16).unwrap();
    let addr = |s: &str| u64::from_str_radix(s, 16).unwrap();
    let (id, tid_id) = (h.id, h.tid_id);
    let want = [
        serde_json::json!({"call": "shmget", "ret": id, "key": key, "size": 20000, "shmflg": 0o3600, "flags": ["IPC_CREAT", "IPC_EXCL"]}),
        serde_json::json!({"call": "shmget", "ret": -EEXIST, "error": "EEXIST", "key": key, "size": 20000, "shmflg": 0o3600, "flags": ["IPC_CREAT", "IPC_EXCL"]}),
        serde_json::json!({"call": "shmget", "ret": id, "key": key, "size": 0, "shmflg": 0, "flags": []}),
        serde_json::json!({"call": "shmat", "ret": addr(&h.a1), "shmid": id, "shmaddr": 0, "shmflg": 0o10000, "flags": ["SHM_RDONLY"]}),
        serde_json::json!({"call": "shmat", "ret": addr(&h.a2), "shmid": id, "shmaddr": 0, "shmflg": 0, "flags": []}),
        serde_json::json!({"call": "shmdt", "ret": 0, "shmaddr": addr(&h.a1)}),
        serde_json::json!({"call": "shmdt", "ret": 0, "shmaddr": addr(&h.a2)}),
        serde_json::json!({"call": "shmdt", "ret": -EINVAL, "error": "EINVAL", "shmaddr": addr(&h.a2)}),
        serde_json::json!({"call": "shmctl", "ret": 0, "shmid": id, "cmd": 2, "cmd_name": "IPC_STAT", "buf": addr(&h.ds)}),
        serde_json::json!({"call": "shmctl", "ret": 0, "shmid": id, "cmd": 0, "cmd_name": "IPC_RMID", "buf": 0}),
        serde_json::json!({"call": "shmat", "ret": -EINVAL, "error": "EINVAL", "shmid": id, "shmaddr": 0, "shmflg": 0, "flags": []}),
        serde_json::json!({"call": "shmget", "ret": tid_id, "key": 0, "size": 4096, "shmflg": 0o640, "flags": []}),
        serde_json::json!({"call": "shmctl", "ret": 0, "shmid": tid_id, "cmd": 0, "cmd_name": "IPC_RMID", "buf": 0}),
    ];
    assert_eq!(recs.len(), want.len(), "{}", done[0].stdout);
    for (i, (r, w)) in recs.iter().zip(&want).enumerate() {
        let mut r = r.as_object().unwrap().clone();
        assert_eq!(r.remove("pid"), Some(h.pid.into()), "{i}");
        let tid = if i >= 11 { h.tid } else { h.pid };
        assert_eq!(r.remove("tid"), Some(tid.into()), "{i}");
        assert_eq!(r.remove("comm"), Some(COMM.into()), "{i}");
        assert!(r.remove("ts").is_some_and(|t| t.as_f64().is_some_and(|t| t >= 0.0)), "{i}");
        assert!(r.remove("time").is_some_and(|t| t.is_string()), "{i}");
        assert_eq!(serde_json::Value::Object(r), *w, "call {i}");
    }
}

#[test]
fn duration_ends_the_run() {
    let me = std::process::id().to_string();
    let done = Running::start(TOOL, &["-d", "1", "-p", &me]).finish(Duration::from_secs(30));
    done.assert_success();
    assert_eq!(done.stdout, "PID    COMM                SYS              RET ARGs\n");
}

#[test]
fn bad_input() {
    for (args, code) in [
        (&["-p", "999999999"][..], 1),
        (&["-t", "999999999"], 1),
        (&["--bogus"], 2),
        (&["-d", "0"], 2),
        (&["-p", "x"], 2),
    ] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
    }
}
