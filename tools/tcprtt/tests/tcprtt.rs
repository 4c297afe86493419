// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcprtt against loopback connections on ports of its own, whose segments are known.
//!
//! The ground truth: the tool samples once per segment an ESTABLISHED socket receives (tcp_rcv_established(), or
//! the tcp:tcp_probe tracepoint at its start). In each test, one end only writes (N one-byte writes, TCP_NODELAY)
//! and the other only receives, and reads nothing while the tool runs, so nothing is held in the socket's
//! backlog, where the kernel could merge segments. The receiving socket then gets exactly the data segments the
//! writer sent, which the writer's TCP_INFO counts (tcpi_data_segs_out: small writes made while the congestion
//! window is full share a segment, and a tail loss probe sends one again); the writer gets only ACKs, and the
//! connection is closed only after the tool has stopped, so no FIN is counted. Filters select the receiving socket by its
//! local port (-p), remote port (-P), addresses (-a, -A) and family (-4, -6); the other end and every other
//! connection of the machine must not be counted. Debian's libbpf-tools tcprtt needs kprobes or fentry on
//! tcp_rcv_established and cannot load here: there is no anchor in these tests.

use std::io::Write;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};

use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "tcprtt";

/// A connection: (the connecting end, the accepted end).
struct Pair {
    client: TcpStream,
    server: TcpStream,
}

/// A listener on `ip` (any free port) and its port.
fn listen(ip: IpAddr) -> (TcpListener, u16) {
    listener(ip)
}

/// Connects to `l` from `from` (a local address to bind first, or any) and accepts.
fn connect(l: &TcpListener, from: Option<IpAddr>) -> Pair {
    let to = l.local_addr().unwrap();
    let client = match from {
        None => TcpStream::connect(to).unwrap(),
        Some(ip) => connect_from(ip, to),
    };
    let (server, _) = l.accept().unwrap();
    Pair { client, server }
}

/// A TCP connect to `to` from local address `ip` (std cannot bind before connecting).
fn connect_from(ip: IpAddr, to: SocketAddr) -> TcpStream {
    let (IpAddr::V4(ip), SocketAddr::V4(to)) = (ip, to) else { panic!("IPv4 only") };
    let sin = |a: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.octets()) },
        sin_zero: [0; 8],
    };
    let len = size_of::<libc::sockaddr_in>() as u32;
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let local = sin(ip, 0);
        assert_eq!(libc::bind(fd, &local as *const _ as *const libc::sockaddr, len), 0, "bind {ip}");
        let remote = sin(*to.ip(), to.port());
        assert_eq!(libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len), 0, "connect {to}");
        TcpStream::from_raw_fd(fd)
    }
}

/// Writes `n` one-byte segments on `s` (no Nagle, so each write is a segment), then waits until the peer has
/// acknowledged them all: from then on nothing of them can be sent again.
fn write_segments(s: &mut TcpStream, n: u32) {
    s.set_nodelay(true).unwrap();
    for _ in 0..n {
        s.write_all(b"x").unwrap();
    }
    let deadline = std::time::Instant::now() + WAIT;
    while tcp_info(s).tcpi_unacked > 0 {
        assert!(std::time::Instant::now() < deadline, "segments still unacknowledged after 20 s");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn tcp_info(s: &TcpStream) -> libc::tcp_info {
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as u32;
    let rc = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, &mut info as *mut _ as *mut _, &mut len)
    };
    assert_eq!(rc, 0);
    info
}

/// Segments the receiving end of a one-way flow has got (once [`write_segments`] returned): every segment with
/// data the writer sent, retransmissions included (TCP_INFO's tcpi_data_segs_out). It is not the number of writes:
/// writes made while the congestion window is full wait in one segment, and a tail loss probe sends one again.
fn received(writer: &TcpStream, writes: u32) -> u64 {
    let sent = u64::from(tcp_info(writer).tcpi_data_segs_out);
    assert!((1..=2 * u64::from(writes)).contains(&sent), "{writes} writes, {sent} data segments");
    sent
}

/// Runs the tool with `args` while `work` makes traffic; returns what it printed and work's expected counts.
fn traced<T>(args: &[&str], work: impl FnOnce() -> T) -> (Finished, T) {
    traced_with(&[], args, work)
}

fn traced_with<T>(env: &[(&str, &str)], args: &[&str], work: impl FnOnce() -> T) -> (Finished, T) {
    let run = start_attached(TOOL, args, env, 1);
    let expected = work();
    (stop(run), expected)
}

/// The sections of text output: (name after `=`, total count).
fn sections(stdout: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for line in stdout.lines() {
        if let Some((_, name)) = line.split_once(" = ") {
            out.push((name.to_string(), 0));
        } else if let Some(last) = out.last_mut() {
            last.1 += hist_rows(line).iter().map(|r| r.2).sum::<u64>();
        }
    }
    out
}

/// One flow to the listener's port, N writes from the client: -p (local port) counts the server's segments.
#[test]
fn lport_counts_every_segment_the_listener_side_receives() {
    let (l, port) = listen(V4);
    let p = port.to_string();
    let mut pair = connect(&l, None);
    let (done, expected) = traced(&["-p", &p], || {
        write_segments(&mut pair.client, 40);
        received(&pair.client, 40)
    });
    assert_eq!(sections(&done.stdout), [("*******".to_string(), expected)], "{}", done.stdout);
    assert!(done.stdout.starts_with("Tracing TCP RTT... Hit Ctrl-C to end.\n"), "{}", done.stdout);
    assert!(done.stdout.contains("\nAll Addresses = *******\n     usecs  "), "{}", done.stdout);
    done.assert_no_programs_left();
    drop(pair);
}

/// Each attach mechanism this kernel has counts the same segments (the kernel matrix runs this test with fentry and
/// kprobe on tcp_rcv_established).
#[test]
fn every_mechanism_counts_the_same() {
    let (l, port) = listen(V4);
    let p = port.to_string();
    for mech in ["tp_btf", "raw_tp"] {
        let mut pair = connect(&l, None);
        let (done, expected) = traced_with(&[("COREBPF_ATTACH", mech)], &["-p", &p, "-v"], || {
            write_segments(&mut pair.client, 20);
            received(&pair.client, 20)
        });
        assert!(done.stderr.contains(&format!("attached with {mech}")), "{}", done.stderr);
        assert_eq!(hist_total(&done.stdout), expected, "{mech}: {}", done.stdout);
    }
}

/// The server writes: -P (remote port) counts the client's segments, and not the server's.
#[test]
fn rport_counts_the_connecting_side() {
    let (l, port) = listen(V4);
    let p = port.to_string();
    let mut pair = connect(&l, None);
    let (done, expected) = traced(&["-P", &p], || {
        write_segments(&mut pair.server, 30);
        received(&pair.server, 30)
    });
    assert_eq!(hist_total(&done.stdout), expected, "{}", done.stdout);
    drop(pair);
}

/// -b: one histogram per local address (the listener's 127.0.0.1 and ::1 on the same port number); -B: per
/// remote address (clients bound to 127.0.0.2 and 127.0.0.3); -e adds each one's mean.
#[test]
fn per_address_histograms_name_each_address() {
    let (l4, port) = listen(V4);
    let l6 = TcpListener::bind((V6, port)).expect("::1 on the same port");
    let p = port.to_string();
    let (mut a, mut b) = (connect(&l4, None), connect(&l6, None));
    let (done, (n4, n6)) = traced(&["-p", &p, "-b", "-e"], || {
        write_segments(&mut a.client, 12);
        write_segments(&mut b.client, 7);
        (received(&a.client, 12), received(&b.client, 7))
    });
    let mut got: Vec<(String, u64)> = sections(&done.stdout)
        .into_iter()
        .map(|(name, n)| (name.split(" [AVG ").next().unwrap().to_string(), n))
        .collect();
    got.sort();
    assert_eq!(got, [("127.0.0.1".to_string(), n4), ("::1".to_string(), n6)], "{}", done.stdout);
    assert!(done.stdout.contains("Local Address = 127.0.0.1 [AVG "), "{}", done.stdout);

    let mut c = connect(&l4, Some("127.0.0.2".parse().unwrap()));
    let mut d = connect(&l4, Some("127.0.0.3".parse().unwrap()));
    let (done, (n2, n3)) = traced(&["-p", &p, "-B"], || {
        write_segments(&mut c.client, 5);
        write_segments(&mut d.client, 9);
        (received(&c.client, 5), received(&d.client, 9))
    });
    let mut got = sections(&done.stdout);
    got.sort();
    assert_eq!(got, [("127.0.0.2".to_string(), n2), ("127.0.0.3".to_string(), n3)], "{}", done.stdout);
    assert!(done.stdout.contains("Remote Address = 127.0.0.2\n"), "{}", done.stdout);
    drop((a, b, c, d));
}

/// -a/-A pick one address of two on the same port; -4/-6 one family.
#[test]
fn address_and_family_filters_keep_only_their_sockets() {
    let (l4, port) = listen(V4);
    let l6 = TcpListener::bind((V6, port)).expect("::1 on the same port");
    let p = port.to_string();
    let cases: [(&[&str], bool, bool); 5] = [
        (&["-a", "::1"], false, true),
        (&["-a", "127.0.0.1"], true, false),
        (&["-A", "127.0.0.2"], true, false),
        (&["-4"], true, false),
        (&["-6"], false, true),
    ];
    for (filter, want4, want6) in cases {
        let mut args = vec!["-p", p.as_str()];
        args.extend_from_slice(filter);
        let (mut a, mut b) = (connect(&l4, Some("127.0.0.2".parse().unwrap())), connect(&l6, None));
        let (done, (n4, n6)) = traced(&args, || {
            write_segments(&mut a.client, 6);
            write_segments(&mut b.client, 4);
            (received(&a.client, 6), received(&b.client, 4))
        });
        let expected = if want4 { n4 } else { 0 } + if want6 { n6 } else { 0 };
        assert_eq!(hist_total(&done.stdout), expected, "{args:?}: {}", done.stdout);
    }
}

/// -m: milliseconds; --json: the same counts with the unit, -e's sum and mean.
#[test]
fn milliseconds_and_json() {
    let (l, port) = listen(V4);
    let p = port.to_string();
    let mut pair = connect(&l, None);
    let (done, expected) = traced(&["-p", &p, "-m"], || {
        write_segments(&mut pair.client, 10);
        received(&pair.client, 10)
    });
    assert!(done.stdout.contains("\n     msecs               : count     distribution\n"), "{}", done.stdout);
    assert_eq!(hist_total(&done.stdout), expected, "{}", done.stdout);

    let mut pair = connect(&l, None);
    let (done, expected) = traced(&["-p", &p, "-e", "--json"], || {
        write_segments(&mut pair.client, 10);
        received(&pair.client, 10)
    });
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    let h = &lines[0];
    assert_eq!(h["unit"], "usecs");
    assert_eq!(h["addr"], "*******");
    assert_eq!(h["count"].as_u64(), Some(expected), "{h}");
    let buckets: u64 = h["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(buckets, expected, "{h}");
    assert_eq!(h["mean"].as_u64(), Some(h["sum"].as_u64().unwrap() / expected), "{h}");
}

/// -i and -d: a report each second for two seconds, then the tool ends by itself.
#[test]
fn interval_and_duration_end_by_themselves() {
    let done = run_tool(TOOL, &["-p", "1", "-i", "1", "-d", "2", "-T"]);
    done.assert_success();
    let stamps = done.stdout.lines().filter(|l| l.len() == 8 && l.as_bytes()[2] == b':').count();
    assert_eq!(stamps, 2, "{}", done.stdout);
}

#[test]
fn bad_input_is_one_line() {
    assert_refused(TOOL, &["-p", "70000"], 2, "not a port number");
    assert_refused(TOOL, &["-a", "1.2.3"], 2, "not an IPv4 or IPv6 address");
    assert_refused(TOOL, &["-b", "-B"], 2, "cannot be used with");
    assert_refused(TOOL, &["-4", "-6"], 2, "cannot be used with");
    assert_refused(TOOL, &["-i", "0"], 2, "");
    assert_refused(TOOL, &["-a", "127.0.0.1", "-A", "::1"], 1, "same family");
    assert_refused(TOOL, &["-6", "-a", "127.0.0.1"], 1, "different families");
}

/// `--prometheus` with -B and -m: the exported histogram holds exactly the segments the listener side received
/// (its `_count`, and its `+Inf` bucket), labelled by the remote address, in seconds whatever -m says.
#[test]
fn prometheus_counts_every_segment_in_seconds() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let (l, port) = listen(V4);
    let mut pair = connect(&l, None);
    let (run, addr) = serving(TOOL, &["-p", &port.to_string(), "-B", "-m"]);
    write_segments(&mut pair.client, 30);
    let expected = received(&pair.client, 30);
    let text = scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    promtool_accepts(&text);
    let count = sample(&text, "corebpf_tcprtt_smoothed_rtt_seconds_count{addr=\"127.0.0.1\"}");
    assert_eq!(count, Some(expected as f64), "{text}");
    let inf = sample(&text, "corebpf_tcprtt_smoothed_rtt_seconds_bucket{le=\"+Inf\",addr=\"127.0.0.1\"}");
    assert_eq!(inf, Some(expected as f64), "{text}");
    // Microsecond slots: the first bucket is 2 us.
    assert!(text.contains("corebpf_tcprtt_smoothed_rtt_seconds_bucket{le=\"0.000002\",addr=\"127.0.0.1\"}"), "{text}");
    drop(pair);
}

/// `--heatmap` with `-i 1`: a column per report, all addresses added up. Two batches of segments a second and
/// more apart fall in different reports; the non-empty columns hold exactly the JSON lines' buckets, report by
/// report, and every segment the listener side received is in one cell.
#[test]
fn heat_map_columns_are_the_reports_segments() {
    let (l, port) = listen(V4);
    let p = port.to_string();
    let svg = std::env::temp_dir().join(format!("corebpf-heatmap-tcprtt-{}.svg", std::process::id()));
    let svg_arg = svg.to_str().unwrap().to_string();
    let mut pair = connect(&l, None);
    let (done, expected) = traced(&["-p", &p, "-j", "-i", "1", "--heatmap", &svg_arg], || {
        write_segments(&mut pair.client, 20);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        write_segments(&mut pair.client, 20);
        received(&pair.client, 40)
    });
    let text = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    let lines = json_lines(&done.stdout);
    let reports = json_bucket_sums(&lines, "time");
    assert!(reports.len() >= 2, "one report only:\n{}", done.stdout);
    let columns = heatmap_non_empty_columns(&text);
    assert_eq!(columns, reports, "{}\n{text}", done.stdout);
    assert_eq!(columns.iter().flatten().sum::<u64>(), expected, "{text}");
    assert!(text.contains("TCP smoothed round-trip time") && text.contains("(usecs)"), "{text}");
    drop(pair);
}
