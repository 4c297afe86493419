// SPDX-License-Identifier: Apache-2.0 OR MIT
//! vfsstat against a helper that makes known numbers of each VFS call in one burst: reads of /dev/zero, writes
//! to /dev/null, fsyncs, opens, files made with mknod (the way in to vfs_create), unlinks, mkdirs and rmdirs,
//! plus calls that must not count (opens of a missing file, a FIFO made with mknod). System-wide, the columns
//! summed over the run hold at least the helper's calls (other tests run at the same time); with `-p` they hold
//! the helper's calls and nothing else but a few of its own start-up and stdin/stdout calls.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::*;

const WAIT: Duration = Duration::from_secs(30);
const HEADER: &str = "TIME         READ/s  WRITE/s  FSYNC/s   OPEN/s CREATE/s UNLINK/s  MKDIR/s  RMDIR/s";

/// The helper's burst: how many calls of each column it makes (BCC's column order), and the calls that reach no
/// counted function: opens of a missing file and FIFOs made with mknod (vfs_mknod, not vfs_create).
const READS: u64 = 23456;
const WRITES: u64 = 21234;
const FSYNCS: u64 = 345;
const OPENS: u64 = 4321;
const CREATES: u64 = 765;
const FIFOS: u64 = 111;
const MKDIRS: u64 = 543;
const FAILED_OPENS: u64 = 5000;
/// Each column's expected count: the FIFOs are unlinked too.
const EXPECTED: [u64; 8] = [READS, WRITES, FSYNCS, OPENS, CREATES, CREATES + FIFOS, MKDIRS, MKDIRS];
/// The helper's own calls around the burst besides it, with `-p` (its "go" read, its "done" write, ...).
const SLACK: u64 = 20;

const HELPER: &str = include_str!("burst.c");

/// The helper process, waiting for "go".
struct Helper {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    _dir: ScratchDir,
}

/// A scratch directory, removed with what is left in it.
struct ScratchDir(ScratchFile);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0 .0);
    }
}

fn helper_exe() -> std::path::PathBuf {
    build_c_helper("vfsstat-helper", HELPER, &["-O1"])
}

impl Helper {
    fn start() -> Helper {
        let exe = helper_exe();
        let dir = ScratchDir(ScratchFile::new("vfsstat"));
        std::fs::create_dir(&dir.0 .0).unwrap();
        let counts = [READS, WRITES, FSYNCS, OPENS, CREATES, FIFOS, MKDIRS, FAILED_OPENS];
        let mut child: Child = Command::new(exe)
            .arg(&dir.0 .0)
            .args(counts.iter().map(u64::to_string))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("vfsstat-helper");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pid = line.trim().parse().unwrap_or_else(|_| panic!("helper printed {line:?}"));
        Helper { child: KillOnDrop(child), stdin, stdout, pid, _dir: dir }
    }

    /// Makes the burst and waits until it is done.
    fn burst(&mut self) {
        writeln!(self.stdin.as_mut().unwrap(), "go").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "done", "the helper failed: {:?}", self.child.0.try_wait());
    }

    fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.0.wait().unwrap();
        assert!(status.success(), "helper: {status:?}");
    }
}

/// Runs vfsstat with `args` (and `env`) around one burst of the helper (`-p` its PID if `pid_filter`), waits
/// until a whole interval has been printed after the burst (so the burst is in whole intervals, and the last
/// one, cut short, holds none of it), stops it with SIGINT and returns what it printed.
fn traced(args: &[&str], env: &[(&str, &str)], pid_filter: bool) -> Finished {
    let mut helper = Helper::start();
    let pid = helper.pid.to_string();
    let mut all: Vec<&str> = Vec::new();
    if pid_filter {
        all.extend(["-p", &pid]);
    }
    all.extend(args);
    let json = args.contains(&"--json");
    let mut run = Running::start_with_env("vfsstat", &all, env);
    if json {
        // No header in JSON: the first record says the tool is attached.
        run.wait_for_line("\"counts\"", WAIT);
    } else {
        run.wait_for_line("TIME", WAIT);
    }
    helper.burst();
    helper.finish();
    // Two more rows: a row printed before the burst ended may still be on its way; the second is a whole
    // interval that ended after it.
    run.wait_for_more_lines(2, WAIT);
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The rows of a text report: each column's rate.
fn rows(stdout: &str) -> Vec<[u64; 8]> {
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some(HEADER), "{stdout}");
    lines
        .map(|l| {
            let (time, rest) = l.split_once(": ").unwrap_or_else(|| panic!("row {l:?}"));
            assert_eq!(time.len(), 8, "{l:?}");
            let v: Vec<u64> = rest.split_whitespace().map(|n| n.parse().unwrap()).collect();
            assert_eq!(l.len(), 10 + 8 * 9, "BCC's widths: {l:?}");
            v.try_into().unwrap_or_else(|_| panic!("row {l:?}"))
        })
        .collect()
}

fn sums(rows: &[[u64; 8]]) -> [u64; 8] {
    let mut s = [0; 8];
    for r in rows {
        for (a, b) in s.iter_mut().zip(r) {
            *a += b;
        }
    }
    s
}

const KEYS: [&str; 8] = ["read", "write", "fsync", "open", "create", "unlink", "mkdir", "rmdir"];

/// The JSON records: (counts, per-second rates, interval, true length in seconds).
fn records(stdout: &str) -> Vec<([u64; 8], [u64; 8], u64, f64)> {
    json_lines(stdout)
        .iter()
        .map(|r| {
            let get = |o: &str| KEYS.map(|k| r[o][k].as_u64().unwrap_or_else(|| panic!("{o}.{k} in {r}")));
            let seconds = r["seconds"].as_f64().unwrap_or_else(|| panic!("seconds in {r}"));
            (get("counts"), get("per_second"), r["interval_s"].as_u64().unwrap(), seconds)
        })
        .collect()
}

fn assert_at_least(total: &[u64; 8], out: &str) {
    for (i, k) in KEYS.iter().enumerate() {
        assert!(total[i] >= EXPECTED[i], "{k}: {} < {}\n{out}", total[i], EXPECTED[i]);
    }
}

fn assert_only_the_helper(total: &[u64; 8], out: &str) {
    for (i, k) in KEYS.iter().enumerate() {
        assert!(
            (EXPECTED[i]..=EXPECTED[i] + SLACK).contains(&total[i]),
            "{k}: {} not within {}..={} (failed opens and FIFOs must not count)\n{out}",
            total[i],
            EXPECTED[i],
            EXPECTED[i] + SLACK
        );
    }
}

#[test]
fn counts_every_call_of_a_known_burst() {
    helper_exe();
    let done = traced(&["1"], &[], false);
    let rows = rows(&done.stdout);
    assert_at_least(&sums(&rows), &done.stdout);
    // The burst is a jump: one interval has at least half of its reads, whichever boundary it straddled.
    let most = rows.iter().map(|r| r[0]).max().unwrap_or(0);
    assert!(most >= READS / 2, "no interval with {} reads\n{}", READS / 2, done.stdout);
}

#[test]
fn pid_filter_counts_only_that_process() {
    helper_exe();
    let done = traced(&["1"], &[], true);
    assert_only_the_helper(&sums(&rows(&done.stdout)), &done.stdout);
}

#[test]
fn json_counts_and_rates_agree() {
    helper_exe();
    let done = traced(&["--json", "2"], &[], true);
    let recs = records(&done.stdout);
    assert!(!recs.is_empty(), "{}", done.stdout);
    let mut total = [0; 8];
    let (whole, last) = recs.split_at(recs.len() - 1);
    for (counts, rates, interval, seconds) in whole {
        assert_eq!((*interval, *seconds), (2, 2.0), "{}", done.stdout);
        for i in 0..8 {
            assert_eq!(
                rates[i],
                counts[i] / 2,
                "{}: BCC's rate is the count over the interval\n{}",
                KEYS[i],
                done.stdout
            );
        }
    }
    // The last interval, cut short by SIGINT: its rates are over its true length.
    let (_, rates, _, seconds) = &last[0];
    assert!(*seconds < 2.0, "{}", done.stdout);
    let (counts, ..) = &last[0];
    let ms = ((seconds * 1000.0).round() as u64).max(1);
    for i in 0..8 {
        assert_eq!(rates[i], counts[i] * 1000 / ms, "{}", done.stdout);
    }
    for (counts, ..) in &recs {
        for i in 0..8 {
            total[i] += counts[i];
        }
    }
    assert_only_the_helper(&total, &done.stdout);
}

#[test]
fn text_rates_are_per_second_over_longer_intervals() {
    helper_exe();
    let done = traced(&["2"], &[], true);
    let rows = rows(&done.stdout);
    let total = sums(&rows).map(|r| r * 2);
    // Each row lost at most one call to the division by 2.
    for (i, k) in KEYS.iter().enumerate() {
        let low = EXPECTED[i].saturating_sub(rows.len() as u64);
        assert!((low..=EXPECTED[i] + SLACK).contains(&total[i]), "{k}: 2 x {} \n{}", total[i] / 2, done.stdout);
    }
}

#[test]
fn raw_tp_fallback_counts_the_same() {
    helper_exe();
    let done = traced(&["-v", "1"], &[("COREBPF_ATTACH", "raw_tp")], true);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    assert_only_the_helper(&sums(&rows(&done.stdout)), &done.stdout);
}

#[test]
fn count_ends_the_run() {
    let done = run_tool("vfsstat", &["1", "2"]);
    done.assert_success();
    assert_eq!(rows(&done.stdout).len(), 2, "{}", done.stdout);
    done.assert_no_programs_left();
}

/// Issue 31 item 14: the last interval, cut short by SIGINT, was divided by the whole interval. A burst made
/// entirely within a 30-second interval that SIGINT ends: its rate is over the interval's true length, which is
/// at most the time the whole run took here, so the rate is at least the calls over that time.
#[test]
fn the_last_interval_is_divided_by_its_true_length() {
    helper_exe();
    let mut helper = Helper::start();
    let pid = helper.pid.to_string();
    let began = Instant::now();
    let mut run = Running::start("vfsstat", &["-p", &pid, "30"]);
    run.wait_for_line("TIME", WAIT);
    helper.burst();
    helper.finish();
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    let took = began.elapsed();
    done.assert_success();
    assert!(took < Duration::from_secs(30), "the run took {took:?}: the interval was not cut short");
    let rows = rows(&done.stdout);
    assert_eq!(rows.len(), 1, "{}", done.stdout);
    let floor = (READS as f64 / took.as_secs_f64()) as u64;
    assert!(rows[0][0] >= floor, "READ/s {} < {READS} reads over {took:?}\n{}", rows[0][0], done.stdout);
}

#[test]
fn sigint_and_sigterm_print_the_final_interval() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let mut run = Running::start("vfsstat", &["10"]);
        run.wait_for_line("TIME", WAIT);
        run.signal(sig);
        let done = run.finish(WAIT);
        done.assert_success();
        assert!(done.stderr.is_empty(), "{}", done.stderr);
        assert_eq!(rows(&done.stdout).len(), 1, "{sig}: one row for the partial interval\n{}", done.stdout);
        done.assert_no_programs_left();
    }
}

#[test]
fn closed_pipe_ends_quietly() {
    // `vfsstat | head -1`: the header is read, the pipe closes, the tool ends at once, quietly.
    let mut child =
        Command::new(bin("vfsstat")).arg("5").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    assert_eq!(first.trim_end(), HEADER);
    let ids = prog_ids_of(child.id());
    drop(reader);
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "vfsstat did not end after its pipe closed");
        thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.is_empty(), "{err}");
    Finished { status, stdout: String::new(), stderr: err, prog_ids: ids }.assert_no_programs_left();
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&["0"][..], "not a number of seconds", 2),
        (&["x"][..], "not a number of seconds", 2),
        (&["1", "0"][..], "", 2),
        (&["1", "2", "3"][..], "unexpected argument", 2),
        (&["-p", "0"][..], "not a PID", 2),
        (&["-p", "999999999"][..], "no process with PID", 1),
        (&["--nope"][..], "unexpected argument", 2),
    ] {
        let done = run_tool("vfsstat", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(what), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.trim_end().lines().count(), 1, "{args:?}: {}", done.stderr);
        assert!(done.stdout.is_empty(), "{args:?}: {}", done.stdout);
    }
}

#[test]
fn prometheus_counts_only_the_helper() {
    helper_exe();
    let mut helper = Helper::start();
    let pid = helper.pid.to_string();
    let (run, addr) = prom::serving("vfsstat", &["-p", &pid]);
    helper.burst();
    helper.finish();
    let text = prom::scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    prom::promtool_accepts(&text);
    let total = KEYS.map(|k| {
        prom::sample(&text, &format!("corebpf_vfsstat_calls_total{{operation=\"{k}\"}}"))
            .unwrap_or_else(|| panic!("no {k}:\n{text}")) as u64
    });
    assert_only_the_helper(&total, &text);
}
