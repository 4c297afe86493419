// SPDX-License-Identifier: Apache-2.0 OR MIT
//! dcstat against a helper (tests/lookups.c) that, in a fresh directory, stats MISSES names that do not exist,
//! stats one existing name HITS times and opens OPENS more names that do not exist. Each of those names is new
//! to the dentry cache, so each is one miss; each stat or open looks its name up at least once (REFS). With `-p`
//! the JSON counts summed over the run hold the helper's lookups and, besides them, only the few of its own
//! stdin/stdout calls: misses between MISSES + OPENS and that plus a little slack (so the HITS stats of the
//! existing name, or an open counted twice, would show), references at least MISSES + HITS + OPENS. System-wide,
//! other processes add their own: lower bounds only.
//!
//! dcstat needs kernel-function tracing. Where the kernel offers none (this development host: no kprobes,
//! fentry refused), the tests check the one-line refusal instead; in the kernel matrix's guests
//! (COREBPF_HELPER_DIR is set there) the tool must attach and the counts are checked.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

use corebpf_tests::sock::{stop, WAIT};
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "dcstat";
const HEADER: &str = "TIME         REFS/s   SLOW/s   MISS/s     HIT%";

const MISSES: u64 = 3000;
const HITS: u64 = 4000;
const OPENS: u64 = 2000;
/// The helper's own lookups besides its workload, with `-p` (none expected; a margin far below the counts).
const SLACK: u64 = 50;

/// The helper, waiting for "go" in its fresh directory (removed with it).
struct Helper {
    child: KillOnDrop,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    dir: ScratchFile,
}

impl Helper {
    fn start() -> Helper {
        let exe = build_c_helper("dcstat-lookups", include_str!("lookups.c"), &["-O1"]);
        let dir = ScratchFile::new("dcstat");
        std::fs::create_dir(&dir.0).unwrap();
        let mut child = Command::new(exe)
            .arg(&dir.0)
            .args([MISSES, HITS, OPENS].map(|n| n.to_string()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pid = line.trim().parse().unwrap_or_else(|_| panic!("helper printed {line:?}"));
        Helper { child: KillOnDrop(child), stdin, stdout, pid, dir }
    }

    /// Makes the lookups; returns once they are done.
    fn run(&mut self) {
        writeln!(self.stdin, "go").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n", "the helper failed");
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
        let _ = std::fs::remove_dir_all(&self.dir.0);
    }
}

/// Starts dcstat and waits until it is tracing; None where the kernel offers no kernel-function tracing (outside
/// the matrix's guests only), after checking that the tool said so in one line, exit 1.
fn start(args: &[&str]) -> Option<Running> {
    let mut run = Running::start(TOOL, args);
    match wait_attached(run.pid(), WAIT) {
        Ok(_) => {
            run.note_programs();
            Some(run)
        }
        Err(why) => {
            let done = run.finish(WAIT);
            assert!(
                std::env::var_os(HELPER_DIR_ENV).is_none(),
                "dcstat did not attach in the guest ({why}): {}",
                done.stderr
            );
            assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
            assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
            assert!(done.stderr.contains("fentry") && done.stderr.contains("kprobes"), "{}", done.stderr);
            assert!(done.stdout.is_empty(), "{}", done.stdout);
            eprintln!(
                "dcstat cannot trace kernel functions here: checked its refusal instead (the matrix checks counts)"
            );
            None
        }
    }
}

/// The JSON lines' exact counts summed over the run: (refs, slow, miss), and the number of lines.
fn json_totals(stdout: &str) -> ((u64, u64, u64), usize) {
    let lines = json_lines(stdout);
    let mut t = (0, 0, 0);
    for l in &lines {
        let c = &l["counts"];
        t.0 += c["refs"].as_u64().unwrap();
        t.1 += c["slow"].as_u64().unwrap();
        t.2 += c["miss"].as_u64().unwrap();
        assert!(l["interval_s"].as_u64() == Some(1), "{stdout}");
    }
    (t, lines.len())
}

#[test]
fn pid_filter_counts_the_helpers_lookups() {
    let mut helper = Helper::start();
    let pid = helper.pid.to_string();
    let Some(run) = start(&["-p", &pid, "-j"]) else { return };
    helper.run();
    let done = stop(run);
    done.assert_no_programs_left();
    let ((refs, slow, miss), n) = json_totals(&done.stdout);
    assert!(n >= 1, "{}", done.stdout);
    assert!((MISSES + OPENS..=MISSES + OPENS + SLACK).contains(&miss), "misses {miss}: {}", done.stdout);
    assert!(slow >= MISSES + OPENS && slow <= refs, "slow {slow}: {}", done.stdout);
    assert!(refs >= MISSES + HITS + OPENS, "refs {refs}: {}", done.stdout);
}

#[test]
fn system_wide_rows_hold_the_lookups() {
    let mut helper = Helper::start();
    let Some(mut run) = start(&[]) else { return };
    run.wait_for_line(HEADER, WAIT);
    helper.run();
    // One more row after the lookups, so the text run also ends by its own SIGINT row.
    run.wait_for_more_lines(1, WAIT);
    let text = stop(run);
    text.assert_no_programs_left();
    let mut lines = text.stdout.lines();
    assert_eq!(lines.next(), Some(HEADER), "{}", text.stdout);
    let (mut refs, mut miss) = (0, 0);
    for row in lines {
        // "HH:MM:SS:  refs slow miss hit%" (rates: one-second intervals but the last, which is shorter)
        let f: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(f.len(), 5, "{}", text.stdout);
        assert!(f[0].len() == 9 && f[0].ends_with(':'), "{}", text.stdout);
        refs += f[1].parse::<u64>().unwrap();
        miss += f[3].parse::<u64>().unwrap();
        assert!(f[4] == "-%" || f[4].parse::<f64>().is_ok(), "{}", text.stdout);
    }
    // Per-second rates of one-second rows are the counts; the last row's rate is at least its count.
    assert!(miss >= MISSES + OPENS, "{}", text.stdout);
    assert!(refs >= MISSES + HITS + OPENS, "{}", text.stdout);
}

#[test]
fn bad_input() {
    assert_refused(TOOL, &["0"], 2, "0");
    assert_refused(TOOL, &["1", "0"], 2, "0");
    assert_refused(TOOL, &["-j", "--prometheus", "9999"], 2, "--");
    assert_refused(TOOL, &["--prometheus", "127.0.0.1:9999", "1"], 2, "interval");
}

/// `--prometheus` with `-p`: the counters hold the helper's lookups, as the JSON counts do.
#[test]
fn prometheus_counters_hold_the_helpers_lookups() {
    use corebpf_tests::prom::{free_addr, sample, scrape};
    let mut helper = Helper::start();
    let pid = helper.pid.to_string();
    let addr = free_addr();
    let Some(run) = start(&["-p", &pid, "--prometheus", &addr]) else { return };
    helper.run();
    let text = scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    let value = |name: &str| sample(&text, &format!("corebpf_dcstat_{name}_total")).map_or(0, |v| v as u64);
    let miss = value("misses");
    assert!((MISSES + OPENS..=MISSES + OPENS + SLACK).contains(&miss), "{text}");
    assert!(value("slow_lookups") >= MISSES + OPENS, "{text}");
    assert!(value("references") >= MISSES + HITS + OPENS, "{text}");
}
