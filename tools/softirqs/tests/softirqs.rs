// SPDX-License-Identifier: Apache-2.0 OR MIT
//! softirqs against the kernel's own count: `/proc/softirqs` read around the run bounds what the tool must count
//! (every event between the tool's attach and detach, and no more than happened from before its start to after
//! its exit), while loopback TCP traffic raises NET_RX. The names are the rows of /proc/softirqs.

use std::collections::BTreeMap;
use std::thread;
use std::time::Duration;

use corebpf_tests::irq::{in_flight_at_stop, loopback_ping_pongs, proc_softirqs, table_counts, Bounds, IrqTool};
use corebpf_tests::pipe::assert_head_1_ends_cleanly;
use corebpf_tests::*;

const BANNER: &str = "Tracing soft irq";

/// The workload: loopback ping-pongs, each delivery raising NET_RX.
fn loopback_traffic() {
    loopback_ping_pongs(3000);
}

/// `softirqs` around loopback traffic; the bounds per vector are (events while surely attached, events from
/// before start to after exit).
const SOFTIRQS: IrqTool = IrqTool {
    name: "softirqs",
    banner: BANNER,
    snapshot: proc_softirqs,
    rename: |name| name.to_lowercase(),
    workload: loopback_traffic,
    check: assert_within,
};

fn traced(args: &[&str], env: &[(&str, &str)], cpu: Option<usize>) -> (Finished, Bounds) {
    SOFTIRQS.traced(args, env, cpu)
}

fn assert_within(counts: &BTreeMap<String, u64>, bounds: &BTreeMap<String, (u64, u64)>, out: &str) {
    for name in counts.keys() {
        assert!(bounds.contains_key(name), "'{name}' is not a row of /proc/softirqs:\n{out}");
    }
    for (name, &(lo, hi)) in bounds {
        let n = counts.get(name).copied().unwrap_or(0);
        // Less the runs still going on when the tool stopped, which end after its last read.
        let lo = lo.saturating_sub(in_flight_at_stop());
        assert!(lo <= n && n <= hi, "{name}: counted {n}, /proc/softirqs says between {lo} and {hi}:\n{out}");
    }
    assert!(bounds["net_rx"].0 >= 1000, "loopback traffic raised only {:?} NET_RX", bounds["net_rx"]);
}

#[test]
fn counts_match_proc_softirqs_and_loopback_raises_net_rx() {
    let (done, bounds) = traced(&["-C"], &[], None);
    assert!(done.stdout.contains("SOFTIRQ          TOTAL_count\n"), "{}", done.stdout);
    assert_within(&table_counts(&done.stdout), &bounds, &done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn one_cpu_only() {
    let cpu = thread::available_parallelism().map(|n| n.get()).unwrap_or(1) - 1;
    let (done, bounds) = traced(&["-C", "-c", &cpu.to_string(), "1"], &[], Some(cpu));
    let counts = table_counts(&done.stdout);
    for (name, &(lo, hi)) in &bounds {
        let n = counts.get(name).copied().unwrap_or(0);
        assert!(lo <= n && n <= hi, "{name} on CPU {cpu}: {n} not in [{lo}, {hi}]:\n{}", done.stdout);
    }
}

#[test]
fn raw_tp_fallback_counts_the_same() {
    SOFTIRQS.raw_tp_fallback_counts_the_same();
}

#[test]
fn json_histograms_hold_every_event_and_time() {
    SOFTIRQS.json_histograms_hold_every_event_and_time();
}

#[test]
fn text_totals_and_histograms_as_bcc() {
    let (done, _) = traced(&["-T"], &[], None);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert!(lines[2].len() == 8 && lines[2].as_bytes()[2] == b':', "{}", done.stdout);
    assert_eq!(lines[3], "SOFTIRQ          TOTAL_usecs", "{}", done.stdout);
    assert!(lines.iter().any(|l| l.starts_with("net_rx ")), "{}", done.stdout);
    let (done, _) = traced(&["-d", "-N"], &[], None);
    let section = done.stdout.split("\nsoftirq = ").find(|s| s.starts_with("net_rx\n")).expect("net_rx section");
    assert!(section.contains("     nsecs               : count     distribution"), "{}", done.stdout);
    assert!(hist_total(section) >= 1000, "{}", done.stdout);
}

#[test]
fn bad_input_and_closed_pipe() {
    let done = run_tool("softirqs", &["-C", "-d"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let done = run_tool("softirqs", &["-C", "-N"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let done = run_tool("softirqs", &["-c", "4096"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert_head_1_ends_cleanly("softirqs", "1", BANNER);
}

#[test]
fn sigterm_prints_the_final_report() {
    let mut run = Running::start("softirqs", &["-C"]);
    run.wait_for_line(BANNER, Duration::from_secs(20));
    loopback_traffic();
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(table_counts(&done.stdout).get("net_rx").copied().unwrap_or(0) >= 1000, "{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn prometheus_counts_are_the_kernels() {
    SOFTIRQS.prometheus_counts_are_the_kernels();
}
