// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcptop against real loopback connections made by C helpers that print their own PID:
//! each makes K connections to its own listener (a fresh port) and sends known byte counts each way, so every
//! connection appears twice (client end, server end) from the helper's PID. Checked: PIDs, comm, addresses,
//! ports and KB on the screen, exact bytes in JSON (summed over intervals: the tool takes differences), -p, -4/-6,
//! -s/-r, the clear-screen escape (absent with -C), bad input, SIGTERM and a closed pipe. Tests run concurrently
//! with other tools' tests, so each looks only at its helpers' PIDs and ports.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::sock::{start_attached, WAIT};
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const BANNER: &str = "Tracing... Output every";

const HELPER: &str = include_str!("conns.c");

/// A helper process: its PID, then (after `go`) its connections as (client port, server port, a, b), where the
/// client sent `a` bytes and received `b`.
struct Helper {
    child: KillOnDrop,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    v6: bool,
    /// Its comm, as the kernel shows it.
    comm: String,
    sizes: usize,
    conns: Vec<(u16, u16, u64, u64)>,
}

impl Helper {
    fn start(v6: bool, sizes: &[(u64, u64)]) -> Helper {
        let exe = build_c_helper("tcptop-helper", HELPER, &["-O1"]);
        let mut args = vec![if v6 { "6" } else { "4" }.to_string()];
        args.extend(sizes.iter().map(|(a, b)| format!("{a}:{b}")));
        let mut child: Child =
            Command::new(exe).args(&args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("tcptop-helper");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pid = line.trim().parse().unwrap();
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
        Helper { child: KillOnDrop(child), stdin, stdout, pid, v6, comm, sizes: sizes.len(), conns: Vec::new() }
    }

    /// Makes the connections and waits until all bytes went both ways (the connections stay open).
    fn go(&mut self) {
        writeln!(self.stdin, "go").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        self.conns = line
            .split_whitespace()
            .map(|c| {
                let f: Vec<u64> = c.split(',').map(|n| n.parse().unwrap()).collect();
                (f[0] as u16, f[1] as u16, f[2], f[3])
            })
            .collect();
        assert_eq!(self.conns.len(), self.sizes, "{line}");
    }

    fn addr(&self) -> &'static str {
        if self.v6 {
            "::1"
        } else {
            "127.0.0.1"
        }
    }

    /// Both ends of every connection: (lport, rport, tx, rx).
    fn ends(&self) -> Vec<(u16, u16, u64, u64)> {
        self.conns.iter().flat_map(|&(c, s, a, b)| [(c, s, a, b), (s, c, b, a)]).collect()
    }

    fn finish(mut self) {
        let _ = writeln!(self.stdin, "bye");
        let _ = self.child.0.wait();
    }
}

/// Starts tcptop and waits until both its programs are attached.
fn start(args: &[&str]) -> Running {
    start_with_env(args, &[])
}

fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Running {
    start_attached("tcptop", args, env, 2)
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// Per (pid, lport, rport): (tx, rx, comm, family, laddr, raddr).
type Totals = HashMap<(u32, u16, u16), (u64, u64, String, String, String, String)>;

/// JSON bytes per (pid, lport, rport), summed over intervals, checking each record's family and addresses.
fn json_totals(stdout: &str) -> Totals {
    let mut totals = Totals::new();
    for r in json_lines(stdout) {
        let key = (
            r["pid"].as_u64().unwrap() as u32,
            r["lport"].as_u64().unwrap() as u16,
            r["rport"].as_u64().unwrap() as u16,
        );
        let e = totals.entry(key).or_insert_with(|| {
            let s = |f: &str| r[f].as_str().unwrap().to_string();
            (0, 0, s("comm"), s("family"), s("laddr"), s("raddr"))
        });
        e.0 += r["tx_bytes"].as_u64().unwrap();
        e.1 += r["rx_bytes"].as_u64().unwrap();
    }
    totals
}

fn check_json(totals: &Totals, h: &Helper) {
    for (l, r, tx, rx) in h.ends() {
        let got = totals.get(&(h.pid, l, r)).unwrap_or_else(|| panic!("no record of {} {l}->{r}: {totals:?}", h.pid));
        assert_eq!((got.0, got.1), (tx, rx), "bytes of {l}->{r}");
        assert_eq!(got.2, h.comm);
        assert_eq!(got.3, if h.v6 { "ipv6" } else { "ipv4" });
        assert_eq!((got.4.as_str(), got.5.as_str()), (h.addr(), h.addr()));
    }
}

const SIZES4: [(u64, u64); 3] = [(4096, 8192), (10 * 1024 + 700, 3 * 1024 + 1), (100 * 1024, 1000)];
const SIZES6: [(u64, u64); 2] = [(5000, 70000), (2048, 2047)];

#[test]
fn json_exact_bytes_per_connection_and_family() {
    let mut h4 = Helper::start(false, &SIZES4);
    let mut h6 = Helper::start(true, &SIZES6);
    let all = start(&["--json", "1"]);
    let only4 = start(&["--json", "-4", "1"]);
    let only6 = start(&["--json", "-6", "1"]);
    h4.go();
    h6.go();
    // Stopped at once: the last report holds what the previous intervals did not.
    let (all, only4, only6) = (stop(all), stop(only4), stop(only6));
    let totals = json_totals(&all.stdout);
    check_json(&totals, &h4);
    check_json(&totals, &h6);
    let t4 = json_totals(&only4.stdout);
    check_json(&t4, &h4);
    assert!(json_lines(&only4.stdout).iter().all(|r| r["family"] == "ipv4"), "{}", only4.stdout);
    assert!(!t4.keys().any(|k| k.0 == h6.pid));
    let t6 = json_totals(&only6.stdout);
    check_json(&t6, &h6);
    assert!(json_lines(&only6.stdout).iter().all(|r| r["family"] == "ipv6"), "{}", only6.stdout);
    assert!(!t6.keys().any(|k| k.0 == h4.pid));
    h4.finish();
    h6.finish();
}

#[test]
fn raw_tp_fallback_counts_the_same() {
    let mut h = Helper::start(false, &SIZES4);
    let run = start_with_env(&["--json", "-v", "-p", &h.pid.to_string(), "1"], &[("COREBPF_ATTACH", "raw_tp")]);
    h.go();
    let done = stop(run);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    check_json(&json_totals(&done.stdout), &h);
    h.finish();
}

#[test]
fn pid_filter_keeps_only_that_process() {
    let mut mine = Helper::start(false, &[(3000, 4000), (1, 2)]);
    let mut other = Helper::start(false, &[(3000, 4000)]);
    let run = start(&["--json", "-p", &mine.pid.to_string(), "1"]);
    mine.go();
    other.go();
    let done = stop(run);
    let records = json_lines(&done.stdout);
    assert!(records.iter().all(|r| r["pid"].as_u64() == Some(mine.pid as u64)), "{}", done.stdout);
    check_json(&json_totals(&done.stdout), &mine);
    mine.finish();
    other.finish();
}

/// Screen rows of a PID: (LADDR, RADDR, RX_KB, TX_KB), with the COMM column checked.
fn screen_rows(stdout: &str, h: &Helper) -> HashMap<(String, String), (u64, u64)> {
    let mut rows = HashMap::new();
    for line in stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 6 && f[0] == h.pid.to_string() {
            assert_eq!(f[1], &h.comm[..12], "{line}");
            rows.insert((f[2].to_string(), f[3].to_string()), (f[4].parse().unwrap(), f[5].parse().unwrap()));
        }
    }
    rows
}

fn hostport(addr: &str, port: u16) -> String {
    format!("{addr}:{port}")
}

#[test]
fn screen_shows_pids_addresses_and_kb() {
    let mut h4 = Helper::start(false, &SIZES4);
    let mut h6 = Helper::start(true, &SIZES6);
    // One long interval, ended by Ctrl-C: the whole traffic is on the final screen.
    let run = start(&["-C", "-r", "10240", "3600"]);
    h4.go();
    h6.go();
    let done = stop(run);
    let out = &done.stdout;
    assert!(!out.contains('\x1b'), "-C prints no escape sequence");
    assert!(out.lines().any(|l| l.len() > 9 && &l[2..3] == ":" && l[8..].starts_with(" loadavg: ")), "{out}");
    let v4 = out.find("PID     COMM         LADDR                 RADDR                  RX_KB  TX_KB").expect(out);
    let v6 = out.find("PID     COMM         LADDR6                           RADDR6").expect(out);
    assert!(v4 < v6, "IPv4 table first:\n{out}");
    for h in [&h4, &h6] {
        let rows = screen_rows(out, h);
        assert_eq!(rows.len(), h.ends().len(), "{out}");
        for (l, r, tx, rx) in h.ends() {
            let got = rows[&(hostport(h.addr(), l), hostport(h.addr(), r))];
            assert_eq!(got, (rx / 1024, tx / 1024), "{l}->{r}:\n{out}");
        }
    }
    // Sorted by bytes sent + received, largest first (the IPv4 helper's rows are consecutive in its table).
    let order: Vec<u64> = out
        .lines()
        .filter(|l| l.starts_with(&format!("{} ", h4.pid)))
        .map(|l| l.split_whitespace().skip(4).map(|n| n.parse::<u64>().unwrap()).sum())
        .collect();
    assert!(order.windows(2).all(|w| w[0] >= w[1]), "{order:?}\n{out}");
    h4.finish();
    h6.finish();
}

#[test]
fn sort_by_sent_and_rows() {
    let mut h = Helper::start(false, &[(1024, 50 * 1024), (30 * 1024, 1024), (2048, 2048)]);
    let run = start(&["-C", "-S", "-s", "sent", "-r", "1", "-p", &h.pid.to_string(), "3600"]);
    h.go();
    let done = stop(run);
    let rows = screen_rows(&done.stdout, &h);
    assert!(!done.stdout.contains("loadavg"), "-S: {}", done.stdout);
    // The one row: the server end of the first connection, which sent 50 KB.
    let (c, s, _, _) = h.conns[0];
    assert_eq!(rows.len(), 1, "{}", done.stdout);
    assert_eq!(rows[&(hostport("127.0.0.1", s), hostport("127.0.0.1", c))], (1, 50));
    h.finish();
}

#[test]
fn screen_is_cleared_unless_c_and_count_ends_it() {
    for (args, escapes) in [(&["-S", "1", "2"][..], 2), (&["-C", "-S", "1", "2"][..], 0)] {
        let done = Running::start("tcptop", args).finish(WAIT);
        done.assert_success();
        assert_eq!(done.stdout.matches("\x1b[H\x1b[2J").count(), escapes, "{args:?}: {:?}", done.stdout);
        assert!(done.stdout.starts_with(BANNER), "{:?}", done.stdout);
    }
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let mut run = Running::start("tcptop", &["-C"]);
    run.wait_for_line(BANNER, WAIT);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `tcptop | head -1`: the banner is read, the pipe closes, the next screen ends the tool quietly.
    assert_ends_when_pipe_closes("tcptop", &["-C"], BANNER, || {});
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&["-4", "-6"][..], "cannot be used with", 2),
        (&["-s", "both"][..], "invalid value", 2),
        (&["-r", "0"][..], "", 2),
        (&["0"][..], "not a number of seconds", 2),
        (&["1", "0"][..], "", 2),
        (&["1", "2", "3"][..], "unexpected argument", 2),
        (&["--max-connections", "0"][..], "", 2),
        (&["-c", "/tmp"][..], "not a cgroup v2 directory", 1),
        (&["-p", "999999999"][..], "no process with PID", 1),
    ] {
        assert_refused("tcptop", args, code, what);
    }
}

/// `--prometheus -p PID`: the helper's two connections to its listener make one series per role, labelled by the
/// listener's port: the client ends sent 3000+7000 bytes and received 5000+11000, the server ends the reverse,
/// exactly. Scraped three times: while the connections are open, after a scrape interval without traffic (the
/// idle rows are folded into the tool's totals and deleted from the kernel's map) and after the helper has
/// exited; the counters read the same each time.
#[test]
fn prometheus_counts_bytes_per_server_port_and_role() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let mut h = Helper::start(false, &[(3000, 5000), (7000, 11000)]);
    let (tool, addr) = serving("tcptop", &["-p", &h.pid.to_string()]);
    h.go();
    let port = h.conns[0].1;
    assert!(h.conns.iter().all(|c| c.1 == port), "{:?}", h.conns);
    let comm = h.comm.clone();
    let series = |name: &str, role: &str| {
        format!(
            "corebpf_tcptop_{name}{{comm=\"{comm}\",laddr=\"127.0.0.1\",raddr=\"127.0.0.1\",port=\"{port}\",role=\"{role}\"}}"
        )
    };
    let check = |text: &str| {
        assert_eq!(sample(text, &series("sent_bytes_total", "client")), Some(10000.0), "{text}");
        assert_eq!(sample(text, &series("received_bytes_total", "client")), Some(16000.0), "{text}");
        assert_eq!(sample(text, &series("sent_bytes_total", "server")), Some(16000.0), "{text}");
        assert_eq!(sample(text, &series("received_bytes_total", "server")), Some(10000.0), "{text}");
        let ours = text.lines().filter(|l| l.starts_with("corebpf_tcptop_") && !l.contains("overflow")).count();
        assert_eq!(ours, 4, "only the helper's series: {text}");
    };
    let first = scrape(&addr);
    promtool_accepts(&first);
    check(&first);
    check(&scrape(&addr));
    h.finish();
    check(&scrape(&addr));
    tool.signal(libc::SIGTERM);
    let done = tool.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    for args in [&["--prometheus", "127.0.0.1:0", "1"][..], &["--prometheus", "127.0.0.1:0", "-j"][..]] {
        assert_refused("tcptop", args, 2, "");
    }
}

/// `-r` ranks the rows of both families together: in a cgroup of the test's own, an IPv6 client that sends 800 KB
/// and IPv4 clients that send 70 KB and 60 KB, `-s sent -r 2` shows the IPv6 client's row (in the IPv6 table) and
/// the 70 KB one (in the IPv4 table), and no other.
#[test]
fn row_limit_ranks_both_families_together() {
    let cg = corebpf_tests::cgroup::TestCgroup::new("tcptop-rows");
    let mut h4 = Helper::start(false, &[(70 * 1024, 1024), (60 * 1024, 1024)]);
    let mut h6 = Helper::start(true, &[(800 * 1024, 1024)]);
    for h in [&h4, &h6] {
        std::fs::write(cg.path().join("cgroup.procs"), h.pid.to_string()).unwrap();
    }
    let run = start(&["-C", "-S", "-s", "sent", "-r", "2", "-c", cg.arg(), "3600"]);
    h4.go();
    h6.go();
    let done = stop(run);
    let out = &done.stdout;
    let (rows4, rows6) = (screen_rows(out, &h4), screen_rows(out, &h6));
    let (c4, s4, _, _) = h4.conns[0];
    let (c6, s6, _, _) = h6.conns[0];
    assert_eq!(rows6.len(), 1, "{out}");
    assert_eq!(rows6[&(hostport("::1", c6), hostport("::1", s6))], (1, 800), "{out}");
    assert_eq!(rows4.len(), 1, "{out}");
    assert_eq!(rows4[&(hostport("127.0.0.1", c4), hostport("127.0.0.1", s4))], (1, 70), "{out}");
    let v4 = out.find(" LADDR ").expect(out);
    let v6 = out.find(" LADDR6 ").expect(out);
    assert!(v4 < v6, "the IPv4 table first:\n{out}");
    h4.finish();
    h6.finish();
}

/// The workload of sendfile_and_splice_are_counted_exactly: a loopback connection whose client sends the file
/// argv[1] with sendfile() and then argv[2] bytes from a pipe with splice(); a thread at the server end reads them.
/// Prints the client's and the server's ports before "done".
const SENDFILE: &str = r#"
import os, socket, sys, threading
path, spliced = sys.argv[1], int(sys.argv[2])
size = os.path.getsize(path)
print("ready", flush=True)
sys.stdin.readline()
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen()
c = socket.create_connection(srv.getsockname())
s, _ = srv.accept()
def drain():
    left = size + spliced
    while left > 0:
        left -= len(s.recv(min(left, 1 << 16)))
reader = threading.Thread(target=drain)
reader.start()
with open(path, "rb") as f:
    sent = 0
    while sent < size:
        sent += os.sendfile(c.fileno(), f.fileno(), sent, size - sent)
r, w = os.pipe()
os.write(w, b"y" * spliced)
moved = 0
while moved < spliced:
    moved += os.splice(r, c.fileno(), spliced - moved)
reader.join()
print(c.getsockname()[1], s.getsockname()[1], flush=True)
print("done", flush=True)
"#;

/// sendfile() and splice() to a TCP socket pass through sendmsg (6.5+), so they are counted byte for byte: the
/// client end sent exactly the file's 300007 bytes plus 50000 spliced ones, the server end received them.
#[test]
fn sendfile_and_splice_are_counted_exactly() {
    let file = ScratchFile::new("tcptop-sendfile");
    std::fs::write(&file.0, vec![b'z'; 300_007]).unwrap();
    let mut workload = corebpf_tests::runtimes::Workload::python_script(SENDFILE, &[file.0.to_str().unwrap(), "50000"]);
    let pid = workload.pid();
    let run = start(&["--json", "-p", &pid.to_string(), "3600"]);
    let said = workload.go();
    let ports: Vec<u16> = said.last().unwrap().split_whitespace().map(|p| p.parse().unwrap()).collect();
    let done = stop(run);
    let totals = json_totals(&done.stdout);
    let bytes = |l: u16, r: u16| totals.get(&(pid, l, r)).map(|t| (t.0, t.1));
    assert_eq!(bytes(ports[0], ports[1]), Some((350_007, 0)), "{}", done.stdout);
    assert_eq!(bytes(ports[1], ports[0]), Some((0, 350_007)), "{}", done.stdout);
}
