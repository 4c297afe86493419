// SPDX-License-Identifier: Apache-2.0 OR MIT
//! bindsnoop against a helper whose binds are known (tests/binder.c): TCP and UDP, IPv4 and IPv6, with
//! SO_REUSEADDR, SO_REUSEPORT, IP_FREEBIND, IP_TRANSPARENT, IP_BIND_ADDRESS_NO_PORT and SO_BINDTODEVICE, two of
//! them failing with EADDRINUSE, plus a Unix socket bind and a bind on a descriptor that is no socket (never
//! shown). Filtered by the helper's PID (and by its ports with -P), so that tests running at once, and the rest
//! of the machine, cannot disturb each other. libbpf-tools' bindsnoop needs kprobes, absent on the development
//! host, so there is no side-by-side run here: the helper's own view of each bind is the ground truth.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::time::Duration;

use corebpf_tests::pipe::assert_sigterm_and_closed_pipe_end_cleanly;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const HEADER: &str = "PID COMM";
const WAIT: Duration = Duration::from_secs(20);

/// One bind as the helper saw it: protocol, address, port, options, interface index, result.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Expected {
    proto: String,
    addr: String,
    port: u16,
    opts: String,
    ifx: u32,
    ret: i32,
}

/// The helper, started and waiting for its go byte; its stdin stays open (its sockets too) until dropped.
struct Binder {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    pid: u32,
    /// Its command name (the helper's file name, cut to 15 bytes).
    comm: String,
}

impl Binder {
    fn start(args: &[&str]) -> Binder {
        let exe = build_c_helper("binder", include_str!("binder.c"), &["-O1"]);
        let mut child =
            Command::new(&exe).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("binder");
        let stdin = child.stdin.take();
        let pid = child.id();
        wait_sleeping(pid, WAIT);
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
        Binder { child: KillOnDrop(child), stdin, pid, comm }
    }

    /// Lets it bind; returns its binds, in order.
    fn go(&mut self) -> Vec<Expected> {
        self.stdin.as_mut().unwrap().write_all(b"g").unwrap();
        let mut binds = Vec::new();
        let mut out = BufReader::new(self.child.0.stdout.take().unwrap());
        loop {
            let mut line = String::new();
            assert!(out.read_line(&mut line).unwrap() > 0, "the helper ended early");
            if line == "done\n" {
                return binds;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            binds.push(Expected {
                proto: f[0].into(),
                addr: f[1].into(),
                port: f[2].parse().unwrap(),
                opts: f[3].into(),
                ifx: f[4].parse().unwrap(),
                ret: f[5].parse().unwrap(),
            });
        }
    }
}

impl Drop for Binder {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.0.wait();
    }
}

/// Runs bindsnoop with `args` and `-p` the helper's PID around the helper's binds: (its output, the binds, the
/// helper's comm).
fn trace(args: &[&str]) -> (Finished, Vec<Expected>, String) {
    trace_binder(&[], args)
}

/// As [`trace`], the helper started with `helper_args`.
fn trace_binder(helper_args: &[&str], args: &[&str]) -> (Finished, Vec<Expected>, String) {
    let mut binder = Binder::start(helper_args);
    let pid = binder.pid.to_string();
    let mut all = vec!["-p", pid.as_str()];
    all.extend_from_slice(args);
    let mut run = Running::start(TOOL, &all);
    if args.contains(&"-j") {
        run.wait_attached(WAIT);
    } else {
        run.wait_for_line("Tracing binds", WAIT);
    }
    let binds = binder.go();
    let comm = binder.comm.clone();
    // Every bind's record is in the ring buffer before the helper prints "done"; the tool drains it at a stop.
    drop(binder);
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    (done, binds, comm)
}

/// The rows of `-E` text output (RC PID COMM PROT ADDR PORT OPTS IF) as Expected, checking COMM (the PID is
/// the -p filter's).
fn rows_with_rc(stdout: &str, comm: &str) -> Vec<Expected> {
    stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 8 && f[1].parse::<u32>().is_ok()).then_some(f)
        })
        .map(|f| {
            assert_eq!(f[2], &comm[..comm.len().min(12)]);
            Expected {
                proto: f[3].into(),
                addr: f[4].into(),
                port: f[5].parse().unwrap(),
                opts: f[6].into(),
                ifx: f[7].parse().unwrap(),
                ret: f[0].parse().unwrap(),
            }
        })
        .collect()
}

#[test]
fn every_bind_with_its_result_address_port_and_options() {
    let (done, binds, comm) = trace(&["-E"]);
    assert_eq!(binds.len(), 10, "the helper's binds: {binds:?}");
    assert_eq!(binds.iter().filter(|b| b.ret == -98).count(), 2, "two EADDRINUSE: {binds:?}");
    assert!(binds.iter().any(|b| b.opts == "F.N.." && b.port == 0 && b.ret == 0), "{binds:?}");
    let header = done.stdout.lines().nth(1).unwrap();
    assert_eq!(header, " RC      PID COMM         PROT ADDR            PORT   OPTS IF");
    assert_eq!(done.stdout.lines().next().unwrap(), "Tracing binds ... Hit Ctrl-C to end");
    let rows = rows_with_rc(&done.stdout, &comm);
    assert_eq!(rows, binds, "output:\n{}", done.stdout);
}

#[test]
fn failed_binds_only_with_e_and_ports_with_p() {
    // Without -E: the eight successful binds, in order (the Unix socket and /dev/null never).
    let (done, binds, comm) = trace(&["-U"]);
    let want: Vec<&Expected> = binds.iter().filter(|b| b.ret == 0).collect();
    let rows: Vec<Vec<&str>> = done
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 8 && f[0].parse::<u32>().is_ok())
        .collect();
    assert_eq!(rows.len(), want.len(), "output:\n{}", done.stdout);
    for (row, b) in rows.iter().zip(&want) {
        assert_eq!(row[0], "0", "UID");
        assert_eq!(row[2], &comm[..comm.len().min(12)]);
        assert_eq!(&row[3..], [b.proto.as_str(), &b.addr, &b.port.to_string(), &b.opts, &b.ifx.to_string()]);
    }

    // -P: only the binds to that port, the failed one (with -E, its requested port) included. The port is free
    // a moment before the helper takes it (a listener on port 0, closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let (done, binds, comm) = trace_binder(&[&port], &["-E", "-P", &port]);
    let want: Vec<Expected> = binds.iter().filter(|b| b.port.to_string() == port).cloned().collect();
    assert_eq!(want.len(), 2, "the helper's binds: {binds:?}");
    assert_eq!(want[1].ret, -98, "{binds:?}");
    assert_eq!(rows_with_rc(&done.stdout, &comm), want, "output:\n{}", done.stdout);
}

#[test]
fn json_records() {
    let (done, binds, comm) = trace(&["-E", "-j"]);
    let recs = json_lines(&done.stdout);
    assert_eq!(recs.len(), binds.len(), "output:\n{}", done.stdout);
    for (r, b) in recs.iter().zip(&binds) {
        assert_eq!(r["comm"], comm.as_str());
        assert_eq!(r["protocol"], b.proto.as_str());
        assert_eq!(r["protocol_number"], if b.proto == "TCP" { 6 } else { 17 });
        assert_eq!(r["family"], if b.addr.contains(':') { "ipv6" } else { "ipv4" });
        assert_eq!(r["addr"], b.addr.as_str());
        assert_eq!(r["port"], b.port);
        assert_eq!(r["opts"], b.opts.as_str());
        assert_eq!(r["bound_if"], b.ifx);
        assert_eq!(r["ret"], b.ret);
        assert_eq!(r["error"], if b.ret == -98 { serde_json::json!("EADDRINUSE") } else { serde_json::Value::Null });
    }
    let opts: Vec<_> = recs.iter().map(|r| r["options"].as_array().unwrap().len()).collect();
    let want: Vec<_> = binds.iter().map(|b| b.opts.chars().filter(|&c| c != '.').count()).collect();
    assert_eq!(opts, want);
}

#[test]
fn count_per_address_and_port() {
    let (done, binds, _) = trace(&["--count"]);
    // Successful binds per (address, port): the three SO_REUSEPORT UDP sockets share one.
    let mut want = std::collections::BTreeMap::new();
    for b in binds.iter().filter(|b| b.ret == 0) {
        *want.entry((b.addr.clone(), b.port)).or_insert(0u64) += 1;
    }
    assert!(want.values().any(|&n| n == 3), "{want:?}");
    let mut got = std::collections::BTreeMap::new();
    let mut lines = done.stdout.lines().skip_while(|l| !l.starts_with("LADDR"));
    let header = lines.next().unwrap_or_else(|| panic!("no LADDR header:\n{}", done.stdout));
    assert!(header.starts_with("LADDR") && header.trim_end().ends_with("LPORT     BINDS"), "{header}");
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        got.insert((f[0].to_string(), f[1].parse::<u16>().unwrap()), f[2].parse::<u64>().unwrap());
    }
    assert_eq!(got, want, "output:\n{}", done.stdout);
}

#[test]
fn wide_shows_error_text_and_whole_addresses() {
    let (done, binds, _) = trace(&["-E", "-w", "-t"]);
    let failed = done.stdout.lines().filter(|l| l.contains("Address already in use")).count();
    assert_eq!(failed, 2, "output:\n{}", done.stdout);
    let ok = done.stdout.lines().filter(|l| l.contains(" Success ")).count();
    assert_eq!(ok, binds.len() - 2, "output:\n{}", done.stdout);
    let header = done.stdout.lines().nth(1).unwrap();
    // RC as wide as the longest text of a bind's errors (EAFNOSUPPORT's, 40 characters).
    let rc = format!("{:<41}", "RC");
    assert!(header.starts_with(&format!("TIME(s)   {rc}       PID COMM ")), "{header}");
}

/// Issue 53 item 12: an IPv6 address longer than ADDR's 15 columns is printed whole without -w (it was cut to 15
/// characters with no mark), pushing the rest of its row right.
#[test]
fn long_ipv6_addresses_are_whole_without_w() {
    let (done, binds, comm) = trace_binder(&["0", "v6long"], &["-E"]);
    let long: Vec<&Expected> = binds.iter().filter(|b| b.addr.len() > 15).collect();
    assert_eq!(long.len(), 2, "the helper's binds: {binds:?}");
    assert_eq!([long[0].ret, long[1].ret], [-99, 0], "EADDRNOTAVAIL, then bound with IP_FREEBIND: {binds:?}");
    assert_eq!(rows_with_rc(&done.stdout, &comm), binds, "output:\n{}", done.stdout);
}

/// Issue 53 item 12: with -w -E, every row's columns start where the header's do, whatever the error's text
/// (EADDRNOTAVAIL's "Cannot assign requested address" overran BCC's 25-column RC and shifted its row by six).
#[test]
fn wide_error_texts_keep_the_columns_in_line() {
    let (done, binds, _) = trace_binder(&["0", "v6long"], &["-E", "-w"]);
    let mut lines = done.stdout.lines().skip(1);
    let header = lines.next().unwrap();
    let pid_end = header.find(" COMM").unwrap();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), binds.len(), "output:\n{}", done.stdout);
    assert!(rows.iter().any(|r| r.starts_with("Cannot assign requested address ")), "output:\n{}", done.stdout);
    for row in &rows {
        let pid_start = row[..pid_end].trim_end().rfind(' ').map_or(0, |i| i + 1);
        assert!(
            row[pid_start..pid_end].parse::<u32>().is_ok() && row.as_bytes()[pid_end] == b' ',
            "the PID column does not end under the header's:\n{header}\n{row}"
        );
    }
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    // `bindsnoop | head -1` reads the banner; a UDP bind gives the tool something to write into the closed pipe.
    let me = std::process::id().to_string();
    assert_sigterm_and_closed_pipe_end_cleanly(TOOL, &["-p", &me], HEADER, "Tracing binds", || {
        let _ = std::net::UdpSocket::bind("127.0.0.1:0");
    });
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&["-P", "80,x"][..], "'x' is not a port", 2),
        (&["-u", "no-such-user-here"][..], "no user named", 2),
        (&["-p", "999999999"][..], "", 1),
        (&["--cgroupmap", "/nonexistent/map"][..], "--cgroupmap", 1),
    ] {
        assert_refused(TOOL, args, code, what);
    }
}
