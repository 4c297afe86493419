// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpaccept against real loopback connections accepted by this test process (std::net) and by a python
//! process, each on a listener of a fresh port: every accept is reported once, from the accepting PID and comm,
//! with the right remote and local ports; -p, -P and -4/-6 keep only theirs. Tests run concurrently, so each looks
//! only at its own ports.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const HEADER: &str = "PID     COMM";

/// Starts tcpaccept with text output and waits for its header (printed once everything is attached).
fn start(args: &[&str]) -> Running {
    let mut run = Running::start("tcpaccept", args);
    run.wait_for_line(HEADER, WAIT);
    run
}

/// A python process that listens on 127.0.0.1, prints its port, accepts one connection and exits:
/// returns (its PID, the client's port, the listener's port).
fn python_accepts() -> (u32, u16, u16) {
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", "import socket,sys\nl=socket.socket();l.bind(('127.0.0.1',0));l.listen()\nprint(l.getsockname()[1],flush=True)\ns,_=l.accept();s.recv(1)"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line.trim().parse().unwrap();
    let mut c = TcpStream::connect((V4, port)).unwrap();
    let cport = c.local_addr().unwrap().port();
    std::io::Write::write_all(&mut c, b"x").unwrap();
    let pid = child.id();
    child.wait().unwrap();
    (pid, cport, port)
}

#[test]
fn every_accept_once_with_its_pid_comm_and_ports() {
    let (l4, p4) = listener(V4);
    let (l6, p6) = listener(V6);
    let mut run = start(&["-P", &format!("{p4},{p6}")]);
    let mut ours = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..5 {
        for (l, ip, port) in [(&l4, V4, p4), (&l6, V6, p6)] {
            let (cport, ends) = connect_accepted(l);
            ours.push((cport, ip, port));
            keep.push(ends);
        }
    }
    for (cport, _, _) in &ours {
        run.wait_for_line(&format!(" {cport} "), WAIT);
    }
    let done = stop(run);
    let rows = pid_comm_rows(&done.stdout);
    let me = std::process::id().to_string();
    let comm: String = thread_comm().chars().take(12).collect();
    for (cport, ip, port) in &ours {
        // A client port is unique within its family only: a v4 and a v6 client may share one (seen on 6.12).
        let v = if ip.is_ipv4() { "4" } else { "6" };
        let hits: Vec<_> = rows.iter().filter(|r| r[2] == v && r[4] == cport.to_string()).collect();
        assert_eq!(hits.len(), 1, "IPv{v} client port {cport}:\n{}", done.stdout);
        let ip = ip.to_string();
        assert_eq!(
            hits[0],
            &vec![me.clone(), comm.clone(), v.into(), ip.clone(), cport.to_string(), ip, port.to_string()]
        );
    }
    assert_eq!(rows.len(), ours.len(), "{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn another_process_is_named_and_filters_keep_only_theirs() {
    // Unfiltered by PID: the python server's accept, under its own PID and comm.
    let run = start(&["-4"]);
    let (pid, cport, port) = python_accepts();
    let (l6, _) = listener(V6);
    let (v6port, _e) = connect_accepted(&l6);
    let mut run = run;
    run.wait_for_line(&format!(" {cport} "), WAIT);
    let done = stop(run);
    let found = pid_comm_rows(&done.stdout);
    let hit: Vec<_> = found.iter().filter(|r| r[4] == cport.to_string()).collect();
    assert_eq!(hit.len(), 1, "{}", done.stdout);
    assert_eq!(
        hit[0],
        &vec![
            pid.to_string(),
            "python3".into(),
            "4".into(),
            "127.0.0.1".into(),
            cport.to_string(),
            "127.0.0.1".into(),
            port.to_string()
        ]
    );
    assert!(!found.iter().any(|r| r[4] == v6port.to_string()), "-4 kept an IPv6 accept:\n{}", done.stdout);

    // -p this process: the python server's accept is left out.
    let me = std::process::id().to_string();
    let (l, p) = listener(V4);
    let mut run = start(&["-p", &me, "-P", &p.to_string()]);
    let (_pid, other, _) = python_accepts();
    let (mine, _e2) = connect_accepted(&l);
    run.wait_for_line(&format!(" {mine} "), WAIT);
    let done = stop(run);
    let rows = pid_comm_rows(&done.stdout);
    assert_eq!(rows.len(), 1, "{}", done.stdout);
    assert_eq!(rows[0][0], me);
    assert!(!done.stdout.contains(&format!(" {other} ")), "{}", done.stdout);
}

#[test]
fn json_records() {
    let (l, p) = listener(V6);
    let mut run = Running::start("tcpaccept", &["--json", "-P", &p.to_string()]);
    // No header in JSON: wait for the first link (accept4's, which std's accept uses, is attached first).
    let deadline = Instant::now() + WAIT;
    while !has_link(run.pid()) {
        assert!(Instant::now() < deadline, "tcpaccept did not attach");
        thread::sleep(Duration::from_millis(20));
    }
    run.note_programs();
    let (cport, _ends) = connect_accepted(&l);
    run.wait_for_line(&format!("\"rport\":{cport}"), WAIT);
    let done = stop(run);
    let recs = json_lines(&done.stdout);
    let r = recs.iter().find(|r| r["rport"] == cport).unwrap();
    assert_eq!(r["pid"], std::process::id());
    assert_eq!(r["comm"], thread_comm());
    assert_eq!(r["family"], "ipv6");
    assert_eq!(r["laddr"], "::1");
    assert_eq!(r["lport"], p);
    assert_eq!(r["raddr"], "::1");
    done.assert_no_programs_left();
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let (l, p) = listener(V4);
    let run = start(&["-P", &p.to_string()]);
    let _e = connect_accepted(&l);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `tcpaccept | head -1`: the header is read, the pipe closes, the tool ends quietly.
    let mut keep = Vec::new();
    assert_ends_when_pipe_closes("tcpaccept", &[], HEADER, || keep.push(connect_accepted(&l)));
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&["-P", "80,x"][..], "'x' is not a port", 2),
        (&["-4", "-6"][..], "cannot be used with", 2),
        (&["-p", "999999999"][..], "", 1),
    ] {
        assert_refused("tcpaccept", args, code, what);
    }
}
