// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpstates against loopback connections whose state sequences are known in advance: made by this test process
//! with std::net (client, server and listener, each with its own sequence), by bash's /dev/tcp (another process,
//! which exits with its connection open), and a connect refused by a port bound but not listening. States are held
//! for known times, which bound MS from below. Tests run concurrently, so each looks only at its own ports; the
//! listener's port, held for the whole test, names every socket of a session. libbpf-tools' tcpstates loads here
//! (it uses the same tracepoint) and is run over the same workload.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::anchor::Anchor;
use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "tcpstates";

/// How long the client stays ESTABLISHED and the server CLOSE_WAIT (lower bounds of their MS).
const CLIENT_HOLD: Duration = Duration::from_millis(30);
const SERVER_HOLD: Duration = Duration::from_millis(50);

const CLIENT: [(&str, &str); 5] = [
    ("CLOSE", "SYN_SENT"),
    ("SYN_SENT", "ESTABLISHED"),
    ("ESTABLISHED", "FIN_WAIT1"),
    ("FIN_WAIT1", "FIN_WAIT2"),
    ("FIN_WAIT2", "CLOSE"),
];
const SERVER: [(&str, &str); 5] = [
    ("LISTEN", "SYN_RECV"),
    ("SYN_RECV", "ESTABLISHED"),
    ("ESTABLISHED", "CLOSE_WAIT"),
    ("CLOSE_WAIT", "LAST_ACK"),
    ("LAST_ACK", "CLOSE"),
];
const LISTENER: [(&str, &str); 2] = [("CLOSE", "LISTEN"), ("LISTEN", "CLOSE")];

/// One state change as the JSON output gives it.
#[derive(Debug, Clone)]
struct Change {
    skaddr: String,
    pid: u32,
    comm: String,
    family: String,
    laddr: String,
    lport: u16,
    raddr: String,
    rport: u16,
    old: String,
    new: String,
    ns: u64,
}

fn changes(stdout: &str) -> Vec<Change> {
    json_lines(stdout)
        .iter()
        .filter(|r| r.get("skaddr").is_some())
        .map(|r| {
            let ms = r["duration_ms"].as_f64().unwrap();
            let ns = r["duration_ns"].as_u64().unwrap();
            assert!((ms - ns as f64 / 1e6).abs() < 1e-9, "{r}");
            Change {
                skaddr: r["skaddr"].as_str().unwrap().into(),
                pid: r["pid"].as_u64().unwrap() as u32,
                comm: r["comm"].as_str().unwrap().into(),
                family: r["family"].as_str().unwrap().into(),
                laddr: r["laddr"].as_str().unwrap().into(),
                lport: r["lport"].as_u64().unwrap() as u16,
                raddr: r["raddr"].as_str().unwrap().into(),
                rport: r["rport"].as_u64().unwrap() as u16,
                old: r["oldstate"].as_str().unwrap().into(),
                new: r["newstate"].as_str().unwrap().into(),
                ns,
            }
        })
        .collect()
}

/// One finished session: the listener's port (the server's) and the client's.
#[derive(Debug, Clone, Copy)]
struct Session {
    ip: IpAddr,
    port: u16,
    cport: u16,
}

/// The changes of one session's sockets, in order: (client, server, listener).
type Seen = (Vec<Change>, Vec<Change>, Vec<Change>);

impl Session {
    fn of(&self, all: &[Change]) -> Seen {
        let (p, c) = (self.port, self.cport);
        let client = all.iter().filter(|x| x.rport == p && (x.lport == c || x.lport == 0)).cloned().collect();
        let server = all.iter().filter(|x| x.lport == p && x.rport == c).cloned().collect();
        let listener = all.iter().filter(|x| x.lport == p && x.rport == 0).cloned().collect();
        (client, server, listener)
    }

    /// The JSON needle of the session's last change (the listener's close).
    fn last_needle(&self) -> String {
        format!("\"lport\":{},\"raddr\":\"{}\",\"rport\":0,\"oldstate\":\"LISTEN\"", self.port, unspecified(self.ip))
    }
}

fn unspecified(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() {
        "0.0.0.0"
    } else {
        "::"
    }
}

/// The TCP state of `s` (tcp_info's first byte).
fn tcp_state(s: &TcpStream) -> u8 {
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: getsockopt(2) into a buffer of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len)
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info[0]
}

/// Runs one session on `listener` with known states and times: the client stays ESTABLISHED for CLIENT_HOLD and
/// shuts its side down; once it is in FIN_WAIT2 (its FIN acked), the server, in CLOSE_WAIT, waits SERVER_HOLD and
/// closes; the listener closes last.
fn session_on(listener: TcpListener) -> Session {
    let addr = listener.local_addr().unwrap();
    let (go, wait) = mpsc::channel::<()>();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"x");
        wait.recv().unwrap();
        thread::sleep(SERVER_HOLD);
        drop(s);
        listener
    });
    let mut c = TcpStream::connect(addr).unwrap();
    let cport = c.local_addr().unwrap().port();
    c.write_all(b"x").unwrap();
    thread::sleep(CLIENT_HOLD);
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while tcp_state(&c) != 5 {
        assert!(Instant::now() < deadline, "the client's FIN was never acked");
        thread::sleep(Duration::from_millis(2));
    }
    go.send(()).unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    drop(c);
    drop(server.join().unwrap());
    Session { ip: addr.ip(), port: addr.port(), cport }
}

fn session(ip: IpAddr) -> Session {
    session_on(TcpListener::bind((ip, 0)).unwrap())
}

fn start(args: &[&str]) -> Running {
    start_attached(TOOL, args, &[], 1)
}

fn pairs(changes: &[Change]) -> Vec<(&str, &str)> {
    changes.iter().map(|c| (c.old.as_str(), c.new.as_str())).collect()
}

/// Checks a session's changes against its known sequences, times and tasks (`pid`, `comm`: this test's). With
/// `old_listener`, the listener was listening before tcpstates started: only its close is seen, as its first
/// change, with no time before it.
fn assert_session(all: &[Change], s: &Session, pid: u32, comm: &str, old_listener: bool) {
    let (client, server, listener) = s.of(all);
    assert_eq!(pairs(&client), CLIENT, "client of {s:?}: {client:#?}");
    // The handshake's LISTEN -> SYN_RECV happens on the request socket. The kernel reports it with the new
    // socket's ports (6.18, usually) or with the listener's (the matrix's 5.10 to 6.12, and now and then here):
    // once in either list. `sv(i)` is SERVER's change i. The accepted socket's first change seen may carry the time
    // since the request socket's change.
    let handshake = |c: &Change| c.old == "LISTEN" && c.new == "SYN_RECV";
    let handshakes = server.iter().chain(&listener).filter(|c| handshake(c)).count();
    assert_eq!(handshakes, 1, "one LISTEN -> SYN_RECV for {s:?}: {server:#?} {listener:#?}");
    let server: Vec<Change> = server.into_iter().filter(|c| !handshake(c)).collect();
    let listener: Vec<Change> = listener.into_iter().filter(|c| !handshake(c)).collect();
    assert_eq!(pairs(&server), SERVER[1..], "server of {s:?}: {server:#?}");
    let sv = |i: usize| &server[i - 1];
    let listener_states = if old_listener { &LISTENER[1..] } else { &LISTENER[..] };
    assert_eq!(pairs(&listener), listener_states, "listener of {s:?}: {listener:#?}");
    let ip = s.ip.to_string();
    let family = if s.ip.is_ipv4() { "ipv4" } else { "ipv6" };
    for (who, socket) in [("client", &client), ("server", &server), ("listener", &listener)] {
        // One socket each: one address through all its changes; its first change seen has no time before it.
        assert!(socket.iter().all(|c| c.skaddr == socket[0].skaddr), "{who} of {s:?}: {socket:#?}");
        if who != "server" {
            assert_eq!(socket[0].ns, 0, "{who}'s first change: {:?}", socket[0]);
        }
        assert!(socket.iter().skip(1).all(|c| c.ns > 0), "{who} of {s:?}: {socket:#?}");
        for c in socket.iter() {
            assert_eq!(c.family, family, "{c:?}");
            assert_eq!(c.laddr, ip, "{c:?}");
        }
    }
    assert_ne!(client[0].skaddr, server[0].skaddr);
    // The connecting socket has no local port until after CLOSE -> SYN_SENT; from then on it has the client's.
    assert_eq!(client[0].lport, 0, "{:?}", client[0]);
    assert!(client[1..].iter().all(|c| c.lport == s.cport && c.raddr == ip), "{client:#?}");
    assert_eq!(listener[0].raddr, unspecified(s.ip));
    // The changes made by this process's system calls: connect, shutdown, listen, the server's close.
    for c in [&client[0], &client[2], sv(3)].into_iter().chain(&listener) {
        assert_eq!((c.pid, c.comm.as_str()), (pid, comm), "{c:?}");
    }
    // States held for known times: MS is at least that long.
    assert!(client[2].ns >= CLIENT_HOLD.as_nanos() as u64, "ESTABLISHED held {CLIENT_HOLD:?}: {:?}", client[2]);
    assert!(sv(3).ns >= SERVER_HOLD.as_nanos() as u64, "CLOSE_WAIT held {SERVER_HOLD:?}: {:?}", sv(3));
    if !old_listener {
        let listened: u64 = [sv(1), sv(2), sv(3)].iter().map(|c| c.ns).sum();
        assert!(listener[1].ns >= listened, "the listener outlived its session: {listener:#?} {server:#?}");
    }
}

/// Text rows for `port` (as LPORT or RPORT), split: SKADDR, C-PID, then from the right LADDR LPORT RADDR RPORT
/// OLDSTATE -> NEWSTATE MS (C-COMM in between may hold spaces).
fn text_rows(stdout: &str, port: u16) -> Vec<Vec<String>> {
    let p = port.to_string();
    stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 11 || f[f.len() - 3] != "->" {
                return None;
            }
            let t = &f[f.len() - 8..];
            (t[1] == p || t[3] == p).then(|| [f[0], f[1]].iter().chain(t).map(|s| s.to_string()).collect())
        })
        .collect()
}

#[test]
fn each_socket_of_a_session_shows_its_known_states_and_times() {
    let pid = std::process::id();
    let comm = thread_comm();
    let mut json = start(&["--json"]);
    let text = start(&[]);
    let wide = start(&["-w"]);
    let sessions = [session(V4), session(V6)];
    for s in &sessions {
        json.wait_for_line(&s.last_needle(), WAIT);
    }
    let (json, text, wide) = (stop(json), stop(text), stop(wide));
    let all = changes(&json.stdout);
    for s in &sessions {
        assert_session(&all, s, pid, &comm, false);
    }
    assert!(text.stdout.starts_with(
        "SKADDR           C-PID C-COMM     LADDR           LPORT RADDR           RPORT OLDSTATE    -> NEWSTATE    MS\n"
    ));
    assert!(wide.stdout.starts_with("SKADDR           C-PID C-COMM           IP LADDR "), "{}", wide.stdout);
    for s in &sessions {
        let (client, server, listener) = s.of(&all);
        let mine: Vec<&Change> = client.iter().chain(&server).chain(&listener).collect();
        for done in [&text, &wide] {
            // Text and JSON saw the same changes (their times come from two tracers, so only their form is checked).
            let rows = text_rows(&done.stdout, s.port);
            let got: BTreeSet<(String, String, String, String, String)> =
                rows.iter().map(|r| (r[0].clone(), r[3].clone(), r[5].clone(), r[6].clone(), r[8].clone())).collect();
            let want: BTreeSet<(String, String, String, String, String)> = mine
                .iter()
                .map(|c| (c.skaddr.clone(), c.lport.to_string(), c.rport.to_string(), c.old.clone(), c.new.clone()))
                .collect();
            assert_eq!(got, want, "text rows of {s:?}:\n{}", done.stdout);
            assert_eq!(rows.len(), mine.len(), "{}", done.stdout);
            for r in &rows {
                assert!(r[9].split_once('.').is_some_and(|(_, d)| d.len() == 3), "MS {}", r[9]);
            }
        }
    }
    json.assert_no_programs_left();
}

#[test]
fn a_refused_connect_goes_from_syn_sent_to_close() {
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
    let pid = std::process::id();
    let mut run = start(&["--json", "-4"]);
    let err = TcpStream::connect((V4, port)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    run.wait_for_line(&format!("\"rport\":{port},\"oldstate\":\"SYN_SENT\""), WAIT);
    let all = changes(&stop(run).stdout);
    // SAFETY: closing the socket made above.
    unsafe { libc::close(fd) };
    let mine: Vec<&Change> = all.iter().filter(|c| c.rport == port).collect();
    assert_eq!(
        mine.iter().map(|c| (c.old.as_str(), c.new.as_str())).collect::<Vec<_>>(),
        [("CLOSE", "SYN_SENT"), ("SYN_SENT", "CLOSE")]
    );
    assert_eq!(mine[0].skaddr, mine[1].skaddr);
    assert_eq!(mine[0].pid, pid);
    assert!(mine[1].ns > 0 && mine[0].ns == 0, "{mine:#?}");
    assert!(all.iter().all(|c| c.lport != port), "the bound socket never changes state: {all:#?}");
}

/// A bash process that connects to 127.0.0.1:`port` when told to, then exits with the connection open, so that
/// the kernel closes its socket as the process exits.
fn bash_connects_and_exits(port: u16) -> (KillOnDrop, u32) {
    let mut child = Command::new("bash")
        .args(["-c", "read port; exec 3<>/dev/tcp/127.0.0.1/$port; read done; exit 0"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("bash");
    let pid = child.id();
    writeln!(child.stdin.as_mut().unwrap(), "{port}").unwrap();
    (KillOnDrop(child), pid)
}

#[test]
fn a_process_that_exits_mid_connection_closes_it_under_its_own_pid() {
    let (listener, port) = listener(V4);
    let mut run = start(&["--json", "-4"]);
    let (mut bash, bash_pid) = bash_connects_and_exits(port);
    let (mut s, peer) = listener.accept().unwrap();
    // Bash's first system call on its fresh socket is its connect; then it exits (stdin closed), which closes it.
    drop(bash.0.stdin.take());
    assert!(bash.0.wait().unwrap().success());
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    drop(s);
    let cport = peer.port();
    run.wait_for_line(
        &format!("\"lport\":{port},\"raddr\":\"127.0.0.1\",\"rport\":{cport},\"oldstate\":\"LAST_ACK\""),
        WAIT,
    );
    let all = changes(&stop(run).stdout);
    let s = Session { ip: V4, port, cport };
    let (client, server, _) = s.of(&all);
    assert_eq!(&pairs(&client)[..3], &CLIENT[..3], "{client:#?}");
    assert_eq!((client[0].pid, client[0].comm.as_str()), (bash_pid, "bash"), "connect: {:?}", client[0]);
    assert_eq!((client[2].pid, client[2].comm.as_str()), (bash_pid, "bash"), "the close at exit: {:?}", client[2]);
    assert_eq!(pairs(&server), SERVER, "{server:#?}");
    assert_eq!(server[3].pid, std::process::id(), "{:?}", server[3]);
}

#[test]
fn port_and_family_filters_keep_only_their_changes() {
    let pid = std::process::id();
    let comm = thread_comm();
    let (l4, p4) = listener(V4);
    let (l6, p6) = listener(V6);
    let (p4s, p6s, both) = (p4.to_string(), p6.to_string(), format!("{p4},{p6}"));
    let mut all = start(&["--json"]);
    let filtered: Vec<(&str, Running)> = vec![
        ("-L p4", start(&["--json", "-L", &p4s])),
        ("-L p4,p6", start(&["--json", "-L", &both])),
        ("-D p6", start(&["--json", "-D", &p6s])),
        ("-4", start(&["--json", "-4"])),
        ("-6", start(&["--json", "-6"])),
    ];
    let s4 = session_on(l4);
    let s6 = session_on(l6);
    all.wait_for_line(&s4.last_needle(), WAIT).wait_for_line(&s6.last_needle(), WAIT);
    let all = changes(&stop(all).stdout);
    assert_session(&all, &s4, pid, &comm, true);
    assert_session(&all, &s6, pid, &comm, true);
    // Every change of ours, named by session, socket and position in its sequence.
    let key = |c: &Change| -> Option<(u16, &'static str, String, String)> {
        for s in [&s4, &s6] {
            let (client, server, listener) = s.of(std::slice::from_ref(c));
            let role = match (client.len(), server.len(), listener.len()) {
                (1, 0, 0) => "client",
                (0, 1, 0) => "server",
                (0, 0, 1) => "listener",
                _ => continue,
            };
            return Some((s.port, role, c.old.clone(), c.new.clone()));
        }
        None
    };
    let ours: BTreeSet<_> = all.iter().filter_map(key).collect();
    // The listeners were listening before the tools started: only their close is seen.
    assert_eq!(ours.len(), 2 * (CLIENT.len() + SERVER.len() + 1));
    for (name, run) in filtered {
        let got: BTreeSet<_> = changes(&stop(run).stdout).iter().filter_map(key).collect();
        let want: BTreeSet<_> = ours
            .iter()
            .filter(|(port, role, old, new)| match name {
                // The listener and the server end have the listener's port as LPORT; the client's CLOSE ->
                // SYN_SENT has LPORT 0, and the client's other changes its own port.
                "-L p4" => *port == p4 && *role != "client",
                "-L p4,p6" => *role != "client",
                "-D p6" => *port == p6 && *role == "client",
                "-4" => *port == p4,
                "-6" => *port == p6,
                _ => unreachable!("{old} {new}"),
            })
            .cloned()
            .collect();
        assert_eq!(got, want, "{name} kept the wrong changes");
    }
}

#[test]
fn raw_tp_and_tracepoint_fallbacks_show_the_same_sequences() {
    let pid = std::process::id();
    let comm = thread_comm();
    for mech in ["raw_tp", "tracepoint"] {
        let mut run = start_attached(TOOL, &["--json", "-v"], &[("COREBPF_ATTACH", mech)], 1);
        let sessions = [session(V4), session(V6)];
        for s in &sessions {
            run.wait_for_line(&s.last_needle(), WAIT);
        }
        let done = stop(run);
        assert!(done.stderr.contains(&format!("attached with {mech}")), "{}", done.stderr);
        let all = changes(&done.stdout);
        for s in &sessions {
            assert_session(&all, s, pid, &comm, false);
        }
        done.assert_no_programs_left();
    }
}

#[test]
fn every_change_libbpf_tools_reports_is_reported_alike() {
    // Ours attaches first and stops last, so its window holds the anchor's.
    let mut ours = start(&["--json"]);
    let mut anchor = Anchor::start("tcpstates", &["-w"], "SKADDR");
    let sessions = [session(V4), session(V6), session(V4)];
    let last = sessions[2];
    anchor.wait_for(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 8
            && f[f.len() - 7] == last.port.to_string()
            && f[f.len() - 2] == "CLOSE"
            && f[f.len() - 4] == "LISTEN"
    });
    let anchor_out = anchor.finish();
    ours.wait_for_line(&last.last_needle(), WAIT);
    let all = changes(&stop(ours).stdout);
    // (SKADDR, PID, LPORT, RPORT, OLDSTATE, NEWSTATE) of each change of our sessions.
    type Row = (String, String, String, String, String, String);
    let anchor_rows: BTreeSet<Row> = anchor_out
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let t = &f[f.len() - 8..];
            let mine = sessions.iter().any(|s| [t[1], t[3]].contains(&s.port.to_string().as_str()));
            mine.then(|| (f[0].into(), f[1].into(), t[1].into(), t[3].into(), t[4].into(), t[6].into()))
        })
        .collect();
    let our_rows: BTreeSet<Row> = all
        .iter()
        .filter(|c| sessions.iter().any(|s| c.lport == s.port || c.rport == s.port))
        .map(|c| {
            let (pid, lport, rport) = (c.pid.to_string(), c.lport.to_string(), c.rport.to_string());
            (c.skaddr.clone(), pid, lport, rport, c.old.clone(), c.new.clone())
        })
        .collect();
    assert_eq!(our_rows.len(), 3 * (CLIENT.len() + SERVER.len() + LISTENER.len()), "{all:#?}");
    assert_eq!(anchor_rows, our_rows, "libbpf-tools' tcpstates and ours differ:\n{anchor_out}");
}

#[test]
fn csv_with_both_time_columns() {
    let mut run = start(&["-s", "-T", "-t"]);
    let s = session(V6);
    run.wait_for_line(&format!(",{},::,0,LISTEN,CLOSE,", s.port), WAIT);
    let done = stop(run);
    let mut lines = done.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header,
        [
            "TIME", "TIME(s)", "SKADDR", "C-PID", "C-COMM", "IP", "LADDR", "LPORT", "RADDR", "RPORT", "OLDSTATE",
            "NEWSTATE", "MS"
        ]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0][1], "0.000000", "{}", done.stdout);
    let mut last_t = -1.0;
    for r in &rows {
        assert_eq!(r[0].len(), 8, "{r:?}");
        let t: f64 = r[1].parse().unwrap();
        assert!(t >= last_t, "TIME(s) went back: {r:?}");
        last_t = t;
    }
    let mine: Vec<&Vec<&str>> =
        rows.iter().filter(|r| r[7] == s.port.to_string() || r[9] == s.port.to_string()).collect();
    assert_eq!(mine.len(), CLIENT.len() + SERVER.len() + LISTENER.len(), "{}", done.stdout);
    assert!(mine.iter().all(|r| r.len() == header.len() && r[5] == "6" && r[6] == "::1"), "{mine:?}");
}

/// State changes lost as tcpstates reported them on stderr.
fn lost_reported(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("tcpstates: lost ")?.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn changes_lost_while_the_reader_is_stopped_are_counted() {
    // The ring buffer (1 MiB) holds about 10,900 records; each short connection makes at least 8 (4 at each end):
    // stop the reader and make more than it holds.
    const N: usize = 2000;
    let (l, port) = listener(V4);
    let mut run = start(&["--json", "-4"]);
    run.signal(libc::SIGSTOP);
    for _ in 0..N {
        let (_, (c, s)) = connect_accepted(&l);
        drop(c);
        drop(s);
    }
    run.signal(libc::SIGCONT);
    // A sentinel made while the reader still drains a full ring buffer is lost too: connect to the sentinel's
    // listener until a change of its server end is seen.
    let (l2, p2) = listener(V4);
    let stop_poking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poker = {
        let stop_poking = stop_poking.clone();
        thread::spawn(move || {
            while !stop_poking.load(std::sync::atomic::Ordering::Relaxed) {
                drop(connect_accepted(&l2));
                thread::sleep(Duration::from_millis(100));
            }
        })
    };
    run.wait_for_line(&format!("\"lport\":{p2},\"raddr\":\"127.0.0.1\""), Duration::from_secs(120));
    stop_poking.store(true, std::sync::atomic::Ordering::Relaxed);
    poker.join().unwrap();
    let done = stop(run);
    let seen = changes(&done.stdout).iter().filter(|c| c.lport == port || c.rport == port).count() as u64;
    let lost = lost_reported(&done.stderr);
    eprintln!("stopped reader: {seen} changes of the burst reported, {lost} reported lost");
    // Each end goes from its first state through ESTABLISHED and at least one closing state to CLOSE: at least
    // 4 changes each (more when the FIN and its ACK come apart), so at least this many were made.
    let made = 8 * N as u64;
    assert!(seen < made, "the ring buffer held every change; the test needs more");
    assert!(made - seen <= lost, "{} changes missing but only {lost} reported lost:\n{}", made - seen, done.stderr);
    let last = json_lines(&done.stdout).pop().unwrap();
    assert_eq!(last["what"], "state changes", "{last}");
    assert_eq!(last["why"], "ring buffer full", "{last}");
    drop(l);
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let run = start(&[]);
    session(V4);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `tcpstates | head -1`: the header is read, the pipe closes, the next change ends the tool quietly.
    assert_ends_when_pipe_closes(TOOL, &[], "SKADDR ", || {
        session(V4);
    });
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what) in [
        (&["-L", "80,x"][..], "'x' is not a port"),
        (&["-D", "0"][..], "'0' is not a port"),
        (&["-L", "70000"][..], "'70000' is not a port"),
        (&["-4", "-6"][..], "cannot be used with"),
        (&["--json", "-w"][..], "cannot be used with"),
        (&["-Y"][..], "-Y (systemd journal) is not supported"),
        (&["-p", "1"][..], "unexpected argument"),
        (&["5"][..], "unexpected argument"),
    ] {
        assert_refused(TOOL, args, 2, what);
    }
    let many: Vec<String> = (1..=1025).map(|p| p.to_string()).collect();
    let done = run_tool(TOOL, &["-D", &many.join(",")]);
    assert_eq!(done.status.code(), Some(1));
    assert_eq!(done.stderr.trim(), "tcpstates: -D lists more than 1024 ports");
}
