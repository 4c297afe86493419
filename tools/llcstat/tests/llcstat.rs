// SPDX-License-Identifier: Apache-2.0 OR MIT
//! llcstat against a helper whose page faults are known (tests/faulter.c), counted through the test-only software
//! substitute (`COREBPF_LLCSTAT_EVENTS=page-faults`: every page fault a "reference", every major fault a "miss")
//! with a sample period of 1, since this machine has no hardware cache counters: pinned to one CPU, the helper's
//! main thread makes 300 minor and 50 major faults and its second thread 200 minor faults, so its process row is
//! 550 references, 50 misses (90.91%), and with -t its threads' rows are 350/50 (85.71%) and 200/0 (100.00%), in
//! the table, in JSON and in the Prometheus counters. The totals line is the sum of the rows. Without the
//! substitute, on a machine with no PMU, the tool refuses in one line naming the counter and the errno; bad input
//! is one line and exit 2.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const SUBSTITUTE: (&str, &str) = ("COREBPF_LLCSTAT_EVENTS", "page-faults");
const MAIN_MINOR: u64 = 300;
const MAJOR: u64 = 50;
const THREAD_MINOR: u64 = 200;

/// The helper, started and ready: waiting for its go byte.
struct Helper {
    child: KillOnDrop,
    pid: u32,
    tid: u32,
    cpu: u32,
    comm: String,
    stdout: BufReader<std::process::ChildStdout>,
    _file: ScratchFile,
}

/// The last online CPU (the helper runs there, so its rows are on one CPU).
fn last_cpu() -> u32 {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let last = online.trim().rsplit([',', '-']).next().unwrap();
    last.parse().unwrap()
}

fn start_helper() -> Helper {
    let exe = build_c_helper("faulter", include_str!("faulter.c"), &["-O1", "-pthread"]);
    let file = ScratchFile::new("llcstat-faults");
    let cpu = last_cpu();
    let args = [cpu.to_string(), MAIN_MINOR.to_string(), THREAD_MINOR.to_string(), MAJOR.to_string()];
    let child: Child = Command::new(&exe)
        .args(&args)
        .arg(&file.0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start faulter");
    let mut child = KillOnDrop(child);
    let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let pid = child.0.id();
    assert_eq!(line.trim(), format!("ready {pid}"), "the helper did not start");
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
    Helper { child, pid, tid: 0, cpu, comm, stdout, _file: file }
}

impl Helper {
    /// Lets the helper fault, and checks its own count of its faults (getrusage) against the design.
    fn fault(&mut self) {
        self.child.0.stdin.as_mut().unwrap().write_all(b"g").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let f: Vec<u64> = line.split_whitespace().skip(1).map(|w| w.parse().unwrap()).collect();
        assert_eq!(f.len(), 6, "the helper said: {line}");
        self.tid = f[3] as u32;
        assert_eq!(
            (f[1], f[2], f[4], f[5]),
            (MAJOR, MAIN_MINOR, 0, THREAD_MINOR),
            "the helper's own count of its faults (major, minor of the main thread; of the other) differs: {line}"
        );
    }

    fn end(mut self) {
        drop(self.child.0.stdin.take());
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
    }
}

/// Runs llcstat (with the substitute, one sample per event) around the helper's faults; stops it with SIGINT.
fn count_helper(extra: &[&str]) -> (Finished, Helper) {
    let mut helper = start_helper();
    let mut args = vec!["-c", "1"];
    args.extend_from_slice(extra);
    args.push("600");
    let mut run = Running::start_with_env(TOOL, &args, &[SUBSTITUTE]);
    run.wait_attached(Duration::from_secs(30));
    helper.fault();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    (done, helper)
}

/// Rows of the table, between the header and the totals: PID, [TID,] NAME (which may hold spaces), CPU,
/// REFERENCE, MISS, HIT%.
fn rows(text: &str) -> Vec<Vec<String>> {
    let per_thread = text.contains("\nPID      TID ");
    let ids = if per_thread { 2 } else { 1 };
    text.lines()
        .skip_while(|l| !l.starts_with("PID "))
        .skip(1)
        .take_while(|l| !l.starts_with("Total References:"))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let n = words.len();
            let mut row: Vec<String> = words[..ids].iter().map(|w| w.to_string()).collect();
            row.push(words[ids..n - 4].join(" "));
            row.extend(words[n - 4..].iter().map(|w| w.to_string()));
            row
        })
        .collect()
}

/// The totals line's (references, misses, hit rate).
fn totals_line(text: &str) -> (u64, u64, String) {
    let line =
        text.lines().find(|l| l.starts_with("Total References:")).unwrap_or_else(|| panic!("no totals:\n{text}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((w[0], w[1], w[3], w[4], w[6], w[7]), ("Total", "References:", "Total", "Misses:", "Hit", "Rate:"));
    (w[2].parse().unwrap(), w[5].parse().unwrap(), w[8].to_string())
}

#[test]
fn counts_each_fault_of_a_process_on_its_cpu() {
    let (done, helper) = count_helper(&[]);
    done.assert_success();
    let text = &done.stdout;
    assert!(text.starts_with("Running for 600 seconds or hit Ctrl-C to end.\n"), "{text}");
    assert!(text.contains("\nPID      NAME             CPU     REFERENCE         MISS    HIT%\n"), "{text}");
    let pid = helper.pid.to_string();
    let mine: Vec<Vec<String>> = rows(text).into_iter().filter(|r| r[0] == pid).collect();
    let want = vec![vec![
        pid.clone(),
        helper.comm.clone(),
        helper.cpu.to_string(),
        (MAIN_MINOR + MAJOR + THREAD_MINOR).to_string(),
        MAJOR.to_string(),
        "90.91%".to_string(),
    ]];
    assert_eq!(mine, want, "the helper's rows:\n{text}");
    // The totals are the sum of every row printed (everything on the machine faulting meanwhile).
    let all = rows(text);
    let sum = |col: usize| all.iter().map(|r| r[col].parse::<u64>().unwrap()).sum::<u64>();
    let (refs, misses, rate) = totals_line(text);
    assert_eq!((refs, misses), (sum(3), sum(4)), "{text}");
    let expected_rate = format!("{:.2}%", refs.saturating_sub(misses) as f64 * 100.0 / refs as f64);
    assert_eq!(rate, expected_rate, "{text}");
    done.assert_no_programs_left();
    helper.end();
}

#[test]
fn with_t_counts_each_thread_apart() {
    let (done, helper) = count_helper(&["-t"]);
    done.assert_success();
    let text = &done.stdout;
    assert!(text.contains("\nPID      TID      NAME             CPU     REFERENCE         MISS    HIT%\n"), "{text}");
    let pid = helper.pid.to_string();
    let mut mine: Vec<Vec<String>> = rows(text).into_iter().filter(|r| r[0] == pid).collect();
    mine.sort();
    let row = |tid: u32, refs: u64, misses: u64, rate: &str| {
        vec![
            pid.clone(),
            tid.to_string(),
            helper.comm.clone(),
            helper.cpu.to_string(),
            refs.to_string(),
            misses.to_string(),
            rate.to_string(),
        ]
    };
    let mut want =
        vec![row(helper.pid, MAIN_MINOR + MAJOR, MAJOR, "85.71%"), row(helper.tid, THREAD_MINOR, 0, "100.00%")];
    want.sort();
    assert_eq!(mine, want, "the helper's rows:\n{text}");
    let all = rows(text);
    let (refs, misses, _) = totals_line(text);
    assert_eq!(refs, all.iter().map(|r| r[4].parse::<u64>().unwrap()).sum::<u64>(), "{text}");
    assert_eq!(misses, all.iter().map(|r| r[5].parse::<u64>().unwrap()).sum::<u64>(), "{text}");
    helper.end();
}

#[test]
fn json_holds_the_same_counts() {
    let (done, helper) = count_helper(&["-t", "-j"]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    let (last, records) = lines.split_last().expect("no JSON");
    let mut mine: Vec<(u64, u64, u64, f64)> = records
        .iter()
        .filter(|v| v["pid"] == helper.pid)
        .map(|v| {
            assert_eq!(v["comm"], helper.comm.as_str());
            assert_eq!(v["cpu"], helper.cpu);
            let n = |k: &str| v[k].as_u64().unwrap();
            (n("tid"), n("references"), n("misses"), v["hit_percent"].as_f64().unwrap())
        })
        .collect();
    mine.sort_by_key(|r| r.0);
    let mut want =
        vec![(helper.pid as u64, MAIN_MINOR + MAJOR, MAJOR, 85.71), (helper.tid as u64, THREAD_MINOR, 0, 100.0)];
    want.sort_by_key(|r| r.0);
    assert_eq!(mine, want, "{}", done.stdout);
    let sum = |k: &str| records.iter().map(|v| v[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(last["total_references"].as_u64(), Some(sum("references")), "{}", done.stdout);
    assert_eq!(last["total_misses"].as_u64(), Some(sum("misses")), "{}", done.stdout);
    helper.end();
}

#[test]
fn prometheus_counters_hold_the_same_counts() {
    let mut helper = start_helper();
    let addr = corebpf_tests::prom::free_addr();
    let mut run = Running::start_with_env(TOOL, &["-c", "1", "--prometheus", &addr], &[SUBSTITUTE]);
    run.wait_for_line(&format!("Serving Prometheus metrics on http://{addr}/metrics"), Duration::from_secs(30));
    run.wait_attached(Duration::from_secs(30));
    helper.fault();
    let text = corebpf_tests::prom::scrape(&addr);
    let labels = format!("{{pid=\"{}\",comm=\"{}\",cpu=\"{}\"}}", helper.pid, helper.comm, helper.cpu);
    let value = |name: &str| corebpf_tests::prom::sample(&text, &format!("{name}{labels}"));
    assert_eq!(value("corebpf_llcstat_cache_references_total"), Some((MAIN_MINOR + MAJOR + THREAD_MINOR) as f64));
    assert_eq!(value("corebpf_llcstat_cache_misses_total"), Some(MAJOR as f64), "{text}");
    corebpf_tests::prom::promtool_accepts(&text);
    run.signal(libc::SIGTERM);
    run.finish(Duration::from_secs(30)).assert_success();
    helper.end();
}

#[test]
fn sigterm_ends_the_run_with_the_table() {
    let mut run = Running::start_with_env(TOOL, &["600"], &[SUBSTITUTE]);
    run.wait_attached(Duration::from_secs(30));
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    assert!(done.stdout.contains("\nPID      NAME "), "{}", done.stdout);
    totals_line(&done.stdout);
    done.assert_no_programs_left();
}

/// Whether this machine counts hardware cache misses (perf_event_open on CPU 0 for all processes).
fn host_counts_cache_misses() -> bool {
    #[repr(C)]
    #[derive(Default)]
    struct Attr {
        type_: u32,
        size: u32,
        config: u64,
        period: u64,
        rest: [u64; 6],
    }
    let attr = Attr { type_: 0, size: 72, config: 3, period: 100, ..Default::default() };
    // SAFETY: perf_event_open(2) reads `size` bytes of `attr`, which lives across the call.
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, &attr as *const Attr, -1, 0, -1, 0) };
    if fd >= 0 {
        // SAFETY: the descriptor was just returned to us.
        unsafe { libc::close(fd as i32) };
    }
    fd >= 0
}

#[test]
fn without_hardware_counters_it_says_which_and_why_in_one_line() {
    let done = run_tool(TOOL, &["1"]);
    if host_counts_cache_misses() {
        done.assert_success();
        assert!(done.stdout.contains("Total References:"), "{}", done.stdout);
        return;
    }
    assert_eq!(done.status.code(), Some(1), "stdout:\n{}\nstderr:\n{}", done.stdout, done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    let line = done.stderr.trim_end();
    assert!(line.starts_with("llcstat: cannot count hardware cache-"), "{line}");
    assert!(line.contains("perf_event_open failed with E"), "{line}");
    assert!(done.stdout.is_empty(), "{}", done.stdout);
}

#[test]
fn bad_input_is_one_line() {
    for (args, code) in [(&["-c", "0"][..], 2), (&["-c", "x"][..], 2), (&["ten"][..], 2), (&["1", "2"][..], 2)] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
    }
    let mut cmd = Command::new(bin(TOOL));
    let out = cmd.arg("1").env("COREBPF_LLCSTAT_EVENTS", "cycles").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("COREBPF_LLCSTAT_EVENTS=cycles"), "{stderr}");
}
