// SPDX-License-Identifier: Apache-2.0 OR MIT
//! solisten against a helper whose listens are known (tests/listener.c): TCP over IPv4 and IPv6 with backlogs
//! 7 and 100, a socket that listens unbound (its port chosen then), a backlog above somaxconn (capped), a listen
//! that fails (a connected socket) and a UDP listen (never shown). Filtered by the helper's PID, so that tests
//! running at once cannot disturb each other. libbpf-tools' solisten needs kprobes, absent on the development
//! host, so the helper's own view of each listen is the ground truth.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::process::{ChildStdin, Command, Stdio};
use std::time::Duration;

use corebpf_tests::pipe::assert_sigterm_and_closed_pipe_end_cleanly;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const HEADER: &str = "PID     COMM";
const WAIT: Duration = Duration::from_secs(20);

/// One listen as the helper saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    proto: String,
    addr: String,
    port: u16,
    backlog: i32,
    ret: i32,
}

/// The helper, waiting for its go byte; its sockets stay open until it is dropped.
struct Helper {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    pid: u32,
    /// Its command name (the helper's file name, cut to 15 bytes).
    comm: String,
}

impl Helper {
    fn start() -> Helper {
        let exe = build_c_helper("listener", include_str!("listener.c"), &["-O1"]);
        let mut child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("listener");
        let stdin = child.stdin.take();
        let pid = child.id();
        wait_sleeping(pid, WAIT);
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
        Helper { child: KillOnDrop(child), stdin, pid, comm }
    }

    fn go(&mut self) -> Vec<Expected> {
        self.stdin.as_mut().unwrap().write_all(b"g").unwrap();
        let mut out = BufReader::new(self.child.0.stdout.take().unwrap());
        let mut listens = Vec::new();
        loop {
            let mut line = String::new();
            assert!(out.read_line(&mut line).unwrap() > 0, "the helper ended early");
            if line == "done\n" {
                return listens;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            listens.push(Expected {
                proto: f[0].into(),
                addr: f[1].into(),
                port: f[2].parse().unwrap(),
                backlog: f[3].parse().unwrap(),
                ret: f[4].parse().unwrap(),
            });
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.0.wait();
    }
}

/// Runs solisten with `-p` the helper's PID and `args` around its listens: (its output, the listens, the
/// helper's network namespace, its PID, its comm).
fn trace(args: &[&str]) -> (Finished, Vec<Expected>, u64, String, String) {
    let mut helper = Helper::start();
    let pid = helper.pid.to_string();
    let netns = std::fs::metadata(format!("/proc/{pid}/ns/net")).unwrap().ino();
    let mut all = vec!["-p", pid.as_str()];
    all.extend_from_slice(args);
    let mut run = Running::start(TOOL, &all);
    if args.contains(&"-j") {
        run.wait_attached(WAIT);
    } else {
        run.wait_for_line(HEADER, WAIT);
    }
    let listens = helper.go();
    let comm = helper.comm.clone();
    // Every listen's record is in the ring buffer before the helper prints "done"; the tool drains it at a stop.
    drop(helper);
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    (done, listens, netns, pid, comm)
}

#[test]
fn every_listen_with_its_backlog_port_and_address() {
    let (done, listens, netns, pid, comm) = trace(&["--show-netns"]);
    assert_eq!(listens.len(), 5, "{listens:?}");
    assert_eq!(listens.iter().filter(|l| l.ret == -22).count(), 1, "{listens:?}");
    assert_ne!(listens[2].port, 0, "the unbound socket got a port: {listens:?}");
    let mut lines = done.stdout.lines();
    assert_eq!(lines.next().unwrap(), "PID     COMM         NETNS        PROTO  BACKLOG  PORT  ADDR");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), listens.len(), "output:\n{}", done.stdout);
    for (row, l) in rows.iter().zip(&listens) {
        let want = [
            pid.clone(),
            comm.chars().take(12).collect(),
            netns.to_string(),
            l.proto.clone(),
            l.backlog.to_string(),
            l.port.to_string(),
            l.addr.clone(),
        ];
        assert_eq!(row, &want.iter().map(String::as_str).collect::<Vec<_>>(), "output:\n{}", done.stdout);
    }
}

#[test]
fn json_records_with_results() {
    let (done, listens, netns, _, comm) = trace(&["-j"]);
    let recs = json_lines(&done.stdout);
    assert_eq!(recs.len(), listens.len(), "output:\n{}", done.stdout);
    for (r, l) in recs.iter().zip(&listens) {
        assert_eq!(r["comm"], comm.as_str());
        assert_eq!(r["netns"], netns);
        assert_eq!(r["proto"], l.proto.as_str());
        assert_eq!(r["family"], if l.proto.ends_with('4') { "ipv4" } else { "ipv6" });
        assert_eq!(r["addr"], l.addr.as_str());
        assert_eq!(r["port"], l.port);
        assert_eq!(r["backlog"], l.backlog);
        assert_eq!(r["ret"], l.ret);
        assert_eq!(r["error"], if l.ret == -22 { serde_json::json!("EINVAL") } else { serde_json::Value::Null });
    }
}

#[test]
fn netns_filter_keeps_only_that_namespace() {
    // The helper's namespace: every listen; another (this one's inode plus one is no namespace of the helper's):
    // none.
    let helper_ns = std::fs::metadata("/proc/self/ns/net").unwrap().ino().to_string();
    let (done, listens, _, _, _) = trace(&["-n", &helper_ns, "-t"]);
    let rows: Vec<&str> = done.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), listens.len(), "output:\n{}", done.stdout);
    // -t: the time of day under TIME (issue 53 item 12: it was headed TIME(s), which heads seconds elsewhere).
    assert!(done.stdout.starts_with("TIME     PID     COMM"), "{}", done.stdout);
    for row in &rows {
        let time = row.split_whitespace().next().unwrap();
        let parts: Vec<&str> = time.split(':').collect();
        assert!(parts.len() == 3 && parts.iter().all(|p| p.len() == 2 && p.parse::<u8>().is_ok()), "{row}");
    }
    let other = (std::fs::metadata("/proc/self/ns/net").unwrap().ino() + 1).to_string();
    let (done, listens, _, _, _) = trace(&["-n", &other]);
    assert_eq!(listens.len(), 5);
    assert_eq!(done.stdout.lines().count(), 1, "output:\n{}", done.stdout);
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    // `solisten | head -1` reads the header; a listener gives the tool something to write into the closed pipe.
    let me = std::process::id().to_string();
    assert_sigterm_and_closed_pipe_end_cleanly(TOOL, &["-p", &me], HEADER, "PID", || {
        let _l = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr());
    });
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&["-n", "x"][..], "not a network namespace", 2),
        (&["-n", "0"][..], "not a network namespace", 2),
        (&["-p", "999999999"][..], "", 1),
    ] {
        assert_refused(TOOL, args, code, what);
    }
}
