// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpsynbl against a helper (tests/fill.c) whose listener has a known backlog limit and never accepts: it makes
//! N loopback connections one at a time, each once the previous one is queued, so the queue lengths the kernel
//! sees at the handshakes are exactly 0..N-1. Each test uses backlog limits no other test or program uses, and looks
//! only at those sections. The limits depend on the test process's PID ([`limit`]): in the kernel matrix two
//! scenarios of this file (fentry and kprobes) may run at once in one guest, and with fixed limits each saw the
//! other's handshakes too (every count exactly doubled, once on 6.12). Checked: the histogram, in text and JSON,
//! per family with -4/-6.
//!
//! tcpsynbl needs kernel-function tracing. Where the kernel offers none (this development host: no kprobes,
//! fentry refused), the tests check the one-line refusal instead; in the kernel matrix's guests
//! (COREBPF_HELPER_DIR is set there) the tool must attach and the histograms are checked.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use corebpf_tests::sock::{stop, WAIT};
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "tcpsynbl";

/// The helper's listener, ready and waiting for `go`.
struct Filler {
    child: KillOnDrop,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Filler {
    fn new(v6: bool, backlog: u32, n: u32) -> Filler {
        let exe = build_c_helper("tcpsynbl-fill", include_str!("fill.c"), &["-O1"]);
        let args = [if v6 { "6" } else { "4" }.to_string(), backlog.to_string(), n.to_string()];
        let mut child = Command::new(exe).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        Filler { child: KillOnDrop(child), stdin, stdout }
    }

    /// Makes the connections; returns once every one is in the accept queue (the helper keeps them open).
    fn fill(&mut self) {
        writeln!(self.stdin, "go").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n", "the helper failed");
    }

    fn finish(mut self) {
        let _ = writeln!(self.stdin, "bye");
        let _ = self.child.0.wait();
    }
}

/// Starts tcpsynbl and waits until it holds `links` BPF links; None where the kernel offers no kernel-function
/// tracing (outside the matrix's guests only), after checking that the tool said so in one line, exit 1.
fn start(args: &[&str], links: usize) -> Option<Running> {
    let mut probe = Running::start(TOOL, args);
    let deadline = std::time::Instant::now() + WAIT;
    while links_of(probe.pid()) < links {
        if std::time::Instant::now() > deadline || probe_exited(&mut probe) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if links_of(probe.pid()) >= links {
        probe.note_programs();
        return Some(probe);
    }
    let done = probe.finish(WAIT);
    assert!(std::env::var_os(HELPER_DIR_ENV).is_none(), "tcpsynbl did not attach in the guest: {}", done.stderr);
    assert_refusal(&done);
    eprintln!("tcpsynbl cannot trace kernel functions here: checked its refusal instead (the matrix checks counts)");
    None
}

fn probe_exited(run: &mut Running) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", run.pid())).map_or(true, |s| s.contains(") Z "))
}

fn assert_refusal(done: &Finished) {
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    assert!(done.stderr.contains("fentry") && done.stderr.contains("kprobes"), "{}", done.stderr);
    assert!(done.stdout.is_empty(), "{}", done.stdout);
}

/// The rows of the `backlog_max = limit` section of the text output: (low, high, count) of non-empty slots.
fn section(stdout: &str, limit: u32) -> Option<Vec<(u64, u64, u64)>> {
    let head = format!("\nbacklog_max = {limit}\n");
    let start = stdout.find(&head)? + head.len();
    let body = &stdout[start..];
    let end = body.find("\nbacklog_max = ").map_or(body.len(), |e| e + 1);
    assert!(body.starts_with("     backlog             : count     distribution\n"), "{stdout}");
    Some(hist_rows(&body[..end]).into_iter().filter(|r| r.2 > 0).collect())
}

/// Backlog limit number `n` (0 to 3) of this test process: four limits of its own, from 64 to 4063, so that no
/// other run of these tests at the same time (PIDs less than 1000 apart) shares one, and below the kernel's
/// somaxconn (4096), which would cap them.
fn limit(n: u32) -> u32 {
    64 + (std::process::id() % 1000) * 4 + n
}

#[test]
fn queue_lengths_of_one_listener() {
    let l = limit(0);
    let mut filler = Filler::new(false, l, 12);
    let Some(run) = start(&[], 2) else { return };
    filler.fill();
    let done = stop(run);
    done.assert_no_programs_left();
    assert!(done.stdout.starts_with("Tracing SYN backlog size. Ctrl-C to end.\n"), "{}", done.stdout);
    // Queue lengths 0..11: 0-1 twice, 2-3 twice, 4-7 four times, 8-11 four times.
    assert_eq!(section(&done.stdout, l), Some(vec![(0, 1, 2), (2, 3, 2), (4, 7, 4), (8, 15, 4)]), "{}", done.stdout);
    filler.finish();
}

#[test]
fn json_and_families() {
    let (l4, l6) = (limit(1), limit(2));
    let mut v4 = Filler::new(false, l4, 3);
    let mut v6 = Filler::new(true, l6, 5);
    let Some(both) = start(&["-j"], 2) else { return };
    let only4 = start(&["-4"], 1).expect("attached once already");
    let only6 = start(&["-6", "-j"], 1).expect("attached once already");
    v4.fill();
    v6.fill();
    let (both, only4, only6) = (stop(both), stop(only4), stop(only6));
    let json = |out: &str, limit: u32| {
        let lines: Vec<_> = json_lines(out).into_iter().filter(|l| l["backlog_max"] == limit).collect();
        assert!(lines.len() <= 1, "{out}");
        lines.first().map(|l| {
            assert_eq!(l["unit"], "backlog");
            let b: Vec<(u64, u64)> = l["buckets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| (b["low"].as_u64().unwrap(), b["count"].as_u64().unwrap()))
                .collect();
            (l["count"].as_u64().unwrap(), b)
        })
    };
    assert_eq!(json(&both.stdout, l4), Some((3, vec![(0, 2), (2, 1)])), "{}", both.stdout);
    assert_eq!(json(&both.stdout, l6), Some((5, vec![(0, 2), (2, 2), (4, 1)])), "{}", both.stdout);
    assert_eq!(section(&only4.stdout, l4), Some(vec![(0, 1, 2), (2, 3, 1)]), "{}", only4.stdout);
    assert_eq!(section(&only4.stdout, l6), None, "{}", only4.stdout);
    assert_eq!(json(&only6.stdout, l4), None, "{}", only6.stdout);
    assert_eq!(json(&only6.stdout, l6), Some((5, vec![(0, 2), (2, 2), (4, 1)])), "{}", only6.stdout);
    v4.finish();
    v6.finish();
}

#[test]
fn bad_input() {
    assert_refused(TOOL, &["-4", "-6"], 2, "--ipv");
    assert_refused(TOOL, &["0"], 2, "0");
    assert_refused(TOOL, &["1", "0"], 2, "0");
}

/// `--prometheus`: the listener's limit has its own histogram, with each handshake counted once: queue lengths 0
/// to 4 give `_count` 5, `_sum` 10 and cumulative buckets 2, 4, 5 at `le` 2, 4, 8.
#[test]
fn prometheus_histogram_of_one_limit() {
    use corebpf_tests::prom::{free_addr, sample, scrape};
    let l = limit(3);
    let mut filler = Filler::new(false, l, 5);
    let addr = free_addr();
    let Some(run) = start(&["--prometheus", &addr], 2) else { return };
    filler.fill();
    let text = scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    let series = |suffix: &str, le: Option<&str>| {
        let le = le.map(|le| format!("le=\"{le}\",")).unwrap_or_default();
        sample(&text, &format!("corebpf_tcpsynbl_accept_queue_length_{suffix}{{{le}backlog_max=\"{l}\"}}"))
    };
    assert_eq!(series("count", None), Some(5.0), "{text}");
    assert_eq!(series("sum", None), Some(10.0), "{text}");
    let buckets: Vec<_> = ["2.0", "4.0", "8.0"].iter().map(|le| series("bucket", Some(le))).collect();
    assert_eq!(buckets, vec![Some(2.0), Some(4.0), Some(5.0)], "{text}");
    filler.finish();
}

/// One -v says which mechanisms the kernel refused, without libbpf's guess that the memory limit is to blame
/// ("try raising 'ulimit -l'"), which it prints for any refused load: here fentry is refused outright. Where the
/// tool attaches (the matrix's guests), it is stopped and checked the same way.
#[test]
fn one_v_leaves_out_libbpfs_memlock_advice() {
    let probe = Running::start(TOOL, &["-v"]);
    let deadline = std::time::Instant::now() + WAIT;
    while links_of(probe.pid()) == 0 && std::time::Instant::now() < deadline {
        if std::fs::read_to_string(format!("/proc/{}/stat", probe.pid())).map_or(true, |s| s.contains(") Z ")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    probe.signal(libc::SIGINT);
    let done = probe.finish(WAIT);
    assert!(!done.stderr.contains("ulimit"), "{}", done.stderr);
    if std::env::var_os(HELPER_DIR_ENV).is_none() && done.status.code() == Some(1) {
        assert!(done.stderr.contains("fentry"), "{}", done.stderr);
    }
}
