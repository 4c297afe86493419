//! runqlat against real scheduling: a helper pinned to one CPU sleeps 1 ms at a time, alone or with busy
//! processes pinned to the same CPU. The kernel's own account of the helper (`/proc/PID/schedstat`: times run
//! and nanoseconds spent waiting on a run queue) is the ground truth for the count and total of the histograms.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use corebpf_tests::*;

const BANNER: &str = "Tracing run queue latency";
const SLEEPS: u32 = 400;

/// `rqlsleeper N`: waits for a line on stdin, then sleeps 1 ms N times and prints the change of its
/// /proc/self/schedstat (runs, waited ns) over the loop; then waits for stdin to close.
/// `rqlsleeper spin`: spins until killed.
const HELPER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
static void stat(unsigned long long *runs, unsigned long long *waited) {
    unsigned long long on;
    FILE *f = fopen("/proc/self/schedstat", "r");
    if (!f || fscanf(f, "%llu %llu %llu", &on, waited, runs) != 3) exit(3);
    fclose(f);
}
int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "spin")) { prctl(PR_SET_NAME, "rqlspinner"); for (;;) {} }
    prctl(PR_SET_NAME, "rqlsleeper");
    int n = argc > 1 ? atoi(argv[1]) : 100;
    char line[64];
    printf("%d\n", getpid()); fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    unsigned long long r0, w0, r1, w1;
    stat(&r0, &w0);
    struct timespec ts = {0, 1000000};
    for (int i = 0; i < n; i++) nanosleep(&ts, NULL);
    stat(&r1, &w1);
    printf("%llu %llu\n", r1 - r0, w1 - w0); fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {}
    return 0;
}
"#;

fn helper() -> PathBuf {
    build_c_helper("rqlsleeper", HELPER, &["-O2"])
}

/// The CPU the tests pin to: the last one.
fn cpu() -> String {
    let n = thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    (n - 1).to_string()
}

struct Sleeper {
    child: KillOnDrop,
    out: BufReader<std::process::ChildStdout>,
    pid: u32,
}

impl Sleeper {
    fn start(exe: &PathBuf) -> Sleeper {
        let mut child = Command::new("taskset")
            .args(["-c", &cpu()])
            .arg(exe)
            .arg(SLEEPS.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("taskset");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let pid = line.trim().parse().expect("helper's PID");
        Sleeper { child: KillOnDrop(child), out, pid }
    }

    /// Runs the sleep loop; returns (runs, waited ns) from the kernel's schedstat.
    fn run(&mut self) -> (u64, u64) {
        writeln!(self.child.0.stdin.as_mut().unwrap(), "go").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
        (v[0], v[1])
    }

    fn end(mut self) {
        drop(self.child.0.stdin.take());
        let _ = self.child.0.wait();
    }
}

fn spinners(exe: &PathBuf, n: usize) -> Vec<KillOnDrop> {
    (0..n)
        .map(|_| KillOnDrop(Command::new("taskset").args(["-c", &cpu()]).arg(exe).arg("spin").spawn().unwrap()))
        .collect()
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done
}

/// Sum of count and sum_ns over the JSON lines.
fn json_totals(text: &str) -> (u64, u64) {
    json_lines(text)
        .iter()
        .fold((0, 0), |(c, s), o| (c + o["count"].as_u64().unwrap(), s + o["sum_ns"].as_u64().unwrap()))
}

/// Runs the sleeper under `runqlat -p PID -j 1` with `busy` spinners on its CPU; returns (our count, our sum,
/// kernel's runs, kernel's waited ns).
fn measured(busy: usize) -> (u64, u64, u64, u64, Finished) {
    let exe = helper();
    let _spin = spinners(&exe, busy);
    let mut sleeper = Sleeper::start(&exe);
    let mut run = Running::start("runqlat", &["-p", &sleeper.pid.to_string(), "-j", "1"]);
    wait_attached(&mut run);
    let (runs, waited) = sleeper.run();
    let done = stop(run);
    sleeper.end();
    let (count, sum) = json_totals(&done.stdout);
    (count, sum, runs, waited, done)
}

/// JSON mode prints no banner: wait until the tool holds its programs and prints its first (idle) interval.
fn wait_attached(run: &mut Running) {
    run.wait_for_line("\"unit\"", Duration::from_secs(20));
}

#[test]
fn counts_each_wakeup_of_a_pid_and_its_wait_as_schedstat_does() {
    for busy in [0, 3] {
        let (count, sum, runs, waited, done) = measured(busy);
        // Each run of the loop follows exactly one wait on the run queue (a wake-up or a preemption); the
        // "go" wake-up before the loop and a few switches around it are counted too.
        assert!(
            count + 2 >= runs && count <= runs + 6,
            "{busy} busy: counted {count}, kernel ran it {runs} times:\n{}",
            done.stdout
        );
        assert!(runs >= SLEEPS as u64, "fewer runs than sleeps: {runs}");
        // The waiting time agrees with the kernel's run_delay (within 20% and 2 ms).
        let (lo, hi) = (waited * 8 / 10, waited * 12 / 10 + 2_000_000);
        assert!(
            sum >= lo.saturating_sub(2_000_000) && sum <= hi,
            "{busy} busy: waited {sum} ns, schedstat {waited} ns"
        );
        done.assert_no_programs_left();
    }
}

#[test]
fn competition_lengthens_the_waits() {
    let (c0, s0, _, w0, _) = measured(0);
    let (c3, s3, _, w3, _) = measured(3);
    // The kernel says the helper waited longer per run with three spinners on its CPU; so must we.
    if w3 / c3.max(1) > 2 * (w0 / c0.max(1)) {
        assert!(s3 / c3.max(1) > s0 / c0.max(1), "alone {s0}/{c0} ns, with spinners {s3}/{c3} ns");
    } else {
        panic!("spinners did not lengthen the kernel's run_delay: alone {w0}, busy {w3}");
    }
}

#[test]
fn per_process_and_thread_sections_name_the_helper() {
    let exe = helper();
    let _spin = spinners(&exe, 2);
    for flag in ["-P", "-L"] {
        let mut sleeper = Sleeper::start(&exe);
        let mut run = Running::start("runqlat", &[flag]);
        run.wait_for_line(BANNER, Duration::from_secs(20));
        let (runs, _) = sleeper.run();
        let done = stop(run);
        let pid = sleeper.pid;
        sleeper.end();
        // The helper runs in one thread: its PID is its TID.
        let label = if flag == "-P" { "pid" } else { "tid" };
        let section = done
            .stdout
            .split(&format!("\n{label} = "))
            .find(|s| s.starts_with(&format!("{pid} rqlsleeper\n")))
            .unwrap_or_else(|| panic!("no '{label} = {pid} rqlsleeper' section:\n{}", done.stdout));
        let counted = hist_total(section);
        assert!(counted + 2 >= runs, "{flag}: {counted} < {runs}");
        assert!(done.stdout.contains("rqlspinner"), "{flag}: spinners not named:\n{}", done.stdout);
    }
}

#[test]
fn text_layout_milliseconds_and_timestamps() {
    let exe = helper();
    let mut sleeper = Sleeper::start(&exe);
    let mut run = Running::start("runqlat", &["-mT", "-p", &sleeper.pid.to_string()]);
    run.wait_for_line(BANNER, Duration::from_secs(20));
    let (runs, _) = sleeper.run();
    let done = stop(run);
    sleeper.end();
    assert!(done.stdout.contains("     msecs               : count     distribution"), "{}", done.stdout);
    let total = hist_total(&done.stdout);
    assert!(total + 2 >= runs && total <= runs + 6, "{total} vs {runs}:\n{}", done.stdout);
    let ts = done.stdout.lines().nth(2).unwrap_or("");
    assert!(ts.len() == 8 && ts.as_bytes()[2] == b':', "no timestamp line:\n{}", done.stdout);
}

#[test]
fn raw_tp_fallback_counts_the_same() {
    let exe = helper();
    let mut sleeper = Sleeper::start(&exe);
    let mut run =
        Running::start_with_env("runqlat", &["-v", "-p", &sleeper.pid.to_string()], &[("COREBPF_ATTACH", "raw_tp")]);
    run.wait_for_line(BANNER, Duration::from_secs(20));
    let (runs, _) = sleeper.run();
    let done = stop(run);
    sleeper.end();
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    let total = hist_total(&done.stdout);
    assert!(total + 2 >= runs && total <= runs + 6, "{total} vs {runs}:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn bad_input_and_closed_pipe() {
    let done = run_tool("runqlat", &["-p", "12ab"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let done = run_tool("runqlat", &["-P", "-L"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let done = run_tool("runqlat", &["-p", "4194303"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    // `runqlat 1 | head -1` ends at once after the banner, with no program left.
    let out = Command::new("sh").arg("-c").arg(format!("{} 1 | head -1", bin("runqlat").display())).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(BANNER));
    assert!(out.status.success());
}

#[test]
fn sigterm_and_sighup_print_the_final_report() {
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        let exe = helper();
        let mut sleeper = Sleeper::start(&exe);
        let mut run = Running::start("runqlat", &["-p", &sleeper.pid.to_string()]);
        run.wait_for_line(BANNER, Duration::from_secs(20));
        let (runs, _) = sleeper.run();
        run.signal(sig);
        let done = run.finish(Duration::from_secs(20));
        done.assert_success();
        sleeper.end();
        assert!(hist_total(&done.stdout) + 2 >= runs, "{}", done.stdout);
        done.assert_no_programs_left();
    }
}
