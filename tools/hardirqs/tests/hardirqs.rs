// SPDX-License-Identifier: Apache-2.0 OR MIT
//! hardirqs against the kernel's own count: `/proc/interrupts` read around the run bounds what the tool must count
//! per handler name, while O_DIRECT writes make the disk interrupt. The names are the handlers /proc/interrupts
//! lists.

use std::collections::BTreeMap;
use std::thread;

use corebpf_tests::irq::{table_counts, Bounds, IrqTool, Snapshot};
use corebpf_tests::pipe::assert_head_1_ends_cleanly;
use corebpf_tests::*;

const BANNER: &str = "Tracing hard irq";

/// /proc/interrupts' numbered lines with one handler: handler name → count per CPU (summed over lines that share
/// a name, as the tool keys by name).
fn proc_interrupts() -> Snapshot {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap();
    let ncpu = text.lines().next().unwrap().split_whitespace().count();
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < ncpu + 4 || f[0].trim_end_matches(':').parse::<u32>().is_err() {
            continue;
        }
        let actions = f[ncpu + 3..].join(" ");
        if actions.contains(", ") {
            continue; // shared line: its count is not one handler's
        }
        let counts: Vec<u64> = f[1..=ncpu].iter().map(|c| c.parse().unwrap()).collect();
        let e = out.entry(actions).or_insert_with(|| vec![0; ncpu]);
        for (a, b) in e.iter_mut().zip(counts) {
            *a += b;
        }
    }
    out
}

/// `hardirqs` around 600 O_DIRECT writes; the bounds per handler name are (interrupts while surely attached,
/// interrupts from before start to after exit).
const HARDIRQS: IrqTool = IrqTool {
    name: "hardirqs",
    banner: BANNER,
    snapshot: proc_interrupts,
    rename: |name| name.to_string(),
    workload: || direct_writes(&ScratchFile::new("hardirqs").0, 600),
    check: assert_within,
};

fn traced(args: &[&str], env: &[(&str, &str)], cpu: Option<usize>) -> (Finished, Bounds) {
    HARDIRQS.traced(args, env, cpu)
}

/// Every handler that interrupted while the tool was attached is counted, no more than /proc/interrupts says
/// (an edge interrupt that arrives while its handler runs is counted once and handled in the same loop, so allow
/// 2% either way), and the disk's handler saw the writes.
fn assert_within(counts: &BTreeMap<String, u64>, bounds: &BTreeMap<String, (u64, u64)>, out: &str) {
    for (name, &(lo, hi)) in bounds {
        let n = counts.get(name).copied().unwrap_or(0);
        assert!(
            n + lo / 50 + 2 >= lo && n <= hi + hi / 50 + 2,
            "{name}: counted {n}, /proc/interrupts: [{lo}, {hi}]:\n{out}"
        );
    }
    let busiest = bounds.iter().max_by_key(|(_, b)| b.0).map(|(n, b)| (n.clone(), b.0)).unwrap();
    assert!(busiest.1 >= 300, "600 O_DIRECT writes raised no interrupt line by 300: {bounds:?}");
    assert!(counts.contains_key(&busiest.0), "the disk's handler {} is missing:\n{out}", busiest.0);
}

#[test]
fn counts_match_proc_interrupts_under_block_io() {
    let (done, bounds) = traced(&["-C"], &[], None);
    assert!(done.stdout.contains("HARDIRQ                    TOTAL_count\n"), "{}", done.stdout);
    assert_within(&table_counts(&done.stdout), &bounds, &done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn one_cpu_only() {
    let n = thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    for cpu in 0..n {
        let (done, bounds) = traced(&["-C", "-c", &cpu.to_string()], &[], Some(cpu));
        let counts = table_counts(&done.stdout);
        for (name, &(lo, hi)) in &bounds {
            let c = counts.get(name).copied().unwrap_or(0);
            assert!(
                c + lo / 50 + 2 >= lo && c <= hi + hi / 50 + 2,
                "{name} on CPU {cpu}: {c} not in [{lo}, {hi}]:\n{}",
                done.stdout
            );
        }
    }
}

#[test]
fn raw_tp_fallback_counts_the_same() {
    HARDIRQS.raw_tp_fallback_counts_the_same();
}

#[test]
fn json_histograms_hold_every_event_and_time() {
    HARDIRQS.json_histograms_hold_every_event_and_time();
}

#[test]
fn text_totals_and_histograms_as_bcc() {
    let (done, bounds) = traced(&["-T"], &[], None);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert!(lines[2].len() == 8 && lines[2].as_bytes()[2] == b':', "{}", done.stdout);
    assert_eq!(lines[3], "HARDIRQ                    TOTAL_usecs", "{}", done.stdout);
    let disk = bounds.iter().max_by_key(|(_, b)| b.0).unwrap().0.clone();
    assert!(lines.iter().any(|l| l.starts_with(&format!("{disk} "))), "no {disk} row:\n{}", done.stdout);
    let (done, bounds) = traced(&["-d", "-N"], &[], None);
    let disk = bounds.iter().max_by_key(|(_, b)| b.0).unwrap().0.clone();
    let section = done
        .stdout
        .split("\nhardirq = ")
        .find(|s| s.starts_with(&format!("{disk}\n")))
        .unwrap_or_else(|| panic!("no {disk} section:\n{}", done.stdout));
    assert!(section.contains("     nsecs               : count     distribution"), "{}", done.stdout);
    assert!(hist_total(section) >= 300, "{}", done.stdout);
}

#[test]
fn bad_input_and_closed_pipe() {
    let done = run_tool("hardirqs", &["-C", "-d"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let done = run_tool("hardirqs", &["-c", "4096"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert_head_1_ends_cleanly("hardirqs", "1", BANNER);
}

#[test]
fn prometheus_counts_are_the_kernels() {
    HARDIRQS.prometheus_counts_are_the_kernels();
}
