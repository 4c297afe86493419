// SPDX-License-Identifier: Apache-2.0 OR MIT
//! runqlen against a known queue: N busy processes pinned to one CPU are always on its run queue, so every
//! sample of that CPU sees at least N-1 tasks waiting (and its occupancy is 100%).

use std::process::Command;
use std::thread;
use std::time::Duration;

use corebpf_tests::*;

const BANNER: &str = "Sampling run queue length";
const SPINNERS: usize = 4;

const HELPER: &str = include_str!("rqnspinner.c");

fn last_cpu() -> usize {
    thread::available_parallelism().map(|n| n.get()).unwrap_or(1) - 1
}

/// Starts SPINNERS busy processes pinned to the last CPU.
fn spinners() -> Vec<KillOnDrop> {
    let exe = build_c_helper("rqnspinner", HELPER, &["-O2"]);
    let cpu = last_cpu().to_string();
    let spin: Vec<KillOnDrop> = (0..SPINNERS)
        .map(|_| KillOnDrop(Command::new("taskset").args(["-c", &cpu]).arg(&exe).spawn().unwrap()))
        .collect();
    thread::sleep(Duration::from_millis(200));
    spin
}

fn sampled(args: &[&str]) -> Finished {
    let mut run = Running::start("runqlen", args);
    if args.contains(&"-j") {
        for _ in 0..200 {
            if !prog_ids_of(run.pid()).is_empty() {
                break;
            }
            thread::sleep(Duration::from_millis(50));
        }
        run.note_programs();
    } else {
        run.wait_for_line(BANNER, Duration::from_secs(20));
    }
    thread::sleep(Duration::from_millis(1500));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done
}

/// (length, samples) rows of the linear histogram in `text`.
fn linear_rows(text: &str) -> Vec<(u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let (len, rest) = l.split_once(':')?;
            Some((len.trim().parse().ok()?, rest.split('|').next()?.trim().parse().ok()?))
        })
        .collect()
}

#[test]
fn pinned_spinners_queue_on_their_cpu() {
    let _spin = spinners();
    let done = sampled(&["-C"]);
    let cpu = last_cpu();
    let section = done
        .stdout
        .split("\ncpu = ")
        .find(|s| s.starts_with(&format!("{cpu}\n")))
        .unwrap_or_else(|| panic!("no 'cpu = {cpu}' section:\n{}", done.stdout));
    assert!(section.contains("     runqlen       : count     distribution"), "{}", done.stdout);
    let rows = linear_rows(section);
    let samples: u64 = rows.iter().map(|r| r.1).sum();
    assert!(samples >= 30, "only {samples} samples of CPU {cpu} in 1.5 s at 99 Hz:\n{}", done.stdout);
    // The spinners never sleep: at every sample SPINNERS tasks are on that run queue, one of them running.
    let short: u64 = rows.iter().filter(|r| r.0 < SPINNERS as u64 - 1).map(|r| r.1).sum();
    assert_eq!(short, 0, "samples of CPU {cpu} with fewer than {} waiting:\n{}", SPINNERS - 1, done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn occupancy_of_the_busy_cpu_is_full() {
    let _spin = spinners();
    let done = sampled(&["-C", "-O"]);
    let cpu = last_cpu();
    let line = format!("runqocc, CPU {cpu:<3} {:6.2}%", 100.0);
    assert!(done.stdout.lines().any(|l| l == line), "no '{line}':\n{}", done.stdout);
    let done = sampled(&["-O", "-T"]);
    assert!(done.stdout.lines().any(|l| l.starts_with("runqocc: ") && l.ends_with('%')), "{}", done.stdout);
}

#[test]
fn json_counts_agree_with_the_queue() {
    let _spin = spinners();
    let done = sampled(&["-C", "-j", "1"]);
    let cpu = last_cpu() as u64;
    let mut samples = 0;
    for line in json_lines(&done.stdout) {
        for c in line["cpus"].as_array().unwrap() {
            if c["cpu"].as_u64() == Some(cpu) {
                let lens: Vec<u64> = c["runqlen"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
                assert_eq!(lens.iter().sum::<u64>(), c["samples"].as_u64().unwrap(), "{c}");
                assert!(lens.iter().take(SPINNERS - 1).all(|&n| n == 0), "{c}");
                samples += c["samples"].as_u64().unwrap();
            }
        }
    }
    assert!(samples >= 30, "{samples} samples:\n{}", done.stdout);
}

#[test]
fn bad_input_and_closed_pipe() {
    let done = run_tool("runqlen", &["-X"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let done = run_tool("runqlen", &["0"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let out = Command::new("sh").arg("-c").arg(format!("{} 1 | head -1", bin("runqlen").display())).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(BANNER));
    assert!(out.status.success());
}

#[test]
fn prometheus_buckets_of_the_busy_cpu_hold_the_spinners() {
    let _spin = spinners();
    let (run, addr) = prom::serving("runqlen", &["-C"]);
    let cpu = last_cpu();
    let family = "corebpf_runqlen_run_queue_length";
    let count = |text: &str| prom::sample(text, &format!("{family}_count{{cpu=\"{cpu}\"}}")).unwrap_or(0.0) as u64;
    // Scrape until 30 samples of the busy CPU are in (99 a second).
    let mut text = prom::scrape(&addr);
    while count(&text) < 30 {
        thread::sleep(Duration::from_millis(200));
        text = prom::scrape(&addr);
    }
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    prom::promtool_accepts(&text);
    // The spinners never sleep: no sample of their CPU has fewer than SPINNERS-1 waiting.
    let le = format!("{family}_bucket{{le=\"{}.0\",cpu=\"{cpu}\"}}", SPINNERS - 2);
    assert_eq!(prom::sample(&text, &le), Some(0.0), "{le}:\n{text}");
    let inf = prom::sample(&text, &format!("{family}_bucket{{le=\"+Inf\",cpu=\"{cpu}\"}}")).unwrap() as u64;
    assert_eq!(inf, count(&text), "{text}");
}
