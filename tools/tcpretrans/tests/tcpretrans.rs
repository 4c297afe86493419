// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpretrans against retransmissions made on purpose: in a test thread's own network namespace (so no other
//! test's traffic is there), a client sends to a local server, the namespace's loopback is taken down for 1.5 s
//! while the client sends more, then brought back up: the kernel retransmits the unacknowledged data until it
//! gets through. Each test looks only at its own flow (addresses and ports), since all tests run at once.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;
use serde_json::Value;

fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Running {
    start_attached("tcpretrans", args, env, 1)
}

fn start(args: &[&str]) -> Running {
    start_with_env(args, &[])
}

/// Sets the loopback up or down through SIOCSIFFLAGS (`ip link set lo up|down`) in this thread's namespace.
fn loopback(up: bool) {
    // SAFETY: a throwaway socket for the ioctls, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    assert!(fd >= 0);
    let mut ifr = [0u8; 40];
    ifr[..2].copy_from_slice(b"lo");
    // SAFETY: struct ifreq is 40 bytes: the name, then the flags (short) at offset 16.
    unsafe {
        assert_eq!(libc::ioctl(fd, libc::SIOCGIFFLAGS, ifr.as_mut_ptr()), 0);
        if up {
            ifr[16] |= libc::IFF_UP as u8;
        } else {
            ifr[16] &= !(libc::IFF_UP as u8);
        }
        assert_eq!(libc::ioctl(fd, libc::SIOCSIFFLAGS, ifr.as_mut_ptr()), 0);
        libc::close(fd);
    }
}

/// A flow that retransmits: in a fresh network namespace, a client sends 1000 bytes to a server on `ip`, the
/// loopback goes down for 1.5 s while it sends 1000 more, then comes back; the server reads all 2000 bytes (so
/// every retransmission is over). Returns (client, server) addresses and the client thread's PID.
fn retransmitting_flow(ip: IpAddr) -> (SocketAddr, SocketAddr) {
    thread::spawn(move || {
        // SAFETY: unshare(2) of this thread's network namespace.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "{}", std::io::Error::last_os_error());
        loopback(true);
        // IPv6's ::1 comes with the loopback going up, maybe a moment later.
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind((ip, 0)) {
                Ok(l) => break l,
                Err(e) => assert!(Instant::now() < deadline, "bind {ip}: {e}"),
            }
            thread::sleep(Duration::from_millis(20));
        };
        let server = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(server).unwrap();
        client.set_nodelay(true).unwrap();
        let (mut accepted, _) = listener.accept().unwrap();
        client.write_all(&[b'a'; 1000]).unwrap();
        loopback(false);
        client.write_all(&[b'b'; 1000]).unwrap();
        thread::sleep(Duration::from_millis(1500));
        loopback(true);
        // All 2000 bytes arrive before the client closes, so every retransmit is of an ESTABLISHED socket.
        let mut got = [0u8; 2000];
        accepted.read_exact(&mut got).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        assert_eq!(accepted.read(&mut got).unwrap(), 0);
        (client.local_addr().unwrap(), server)
    })
    .join()
    .unwrap()
}

/// The JSON records of the flow from `client` to `server`.
fn of_flow(records: &[Value], client: SocketAddr, server: SocketAddr) -> Vec<&Value> {
    records
        .iter()
        .filter(|r| {
            r["laddr"] == client.ip().to_string()
                && r["lport"] == client.port()
                && r["raddr"] == server.ip().to_string()
                && r["rport"] == server.port()
        })
        .collect()
}

#[test]
fn retransmits_are_reported_with_their_flow_and_counted_by_c() {
    let text = start(&[]);
    let json = start(&["--json"]);
    let count = start(&["-c"]);
    let count_json = start(&["-c", "--json"]);
    let (client, server) = retransmitting_flow(V4);
    let (text, json, count, count_json) = (stop(text), stop(json), stop(count), stop(count_json));

    let records = json_lines(&json.stdout);
    let mine = of_flow(&records, client, server);
    assert!(!mine.is_empty(), "no retransmit of {client} -> {server}: {}", json.stdout);
    for r in &mine {
        assert_eq!(r["family"], "ipv4", "{r}");
        assert_eq!(r["state"], "ESTABLISHED", "{r}");
        assert_eq!(r["type"], "R", "{r}");
        assert!(r["pid"].is_u64() && r["time"].is_string(), "{r}");
    }

    // Text: BCC's header, and the same retransmits (all four tools saw the same tracepoint hits).
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines[0], "Tracing retransmits ... Hit Ctrl-C to end", "{}", text.stdout);
    assert_eq!(lines[1], "TIME     PID     IP LADDR:LPORT          T> RADDR:RPORT          STATE");
    let needle = format!("{:<20} R> {:<20} ESTABLISHED", client.to_string(), server.to_string());
    let rows = lines.iter().filter(|l| l.contains(&needle)).count();
    assert_eq!(rows, mine.len(), "{}\n{}", text.stdout, json.stdout);
    assert!(lines.iter().filter(|l| l.contains(&needle)).all(|l| l.split_whitespace().nth(2) == Some("4")));

    // -c: one row for the flow, with as many retransmits as were traced one by one.
    let row = format!(
        "{:<20} <-> {:<20} {:>10}",
        format!("[{}]#{}", client.ip(), client.port()),
        format!("[{}]#{}", server.ip(), server.port()),
        mine.len()
    );
    assert!(
        count.stdout.contains("LADDR:LPORT               RADDR:RPORT               RETRANSMITS\n"),
        "{}",
        count.stdout
    );
    assert_eq!(count.stdout.lines().filter(|l| *l == row).count(), 1, "{row:?} in\n{}", count.stdout);
    let flows = json_lines(&count_json.stdout);
    let flow = of_flow(&flows, client, server);
    assert_eq!(flow.len(), 1, "{}", count_json.stdout);
    assert_eq!(flow[0]["retransmits"], mine.len() as u64, "{}", count_json.stdout);
    assert_eq!(flow[0]["family"], "ipv4");
    for done in [text, json, count, count_json] {
        done.assert_no_programs_left();
    }
}

/// IPv6's loopback keeps delivering while down (no retransmit to make that way), so -6 is checked to leave out
/// an IPv4 flow that -4 sees.
#[test]
fn family_filters_and_sequence_numbers() {
    let v6 = start(&["--json", "-6"]);
    let v4 = start(&["--json", "-4"]);
    let seq = start(&["-s"]);
    let (client, server) = retransmitting_flow(V4);
    let (v6, v4, seq) = (stop(v6), stop(v4), stop(seq));
    let mine = of_flow(&json_lines(&v4.stdout), client, server).len();
    assert!(mine > 0, "no retransmit of {client} -> {server}: {}", v4.stdout);
    assert!(json_lines(&v4.stdout).iter().all(|r| r["family"] == "ipv4"), "{}", v4.stdout);
    assert!(of_flow(&json_lines(&v6.stdout), client, server).is_empty(), "-6 saw IPv4: {}", v6.stdout);
    assert!(json_lines(&v6.stdout).iter().all(|r| r["family"] == "ipv6"), "{}", v6.stdout);
    // -s: BCC's STATE and SEQ columns, IP 4, addresses as ADDR:PORT.
    assert!(seq.stdout.lines().nth(1).is_some_and(|h| h.ends_with("STATE        SEQ       ")), "{}", seq.stdout);
    let needle = format!(
        "4  {:<20} R> {:<20} ESTABLISHED  ",
        format!("{}:{}", client.ip(), client.port()),
        format!("{}:{}", server.ip(), server.port())
    );
    let rows: Vec<&str> = seq.stdout.lines().filter(|l| l.contains(&needle)).collect();
    assert_eq!(rows.len(), mine, "{}", seq.stdout);
    assert!(rows.iter().all(|l| l.split_whitespace().last().unwrap().parse::<u32>().is_ok()), "{}", seq.stdout);
    for done in [v6, v4, seq] {
        done.assert_no_programs_left();
    }
}

#[test]
fn raw_tp_and_tracepoint_fallbacks_report_the_same_retransmits() {
    for mech in ["raw_tp", "tracepoint"] {
        let run = start_with_env(&["--json", "-v"], &[("COREBPF_ATTACH", mech)]);
        let (client, server) = retransmitting_flow(V4);
        let done = stop(run);
        assert!(done.stderr.contains(&format!("attached with {mech}")), "{}", done.stderr);
        let records = json_lines(&done.stdout);
        let mine = of_flow(&records, client, server);
        assert!(!mine.is_empty(), "{mech}: no retransmit of {client} -> {server}: {}", done.stdout);
        assert!(mine.iter().all(|r| r["state"] == "ESTABLISHED" && r["family"] == "ipv4"), "{}", done.stdout);
        done.assert_no_programs_left();
    }
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, code, what) in [
        (&["-4", "-6"][..], 2, "cannot be used with"),
        (&["--bogus"][..], 2, "unexpected argument"),
        (&["-c", "5"][..], 2, "unexpected argument"),
        (&["-l"][..], 1, "no tail loss probe tracepoint"),
    ] {
        assert_refused("tcpretrans", args, code, what);
    }
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let run = start(&[]);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `tcpretrans | head -1`: the first line is read and the pipe closed; the tool ends without a retransmit.
    assert_ends_when_pipe_closes("tcpretrans", &[], "Tracing retransmits", || {});
}

/// `--prometheus` serves -c's counts: the flow's counter equals what `-c --json` counted of the same retransmits.
#[test]
fn prometheus_serves_the_counts_of_c() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let count_json = start(&["-c", "--json"]);
    // Its banner comes once it is attached.
    let (run, addr) = serving("tcpretrans", &[]);
    let (client, server) = retransmitting_flow(V4);
    let text = scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    let count_json = stop(count_json);
    let flows = json_lines(&count_json.stdout);
    let flow = of_flow(&flows, client, server);
    assert_eq!(flow.len(), 1, "{}", count_json.stdout);
    promtool_accepts(&text);
    let series = format!(
        "corebpf_tcpretrans_retransmits_total{{laddr=\"{}\",lport=\"{}\",raddr=\"{}\",rport=\"{}\"}}",
        client.ip(),
        client.port(),
        server.ip(),
        server.port()
    );
    assert_eq!(sample(&text, &series), flow[0]["retransmits"].as_f64(), "{series} in\n{text}");
}
