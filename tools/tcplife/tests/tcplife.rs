// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcplife against real loopback TCP sessions with byte counts known in advance: made by this test process with
//! std::net (client and server, so both ends carry this process's PID) and by bash's /dev/tcp (a second PID), and
//! checked against libbpf-tools' tcplife run over the same workload. Tests run concurrently in one process, so
//! each looks only at the sessions on its own ports.
//!
//! JSON carries payload bytes exactly (what each end wrote and read), for FIN and RST closes. The text's KB
//! columns are the kernel's counters as BCC shows them, which count SYN and FIN as one byte each (they use
//! sequence space): the client's bytes_acked includes its SYN and FIN, the server's its FIN, and each side's
//! bytes_received the peer's FIN.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::anchor::Anchor;
use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;
use serde_json::Value;

const HEADER: &str = "RX_KB";

/// One finished session and what each end must report.
#[derive(Debug, Clone)]
struct Conn {
    ip: IpAddr,
    client_port: u16,
    server_port: u16,
    /// Payload bytes client -> server and server -> client.
    c2s: u64,
    s2c: u64,
}

/// What one end of a session should look like: ports, payload bytes (JSON) and the kernel's counters (text KB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct End {
    ip: IpAddr,
    lport: u16,
    rport: u16,
    tx: u64,
    rx: u64,
    /// bytes_acked and bytes_received after a FIN close: BCC's TX_KB and RX_KB are these / 1024.
    ktx: u64,
    krx: u64,
}

impl Conn {
    fn client(&self) -> End {
        let (tx, rx) = (self.c2s, self.s2c);
        End { ip: self.ip, lport: self.client_port, rport: self.server_port, tx, rx, ktx: tx + 2, krx: rx + 1 }
    }
    fn server(&self) -> End {
        let (tx, rx) = (self.s2c, self.c2s);
        End { ip: self.ip, lport: self.server_port, rport: self.client_port, tx, rx, ktx: tx + 1, krx: rx + 1 }
    }
}

/// Makes one session: the client sends `c2s` bytes, the server answers with `s2c`, the client closes first and
/// the server closes after reading its FIN. Returns once both ends are closed.
fn session(ip: IpAddr, c2s: usize, s2c: usize) -> Conn {
    session_on(TcpListener::bind((ip, 0)).unwrap(), c2s, s2c)
}

/// Like `session`, to a listener made beforehand (for filters that name its port).
fn session_on(listener: TcpListener, c2s: usize, s2c: usize) -> Conn {
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; c2s];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&vec![b's'; s2c]).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    });
    let mut c = TcpStream::connect(addr).unwrap();
    let client_port = c.local_addr().unwrap().port();
    c.write_all(&vec![b'c'; c2s]).unwrap();
    let mut buf = vec![0u8; s2c];
    c.read_exact(&mut buf).unwrap();
    drop(c);
    server.join().unwrap();
    Conn { ip: addr.ip(), client_port, server_port: addr.port(), c2s: c2s as u64, s2c: s2c as u64 }
}

/// Starts tcplife with `args` and waits until its program is attached.
fn start(args: &[&str]) -> Running {
    start_with_env(args, &[])
}

fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Running {
    start_attached("tcplife", args, env, 1)
}

/// The JSON needle of one end's record.
fn needle(end: &End) -> String {
    format!("\"lport\":{},\"raddr\":\"{}\",\"rport\":{},", end.lport, end.ip, end.rport)
}

/// The JSON records of `done` for `end` (matched on addresses and ports).
fn records_for<'a>(records: &'a [Value], end: &End) -> Vec<&'a Value> {
    let ip = end.ip.to_string();
    records
        .iter()
        .filter(|r| {
            r["laddr"] == ip.as_str()
                && r["raddr"] == ip.as_str()
                && r["lport"] == end.lport as u64
                && r["rport"] == end.rport as u64
        })
        .collect()
}

/// Asserts that `records` hold exactly one record for `end`, with its exact bytes, PID and family.
fn assert_reported(records: &[Value], end: &End, pid: u32, comm: &str) {
    let found = records_for(records, end);
    assert_eq!(found.len(), 1, "want one record for {end:?}, got {found:?}");
    let r = found[0];
    assert_eq!(r["tx_bytes"], end.tx, "tx of {end:?}: {r}");
    assert_eq!(r["rx_bytes"], end.rx, "rx of {end:?}: {r}");
    assert_eq!(r["pid"], pid as u64, "{r}");
    assert_eq!(r["comm"], comm, "{r}");
    assert_eq!(r["family"], if end.ip.is_ipv4() { "ipv4" } else { "ipv6" }, "{r}");
    let ns = r["duration_ns"].as_u64().unwrap();
    assert!((r["duration_ms"].as_f64().unwrap() - ns as f64 / 1e6).abs() < 1e-9, "{r}");
}

/// Text columns from the right (COMM may hold spaces): PID, LADDR, LPORT, RADDR, RPORT, TX_KB, RX_KB, MS.
fn text_row<'a>(line: &'a str, end: &End) -> Option<Vec<&'a str>> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 9 {
        return None;
    }
    let t = &f[f.len() - 7..];
    let ip = end.ip.to_string();
    (t[0] == ip && t[1] == end.lport.to_string() && t[2] == ip && t[3] == end.rport.to_string()).then(|| {
        let mut row = vec![f[0]];
        row.extend_from_slice(t);
        row
    })
}

#[test]
fn every_session_from_both_ends_with_exact_bytes() {
    let pid = std::process::id();
    let comm = thread_comm();
    let mut json = start(&["--json"]);
    let text = start(&[]);
    let wide = start(&["-w"]);
    let sizes = [(1, 1), (1023, 70_001), (5000, 3000), (250_000, 17), (2048, 1024 * 1024 + 5)];
    let mut conns = Vec::new();
    for ip in [V4, V6] {
        for (c2s, s2c) in sizes {
            conns.push(session(ip, c2s, s2c));
        }
    }
    let ends: Vec<End> = conns.iter().flat_map(|c| [c.client(), c.server()]).collect();
    for end in &ends {
        json.wait_for_line(&needle(end), Duration::from_secs(20));
    }
    let (json, text, wide) = (stop(json), stop(text), stop(wide));
    let records = json_lines(&json.stdout);
    for end in &ends {
        assert_reported(&records, end, pid, &comm);
    }
    assert!(text.stdout.starts_with("PID   COMM       LADDR           LPORT RADDR           RPORT TX_KB RX_KB MS\n"));
    assert!(wide.stdout.starts_with(
        "PID   COMM             IP LADDR                      LPORT RADDR                      RPORT  TX_KB  RX_KB MS\n"
    ));
    for (done, wide) in [(&text, false), (&wide, true)] {
        for end in &ends {
            let rows: Vec<Vec<&str>> = done.stdout.lines().filter_map(|l| text_row(l, end)).collect();
            assert_eq!(rows.len(), 1, "want one text row for {end:?}:\n{}", done.stdout);
            let row = &rows[0];
            assert_eq!(row[0], pid.to_string());
            assert_eq!(row[5], (end.ktx / 1024).to_string(), "TX_KB of {end:?}");
            assert_eq!(row[6], (end.krx / 1024).to_string(), "RX_KB of {end:?}");
            let ms: f64 = row[7].parse().unwrap();
            assert!(row[7].split_once('.').is_some_and(|(_, d)| d.len() == 2) && ms >= 0.0, "MS {}", row[7]);
            if wide {
                let line = done.stdout.lines().find(|l| text_row(l, end).is_some()).unwrap();
                let ipcol = line.split_whitespace().rev().nth(7).unwrap();
                assert_eq!(ipcol, if end.ip.is_ipv4() { "4" } else { "6" }, "{line}");
            }
        }
    }
    json.assert_no_programs_left();
}

/// A bash process that connects to `port` on 127.0.0.1 when told to, sends "hello" and closes.
struct BashClient {
    child: std::process::Child,
}

impl BashClient {
    fn spawn() -> BashClient {
        Self::spawn_with("printf hello >&3; exec 3>&-")
    }

    /// Bash that, once told a port, connects to it on fd 3 and then runs `script`.
    fn spawn_with(script: &str) -> BashClient {
        let child = Command::new("bash")
            .args(["-c", &format!("read port; exec 3<>/dev/tcp/127.0.0.1/$port; {script}; read done")])
            .stdin(Stdio::piped())
            .spawn()
            .expect("bash");
        BashClient { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Has bash connect to a fresh listener here; returns the session once the server end has closed.
    fn session(&mut self) -> Conn {
        let listener = TcpListener::bind((V4, 0)).unwrap();
        let server_port = listener.local_addr().unwrap().port();
        writeln!(self.child.stdin.as_mut().unwrap(), "{server_port}").unwrap();
        let (mut s, peer) = listener.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"hello");
        drop(s);
        Conn { ip: V4, client_port: peer.port(), server_port, c2s: 5, s2c: 0 }
    }
}

impl Drop for BashClient {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
fn pid_port_and_family_filters_keep_only_their_sessions() {
    let pid = std::process::id();
    let comm = thread_comm();
    let mut bash = BashClient::spawn();
    // Ports are known only once the listeners exist: make them first, connect after the tools are attached.
    let l4 = TcpListener::bind((V4, 0)).unwrap();
    let l6 = TcpListener::bind((V6, 0)).unwrap();
    let (p4, p6) = (l4.local_addr().unwrap().port(), l6.local_addr().unwrap().port());
    let bash_pid = bash.pid().to_string();
    let (p4s, p6s, both) = (p4.to_string(), p6.to_string(), format!("{p4},{p6}"));
    let mut all = start(&["--json"]);
    let filtered: Vec<(&str, Running)> = vec![
        ("-p bash", start(&["--json", "-p", &bash_pid])),
        ("-L p4", start(&["--json", "-L", &p4s])),
        ("-L p4,p6", start(&["--json", "-L", &both])),
        ("-D p6", start(&["--json", "-D", &p6s])),
        ("-4", start(&["--json", "-4"])),
        ("-6", start(&["--json", "-6"])),
    ];
    let c4 = session_on(l4, 3000, 4000);
    let c6 = session_on(l6, 6000, 7000);
    let cb = bash.session();
    let ours = [c4.client(), c4.server(), c6.client(), c6.server(), cb.client(), cb.server()];
    for end in &ours {
        all.wait_for_line(&needle(end), Duration::from_secs(20));
    }
    let all = json_lines(&stop(all).stdout);
    assert_reported(&all, &c4.client(), pid, &comm);
    assert_reported(&all, &cb.client(), bash.pid(), "bash");
    assert_eq!(records_for(&all, &cb.server()).len(), 1);

    for (name, run) in filtered {
        let records = json_lines(&stop(run).stdout);
        let kept: Vec<End> = ours.iter().copied().filter(|e| !records_for(&records, e).is_empty()).collect();
        let want: Vec<End> = match name {
            "-p bash" => vec![cb.client()],
            "-L p4" => vec![c4.server()],
            "-L p4,p6" => vec![c4.server(), c6.server()],
            "-D p6" => vec![c6.client()],
            "-4" => vec![c4.client(), c4.server(), cb.client(), cb.server()],
            "-6" => vec![c6.client(), c6.server()],
            _ => unreachable!(),
        };
        assert_eq!(kept, want, "{name} kept the wrong sessions");
        match name {
            "-p bash" => assert!(records.iter().all(|r| r["pid"] == bash.pid() as u64), "{name}: {records:?}"),
            "-4" => assert!(records.iter().all(|r| r["family"] == "ipv4"), "{name}: {records:?}"),
            "-6" => assert!(records.iter().all(|r| r["family"] == "ipv6"), "{name}: {records:?}"),
            _ => {}
        }
    }
}

/// `n` short sessions to one listener, each client sending one byte; returns them in order.
fn burst(n: usize) -> Vec<Conn> {
    let listener = TcpListener::bind((V4, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    (0..n)
        .map(|_| {
            let mut c = TcpStream::connect((V4, port)).unwrap();
            let (mut s, _) = listener.accept().unwrap();
            let client_port = c.local_addr().unwrap().port();
            c.write_all(b"x").unwrap();
            drop(c);
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            drop(s);
            Conn { ip: V4, client_port, server_port: port, c2s: 1, s2c: 0 }
        })
        .collect()
}

/// Sessions lost as tcplife reported them on stderr.
fn lost_reported(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("tcplife: lost ")?.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_burst_of_short_sessions_is_reported_in_full() {
    const N: usize = 2500;
    let mut run = start(&["--json"]);
    let conns = burst(N);
    let last = conns.last().unwrap().server();
    run.wait_for_line(&needle(&last), Duration::from_secs(60));
    let done = stop(run);
    let records = json_lines(&done.stdout);
    let port = conns[0].server_port;
    let mut by_ends: HashMap<(u16, u16), &Value> = HashMap::new();
    for r in records.iter().filter(|r| r["laddr"] == "127.0.0.1" && (r["lport"] == port || r["rport"] == port)) {
        by_ends.insert((r["lport"].as_u64().unwrap() as u16, r["rport"].as_u64().unwrap() as u16), r);
    }
    let mut missing = 0usize;
    for end in conns.iter().flat_map(|c| [c.client(), c.server()]) {
        match by_ends.get(&(end.lport, end.rport)) {
            Some(r) => {
                assert_eq!(r["tx_bytes"], end.tx, "{r}");
                assert_eq!(r["rx_bytes"], end.rx, "{r}");
            }
            None => missing += 1,
        }
    }
    let lost = lost_reported(&done.stderr);
    eprintln!("burst: {} of {} sessions reported, {lost} reported lost", 2 * N - missing, 2 * N);
    assert!(missing as u64 <= lost, "{missing} of {} sessions missing, {lost} reported lost:\n{}", 2 * N, done.stderr);
    assert!(!done.stderr.contains("socket map full"), "{}", done.stderr);
}

#[test]
fn csv_parses_with_the_header_columns() {
    let pid = std::process::id();
    let mut run = start(&["-s", "-T", "-t"]);
    run.wait_for_line(HEADER, Duration::from_secs(20));
    let conns = [session(V4, 1500, 2500), session(V6, 9000, 100)];
    let text_needle = |e: &End| format!(",{},{},{},{},", e.lport, e.ip, e.rport, e.ktx / 1024);
    for c in &conns {
        run.wait_for_line(&text_needle(&c.server()), Duration::from_secs(20));
    }
    let done = stop(run);
    let mut lines = done.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header,
        ["TIME", "TIME(s)", "PID", "COMM", "IP", "LADDR", "LPORT", "RADDR", "RPORT", "TX_KB", "RX_KB", "MS"]
    );
    let rows: Vec<HashMap<&str, &str>> = lines
        .map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            assert_eq!(fields.len(), header.len(), "{l}");
            header.iter().copied().zip(fields).collect()
        })
        .collect();
    let mut last_time_s = -1.0;
    for row in &rows {
        let t: f64 = row["TIME(s)"].parse().unwrap();
        assert!(t >= last_time_s, "TIME(s) went back: {row:?}");
        last_time_s = t;
        assert_eq!(row["TIME"].len(), 8, "{row:?}");
    }
    assert_eq!(rows[0]["TIME(s)"], "0.000000");
    for end in conns.iter().flat_map(|c| [c.client(), c.server()]) {
        let row = rows
            .iter()
            .find(|r| r["LPORT"] == end.lport.to_string() && r["RPORT"] == end.rport.to_string())
            .unwrap_or_else(|| panic!("no row for {end:?}:\n{}", done.stdout));
        assert_eq!(row["PID"], pid.to_string());
        assert_eq!(row["IP"], if end.ip.is_ipv4() { "4" } else { "6" });
        assert_eq!(row["LADDR"], end.ip.to_string());
        assert_eq!(row["RADDR"], end.ip.to_string());
        assert_eq!(row["TX_KB"], (end.ktx / 1024).to_string());
        assert_eq!(row["RX_KB"], (end.krx / 1024).to_string());
        assert!(row["MS"].parse::<f64>().is_ok(), "{row:?}");
    }
}

#[test]
fn raw_tp_and_tracepoint_fallbacks_report_the_same_bytes() {
    let pid = std::process::id();
    let comm = thread_comm();
    for mech in ["raw_tp", "tracepoint"] {
        let mut run = start_with_env(&["--json", "-v"], &[("COREBPF_ATTACH", mech)]);
        let conns = [session(V4, 4321, 1234), session(V6, 111, 99_999)];
        let ends: Vec<End> = conns.iter().flat_map(|c| [c.client(), c.server()]).collect();
        for end in &ends {
            run.wait_for_line(&needle(end), Duration::from_secs(20));
        }
        let done = stop(run);
        assert!(done.stderr.contains(&format!("attached with {mech}")), "{}", done.stderr);
        let records = json_lines(&done.stdout);
        for end in &ends {
            assert_reported(&records, end, pid, &comm);
        }
        done.assert_no_programs_left();
    }
}

#[test]
fn every_session_libbpf_tools_reports_is_reported_alike() {
    // Ours attaches first and stops last, so its window holds the anchor's.
    let mut ours = start(&["--json"]);
    // libbpf-tools' tcplife prints its header once attached.
    let mut anchor = Anchor::start("tcplife", &["-w"], "LADDR");
    let mut conns = Vec::new();
    for (i, ip) in [V4, V6, V4, V6, V4, V6].into_iter().enumerate() {
        conns.push(session(ip, 1000 * i + 7, 200_000 / (i + 1)));
    }
    conns.extend(burst(300));
    let last = conns.last().unwrap().server();
    anchor
        .wait_for(|l| l.split_whitespace().any(|f| f == last.lport.to_string()) && l.contains(&last.rport.to_string()));
    let anchor_out = anchor.finish();
    let anchor_lines: Vec<&str> = anchor_out.lines().collect();
    ours.wait_for_line(&needle(&last), Duration::from_secs(20));
    let done = stop(ours);
    let records = json_lines(&done.stdout);
    // The anchor shows the kernel's counters: our payload plus the SYN and FIN they count (0 to 2 bytes).
    let kb = |b: &Value, extra: u64| format!("{:.2}", (b.as_u64().unwrap() + extra) as f64 / 1024.0);

    let mut checked = 0;
    let mut missing = Vec::new();
    for line in anchor_lines.iter().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(f.len() >= 9, "unexpected anchor line: {line}");
        let t = &f[f.len() - 7..];
        let (laddr, lport, raddr, rport, tx, rx) = (t[0], t[1], t[2], t[3], t[4], t[5]);
        let found = records.iter().any(|r| {
            r["laddr"] == laddr
                && r["lport"].as_u64() == lport.parse().ok()
                && r["raddr"] == raddr
                && r["rport"].as_u64() == rport.parse().ok()
                && (0..=2).any(|d| kb(&r["tx_bytes"], d) == tx)
                && (0..=1).any(|d| kb(&r["rx_bytes"], d) == rx)
        });
        if !found {
            missing.push(*line);
        }
        checked += 1;
    }
    // A guard against an empty comparison: the anchor saw at least our six sessions with data, both ends.
    assert!(checked >= 12, "the anchor reported only {checked} sessions:\n{}", anchor_lines.join("\n"));
    let lost = lost_reported(&done.stderr);
    eprintln!("anchor: {checked} sessions reported by libbpf-tools, {} not by us, {lost} lost", missing.len());
    assert!(missing.len() as u64 <= lost, "sessions the anchor reported and we did not ({lost} lost): {missing:#?}");
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let run = start(&[]);
    session(V4, 10, 10);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `tcplife | head -1`: the header is read, the pipe closes, the next session ends the tool quietly.
    assert_ends_when_pipe_closes("tcplife", &[], "PID ", || {
        session(V4, 1, 1);
    });
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what) in [
        (&["-L", "80,x"][..], "'x' is not a port"),
        (&["-D", "0"][..], "'0' is not a port"),
        (&["-L", "70000"][..], "'70000' is not a port"),
        (&["-p", "abc"][..], "'abc' is not a PID"),
        (&["-4", "-6"][..], "cannot be used with"),
        (&["--json", "-s"][..], "cannot be used with"),
        (&["--bogus"][..], "unexpected argument"),
    ] {
        assert_refused("tcplife", args, 2, what);
    }
    // An unknown PID is a runtime fact: one line, exit 1, as in every tool.
    let done = run_tool("tcplife", &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr, "tcplife: no process with PID 999999999\n");
    let many: Vec<String> = (1..=1025).map(|p| p.to_string()).collect();
    let done = run_tool("tcplife", &["-L", &many.join(",")]);
    assert_eq!(done.status.code(), Some(1));
    assert_eq!(done.stderr.trim(), "tcplife: -L lists more than 1024 ports");
}

#[test]
fn sessions_lost_while_the_reader_is_stopped_are_counted() {
    // The ring buffer (1 MiB) holds about 8700 records: stop the reader and close more sessions than that.
    const N: usize = 6000;
    let mut run = start(&["--json"]);
    run.signal(libc::SIGSTOP);
    let conns = burst(N);
    run.signal(libc::SIGCONT);
    // A sentinel session closed while the reader still drains the full ring buffer is lost too: make one every
    // half second until one is reported.
    let mut sentinels = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        sentinels.push(needle(&session(V4, 1, 1).server()));
        if sentinels.iter().any(|n| run.has_line_within(n, Duration::from_millis(500))) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no sentinel session reported within 60 s");
    }
    let done = stop(run);
    let records = json_lines(&done.stdout);
    let port = conns[0].server_port;
    let reported = records.iter().filter(|r| r["lport"] == port || r["rport"] == port).count();
    let missing = (2 * N - reported) as u64;
    let lost = lost_reported(&done.stderr);
    eprintln!("stopped reader: {reported} of {} sessions reported, {lost} reported lost", 2 * N);
    assert!(missing > 0, "the ring buffer held every session; the test needs more");
    assert!(missing <= lost, "{missing} sessions missing but only {lost} reported lost:\n{}", done.stderr);
    // The records the ring buffer had no room for are reported once, at the end: on stderr, and as the last JSON
    // line.
    let ring: Vec<&str> = done.stderr.lines().filter(|l| l.ends_with(" sessions (ring buffer full)")).collect();
    assert_eq!(ring.len(), 1, "{}", done.stderr);
    let last = records.last().unwrap();
    assert_eq!(last["what"], "sessions", "{last}");
    assert_eq!(last["why"], "ring buffer full", "{last}");
    assert_eq!(ring[0], format!("tcplife: lost {} sessions (ring buffer full)", last["lost"]), "{last}");
}

#[test]
fn a_server_that_closes_first_keeps_its_own_pid() {
    // The server (this process) closes first; its socket reaches TCP_CLOSE when bash's FIN arrives, which on
    // loopback is processed while bash is the running task. BCC would name bash; the owner is this process.
    let pid = std::process::id();
    let comm = thread_comm();
    let mut bash = BashClient::spawn_with("read -r line <&3; exec 3>&-");
    let mut run = start(&["--json", "-4"]);
    let listener = TcpListener::bind((V4, 0)).unwrap();
    let server_port = listener.local_addr().unwrap().port();
    writeln!(bash.child.stdin.as_mut().unwrap(), "{server_port}").unwrap();
    let (mut s, peer) = listener.accept().unwrap();
    s.write_all(b"bye\n").unwrap();
    drop(s);
    let conn = Conn { ip: V4, client_port: peer.port(), server_port, c2s: 0, s2c: 4 };
    for end in [conn.client(), conn.server()] {
        run.wait_for_line(&needle(&end), Duration::from_secs(20));
    }
    let records = json_lines(&stop(run).stdout);
    // The client did not close first here: its FIN was acked, the server's was received.
    assert_reported(&records, &conn.server(), pid, &comm);
    assert_reported(&records, &conn.client(), bash.pid(), "bash");
}

/// `tcplife | head -1` with no session after the reader has gone (`-p` of an idle process): stdout is watched,
/// so the tool ends at once instead of at its next write.
#[test]
fn closed_pipe_ends_without_waiting_for_a_session() {
    let idle = KillOnDrop(Command::new("sleep").arg("600").spawn().unwrap());
    assert_ends_when_pipe_closes("tcplife", &["-p", &idle.0.id().to_string()], "PID ", || {});
}

/// How a session in `session_closed_by` ends.
#[derive(Debug, Clone, Copy)]
enum Close {
    /// The client aborts (SO_LINGER 0: an RST, no FIN).
    ResetByClient,
    /// The server aborts.
    ResetByServer,
    /// The client sends its FIN (shutdown), the server reads it and then aborts.
    FinThenResetByServer,
}

/// Packets this end has sent and the peer not yet acked (tcp_info's tcpi_unacked, at byte offset 24).
fn unacked(s: &TcpStream) -> u32 {
    use std::os::fd::AsRawFd;
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: getsockopt(2) into a buffer of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len)
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    u32::from_ne_bytes(info[24..28].try_into().unwrap())
}

/// Waits until everything `s` sent (FIN included) is acked, so its bytes_acked holds all of it before a reset.
fn wait_acked(s: &TcpStream) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while unacked(s) != 0 {
        assert!(Instant::now() < deadline, "data never acked");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Closes `s` with an RST (SO_LINGER on with a zero timeout).
fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt(2) with a struct linger of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    drop(s);
}

/// One session of `c2s` bytes one way and `s2c` the other, ended by a reset as `how` says. Both ends wait until
/// their data is acked before the reset, so the payload each end reports is known.
fn session_closed_by(ip: IpAddr, c2s: usize, s2c: usize, how: Close) -> Conn {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let (client_done, server_wait) = mpsc::channel::<()>();
    let (server_done, client_wait) = mpsc::channel::<()>();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; c2s];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&vec![b's'; s2c]).unwrap();
        match how {
            Close::ResetByClient => {
                wait_acked(&s);
                server_done.send(()).unwrap();
                let _ = s.read_to_end(&mut Vec::new()); // ECONNRESET
            }
            Close::ResetByServer => {
                wait_acked(&s);
                server_wait.recv().unwrap();
                reset(s);
            }
            Close::FinThenResetByServer => {
                let mut rest = Vec::new();
                s.read_to_end(&mut rest).unwrap();
                assert!(rest.is_empty());
                wait_acked(&s);
                server_wait.recv().unwrap();
                reset(s);
            }
        }
    });
    let mut c = TcpStream::connect(addr).unwrap();
    let client_port = c.local_addr().unwrap().port();
    c.write_all(&vec![b'c'; c2s]).unwrap();
    let mut buf = vec![0u8; s2c];
    c.read_exact(&mut buf).unwrap();
    match how {
        Close::ResetByClient => {
            wait_acked(&c);
            client_wait.recv().unwrap();
            reset(c);
        }
        Close::ResetByServer => {
            wait_acked(&c);
            client_done.send(()).unwrap();
            let _ = c.read_to_end(&mut Vec::new());
        }
        Close::FinThenResetByServer => {
            c.shutdown(std::net::Shutdown::Write).unwrap();
            wait_acked(&c);
            client_done.send(()).unwrap();
            let _ = c.read_to_end(&mut Vec::new());
        }
    }
    server.join().unwrap();
    Conn { ip, client_port, server_port: addr.port(), c2s: c2s as u64, s2c: s2c as u64 }
}

#[test]
fn sessions_ended_by_a_reset_report_exact_payload_at_both_ends() {
    let pid = std::process::id();
    let comm = thread_comm();
    let mut run = start(&["--json"]);
    let mut conns = Vec::new();
    for ip in [V4, V6] {
        for (i, how) in
            [Close::ResetByClient, Close::ResetByServer, Close::FinThenResetByServer].into_iter().enumerate()
        {
            conns.push(session_closed_by(ip, 4096 + i, 8192 + 3 * i, how));
            conns.push(session_closed_by(ip, 1, 100_000 + i, how));
        }
    }
    let ends: Vec<End> = conns.iter().flat_map(|c| [c.client(), c.server()]).collect();
    for end in &ends {
        run.wait_for_line(&needle(end), Duration::from_secs(20));
    }
    let done = stop(run);
    let records = json_lines(&done.stdout);
    for end in &ends {
        assert_reported(&records, end, pid, &comm);
    }
}

/// `--prometheus`: both ends of sessions of known sizes, on IPv4 and IPv6, land in their service's histograms
/// (the listener's port; `server` for the accepted end, `client` for the connecting one) with exact counts and
/// byte sums, and each single session in the bucket of its size.
#[test]
fn prometheus_histograms_count_both_ends_of_each_service() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let (run, addr) = serving("tcplife", &[]);
    let v4 = [session(V4, 3000, 4000), session_on(TcpListener::bind((V4, 0)).unwrap(), 1, 100_000)];
    let v6 = session(V6, 6000, 7000);
    let series = |name: &str, c: &Conn, role: &str, family: &str| {
        format!("corebpf_tcplife_session_{name}{{port=\"{}\",role=\"{role}\",family=\"{family}\"}}", c.server_port)
    };
    // Both ends of every session are closed in user space already; the kernel's last state changes may lag.
    let expected = [(&v4[0], "ipv4"), (&v4[1], "ipv4"), (&v6, "ipv6")];
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = scrape(&addr);
        let counted = |c: &Conn, f: &str, role: &str| sample(&text, &series("duration_seconds_count", c, role, f));
        let all =
            expected.iter().all(|(c, f)| counted(c, f, "server") == Some(1.0) && counted(c, f, "client") == Some(1.0));
        if all || Instant::now() > deadline {
            break text;
        }
        thread::sleep(Duration::from_millis(200));
    };
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    promtool_accepts(&text);
    for (c, family) in expected {
        for (role, received, sent) in [("server", c.c2s, c.s2c), ("client", c.s2c, c.c2s)] {
            let get = |name: &str| sample(&text, &series(name, c, role, family));
            assert_eq!(get("duration_seconds_count"), Some(1.0), "{role} of {c:?}\n{text}");
            assert_eq!(get("received_bytes_sum"), Some(received as f64), "{role} of {c:?}\n{text}");
            assert_eq!(get("sent_bytes_sum"), Some(sent as f64), "{role} of {c:?}\n{text}");
            // The bucket of the session's size: the first power of two above it holds it, the one below not.
            let bucket = |name: &str, le: u64| {
                let s = series(name, c, role, family);
                let (head, labels) = s.split_once('{').unwrap();
                sample(&text, &format!("{head}_bucket{{le=\"{le}.0\",{labels}"))
            };
            let above = (received + 1).next_power_of_two();
            assert_eq!(bucket("received_bytes", above), Some(1.0), "{role} of {c:?}: le={above}\n{text}");
            if above > 2 {
                assert_eq!(bucket("received_bytes", above / 2), Some(0.0), "{role} of {c:?}: le={}\n{text}", above / 2);
            }
        }
    }
}
