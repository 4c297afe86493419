// SPDX-License-Identifier: Apache-2.0 OR MIT
//! pidpersec against a helper (tests/burst.c) that forks exactly N children in a burst and reports the monotonic
//! clock before its first fork and after its last. pidpersec counts system-wide, so the assertion is a lower bound
//! on the seconds that overlap the burst: together they hold at least N new tasks, and when the burst fits in one
//! second, that second alone does (other processes only add to it). JSON gives the exact counts, and each line's
//! wall-clock time places its second.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
const N: u64 = 150;

/// Runs the tool with `args` across a burst of N forks, started just after a line (a second ended), and returns
/// the run and the burst's clock readings (seconds).
fn across_a_burst(args: &[&str], env: &[(&str, &str)]) -> (Finished, f64, f64) {
    let exe = build_c_helper("pidpersec-burst", include_str!("burst.c"), &["-O1"]);
    let mut helper =
        KillOnDrop(Command::new(exe).arg(N.to_string()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap());
    let mut run = Running::start_with_env(TOOL, args, env);
    run.wait_attached(Duration::from_secs(20));
    // Right after a second's line, so that the burst (milliseconds) most likely falls in the next second.
    run.wait_for_more_lines(1, Duration::from_secs(10));
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut text = String::new();
    helper.0.stdout.take().unwrap().read_to_string(&mut text).unwrap();
    assert!(helper.0.wait().unwrap().success(), "the helper failed");
    let t: Vec<f64> = text.split_whitespace().map(|s| s.parse::<u64>().unwrap() as f64 / 1e9).collect();
    // Two more lines: the second that holds the burst's end is printed.
    run.wait_for_more_lines(2, Duration::from_secs(10));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    (done, t[0], t[1])
}

#[test]
fn json_seconds_hold_the_burst() {
    check_json(&[]);
}

/// The fallbacks, forced: raw_tp and the classic tracepoint count the same burst.
#[test]
fn raw_tp_and_tracepoint_count_the_same() {
    check_json(&[("COREBPF_ATTACH", "raw_tp")]);
    check_json(&[("COREBPF_ATTACH", "tracepoint")]);
}

fn check_json(env: &[(&str, &str)]) {
    let (done, t0, t1) = across_a_burst(&["--json"], env);
    let records = json_lines(&done.stdout);
    // time is RFC 3339, as in every tool's JSON (issue 53, item 10): 2026-12-02T07:01:02.345+00:00.
    for r in &records {
        let time = r["time"].as_str().unwrap_or_else(|| panic!("{r}"));
        assert!(time.len() >= 20 && time.as_bytes()[10] == b'T' && time.as_bytes()[4] == b'-', "{r}");
    }
    // Each line is written just after its count was read, so its `time` (to the millisecond) places the read:
    // second i counts forks after line i-1's time and up to line i's. The burst's monotonic readings are moved
    // to the wall clock to compare; 50 ms of slack covers a preempted reader and the milliseconds cut off.
    let wall = realtime_minus_monotonic();
    let (t0, t1) = (t0 + wall, t1 + wall);
    let secs: Vec<(f64, u64)> = records
        .iter()
        .map(|r: &Value| (rfc3339_epoch_secs(r["time"].as_str().unwrap()), r["count"].as_u64().unwrap()))
        .collect();
    assert!(secs.len() >= 3, "{}", done.stdout);
    // ts counts from the start of tracing: a second apart too, the first line about a second in.
    let ts: Vec<f64> = records.iter().map(|r| r["ts"].as_f64().unwrap()).collect();
    assert!(ts[0] > 0.5 && ts[0] < 5.0, "{}", done.stdout);
    let slack = 0.05;
    let overlapping: Vec<(f64, u64)> = secs
        .iter()
        .enumerate()
        .filter(|&(i, &(ts, _))| ts >= t0 - slack && (i == 0 || secs[i - 1].0 <= t1 + slack))
        .map(|(_, &s)| s)
        .collect();
    let total: u64 = overlapping.iter().map(|&(_, n)| n).sum();
    assert!(total >= N, "burst [{t0}, {t1}]: the seconds over it hold {total} < {N}:\n{}", done.stdout);
    if let Some(i) = secs.iter().position(|&(ts, _)| ts >= t1 + slack) {
        if i > 0 && secs[i - 1].0 < t0 - slack {
            assert!(secs[i].1 >= N, "the burst fell in one second, which counts {} < {N}:\n{}", secs[i].1, done.stdout);
        }
    }
    // The seconds are a second apart, by both clocks.
    for w in secs.windows(2) {
        assert!((w[1].0 - w[0].0 - 1.0).abs() < 0.5, "{}", done.stdout);
    }
    for w in ts.windows(2) {
        assert!((w[1] - w[0] - 1.0).abs() < 0.5, "{}", done.stdout);
    }
}

#[test]
fn text_lines_as_bcc() {
    let (done, _, _) = across_a_burst(&[], &[]);
    let mut lines = done.stdout.lines();
    assert_eq!(lines.next(), Some("Tracing... Ctrl-C to end."), "{}", done.stdout);
    let counts: Vec<u64> = lines
        .map(|l| {
            let (time, n) = l.split_once(": PIDs/sec: ").unwrap_or_else(|| panic!("{l}"));
            assert!(time.len() == 8 && time.as_bytes()[2] == b':' && time.as_bytes()[5] == b':', "{l}");
            n.parse().unwrap()
        })
        .collect();
    assert!(counts.len() >= 3, "{}", done.stdout);
    assert!(counts.iter().sum::<u64>() >= N, "{}", done.stdout);
}

#[test]
fn bad_input() {
    let done = run_tool(TOOL, &["--bogus"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let done = run_tool(TOOL, &["5"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
}

#[test]
fn prometheus_counter_holds_the_burst() {
    let exe = build_c_helper("pidpersec-burst", include_str!("burst.c"), &["-O1"]);
    let mut helper =
        KillOnDrop(Command::new(exe).arg(N.to_string()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap());
    let (run, addr) = prom::serving(TOOL, &[]);
    let series = "corebpf_pidpersec_new_tasks_total";
    let before = prom::sample(&prom::scrape(&addr), series).unwrap();
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut text = String::new();
    helper.0.stdout.take().unwrap().read_to_string(&mut text).unwrap();
    assert!(helper.0.wait().unwrap().success(), "the helper failed");
    let after = prom::scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    prom::promtool_accepts(&after);
    // System-wide: the N forks, and whatever else started meanwhile.
    let increase = prom::sample(&after, series).unwrap() - before;
    assert!(increase >= N as f64, "{increase} new tasks across a burst of {N}:\n{after}");
}
