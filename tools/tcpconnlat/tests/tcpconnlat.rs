// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpconnlat against loopback connects whose tasks and ports are known: made by this test process with std::net
//! (IPv4 and IPv6) and by bash's /dev/tcp (another process, which exits right after), a connect refused by a port
//! bound but not listening (no line), and a connect held back by a listener whose accept queue is full: its SYN
//! is dropped and sent again after the initial retransmission timeout (1 s), so its latency is at least that, which
//! the threshold tests use. Tests run concurrently, so each looks only at its own listeners' ports.
//! libbpf-tools' tcpconnlat needs kprobes or fentry and cannot load here: there is no anchor in these tests.

use std::io::Write;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::serde_json::Value;
use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "tcpconnlat";

fn start(args: &[&str]) -> Running {
    start_attached(TOOL, args, &[], 1)
}

/// The JSON records of connects to `port`.
fn to_port(records: &[Value], port: u16) -> Vec<Value> {
    records.iter().filter(|r| r["rport"] == port as u64).cloned().collect()
}

fn needle(port: u16) -> String {
    format!("\"rport\":{port},")
}

/// Connects to `l` from this process, accepts, closes both: the client's port.
fn connect_once(l: &TcpListener) -> u16 {
    let (cport, _) = connect_accepted(l);
    cport
}

/// Checks one record: the connecting task, addresses, ports, a latency above zero in both units.
fn assert_connect(r: &Value, ip: IpAddr, cport: u16, port: u16, pid: u32, comm: &str) {
    let family = if ip.is_ipv4() { "ipv4" } else { "ipv6" };
    assert_eq!(r["pid"], pid as u64, "{r}");
    assert_eq!(r["comm"], comm, "{r}");
    assert_eq!(r["family"], family, "{r}");
    assert_eq!(r["laddr"], ip.to_string(), "{r}");
    assert_eq!(r["raddr"], ip.to_string(), "{r}");
    assert_eq!(r["lport"], cport as u64, "{r}");
    assert_eq!(r["rport"], port as u64, "{r}");
    let ns = r["latency_ns"].as_u64().unwrap();
    assert!(ns > 0, "{r}");
    assert!((r["latency_ms"].as_f64().unwrap() - ns as f64 / 1e6).abs() < 1e-9, "{r}");
}

/// Text rows for destination port `port`: PID, COMM (may hold spaces), then the columns after it.
fn text_rows(stdout: &str, port: u16, after_comm: usize, dport_from_right: usize) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < after_comm + 2 || f[f.len() - dport_from_right] != port.to_string() {
                return None;
            }
            let t = &f[f.len() - after_comm..];
            let comm = f[1..f.len() - after_comm].join(" ");
            Some([f[0].to_string(), comm].into_iter().chain(t.iter().map(|s| s.to_string())).collect())
        })
        .collect()
}

#[test]
fn each_connect_once_with_its_task_ports_and_latency() {
    let pid = std::process::id();
    let comm = thread_comm();
    // Filtered by this process (the PID does not change the columns), so that other tests' connects stay out.
    let me = pid.to_string();
    let mut json = start(&["--json", "-p", &me]);
    let text = start(&["-p", &me]);
    let lport = start(&["-L", "-p", &me]);
    let (l4, p4) = listener(V4);
    let (l6, p6) = listener(V6);
    // A fresh socket's first connect, three times to each listener.
    let c4: Vec<u16> = (0..3).map(|_| connect_once(&l4)).collect();
    let c6: Vec<u16> = (0..3).map(|_| connect_once(&l6)).collect();
    for (c, ip, port) in c4.iter().map(|c| (c, V4, p4)).chain(c6.iter().map(|c| (c, V6, p6))) {
        json.wait_for_line(&format!("\"lport\":{c},\"raddr\":\"{ip}\",\"rport\":{port},"), WAIT);
    }
    let (json, text, lport) = (stop(json), stop(text), stop(lport));
    let records = json_lines(&json.stdout);
    for (ip, port, clients) in [(V4, p4, &c4), (V6, p6, &c6)] {
        let got = to_port(&records, port);
        assert_eq!(got.len(), 3, "one record per connect to {port}: {got:#?}");
        for (r, &cport) in got.iter().zip(clients.iter()) {
            assert_connect(r, ip, cport, port, pid, &comm);
        }
    }
    assert!(text.stdout.starts_with("PID     COMM         IP SADDR            DADDR            DPORT LAT(ms)\n"));
    assert!(lport
        .stdout
        .starts_with("PID     COMM         IP SADDR            LPORT  DADDR            DPORT LAT(ms)\n"));
    for (ip, port, clients) in [(V4, p4, &c4), (V6, p6, &c6)] {
        let ipv = if ip.is_ipv4() { "4" } else { "6" };
        // PID COMM IP SADDR DADDR DPORT LAT(ms)
        let rows = text_rows(&text.stdout, port, 5, 2);
        assert_eq!(rows.len(), 3, "{}", text.stdout);
        for r in &rows {
            assert_eq!([&r[0], &r[2], &r[3], &r[4]], [&pid.to_string(), ipv, &ip.to_string(), &ip.to_string()]);
            assert!(r[6].split_once('.').is_some_and(|(_, d)| d.len() == 2), "LAT(ms) {}", r[6]);
        }
        // PID COMM IP SADDR LPORT DADDR DPORT LAT(ms)
        let rows = text_rows(&lport.stdout, port, 6, 2);
        let lports: Vec<u16> = rows.iter().map(|r| r[4].parse().unwrap()).collect();
        assert_eq!(&lports, clients, "{}", lport.stdout);
    }
    json.assert_no_programs_left();
}

#[test]
fn a_refused_connect_prints_nothing() {
    // A port bound but not listening answers a SYN with a reset, and stays ours for the whole test.
    // SAFETY: socket(2), bind(2) and getsockname(2) on a socket this test owns, with buffers of the sizes given.
    let (fd, port) = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), len), 0);
        let mut got_len = len;
        assert_eq!(libc::getsockname(fd, (&mut sa as *mut libc::sockaddr_in).cast(), &mut got_len), 0);
        (fd, u16::from_be(sa.sin_port))
    };
    let (l, port_ok) = listener(V4);
    let mut run = start(&["--json", "-p", &std::process::id().to_string()]);
    let err = TcpStream::connect((V4, port)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    // A connect made after the refused one, seen, shows that the refused one was over and printed nothing.
    connect_once(&l);
    run.wait_for_line(&needle(port_ok), WAIT);
    let records = json_lines(&stop(run).stdout);
    // SAFETY: closing the socket made above.
    unsafe { libc::close(fd) };
    assert!(to_port(&records, port).is_empty(), "{records:#?}");
    assert_eq!(to_port(&records, port_ok).len(), 1, "{records:#?}");
}

/// A listener whose accept queue is full (backlog 0 holds one connection): a second connect's SYN is dropped
/// until the first is accepted, after `wait`; the client sends its SYN again after 1 s. Returns the listener's
/// port and the two clients' ports (fast, held back).
fn held_back_connect(ip: IpAddr, wait: Duration) -> (u16, u16, u16) {
    let (l, port) = listener(ip);
    // SAFETY: listen(2) again on a listening socket only changes its backlog.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    let first = TcpStream::connect((ip, port)).unwrap();
    let fast = first.local_addr().unwrap().port();
    let acceptor = thread::spawn(move || {
        thread::sleep(wait);
        let a = l.accept().unwrap();
        let b = l.accept().unwrap();
        (a, b, l)
    });
    let second = TcpStream::connect((ip, port)).unwrap();
    let slow = second.local_addr().unwrap().port();
    drop(acceptor.join().unwrap());
    (port, fast, slow)
}

#[test]
fn a_connect_held_back_by_a_full_backlog_shows_its_wait_and_passes_the_threshold() {
    let pid = std::process::id();
    let comm = thread_comm();
    let me = pid.to_string();
    let mut all = start(&["--json", "-p", &me]);
    let mut min = start(&["--json", "-p", &me, "500"]);
    let text = start(&["-p", &me, "-t", "0.5"]);
    let (port, fast, slow) = held_back_connect(V4, Duration::from_millis(200));
    all.wait_for_line(&format!("\"lport\":{slow},\"raddr\":\"127.0.0.1\",\"rport\":{port},"), WAIT);
    min.wait_for_line(&needle(port), WAIT);
    let (all, min, text) = (json_lines(&stop(all).stdout), json_lines(&stop(min).stdout), stop(text));
    let got = to_port(&all, port);
    assert_eq!(got.len(), 2, "{got:#?}");
    let slow_r = got.iter().find(|r| r["lport"] == slow as u64).unwrap();
    assert_connect(slow_r, V4, slow, port, pid, &comm);
    // The SYN's first retransmission comes 1 s (the initial RTO) after the first SYN.
    assert!(slow_r["latency_ns"].as_u64().unwrap() >= 1_000_000_000, "{slow_r}");
    // The threshold (500 ms, and 0.5 ms in text) keeps the held-back connect and drops the fast one whenever
    // it was faster than the threshold, as the unfiltered run measured it.
    let kept: Vec<u64> = to_port(&min, port).iter().map(|r| r["lport"].as_u64().unwrap()).collect();
    let fast_ns = got.iter().find(|r| r["lport"] == fast as u64).unwrap()["latency_ns"].as_u64().unwrap();
    if fast_ns < 500_000_000 {
        assert_eq!(kept, [slow as u64], "{min:#?}");
    }
    let rows = text_rows(&text.stdout, port, 5, 2);
    assert!(text.stdout.starts_with("TIME(s)  PID     COMM "), "{}", text.stdout);
    assert!(rows.iter().any(|r| r[6].parse::<f64>().unwrap() >= 1000.0), "{}", text.stdout);
    for r in &rows {
        assert!(r[6].parse::<f64>().unwrap() >= 0.5, "{}", text.stdout);
    }
}

#[test]
fn pid_and_family_filters_keep_only_their_connects() {
    let pid = std::process::id();
    let comm = thread_comm();
    let (l4, p4) = listener(V4);
    let (l6, p6) = listener(V6);
    let mut bash = KillOnDrop(
        Command::new("bash")
            .args(["-c", "read port; exec 3<>/dev/tcp/127.0.0.1/$port; read done; exit 0"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (bash_pid, me) = (bash.0.id().to_string(), pid.to_string());
    // Every run names a process, so that other tests' connects (some make thousands) stay out.
    let runs: Vec<(&str, Running)> = vec![
        ("-p bash", start(&["--json", "-p", &bash_pid])),
        ("-p test", start(&["--json", "-p", &me])),
        ("-4", start(&["--json", "-4", "-p", &me])),
        ("-6", start(&["--json", "-6", "-p", &me])),
    ];
    let c4 = connect_once(&l4);
    let c6 = connect_once(&l6);
    // Bash's first connect on a fresh socket, then it exits.
    writeln!(bash.0.stdin.as_mut().unwrap(), "{p4}").unwrap();
    let (s, peer) = l4.accept().unwrap();
    drop(bash.0.stdin.take());
    assert!(bash.0.wait().unwrap().success());
    drop(s);
    let cb = peer.port();
    let mine = |records: &[Value]| -> Vec<u16> {
        let mut v: Vec<u16> = records
            .iter()
            .filter(|r| r["rport"] == p4 as u64 || r["rport"] == p6 as u64)
            .map(|r| r["lport"].as_u64().unwrap() as u16)
            .collect();
        v.sort();
        v
    };
    for (name, mut run) in runs {
        let want = match name {
            "-p bash" => vec![(cb, p4, V4)],
            "-p test" => vec![(c4, p4, V4), (c6, p6, V6)],
            "-4" => vec![(c4, p4, V4)],
            "-6" => vec![(c6, p6, V6)],
            _ => unreachable!(),
        };
        for (c, port, ip) in &want {
            run.wait_for_line(&format!("\"lport\":{c},\"raddr\":\"{ip}\",\"rport\":{port},"), WAIT);
        }
        let records = json_lines(&stop(run).stdout);
        let mut ports: Vec<u16> = want.iter().map(|(c, _, _)| *c).collect();
        ports.sort();
        assert_eq!(mine(&records), ports, "{name} kept the wrong connects");
        for r in &records {
            match name {
                "-p bash" => assert_connect(r, V4, cb, p4, bash.0.id(), "bash"),
                "-4" => assert_connect(r, V4, c4, p4, pid, &comm),
                "-6" => assert_connect(r, V6, c6, p6, pid, &comm),
                _ => assert_eq!(r["pid"], pid as u64, "{r}"),
            }
        }
    }
    drop((l4, l6));
}

#[test]
fn raw_tp_and_tracepoint_fallbacks_time_the_same_connects() {
    let pid = std::process::id();
    let comm = thread_comm();
    for mech in ["raw_tp", "tracepoint"] {
        let me = pid.to_string();
        let mut run = start_attached(TOOL, &["--json", "-v", "-p", &me], &[("COREBPF_ATTACH", mech)], 1);
        let (l4, p4) = listener(V4);
        let (l6, p6) = listener(V6);
        let (c4, c6) = (connect_once(&l4), connect_once(&l6));
        run.wait_for_line(&needle(p4), WAIT).wait_for_line(&needle(p6), WAIT);
        let done = stop(run);
        assert!(done.stderr.contains(&format!("attached with {mech}")), "{}", done.stderr);
        let records = json_lines(&done.stdout);
        assert_connect(&to_port(&records, p4)[0], V4, c4, p4, pid, &comm);
        assert_connect(&to_port(&records, p6)[0], V6, c6, p6, pid, &comm);
        done.assert_no_programs_left();
    }
}

/// Connects lost as tcpconnlat reported them on stderr.
fn lost_reported(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("tcpconnlat: lost ")?.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn connects_lost_while_the_reader_is_stopped_are_counted() {
    // The ring buffer (1 MiB) holds about 11,900 records: stop the reader and connect more often than that.
    const N: usize = 14_000;
    let (l, port) = listener(V4);
    let mut run = start(&["--json", "-p", &std::process::id().to_string()]);
    run.signal(libc::SIGSTOP);
    for _ in 0..N {
        connect_once(&l);
    }
    run.signal(libc::SIGCONT);
    // A sentinel connect made while the reader still drains a full ring buffer is lost too: make them until one
    // is seen.
    let (l2, p2) = listener(V4);
    let stop_poking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poker = {
        let stop_poking = stop_poking.clone();
        thread::spawn(move || {
            while !stop_poking.load(std::sync::atomic::Ordering::Relaxed) {
                connect_once(&l2);
                thread::sleep(Duration::from_millis(100));
            }
        })
    };
    run.wait_for_line(&needle(p2), Duration::from_secs(120));
    stop_poking.store(true, std::sync::atomic::Ordering::Relaxed);
    poker.join().unwrap();
    let done = stop(run);
    let records = json_lines(&done.stdout);
    let seen = to_port(&records, port).len() as u64;
    let lost = lost_reported(&done.stderr);
    eprintln!("stopped reader: {seen} of {N} connects reported, {lost} reported lost");
    assert!(seen < N as u64, "the ring buffer held every connect; the test needs more");
    assert!(N as u64 - seen <= lost, "{} connects missing, {lost} reported lost:\n{}", N as u64 - seen, done.stderr);
    let last = records.last().unwrap();
    assert_eq!(last["what"], "connects", "{last}");
    assert_eq!(last["why"], "ring buffer full", "{last}");
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let (l, _) = listener(V4);
    let run = start(&[]);
    connect_once(&l);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `tcpconnlat | head -1`: the header is read, the pipe closes, the next connect ends the tool quietly.
    assert_ends_when_pipe_closes(TOOL, &[], "PID ", || {
        connect_once(&l);
    });
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what) in [
        (&["-p", "abc"][..], "'abc' is not a PID"),
        (&["-1"][..], "unexpected argument"),
        (&["abc"][..], "'abc' is not a number of milliseconds"),
        (&["1", "2"][..], "unexpected argument"),
        (&["-4", "-6"][..], "cannot be used with"),
        (&["--bogus"][..], "unexpected argument"),
    ] {
        assert_refused(TOOL, args, 2, what);
    }
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr, "tcpconnlat: no process with PID 999999999\n");
}
