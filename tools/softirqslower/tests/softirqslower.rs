// SPDX-License-Identifier: Apache-2.0 OR MIT
//! softirqslower against the kernel's own count: at threshold 0 every soft IRQ run is a row, so the rows per
//! vector lie between what /proc/softirqs counted while the tool was surely attached and what it counted from
//! before its start to after its exit (less one per CPU: a run still going on when the tool stops is not shown),
//! while loopback TCP traffic raises NET_RX (and NET_TX) and the tick TIMER.
//! The JSON vector numbers name the same rows as /proc/softirqs (the kernel prints them in vector order), so the
//! decoding of names is checked exactly; a huge threshold shows nothing.

use std::collections::BTreeMap;
use std::thread;
use std::time::Duration;

use corebpf_tests::irq::{in_flight_at_stop, loopback_ping_pongs, proc_softirqs, Bounds, IrqTool};
use corebpf_tests::pipe::assert_head_1_ends_cleanly;
use corebpf_tests::*;

const TOOL: &str = "softirqslower";
const BANNER: &str = "Tracing softirq latency higher than";
const HEADER: &str = "TIME     STAGE                SOFTIRQ  LAT(us)        CPU    COMM  ";

/// The vector names in vector order, lower case: /proc/softirqs prints one row per vector, from 0.
fn vectors_in_order() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/softirqs").unwrap();
    text.lines().skip(1).filter_map(|l| Some(l.split_once(':')?.0.trim().to_lowercase())).collect()
}

/// The workload: loopback ping-pongs, each delivery raising NET_RX.
fn loopback_traffic() {
    loopback_ping_pongs(2000);
}

/// One text row: (stage, softirq, lat_us, cpu, comm).
type Row = (String, String, u64, u32, String);

/// The rows of text output, parsed by BCC's fixed columns (STAGE holds spaces).
fn rows(text: &str) -> Vec<Row> {
    text.lines()
        .skip_while(|l| !l.starts_with("TIME "))
        .skip(1)
        .filter(|l| l.len() > 39 && l.as_bytes()[2] == b':')
        .map(|l| {
            let mut rest = l[39..].split_whitespace();
            (
                l[9..29].trim_end().to_string(),
                l[30..38].trim_end().to_string(),
                rest.next().unwrap().parse().unwrap(),
                rest.next().unwrap().parse().unwrap(),
                rest.collect::<Vec<_>>().join(" "),
            )
        })
        .collect()
}

/// The runs (`softirq runtime` rows) per vector name.
fn runs(rows: &[Row]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for r in rows.iter().filter(|r| r.0 == "softirq runtime") {
        *counts.entry(r.1.clone()).or_default() += 1;
    }
    counts
}

fn assert_within(counts: &BTreeMap<String, u64>, bounds: &Bounds, out: &str) {
    assert_within_skipping(counts, bounds, 0, out);
}

/// Every name is a row of /proc/softirqs; each count lies within its bounds, less the runs still going on when
/// the tool stopped and those the kernel says it skipped.
fn assert_within_skipping(counts: &BTreeMap<String, u64>, bounds: &Bounds, skipped: u64, out: &str) {
    for name in counts.keys() {
        assert!(bounds.contains_key(name), "'{name}' is not a row of /proc/softirqs:\n{out}");
    }
    for (name, &(lo, hi)) in bounds {
        let n = counts.get(name).copied().unwrap_or(0);
        let lo = lo.saturating_sub(in_flight_at_stop() + skipped);
        assert!(lo <= n && n <= hi, "{name}: {n} runs shown, /proc/softirqs says between {lo} and {hi}");
    }
    assert!(bounds["net_rx"].0 >= 1000, "loopback traffic raised only {:?} NET_RX", bounds["net_rx"]);
}

fn check_text(counts: &BTreeMap<String, u64>, bounds: &Bounds, out: &str) {
    assert_within(counts, bounds, out);
}

/// softirqslower around loopback traffic, with the bounds per vector.
const SOFTIRQSLOWER: IrqTool = IrqTool {
    name: TOOL,
    banner: BANNER,
    snapshot: proc_softirqs,
    rename: |name| name.to_lowercase(),
    workload: loopback_traffic,
    check: check_text,
};

/// Runs the tool with `args` (and `env`) around the traffic; the rows, the bounds and the finished run.
fn traced(args: &[&str], env: &[(&str, &str)], cpu: Option<usize>) -> (Vec<Row>, Bounds, Finished) {
    let (done, bounds) = SOFTIRQSLOWER.traced(args, env, cpu);
    assert!(
        done.stderr.lines().all(|l| !l.contains("lost") || l.contains("(at most: the kernel skipped")),
        "{}",
        done.stderr
    );
    (rows(&done.stdout), bounds, done)
}

#[test]
fn threshold_0_shows_every_run_as_the_kernel_counts_it() {
    let (rows, bounds, done) = traced(&["0"], &[], None);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "Tracing softirq latency higher than 0 us... Hit Ctrl-C to end.");
    assert_eq!(lines[1], HEADER);
    assert_within_skipping(&runs(&rows), &bounds, skipped_runs(&done.stderr), &done.stdout);
    // Loopback delivery raises NET_RX and runs it: its wait is shown too.
    assert!(rows.iter().any(|r| r.0 == "irq(hard) to softirq" && r.1 == "net_rx"), "{}", done.stdout);
    assert!(rows.iter().all(|r| r.0 == "softirq runtime" || r.0 == "irq(hard) to softirq"));
    done.assert_no_programs_left();
}

#[test]
fn one_cpu_only() {
    let cpu = thread::available_parallelism().map(|n| n.get()).unwrap_or(1) - 1;
    let (rows, bounds, done) = traced(&["-c", &cpu.to_string(), "0"], &[], Some(cpu));
    assert!(rows.iter().all(|r| r.3 as usize == cpu), "{}", done.stdout);
    for (name, &(lo, hi)) in &bounds {
        let n = runs(&rows).get(name).copied().unwrap_or(0);
        let lo = lo.saturating_sub(1 + skipped_runs(&done.stderr));
        assert!(lo <= n && n <= hi, "{name} on CPU {cpu}: {n} not in [{lo}, {hi}]");
    }
}

fn fallback_counts_the_same(mech: &str) {
    let (rows, bounds, done) = traced(&["-v", "0"], &[("COREBPF_ATTACH", mech)], None);
    assert!(done.stderr.contains(&format!("attached with {mech}")), "{}", done.stderr);
    assert_within_skipping(&runs(&rows), &bounds, skipped_runs(&done.stderr), &done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn raw_tp_fallback_counts_the_same() {
    fallback_counts_the_same("raw_tp");
}

#[test]
fn tracepoint_fallback_counts_the_same() {
    fallback_counts_the_same("tracepoint");
}

#[test]
fn json_vector_numbers_name_the_kernels_vectors() {
    let (done, bounds) = SOFTIRQSLOWER.traced(&["-j", "0"], &[], None);
    let order = vectors_in_order();
    let mut counts = BTreeMap::new();
    for v in json_lines(&done.stdout) {
        if v.get("lost").is_some() {
            panic!("lost records: {v}");
        }
        let name = v["softirq"].as_str().unwrap();
        let vec = v["vec"].as_u64().unwrap() as usize;
        assert_eq!(order[vec], name, "vector {vec}: {v}");
        assert_eq!(v["lat_us"].as_u64().unwrap(), v["lat_ns"].as_u64().unwrap() / 1000, "{v}");
        assert!(v["cpu"].as_u64().is_some() && v["comm"].is_string() && v["tid"].is_u64() && v["time"].is_string());
        match v["stage"].as_str().unwrap() {
            "entry_to_exit" => *counts.entry(name.to_string()).or_default() += 1,
            "raise_to_entry" => {}
            other => panic!("stage {other}: {v}"),
        }
    }
    assert_within_skipping(&counts, &bounds, skipped_runs(&done.stderr), &done.stdout);
}

#[test]
fn a_huge_threshold_shows_nothing() {
    let (rows, bounds, done) = traced(&["4000000000"], &[], None);
    assert!(bounds["net_rx"].0 >= 1000, "{bounds:?}");
    assert_eq!(done.stdout.lines().count(), 2, "{}", done.stdout);
    assert!(rows.is_empty());
    assert!(done.stdout.starts_with("Tracing softirq latency higher than 4000000000 us..."), "{}", done.stdout);
}

#[test]
fn a_threshold_keeps_only_delays_at_or_above_it() {
    let (rows, _, done) = traced(&["3"], &[], None);
    assert!(rows.iter().all(|r| r.2 >= 3), "{}", done.stdout);
}

#[test]
fn bad_input_and_closed_pipe() {
    for args in [&["abc"][..], &["-1"], &["0", "1"], &["-c", "x"], &["--nope"]] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
    }
    let done = run_tool(TOOL, &["-c", "4096", "0"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert_head_1_ends_cleanly(TOOL, "0", BANNER);
}

#[test]
fn signals_end_cleanly() {
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        let mut run = Running::start(TOOL, &["0"]);
        run.wait_for_line(BANNER, Duration::from_secs(20));
        loopback_traffic();
        run.signal(sig);
        let done = run.finish(Duration::from_secs(20));
        done.assert_success();
        assert!(runs(&rows(&done.stdout)).get("net_rx").copied().unwrap_or(0) >= 1000, "{}", done.stdout);
        done.assert_no_programs_left();
    }
}
