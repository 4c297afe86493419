// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpdrop against drops made on purpose, with known addresses and ports: SYNs to closed local ports (the kernel
//! drops each once, as NO_SOCKET where it gives reasons) and UDP datagrams to closed ports, the -s counts made in a
//! private network namespace (a test thread's own, so no other test's drops land there). Each test looks only at
//! its own ports or namespace, since all tests run at once.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;
use serde_json::Value;

fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Running {
    start_attached("tcpdrop", args, env, 1)
}

/// A local port nothing listens on (bound once, then released).
fn closed_port(ip: IpAddr) -> u16 {
    TcpListener::bind((ip, 0)).unwrap().local_addr().unwrap().port()
}

/// Connects to a closed port: one SYN, dropped by the kernel, answered by an RST. Returns the client's port.
fn syn_to_closed(ip: IpAddr, port: u16) -> u16 {
    socket2_like_connect(SocketAddr::new(ip, port))
}

/// connect(2) from a socket whose local port is known beforehand (std's connect does not say it on failure).
fn socket2_like_connect(to: SocketAddr) -> u16 {
    use std::os::fd::FromRawFd;
    let domain = if to.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: socket(2); the fd is owned by the TcpStream made from it right away.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0);
    // SAFETY: fd is a fresh socket nobody else owns.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    let local = match to {
        SocketAddr::V4(_) => SocketAddr::new(V4, 0),
        SocketAddr::V6(_) => SocketAddr::new(V6, 0),
    };
    bind_fd(fd, local);
    let port = stream.local_addr().unwrap().port();
    let err = connect_fd(fd, to);
    assert_eq!(err, Some(libc::ECONNREFUSED), "connect to closed port {to}");
    port
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as u16,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: 0,
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn bind_fd(fd: i32, addr: SocketAddr) {
    let (ss, len) = sockaddr(addr);
    // SAFETY: bind(2) with a sockaddr of `len` bytes.
    let rc = unsafe { libc::bind(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
}

fn connect_fd(fd: i32, addr: SocketAddr) -> Option<i32> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: connect(2) with a sockaddr of `len` bytes.
    let rc = unsafe { libc::connect(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    (rc != 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap())
}

/// The JSON drops of the SYN from `sport` to `dport`.
fn drops_of(records: &[Value], ip: IpAddr, sport: u16, dport: u16) -> Vec<&Value> {
    let ip = ip.to_string();
    records
        .iter()
        .filter(|r| {
            r["saddr"] == ip.as_str() && r["daddr"] == ip.as_str() && r["sport"] == sport && r["dport"] == dport
        })
        .collect()
}

/// SYNs to closed ports, IPv4 and IPv6: (ip, client port, closed port).
fn syns() -> Vec<(IpAddr, u16, u16)> {
    let mut made = Vec::new();
    for ip in [V4, V6, V4, V6, V4, V6] {
        let port = closed_port(ip);
        made.push((ip, syn_to_closed(ip, port), port));
    }
    made
}

/// A frame of the BPF program or of the tracepoint's calls into it (`bpf_prog_*`, `bpf_trace_run4`,
/// `__traceiter_kfree_skb`, `__bpf_trace_kfree_skb`), which BCC's tcpdrop does not show.
fn is_tracing_frame(frame: &str) -> bool {
    ["bpf_prog_", "bpf_trace_run", "__traceiter_", "__bpf_trace_"].iter().any(|p| frame.starts_with(p))
}

fn check_json_syn_drops(records: &[Value], made: &[(IpAddr, u16, u16)]) {
    for &(ip, sport, dport) in made {
        let found = drops_of(records, ip, sport, dport);
        assert_eq!(found.len(), 1, "want one drop of the SYN {ip} {sport} > {dport}, got {found:?}");
        let r = found[0];
        assert_eq!(r["reason"], "NO_SOCKET", "{r}");
        assert_eq!(r["tcpflags"], "SYN", "{r}");
        assert_eq!(r["protocol"], "tcp", "{r}");
        assert_eq!(r["family"], if ip.is_ipv4() { "ipv4" } else { "ipv6" }, "{r}");
        assert!(r["state"].is_null(), "a SYN to a closed port has no socket: {r}");
        let rcv = if ip.is_ipv4() { "tcp_v4_rcv" } else { "tcp_v6_rcv" };
        let stack: Vec<&str> = r["stack"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        assert!(stack.iter().any(|f| f.starts_with(&format!("{rcv}+0x"))), "{rcv} not in the stack: {stack:?}");
        assert!(!stack.iter().any(|f| is_tracing_frame(f)), "the tracing machinery's frames are shown: {stack:?}");
        assert!(r["location"].as_str().unwrap().starts_with(rcv), "{r}");
    }
}

#[test]
fn a_syn_to_a_closed_port_is_one_no_socket_drop_with_its_stack() {
    let mut json = start_with_env(&["--json"], &[]);
    let mut text = start_with_env(&[], &[]);
    text.wait_for_line("REASON (CODE)", Duration::from_secs(20));
    let made = syns();
    let (ip, sport, dport) = *made.last().unwrap();
    json.wait_for_line(&format!("\"sport\":{sport},\"daddr\":\"{ip}\",\"dport\":{dport}"), Duration::from_secs(20));
    text.wait_for_line(&format!("{ip}:{sport}"), Duration::from_secs(20));
    let (json, text) = (stop(json), stop(text));
    check_json_syn_drops(&json_lines(&json.stdout), &made);

    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "TIME     PID     IP SADDR:SPORT          > DADDR:DPORT          STATE (FLAGS)        REASON (CODE)"
    );
    for &(ip, sport, dport) in &made {
        let head = format!("{ip}:{sport}");
        let at: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].split_whitespace().nth(3) == Some(head.as_str()))
            .filter(|&i| lines[i].split_whitespace().nth(5) == Some(format!("{ip}:{dport}").as_str()))
            .collect();
        assert_eq!(at.len(), 1, "want one line for {head} > {dport}:\n{}", text.stdout);
        let f: Vec<&str> = lines[at[0]].split_whitespace().collect();
        assert_eq!(f[2], if ip.is_ipv4() { "4" } else { "6" });
        assert_eq!(&f[6..], ["-", "(SYN)", "NO_SOCKET", f[9]], "{}", lines[at[0]]);
        // The kernel stack follows, one tab-indented frame a line, up to a blank line.
        let frames: Vec<&str> = lines[at[0] + 1..].iter().take_while(|l| !l.is_empty()).copied().collect();
        assert!(frames.len() >= 3 && frames.iter().all(|l| l.starts_with('\t')), "{frames:?}");
        assert!(frames.iter().any(|l| l.contains("_rcv+0x")), "{frames:?}");
        assert!(
            !frames.iter().any(|l| is_tracing_frame(l.trim())),
            "the tracing machinery's frames are shown: {frames:?}"
        );
    }
    json.assert_no_programs_left();
}

#[test]
fn raw_tp_and_tracepoint_fallbacks_report_the_same_drops() {
    for mech in ["raw_tp", "tracepoint"] {
        let mut run = start_with_env(&["--json", "-v"], &[("COREBPF_ATTACH", mech)]);
        let made = syns();
        let (ip, sport, dport) = *made.last().unwrap();
        run.wait_for_line(&format!("\"sport\":{sport},\"daddr\":\"{ip}\",\"dport\":{dport}"), Duration::from_secs(20));
        let done = stop(run);
        assert!(done.stderr.contains(&format!("attached with {mech}")), "{}", done.stderr);
        check_json_syn_drops(&json_lines(&done.stdout), &made);
        done.assert_no_programs_left();
    }
}

/// Runs `work` in a thread moved into a fresh network namespace with its loopback up; returns the namespace's
/// inode number at once and a sender that starts the work.
fn in_private_netns(work: impl FnOnce() + Send + 'static) -> (u64, mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (ino_tx, ino_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let handle = thread::spawn(move || {
        // SAFETY: unshare(2) of this thread's network namespace.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "{}", std::io::Error::last_os_error());
        loopback_up();
        use std::os::unix::fs::MetadataExt;
        ino_tx.send(std::fs::metadata("/proc/thread-self/ns/net").unwrap().ino()).unwrap();
        go_rx.recv().unwrap();
        work();
    });
    (ino_rx.recv().unwrap(), go_tx, handle)
}

/// `ip link set lo up` through SIOCSIFFLAGS.
fn loopback_up() {
    let sock = UdpSocket::bind((V4, 0)).ok();
    use std::os::fd::AsRawFd;
    // SAFETY: a throwaway socket for the ioctl (lo exists but is down, so binding may fail: use a raw one then).
    let fd =
        sock.as_ref().map_or_else(|| unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) }, |s| s.as_raw_fd());
    let mut ifr = [0u8; 40];
    ifr[..2].copy_from_slice(b"lo");
    // SAFETY: struct ifreq is 40 bytes: the name, then the flags (short) at offset 16.
    unsafe {
        assert_eq!(libc::ioctl(fd, libc::SIOCGIFFLAGS, ifr.as_mut_ptr()), 0);
        ifr[16] |= libc::IFF_UP as u8;
        assert_eq!(libc::ioctl(fd, libc::SIOCSIFFLAGS, ifr.as_mut_ptr()), 0);
    }
}

const SYNS: usize = 7;
const DATAGRAMS: usize = 5;

#[test]
fn summary_counts_equal_the_drops_made_in_a_private_namespace() {
    let udp_port = std::sync::Arc::new(std::sync::Mutex::new(0u16));
    let port = udp_port.clone();
    let (netns, go, worker) = in_private_netns(move || {
        for ip in [V4, V6].into_iter().cycle().take(SYNS) {
            syn_to_closed(ip, closed_port(ip));
        }
        let closed = UdpSocket::bind((V4, 0)).unwrap();
        let dport = closed.local_addr().unwrap().port();
        drop(closed);
        *port.lock().unwrap() = dport;
        let sender = UdpSocket::bind((V4, 0)).unwrap();
        for _ in 0..DATAGRAMS {
            sender.send_to(b"x", (V4, dport)).unwrap();
        }
    });
    let ns = netns.to_string();
    let summary = start_with_env(&["-s", "--netns-id", &ns], &[]);
    let summary_json = start_with_env(&["-s", "--json", "--reasons", "NO_SOCKET", "--netns-id", &ns], &[]);
    let mut all = start_with_env(&["--json", "--all-protocols", "--netns-id", &ns], &[]);
    go.send(()).unwrap();
    worker.join().unwrap();
    let dport = *udp_port.lock().unwrap();
    // Every drop happened in the worker's system calls (loopback delivers at once), so they are all in the ring
    // buffer by now; the tool reads it to the end when stopped. UDP drops are seen only with --all-protocols.
    all.wait_for_line("\"protocol\":\"udp\"", Duration::from_secs(20));
    let all = stop(all);
    let (summary, summary_json) = (stop(summary), stop(summary_json));

    let text: Vec<&str> = summary.stdout.lines().collect();
    assert!(text[0].starts_with("REASON (CODE)") && text[0].ends_with("COUNT"), "{}", summary.stdout);
    let mut total = 0;
    for row in &text[1..] {
        let f: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(f[0], "NO_SOCKET", "only the SYNs' drops are TCP drops here: {}", summary.stdout);
        assert!(f[2].starts_with("tcp_v4_rcv") || f[2].starts_with("tcp_v6_rcv"), "{row}");
        total += f[3].parse::<usize>().unwrap();
    }
    assert_eq!(total, SYNS, "{}", summary.stdout);

    let rows = json_lines(&summary_json.stdout);
    let sum: u64 = rows.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    assert_eq!(sum, SYNS as u64, "{rows:?}");
    assert!(rows.iter().all(|r| r["reason"] == "NO_SOCKET"), "{rows:?}");

    let records = json_lines(&all.stdout);
    let udp = records.iter().filter(|r| r["protocol"] == "udp" && r["dport"] == dport).count();
    let tcp = records.iter().filter(|r| r["protocol"] == "tcp" && r["tcpflags"] == "SYN").count();
    assert_eq!((tcp, udp), (SYNS, DATAGRAMS), "{}", all.stdout);
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, code, what) in [
        (&["-4", "-6"][..], 2, "cannot be used with"),
        (&["--bogus"][..], 2, "unexpected argument"),
        (&["--pid-netns", "abc"][..], 2, "'abc' is not a PID"),
        (&["--reasons", "NO_SUCH_REASON"][..], 1, "'NO_SUCH_REASON' is not a drop reason of this kernel"),
        (&["--pid-netns", "999999999"][..], 1, "no process with PID 999999999"),
    ] {
        assert_refused("tcpdrop", args, code, what);
    }
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let run = start_with_env(&[], &[]);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `tcpdrop | head -1`: the header is read and the pipe closed; the tool ends without waiting for a drop.
    assert_ends_when_pipe_closes("tcpdrop", &[], "TIME ", || {});
}

/// `--prometheus`: the drops made in a private namespace, exactly, per reason and dropping function; the
/// exposition passes promtool; an interval is refused.
#[test]
fn prometheus_counts_the_drops_made_in_a_private_namespace() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let (netns, go, worker) = in_private_netns(move || {
        for ip in [V4, V6].into_iter().cycle().take(SYNS) {
            syn_to_closed(ip, closed_port(ip));
        }
    });
    let ns = netns.to_string();
    let (run, addr) = serving("tcpdrop", &["--netns-id", &ns]);
    go.send(()).unwrap();
    worker.join().unwrap();
    // Loopback delivers at once: every drop was counted when the worker's connects returned.
    let text = scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    promtool_accepts(&text);
    let drops =
        |func: &str| sample(&text, &format!("corebpf_tcpdrop_drops_total{{reason=\"NO_SOCKET\",location=\"{func}\"}}"));
    let v4 = SYNS.div_ceil(2) as f64;
    assert_eq!(drops("tcp_v4_rcv"), Some(v4), "{text}");
    assert_eq!(drops("tcp_v6_rcv"), Some(SYNS as f64 - v4), "{text}");
    let series = text.lines().filter(|l| l.starts_with("corebpf_tcpdrop_drops_total{")).count();
    assert_eq!(series, 2, "only the SYNs' drops happened in the namespace: {text}");

    assert_refused("tcpdrop", &["--prometheus", "127.0.0.1:1", "--json"], 2, "cannot be used with");
}
