// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpconnect against real loopback connects made by this test process (std::net) and by a bash process
//! (/dev/tcp), each to a listener on a fresh port of its own: every connect is reported once, from the right
//! PID and comm, with the right local and destination ports; -p, -P and -4/-6 keep only theirs; -c counts
//! equal the connects made. Tests run concurrently, so each looks only at its own ports.

use std::collections::HashMap;
use std::io::Read;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;
use serde_json::Value;

const BANNER: &str = "Tracing connect";

/// Starts tcpconnect with text output and waits for its banner (printed once everything is attached).
fn start(args: &[&str]) -> Running {
    start_with_env(args, &[])
}

fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut run = Running::start_with_env("tcpconnect", args, env);
    run.wait_for_line(BANNER, WAIT);
    run
}

/// A bash process that connects to 127.0.0.1:`port` and waits to be told to exit; returns (pid, local port).
fn bash_connect(listener: &TcpListener) -> (u32, u16) {
    let port = listener.local_addr().unwrap().port();
    let mut child = Command::new("bash")
        .args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{port}; printf x >&3; exec 3>&-")])
        .stdin(Stdio::null())
        .spawn()
        .expect("bash");
    let (mut s, peer) = listener.accept().unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"x");
    let pid = child.id();
    child.wait().unwrap();
    (pid, peer.port())
}

#[test]
fn every_connect_once_with_its_pid_comm_and_ports() {
    let (l4, p4) = listener(V4);
    let (l6, p6) = listener(V6);
    let mut run = start(&["-L", "-P", &format!("{p4},{p6}")]);
    let mut ours = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..5 {
        for l in [&l4, &l6] {
            let (lport, s) = connect_accepted(l);
            ours.push((lport, l.local_addr().unwrap()));
            keep.push(s);
        }
    }
    let (bash_pid, bash_lport) = bash_connect(&l4);
    run.wait_for_line(&format!(" {bash_lport} "), WAIT);
    for (lport, _) in &ours {
        run.wait_for_line(&format!(" {lport} "), WAIT);
    }
    let done = stop(run);
    let rows = pid_comm_rows(&done.stdout);
    let me = std::process::id().to_string();
    let comm = thread_comm();
    let mut expected: usize = 0;
    for (lport, dst) in &ours {
        let hits: Vec<_> = rows.iter().filter(|r| r[4] == lport.to_string()).collect();
        assert_eq!(hits.len(), 1, "local port {lport}:\n{}", done.stdout);
        let r = hits[0];
        let ip = dst.ip().to_string();
        let version = if dst.is_ipv4() { "4" } else { "6" };
        assert_eq!(
            r,
            &vec![
                me.clone(),
                comm.chars().take(12).collect(),
                version.into(),
                ip.clone(),
                lport.to_string(),
                ip,
                dst.port().to_string()
            ]
        );
        expected += 1;
    }
    let hits: Vec<_> = rows.iter().filter(|r| r[4] == bash_lport.to_string()).collect();
    assert_eq!(hits.len(), 1, "{}", done.stdout);
    assert_eq!(hits[0][0], bash_pid.to_string());
    assert_eq!(hits[0][1], "bash");
    assert_eq!(hits[0][6], p4.to_string());
    expected += 1;
    // Nothing else: -P kept only these two ports, and no connect was reported twice.
    assert_eq!(rows.len(), expected, "{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn pid_and_port_filters_keep_only_theirs() {
    let (la, pa) = listener(V4);
    let (lb, pb) = listener(V4);
    let me = std::process::id().to_string();
    let mut run = start(&["-L", "-p", &me, "-P", &pa.to_string()]);
    let (_bash, bash_lport) = bash_connect(&la);
    let (other_port, _s1) = connect_accepted(&lb);
    let (lport, _s2) = connect_accepted(&la);
    run.wait_for_line(&format!(" {lport} "), WAIT);
    let done = stop(run);
    let rows = pid_comm_rows(&done.stdout);
    assert_eq!(rows.len(), 1, "{}", done.stdout);
    assert_eq!(rows[0][0], me);
    assert_eq!(rows[0][4], lport.to_string());
    assert!(!done.stdout.contains(&format!(" {bash_lport} ")), "{}", done.stdout);
    assert!(!done.stdout.contains(&format!(" {other_port} ")), "{}", done.stdout);
    let _ = pb;
}

#[test]
fn count_mode_counts_each_flow() {
    let (la, pa) = listener(V4);
    let (lb, pb) = listener(V6);
    let run = start(&["-c", "-P", &format!("{pa},{pb}")]);
    let mut keep = Vec::new();
    for _ in 0..3 {
        keep.push(connect_accepted(&la));
    }
    for _ in 0..2 {
        keep.push(connect_accepted(&lb));
    }
    let (_bash, _) = bash_connect(&la);
    let done = stop(run);
    let table: Vec<Vec<&str>> = done
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("LADDR"))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        table,
        vec![vec!["127.0.0.1", "127.0.0.1", &pa.to_string()[..], "4"], vec!["::1", "::1", &pb.to_string()[..], "2"]],
        "{}",
        done.stdout
    );
    done.assert_no_programs_left();
}

/// JSON records of `stdout`.
fn records(stdout: &str) -> Vec<Value> {
    json_lines(stdout)
}

#[test]
fn json_and_family_filter() {
    let (l4, p4) = listener(V4);
    let (l6, p6) = listener(V6);
    let mut run = Running::start("tcpconnect", &["--json", "-6", "-P", &format!("{p4},{p6}")]);
    let deadline = Instant::now() + WAIT;
    while links_of(run.pid()) < 2 {
        assert!(Instant::now() < deadline, "tcpconnect did not attach");
        thread::sleep(Duration::from_millis(20));
    }
    run.note_programs();
    let (v4port, _a) = connect_accepted(&l4);
    let (v6port, _b) = connect_accepted(&l6);
    run.wait_for_line(&format!("\"lport\":{v6port},"), WAIT);
    let done = stop(run);
    let recs = records(&done.stdout);
    assert_eq!(recs.len(), 1, "{}", done.stdout);
    let r = &recs[0];
    assert_eq!(r["pid"], std::process::id());
    assert_eq!(r["uid"], 0);
    assert_eq!(r["comm"], thread_comm());
    assert_eq!(r["family"], "ipv6");
    assert_eq!(r["laddr"], "::1");
    assert_eq!(r["lport"], v6port);
    assert_eq!(r["raddr"], "::1");
    assert_eq!(r["rport"], p6);
    assert!(!done.stdout.contains(&v4port.to_string()) || v4port == p6);
    done.assert_no_programs_left();
}

#[test]
fn raw_tp_and_tracepoint_fallbacks() {
    for mech in ["raw_tp", "tracepoint"] {
        let (l, p) = listener(V4);
        let mut run = start_with_env(&["-L", "-v", "-P", &p.to_string()], &[("COREBPF_ATTACH", mech)]);
        let (lport, _s) = connect_accepted(&l);
        run.wait_for_line(&format!(" {lport} "), WAIT);
        let done = stop(run);
        assert!(done.stderr.contains(&format!("attached with {mech}")), "{}", done.stderr);
        assert_eq!(pid_comm_rows(&done.stdout).len(), 1, "{}", done.stdout);
        done.assert_no_programs_left();
    }
}

/// A non-blocking connect to a listener whose queue is full stays in SYN_SENT: it is still reported at once
/// (when connect_accepted() returns EINPROGRESS), with its local port.
#[test]
fn a_connect_that_is_not_answered_is_reported_at_once() {
    // SAFETY: plain socket calls on descriptors this test owns.
    unsafe {
        let srv = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as u16;
        addr.sin_addr.s_addr = u32::from(Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
        assert_eq!(libc::bind(srv, &addr as *const _ as *const libc::sockaddr, len), 0);
        assert_eq!(libc::listen(srv, 0), 0);
        let mut len2 = len;
        libc::getsockname(srv, &mut addr as *mut _ as *mut libc::sockaddr, &mut len2);
        let port = u16::from_be(addr.sin_port);
        // Fill the accept queue (backlog 0 holds one connection), so further SYNs are dropped.
        let fill = TcpStream::connect((V4, port)).unwrap();
        let mut run = start(&["-L", "-P", &port.to_string()]);
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let r = libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len);
        assert_eq!(r, -1);
        let mut local: libc::sockaddr_in = std::mem::zeroed();
        let mut llen = len;
        libc::getsockname(fd, &mut local as *mut _ as *mut libc::sockaddr, &mut llen);
        let lport = u16::from_be(local.sin_port);
        run.wait_for_line(&format!(" {lport} "), WAIT);
        let done = stop(run);
        let rows = pid_comm_rows(&done.stdout);
        assert_eq!(rows.len(), 1, "{}", done.stdout);
        assert_eq!(rows[0][4], lport.to_string());
        libc::close(fd);
        libc::close(srv);
        drop(fill);
    }
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let (l, p) = listener(V4);
    let run = start(&["-P", &p.to_string()]);
    let _s = connect_accepted(&l);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `tcpconnect | head -1`: the banner is read, the pipe closes, the tool ends quietly.
    let mut keep = HashMap::new();
    assert_ends_when_pipe_closes("tcpconnect", &[], BANNER, || {
        let (lport, s) = connect_accepted(&l);
        keep.insert(lport, s);
    });
}

/// A bash in a mount namespace of its own, whose /etc/hosts names `addr` `name`, connects to `name`:`port` (bash's
/// /dev/tcp looks the name up with the C library's getaddrinfo()); returns once `listener` accepted its byte.
fn bash_connect_by_name(listener: &TcpListener, addr: Ipv4Addr, name: &str) {
    let hosts = ScratchFile::new("tcpconnect-hosts");
    std::fs::write(&hosts.0, format!("{addr} {name}\n")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "mount --bind {} /etc/hosts && exec 3<>/dev/tcp/{name}/{port} && printf x >&3 && exec 3>&-",
        hosts.0.display()
    );
    let mut child =
        KillOnDrop(Command::new("unshare").args(["-m", "bash", "-c", &script]).stdin(Stdio::null()).spawn().unwrap());
    let (mut s, _) = listener.accept().unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"x");
    assert!(child.0.wait().unwrap().success());
}

/// BCC's -d: a QUERY column with the name each destination was looked up by. Here the name is in a hosts file of
/// the connecting process's own, for a loopback address no other test uses; a connect to an address given by
/// number shows `No DNS Query`, and the column follows DPORT's six characters as in BCC.
#[test]
fn dns_names_the_host_each_connect_was_looked_up_by() {
    let me = std::process::id();
    let named = Ipv4Addr::new(127, 77, (me >> 8) as u8, me as u8);
    let plain = Ipv4Addr::new(127, 78, (me >> 8) as u8, me as u8);
    let name = format!("corebpf-{me}.test");
    let (l_named, p_named) = listener(named.into());
    let (l_plain, p_plain) = listener(plain.into());
    let mut run = start(&["-d", "-P", &format!("{p_named},{p_plain}")]);
    bash_connect_by_name(&l_named, named, &name);
    let (lport, _keep) = connect_accepted(&l_plain);
    run.wait_for_line(&format!(" {p_named} "), WAIT);
    run.wait_for_line(&format!(" {p_plain} "), WAIT);
    let done = stop(run);
    let lines: Vec<&str> = done.stdout.lines().collect();
    let header = lines.iter().find(|l| l.starts_with("PID ")).unwrap_or_else(|| panic!("{}", done.stdout));
    assert!(header.ends_with(" DPORT  QUERY"), "{header:?}");
    let by_name = lines.iter().find(|l| l.contains(&format!(" {named} "))).unwrap_or_else(|| panic!("{}", done.stdout));
    let query = by_name.split_once(&format!(" {p_named:<6} ")).map(|(_, q)| q);
    assert!(query.is_some_and(|q| q == name || q.starts_with(&format!("{name} ("))), "{by_name:?}");
    let by_number =
        lines.iter().find(|l| l.contains(&format!(" {plain} "))).unwrap_or_else(|| panic!("{}", done.stdout));
    assert!(by_number.ends_with(&format!(" {p_plain:<6} No DNS Query")), "{by_number:?} (local port {lport})");
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&["-d", "-c"][..], "cannot be used with", 2),
        (&["-P", "80,x"][..], "'x' is not a port", 2),
        (&["-u", "x"][..], "invalid value", 2),
        (&["-4", "-6"][..], "cannot be used with", 2),
        (&["--cgroup", "/tmp"][..], "not a cgroup v2 directory", 1),
        (&["-p", "999999999"][..], "", 1),
    ] {
        assert_refused("tcpconnect", args, code, what);
    }
}
