// SPDX-License-Identifier: Apache-2.0 OR MIT
//! cpufreq. No machine available to the project has a cpufreq driver (the build machines and the QEMU guests of
//! the kernel matrix are virtual machines with none), so the real frequency cannot be a ground truth here: on such
//! a machine the tool must refuse in one line, exit 1, and that is tested. The sampling and the per-process
//! accounting are tested with declared starting frequencies (`COREBPF_CPUFREQ_KHZ=1000000,2400000`: CPU 0 at
//! 1000 MHz, the others at 2400 MHz), which the tool loads into the same map the driver's values would go to:
//! a helper spinning on CPU 0 and another on the last CPU must each have all their samples in their own CPU's
//! slot, the system-wide histogram only those two slots, and every sum exactly the slots' counts times their
//! frequency; with -c on a cgroup holding only the first helper, the other is absent and the system-wide count
//! equals the first helper's. Bad input is one line and a status.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::cgroup::TestCgroup;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const DECLARED: (&str, &str) = ("COREBPF_CPUFREQ_KHZ", "1000000,2400000");
const CPU0_MHZ: u64 = 1000;
const OTHERS_MHZ: u64 = 2400;

/// The declared frequency of `cpu`.
fn mhz_of(cpu: u32) -> u64 {
    if cpu == 0 {
        CPU0_MHZ
    } else {
        OTHERS_MHZ
    }
}

fn last_cpu() -> u32 {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    online.trim().rsplit([',', '-']).next().unwrap().parse().unwrap()
}

/// A spinning helper on one CPU, waiting for its go byte. Each test gives its spinners tags of their own: the
/// histograms are per process name, and another test's spinner of the same name, sampled on another CPU while it
/// starts (before it pins itself), would land in this test's histogram.
struct Spinner {
    child: KillOnDrop,
    comm: String,
    out: BufReader<std::process::ChildStdout>,
}

impl Spinner {
    fn start(tag: &str, cpu: u32) -> Spinner {
        let exe = build_c_helper(&format!("cfq-{tag}"), include_str!("spinner.c"), &["-O1", &format!("-DTAG_{tag}")]);
        let mut cmd = Command::new(&exe);
        cmd.args([cpu.to_string(), "800".into()]).stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = KillOnDrop(cmd.spawn().expect("start spinner"));
        let mut out = BufReader::new(child.0.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n", "the spinner did not start");
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", child.0.id())).unwrap().trim_end().to_string();
        Spinner { child, comm, out }
    }

    fn go(&mut self) {
        self.child.0.stdin.as_mut().unwrap().write_all(b"g").unwrap();
    }

    fn wait_done(&mut self) {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n", "the spinner failed");
    }
}

/// Runs cpufreq (declared frequencies) while the spinners run, stops it with SIGINT once they are done.
fn sample(spinners: &mut [&mut Spinner], extra: &[&str]) -> Finished {
    let mut run = Running::start_with_env(TOOL, extra, &[DECLARED]);
    run.wait_attached(Duration::from_secs(30));
    spinners.iter_mut().for_each(|s| s.go());
    spinners.iter_mut().for_each(|s| s.wait_done());
    run.signal(libc::SIGINT);
    run.finish(Duration::from_secs(30))
}

/// Each histogram of the text output by its title: (low MHz, count) of its rows.
fn hists(text: &str) -> Vec<(String, Vec<(u64, u64)>)> {
    let mut out: Vec<(String, Vec<(u64, u64)>)> = Vec::new();
    for line in text.lines() {
        if let Some(title) = line.strip_suffix(" : count     distribution") {
            out.push((title.trim().to_string(), Vec::new()));
        } else if let (Some(last), Some((low, rest))) = (out.last_mut(), line.split_once(':')) {
            if let (Ok(low), Some(n)) = (low.trim().parse(), rest.split('|').next()) {
                last.1.push((low, n.trim().parse().unwrap()));
            }
        }
    }
    out
}

fn rows_of<'a>(all: &'a [(String, Vec<(u64, u64)>)], title: &str, text: &str) -> &'a [(u64, u64)] {
    &all.iter().find(|(t, _)| t == title).unwrap_or_else(|| panic!("no histogram '{title}':\n{text}")).1
}

#[test]
fn samples_land_in_each_cpus_declared_frequency() {
    // On a machine with one CPU (the kernel matrix's guests) both run on CPU 0: the per-process accounting is
    // checked, the per-CPU frequencies only where there are two CPUs.
    let (mut a, mut b) = (Spinner::start("a", 0), Spinner::start("b", last_cpu()));
    let done = sample(&mut [&mut a, &mut b], &[]);
    done.assert_success();
    let text = &done.stdout;
    assert!(text.starts_with("Sampling CPU freq system-wide & by process. Ctrl-C to end.\n\n"), "{text}");
    let all = hists(text);
    assert_eq!(all.last().map(|h| h.0.as_str()), Some("syswide"), "the system-wide histogram comes last:\n{text}");
    for (spinner, mhz) in [(&a, CPU0_MHZ), (&b, mhz_of(last_cpu()))] {
        let rows = rows_of(&all, &spinner.comm, text);
        assert_eq!(rows.len(), 1, "{}: one slot only:\n{text}", spinner.comm);
        assert_eq!(rows[0].0, mhz, "{}:\n{text}", spinner.comm);
        assert!(rows[0].1 > 0);
    }
    let sys: Vec<u64> = rows_of(&all, "syswide", text).iter().map(|r| r.0).collect();
    let want = if last_cpu() == 0 { vec![CPU0_MHZ] } else { vec![CPU0_MHZ, OTHERS_MHZ] };
    assert_eq!(sys, want, "{text}");
    done.assert_no_programs_left();
}

#[test]
fn json_sums_are_the_slots_times_their_frequency() {
    let (mut a, mut b) = (Spinner::start("ja", 0), Spinner::start("jb", last_cpu()));
    let done = sample(&mut [&mut a, &mut b], &["-j"]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    let (system, per) = lines.split_last().unwrap();
    assert_eq!(system["scope"], "system");
    let check = |v: &serde_json::Value| {
        let buckets = v["buckets"].as_array().unwrap();
        assert!(buckets.last().is_some_and(|b| b["count"].as_u64() > Some(0)), "up to the last used bucket: {v}");
        let count = |mhz: u64| {
            let bucket = buckets.iter().find(|b| b["low"] == mhz);
            bucket.map_or(0, |b| {
                assert_eq!(b["high"].as_u64(), Some(mhz + 199), "{v}");
                b["count"].as_u64().unwrap()
            })
        };
        let (n0, n1) = (count(CPU0_MHZ), count(OTHERS_MHZ));
        assert_eq!(v["samples"].as_u64(), Some(n0 + n1), "only the two declared slots: {v}");
        assert_eq!(v["sum_mhz"].as_u64(), Some(n0 * CPU0_MHZ + n1 * OTHERS_MHZ), "{v}");
        (n0, n1)
    };
    check(system);
    for (spinner, own) in [(&a, 0), (&b, usize::from(last_cpu() != 0))] {
        let v = per.iter().find(|v| v["comm"] == spinner.comm.as_str()).expect("the spinner's histogram");
        assert_eq!(v["scope"], "process");
        let (n0, n1) = check(v);
        let counts = [n0, n1];
        assert!(counts[own] > 0 && counts[1 - own] == 0, "{}: {v}", spinner.comm);
    }
}

#[test]
fn cgroup_filter_keeps_only_its_tasks() {
    let cg = TestCgroup::new("cpufreq");
    let (mut a, mut b) = (Spinner::start("ca", 0), Spinner::start("cb", last_cpu()));
    std::fs::write(cg.path().join("cgroup.procs"), a.child.0.id().to_string()).unwrap();
    let done = sample(&mut [&mut a, &mut b], &["-j", "-c", cg.arg()]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    let (system, per) = lines.split_last().unwrap();
    assert_eq!(per.len(), 1, "only the cgroup's helper:\n{}", done.stdout);
    assert_eq!(per[0]["comm"], a.comm.as_str());
    assert!(per[0]["samples"].as_u64().unwrap() > 0);
    assert_eq!(system["samples"], per[0]["samples"], "{}", done.stdout);
    assert_eq!(system["sum_mhz"], per[0]["sum_mhz"], "{}", done.stdout);
    drop((a, b));
}

#[test]
fn prometheus_histograms_hold_the_samples_in_hertz() {
    let mut a = Spinner::start("pa", 0);
    let addr = corebpf_tests::prom::free_addr();
    let mut run = Running::start_with_env(TOOL, &["--prometheus", &addr], &[DECLARED]);
    run.wait_for_line(&format!("Serving Prometheus metrics on http://{addr}/metrics"), Duration::from_secs(30));
    run.wait_attached(Duration::from_secs(30));
    a.go();
    a.wait_done();
    let text = corebpf_tests::prom::scrape(&addr);
    let series = |s: &str| corebpf_tests::prom::sample(&text, s);
    let comm = &a.comm;
    let count = series(&format!("corebpf_cpufreq_sampled_frequency_hertz_count{{comm=\"{comm}\"}}")).expect(&text);
    assert!(count > 0.0);
    // All of them at 1000 MHz: below the 1200 MHz bound, none below 1000.
    let le = |b: &str| series(&format!("corebpf_cpufreq_sampled_frequency_hertz_bucket{{le=\"{b}\",comm=\"{comm}\"}}"));
    assert_eq!(le("1000000000.0"), Some(0.0), "{text}");
    assert_eq!(le("1200000000.0"), Some(count), "{text}");
    assert_eq!(series(&format!("corebpf_cpufreq_sampled_frequency_hertz_sum{{comm=\"{comm}\"}}")), Some(count * 1e9));
    corebpf_tests::prom::promtool_accepts(&text);
    run.signal(libc::SIGTERM);
    run.finish(Duration::from_secs(30)).assert_success();
}

#[test]
fn without_a_cpufreq_driver_it_refuses_in_one_line() {
    let done = run_tool(TOOL, &["-d", "1"]);
    if std::path::Path::new("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq").exists() {
        done.assert_success();
        assert!(done.stdout.contains("syswide"), "{}", done.stdout);
        return;
    }
    assert_eq!(done.status.code(), Some(1), "stdout:\n{}\nstderr:\n{}", done.stdout, done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert!(done.stderr.starts_with("cpufreq: no cpufreq driver on this machine ("), "{}", done.stderr);
    assert!(done.stdout.is_empty(), "{}", done.stdout);
}

#[test]
fn bad_input_is_one_line() {
    for (args, code) in [
        (&["-f", "0"][..], 2),
        (&["-d", "0"][..], 2),
        (&["-d", "x"][..], 2),
        (&["-f", "100000000"][..], 1),
        (&["-c", "/tmp"][..], 1),
        (&["extra"][..], 2),
    ] {
        let out = Command::new(bin(TOOL)).args(args).env(DECLARED.0, DECLARED.1).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    let out = Command::new(bin(TOOL)).args(["-d", "1"]).env(DECLARED.0, "fast").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("COREBPF_CPUFREQ_KHZ=fast is not a list of frequencies in kHz"), "{stderr}");
}
