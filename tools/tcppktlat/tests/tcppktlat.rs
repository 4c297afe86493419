// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcppktlat against a loopback connection whose reads are known. One end is a helper process (tests/peer.c), the
//! other this test's own thread; they take turns: the test sends a message of a known size, the helper waits until
//! all of it has arrived, sleeps a known time, reads it with one recv() and answers one byte, which the test reads
//! the same way. So each read picks up data that waited at least the sleep, and each side's reads are counted: one
//! row per message on the helper's socket (its PID, TID and comm, local port the client port, remote port the
//! listener's) and one per answer on the test's socket (the other way round). The filters are checked to cut
//! exactly those rows. Tests run concurrently, so each looks only at its own connection's ports.
//! libbpf-tools' tcppktlat is not packaged in Debian's libbpf-tools 0.26: there is no anchor in these tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use corebpf_tests::pipe::assert_sigterm_and_closed_pipe_end_cleanly;
use corebpf_tests::serde_json::Value;
use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "tcppktlat";
/// The messages the test sends, by size: one segment each, or several for the largest.
const SIZES: [usize; 5] = [1, 100, 1448, 10_000, 40_000];

fn start(args: &[&str]) -> Running {
    start_attached(TOOL, args, &[], 3)
}

fn peer_exe() -> PathBuf {
    build_c_helper("pktpeer", include_str!("peer.c"), &["-O1"])
}

/// A connection between the helper (connected, waiting for its go) and this thread, before any data moves.
struct Conversation {
    helper: KillOnDrop,
    ip: IpAddr,
    /// The helper's pid (= its TID) and comm.
    peer_pid: u32,
    peer_comm: String,
    /// This side: its process, thread and comm.
    pid: u32,
    tid: u32,
    comm: String,
    /// The listener's port (this side's local port) and the helper's (its local port).
    port: u16,
    cport: u16,
    stream: TcpStream,
}

impl Conversation {
    /// The helper connects to a new listener on `ip`; it will sleep `peer_sleep_ms` before each read.
    fn open(ip: IpAddr, peer_sleep_ms: u64) -> Conversation {
        let exe = peer_exe();
        let (l, port) = listener(ip);
        let sizes: Vec<String> = SIZES.iter().map(|s| s.to_string()).collect();
        let child = Command::new(exe)
            .args([ip.to_string(), port.to_string(), peer_sleep_ms.to_string()])
            .args(&sizes)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the helper");
        let helper = KillOnDrop(child);
        let (stream, peer) = l.accept().unwrap();
        stream.set_nodelay(true).unwrap();
        let peer_pid = helper.0.id();
        let peer_comm = std::fs::read_to_string(format!("/proc/{peer_pid}/comm")).unwrap().trim_end().to_string();
        Conversation {
            helper,
            ip,
            peer_pid,
            peer_comm,
            pid: std::process::id(),
            // SAFETY: gettid(2) has no arguments and cannot fail.
            tid: unsafe { libc::gettid() } as u32,
            comm: thread_comm(),
            port,
            cport: peer.port(),
            stream,
        }
    }

    /// Runs the exchange: each message, then its answer, read `sleep` after it arrived. Returns when the helper
    /// has read everything and exited.
    fn talk(&mut self, sleep: Duration) {
        let mut stdin = self.helper.0.stdin.take().unwrap();
        stdin.write_all(b"g").unwrap();
        let message = vec![b'm'; *SIZES.iter().max().unwrap()];
        for size in SIZES {
            self.stream.write_all(&message[..size]).unwrap();
            wait_readable(&self.stream, 1);
            thread::sleep(sleep);
            let mut answer = [0u8; 1];
            self.stream.read_exact(&mut answer).unwrap();
        }
        let mut line = String::new();
        BufReader::new(self.helper.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line, "done\n", "the helper failed");
        drop(stdin);
        assert!(self.helper.0.wait().unwrap().success(), "the helper failed");
    }

    fn pid_arg(&self) -> String {
        self.pid.to_string()
    }
}

/// Waits until `n` bytes can be read from `s` without reading them (FIONREAD).
fn wait_readable(s: &TcpStream, n: i32) {
    loop {
        let mut avail: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int to the pointer given, on a socket this test owns.
        assert_eq!(unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut avail) }, 0);
        if avail >= n {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// The JSON records of one socket: local port `lport`, remote port `rport`.
fn of_socket(records: &[Value], lport: u16, rport: u16) -> Vec<Value> {
    records.iter().filter(|r| r["lport"] == lport as u64 && r["rport"] == rport as u64).cloned().collect()
}

/// The JSON records of either end of the conversation.
fn of_conversation(records: &[Value], c: &Conversation) -> Vec<Value> {
    records
        .iter()
        .filter(|r| {
            (r["lport"] == c.port as u64 && r["rport"] == c.cport as u64)
                || (r["lport"] == c.cport as u64 && r["rport"] == c.port as u64)
        })
        .cloned()
        .collect()
}

/// Checks one record: the reading task, both ends, and a wait of at least `min`.
fn assert_pickup(r: &Value, c: &Conversation, peer_side: bool, min: Duration) {
    let (pid, tid, comm, lport, rport) = if peer_side {
        (c.peer_pid, c.peer_pid, c.peer_comm.as_str(), c.cport, c.port)
    } else {
        (c.pid, c.tid, c.comm.as_str(), c.port, c.cport)
    };
    let family = if c.ip.is_ipv4() { "ipv4" } else { "ipv6" };
    assert_eq!(r["pid"], pid as u64, "{r}");
    assert_eq!(r["tid"], tid as u64, "{r}");
    assert_eq!(r["comm"], comm, "{r}");
    assert_eq!(r["family"], family, "{r}");
    assert_eq!(r["laddr"], c.ip.to_string(), "{r}");
    assert_eq!(r["raddr"], c.ip.to_string(), "{r}");
    assert_eq!(r["lport"], lport as u64, "{r}");
    assert_eq!(r["rport"], rport as u64, "{r}");
    let ns = r["latency_ns"].as_u64().unwrap();
    assert!(ns >= min.as_nanos() as u64, "waited less than {min:?}: {r}");
    assert!((r["latency_ms"].as_f64().unwrap() - ns as f64 / 1e6).abs() < 1e-9, "{r}");
}

/// Both sides' records, each exactly one per read, in order.
fn assert_conversation(records: &[Value], c: &Conversation, peer_min: Duration, my_min: Duration) {
    let peer = of_socket(records, c.cport, c.port);
    assert_eq!(peer.len(), SIZES.len(), "one record per message the helper read: {peer:#?}");
    peer.iter().for_each(|r| assert_pickup(r, c, true, peer_min));
    let mine = of_socket(records, c.port, c.cport);
    assert_eq!(mine.len(), SIZES.len(), "one record per answer this test read: {mine:#?}");
    mine.iter().for_each(|r| assert_pickup(r, c, false, my_min));
}

/// Text rows of the conversation: `[PID, TID, COMM, LADDR, LPORT, RADDR, RPORT, MS]` (COMM may hold spaces),
/// after `skip` leading columns (-T).
fn text_rows(stdout: &str, c: &Conversation, skip: usize) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().skip(skip).collect();
            if f.len() < 8 || f[0].parse::<u32>().is_err() {
                return None;
            }
            let t = &f[f.len() - 5..];
            let ports = (t[1].parse::<u16>().ok()?, t[3].parse::<u16>().ok()?);
            if ports != (c.port, c.cport) && ports != (c.cport, c.port) {
                return None;
            }
            let comm = f[2..f.len() - 5].join(" ");
            Some([f[0], f[1], comm.as_str()].into_iter().chain(t.iter().copied()).map(String::from).collect())
        })
        .collect()
}

/// The text rows a conversation must give, in order: the helper's reads and this thread's, each by its ports.
fn assert_text_rows(stdout: &str, c: &Conversation, skip: usize, peer_min: Duration) {
    let rows = text_rows(stdout, c, skip);
    let ip = c.ip.to_string();
    let peer: Vec<&Vec<String>> = rows.iter().filter(|r| r[4] == c.cport.to_string()).collect();
    let mine: Vec<&Vec<String>> = rows.iter().filter(|r| r[4] == c.port.to_string()).collect();
    assert_eq!((peer.len(), mine.len()), (SIZES.len(), SIZES.len()), "{stdout}");
    for r in peer {
        let want = [&c.peer_pid.to_string(), &c.peer_pid.to_string(), &c.peer_comm, &ip, &ip, &c.port.to_string()];
        assert_eq!([&r[0], &r[1], &r[2], &r[3], &r[5], &r[6]], want, "{stdout}");
        let (_, decimals) = r[7].split_once('.').unwrap();
        assert_eq!(decimals.len(), 2, "MS {}", r[7]);
        assert!(r[7].parse::<f64>().unwrap() >= peer_min.as_secs_f64() * 1000.0, "{stdout}");
    }
    for r in mine {
        let want = [&c.pid.to_string(), &c.tid.to_string(), &c.comm, &ip, &ip, &c.cport.to_string()];
        assert_eq!([&r[0], &r[1], &r[2], &r[3], &r[5], &r[6]], want, "{stdout}");
    }
}

#[test]
fn each_read_once_with_its_task_connection_and_wait() {
    let peer_sleep = Duration::from_millis(60);
    let my_sleep = Duration::from_millis(20);
    let mut c = Conversation::open(V4, 60);
    let json = start(&["--json"]);
    let text = start(&[]);
    let clock = start(&["-T"]);
    c.talk(my_sleep);
    let (json, text, clock) = (stop(json), stop(text), stop(clock));
    let records = json_lines(&json.stdout);
    assert_conversation(&records, &c, peer_sleep, my_sleep);
    assert!(
        text.stdout.starts_with("PID     TID     COMM             LADDR           LPORT RADDR           RPORT MS\n"),
        "{}",
        text.stdout
    );
    assert_text_rows(&text.stdout, &c, 0, peer_sleep);
    // Exact alignment of one row: the helper's first read.
    let ip = c.ip.to_string();
    let row = text.stdout.lines().find(|l| l.contains(&format!(" {} ", c.cport))).unwrap();
    let head = format!(
        "{:<7} {:<7} {:<16} {ip:<15} {:<5} {ip:<15} {:<5} ",
        c.peer_pid, c.peer_pid, c.peer_comm, c.cport, c.port
    );
    assert!(row.starts_with(&head), "{row:?} does not start with {head:?}");
    assert!(clock.stdout.starts_with("TIME(s)  PID     TID     COMM "), "{}", clock.stdout);
    assert_text_rows(&clock.stdout, &c, 1, peer_sleep);
    for r in clock.stdout.lines().skip(1) {
        let t = r.split_whitespace().next().unwrap();
        assert!(t.len() == 8 && t.as_bytes()[2] == b':' && t.as_bytes()[5] == b':', "{r}");
    }
    json.assert_no_programs_left();
}

#[test]
fn ipv6_wide_columns_and_the_raw_tp_fallback() {
    let peer_sleep = Duration::from_millis(30);
    let mut c = Conversation::open(V6, 30);
    let json = start(&["--json"]);
    let wide = start(&["-w"]);
    let raw = start_attached(TOOL, &["--json", "-v"], &[("COREBPF_ATTACH", "raw_tp")], 3);
    c.talk(Duration::ZERO);
    let (json, wide, raw) = (stop(json), stop(wide), stop(raw));
    assert_conversation(&json_lines(&json.stdout), &c, peer_sleep, Duration::ZERO);
    assert!(raw.stderr.contains("attached with raw_tp"), "{}", raw.stderr);
    assert_conversation(&json_lines(&raw.stdout), &c, peer_sleep, Duration::ZERO);
    raw.assert_no_programs_left();
    assert!(
        wide.stdout
            .starts_with(&format!("PID     TID     COMM             {:<26} LPORT {:<26} RPORT MS\n", "LADDR", "RADDR")),
        "{}",
        wide.stdout
    );
    assert_text_rows(&wide.stdout, &c, 0, peer_sleep);
    let row = wide.stdout.lines().find(|l| l.contains(&format!(" {} ", c.cport))).unwrap();
    assert!(row.contains(&format!(" {:<26} {:<5} {:<26} {:<5} ", "::1", c.cport, "::1", c.port)), "{row:?}");
}

#[test]
fn filters_cut_rows_exactly() {
    let mut c = Conversation::open(V4, 0);
    let (peer_pid, me, tid) = (c.peer_pid.to_string(), c.pid_arg(), c.tid.to_string());
    let (port, cport) = (c.port.to_string(), c.cport.to_string());
    let runs: Vec<(&str, Running)> = vec![
        ("all", start(&["--json"])),
        ("-p peer", start(&["--json", "-p", &peer_pid])),
        ("-p test", start(&["--json", "-p", &me])),
        ("-t test", start(&["--json", "-t", &tid])),
        ("-t peer", start(&["--json", "-t", &peer_pid])),
        ("-l port", start(&["--json", "-l", &port])),
        ("-r port", start(&["--json", "-r", &port])),
        ("-l cport", start(&["--json", "-l", &cport])),
        ("-r cport", start(&["--json", "-r", &cport])),
        ("-l port -r port", start(&["--json", "-l", &port, "-r", &port])),
    ];
    c.talk(Duration::ZERO);
    let peer = |records: &[Value]| of_socket(records, c.cport, c.port);
    let mine = |records: &[Value]| of_socket(records, c.port, c.cport);
    let n = SIZES.len();
    for (name, run) in runs {
        let records = json_lines(&stop(run).stdout);
        let ours = of_conversation(&records, &c);
        // Which side's reads the filter keeps, and what every record of the run must have.
        let (side, every): (Option<bool>, Option<(&str, u64)>) = match name {
            "all" => (None, None),
            "-p peer" => (Some(true), Some(("pid", c.peer_pid as u64))),
            "-p test" => (Some(false), Some(("pid", c.pid as u64))),
            "-t test" => (Some(false), Some(("tid", c.tid as u64))),
            "-t peer" => (Some(true), Some(("tid", c.peer_pid as u64))),
            "-l port" => (Some(false), Some(("lport", c.port as u64))),
            "-r port" => (Some(true), Some(("rport", c.port as u64))),
            "-l cport" => (Some(true), Some(("lport", c.cport as u64))),
            "-r cport" => (Some(false), Some(("rport", c.cport as u64))),
            "-l port -r port" => {
                assert!(ours.is_empty(), "{name}: {ours:#?}");
                continue;
            }
            _ => unreachable!(),
        };
        if let Some((field, value)) = every {
            for r in &records {
                assert_eq!(r[field], value, "{name} let through {r}");
            }
        }
        match side {
            None => {
                assert_eq!(ours.len(), 2 * n, "{name}: {ours:#?}");
                assert_conversation(&records, &c, Duration::ZERO, Duration::ZERO);
            }
            Some(peer_side) => {
                let kept = if peer_side { peer(&records) } else { mine(&records) };
                assert_eq!((ours.len(), kept.len()), (n, n), "{name}: {ours:#?}");
                kept.iter().for_each(|r| assert_pickup(r, &c, peer_side, Duration::ZERO));
            }
        }
        // A process or a listening port of this test's own: nothing else on the host matches.
        if matches!(name, "-p peer" | "-t peer" | "-t test" | "-l port" | "-l cport") {
            assert_eq!(records.len(), n, "{name}: {records:#?}");
        }
    }
}

#[test]
fn the_threshold_keeps_only_longer_waits() {
    let peer_sleep = Duration::from_millis(150);
    let mut c = Conversation::open(V4, 150);
    let (port, cport) = (c.port.to_string(), c.cport.to_string());
    // Narrowed to this conversation's local ports, each run shows both sides.
    let all = start(&["--json", "-l", &port]);
    let all_peer = start(&["--json", "-l", &cport]);
    let min = start(&["--json", "100000"]);
    let text = start(&["-l", &cport, "100000"]);
    c.talk(Duration::ZERO);
    let (all, all_peer, min, text) = (stop(all), stop(all_peer), stop(min), stop(text));
    let (all, all_peer, min) = (json_lines(&all.stdout), json_lines(&all_peer.stdout), json_lines(&min.stdout));
    assert_conversation(&[all, all_peer].concat(), &c, peer_sleep, Duration::ZERO);
    // Every wait shown is longer than 100 ms (100,000 us), and the helper's (150 ms and more) are all shown.
    for r in &min {
        assert!(r["latency_ns"].as_u64().unwrap() > 100_000_000, "{r}");
    }
    let peer = of_socket(&min, c.cport, c.port);
    assert_eq!(peer.len(), SIZES.len(), "{min:#?}");
    peer.iter().for_each(|r| assert_pickup(r, &c, true, peer_sleep));
    let rows = text_rows(&text.stdout, &c, 0);
    assert_eq!(rows.len(), SIZES.len(), "{}", text.stdout);
    for r in &rows {
        assert!(r[7].parse::<f64>().unwrap() >= 100.0, "{}", text.stdout);
    }
}

#[test]
fn reads_lost_while_the_reader_is_stopped_are_counted() {
    // The ring buffer (1 MiB) holds about 13,100 records (72 bytes, 80 with its header): stop the tool and make
    // more reads than that.
    const N: usize = 20_000;
    let (l, port) = listener(V4);
    let (_, (mut client, mut server)) = connect_accepted(&l);
    client.set_nodelay(true).unwrap();
    let run = start(&["--json", "-l", &port.to_string()]);
    run.signal(libc::SIGSTOP);
    let mut byte = [0u8; 1];
    for _ in 0..N {
        client.write_all(b"x").unwrap();
        server.read_exact(&mut byte).unwrap();
    }
    run.signal(libc::SIGCONT);
    let done = stop(run);
    let records = json_lines(&done.stdout);
    let last = records.last().unwrap();
    let seen = records.iter().filter(|r| r["lport"] == port as u64).count() as u64;
    let lost = last["lost"].as_u64().unwrap_or(0);
    eprintln!("stopped reader: {seen} of {N} reads reported, {lost} reported lost");
    assert!(seen < N as u64, "the ring buffer held every read; the test needs more");
    assert_eq!(seen + lost, N as u64, "{}", done.stderr);
    assert_eq!(last["what"], "reads", "{last}");
    assert_eq!(last["why"], "ring buffer full", "{last}");
    assert_eq!(done.stderr, format!("tcppktlat: lost {lost} reads (ring buffer full)\n"));
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let (l, _) = listener(V4);
    let (_, (mut client, mut server)) = connect_accepted(&l);
    client.set_nodelay(true).unwrap();
    let me = std::process::id().to_string();
    assert_sigterm_and_closed_pipe_end_cleanly(TOOL, &["-p", &me], "PID ", "PID ", || {
        let mut byte = [0u8; 1];
        client.write_all(b"x").unwrap();
        server.read_exact(&mut byte).unwrap();
    });
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what) in [
        (&["-p", "abc"][..], "'abc' is not a PID"),
        (&["-t", "0"][..], "'0' is not a PID"),
        (&["-l", "0"][..], "'0' is not a port"),
        (&["-r", "65536"][..], "'65536' is not a port"),
        (&["abc"][..], "'abc' is not a positive whole number"),
        (&["0"][..], "must be greater than 0"),
        (&["1", "2"][..], "unexpected argument"),
        (&["-w", "--json"][..], "cannot be used with"),
        (&["--bogus"][..], "unexpected argument"),
    ] {
        assert_refused(TOOL, args, 2, what);
    }
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr, "tcppktlat: no process with PID 999999999\n");
    let done = run_tool(TOOL, &["-t", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr, "tcppktlat: no thread with TID 999999999\n");
}
