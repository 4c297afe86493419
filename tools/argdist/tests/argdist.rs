// SPDX-License-Identifier: Apache-2.0 OR MIT
//! argdist against a helper whose events are known (tests/src/work.c): after a `go` line on stdin it calls
//! `work(n)` 10, 20 and 30 times with n = 1, 2, 3 (returning n*10-25, sleeping n*100 us), writes N bytes of 1 and
//! M of 4096 to /dev/null, and opens a missing file. Every run filters by the helper's PID (-p), so concurrent
//! tests never show up. The tool prints `[HH:MM:SS]` once attached (after the first interval); with -c the final
//! report (at SIGINT, after the helper has exited) holds every event.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::libc;
use corebpf_tests::{build_c_helper, hist_rows, json_lines, run_tool, Finished, KillOnDrop, Running, WORK_C};

const N_SMALL: u64 = 7;
const M_LARGE: u64 = 5;

fn helper() -> PathBuf {
    build_c_helper("argdist-helper", WORK_C, &["-O1", "-static", "-DTAG=\"argdist\"", "-DMISSING=1", "-DNULL_OPENS=1"])
}

/// Runs argdist with `-p HELPER -c -i 1` and `args` (`{exe}` replaced by the helper's path) around one run of
/// the helper; returns the finished tool (checked: exit 0, no program left).
fn run_with_helper(args: &[&str]) -> Finished {
    let exe = helper();
    let child = Command::new(&exe).stdin(Stdio::piped()).spawn().expect("starting the helper");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id().to_string();
    let mut all = vec!["-p".to_owned(), pid, "-c".to_owned(), "-i".to_owned(), "1".to_owned()];
    all.extend(args.iter().map(|a| a.replace("{exe}", &exe.display().to_string())));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut run = Running::start("argdist", &all);
    run.wait_for_line("[", Duration::from_secs(60));
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.0.wait().unwrap().success(), "helper failed");
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The last interval's report (after the last `[HH:MM:SS]` line).
fn last_report(stdout: &str) -> String {
    let start = stdout.rfind("\n[").map_or(0, |i| i + 1);
    let body = &stdout[start..];
    body.split_once('\n').map_or("", |(_, rest)| rest).to_owned()
}

/// `COUNT EVENT` rows of a report as (count, event).
fn count_rows(report: &str) -> Vec<(u64, String)> {
    report
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix('\t')?;
            let (count, event) = l.split_once(' ')?;
            Some((count.parse().ok()?, event.trim().to_owned()))
        })
        .collect()
}

fn count_of(rows: &[(u64, u64, u64)], low: u64) -> u64 {
    rows.iter().find(|r| r.0 == low).map_or(0, |r| r.2)
}

#[test]
fn write_sizes_histogram_holds_each_write() {
    let done = run_with_helper(&["-H", "t:syscalls:sys_enter_write():u64:args->count"]);
    let report = last_report(&done.stdout);
    assert!(report.contains("args->count") && report.contains(": count     distribution"), "{}", done.stdout);
    let rows = hist_rows(&report);
    assert_eq!(count_of(&rows, 0), N_SMALL, "0 -> 1 bucket:\n{report}");
    assert_eq!(count_of(&rows, 4096), M_LARGE, "4096 -> 8191 bucket:\n{report}");
    assert_eq!(rows.iter().map(|r| r.2).sum::<u64>(), N_SMALL + M_LARGE, "{report}");
}

#[test]
fn filter_keeps_only_large_writes() {
    let done = run_with_helper(&["-H", "t:syscalls:sys_enter_write():u64:args->count:args->count > 100"]);
    let rows = hist_rows(&last_report(&done.stdout));
    assert_eq!(count_of(&rows, 4096), M_LARGE, "{}", done.stdout);
    assert_eq!(rows.iter().map(|r| r.2).sum::<u64>(), M_LARGE, "{}", done.stdout);
}

#[test]
fn counts_user_function_arguments() {
    let spec = "p:{exe}:work(int n):int:n";
    let done = run_with_helper(&["-C", spec]);
    let report = last_report(&done.stdout);
    assert!(
        report
            .starts_with(&format!("{}\n\tCOUNT      EVENT\n", spec.replace("{exe}", &helper().display().to_string()))),
        "{report}"
    );
    // BCC's order: ascending counts.
    assert_eq!(count_rows(&report), vec![(10, "n = 1".into()), (20, "n = 2".into()), (30, "n = 3".into())]);
}

#[test]
fn counts_return_values_and_filters_them() {
    let done = run_with_helper(&[
        "-C",
        "r:{exe}:work():int:$retval#all",
        "-C",
        "r:{exe}:work():int:$retval:$retval < 0#failed",
    ]);
    let report = last_report(&done.stdout);
    let (all, failed) = report.split_once("failed\n").expect("both probes");
    assert_eq!(
        count_rows(all),
        vec![(10, "$retval = -15".into()), (20, "$retval = -5".into()), (30, "$retval = 5".into())]
    );
    assert_eq!(count_rows(failed), vec![(10, "$retval = -15".into()), (20, "$retval = -5".into())]);
}

#[test]
fn latency_histogram_counts_every_call() {
    let done = run_with_helper(&["-H", "r:{exe}:work():u64:$latency"]);
    let report = last_report(&done.stdout);
    assert!(report.contains("$latency"), "{report}");
    let rows = hist_rows(&report);
    assert_eq!(rows.iter().map(|r| r.2).sum::<u64>(), 60, "{report}");
    // Each call sleeps at least 100 us: nothing below 65536 ns.
    assert_eq!(rows.iter().filter(|r| r.1 < 65536).map(|r| r.2).sum::<u64>(), 0, "{report}");
}

#[test]
fn counts_tracepoint_strings_and_multiple_keys() {
    let done = run_with_helper(&[
        "-C",
        "t:syscalls:sys_exit_openat():int:args->ret:args->ret < 0",
        "-C",
        "t:syscalls:sys_enter_openat():char*,int:args->filename,args->flags:args->flags == 0",
    ]);
    let report = last_report(&done.stdout);
    let rows = count_rows(&report);
    assert!(rows.contains(&(1, "args->ret = -2".into())), "{report}");
    let missing = rows.iter().filter(|r| r.1.contains("/nonexistent/argdist-")).collect::<Vec<_>>();
    assert_eq!(missing.len(), 1, "{report}");
    assert_eq!(missing[0].0, 1);
    assert!(missing[0].1.ends_with(", args->flags = 0"), "{report}");
}

#[test]
fn json_counts() {
    let done = run_with_helper(&["--json", "-C", "p:{exe}:work(int n):int:n"]);
    let lines = json_lines(&done.stdout);
    let last = lines.last().expect("a JSON line");
    assert_eq!(last["type"], "count");
    let mut got: Vec<(u64, i64)> = last["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["count"].as_u64().unwrap(), c["values"]["n"].as_i64().unwrap()))
        .collect();
    got.sort();
    assert_eq!(got, vec![(10, 1), (20, 2), (30, 3)]);
}

#[test]
fn stops_after_count_intervals() {
    let done = Running::start("argdist", &["-i", "1", "-n", "2", "-C", "t:sched:sched_process_exit():int:args->pid"])
        .finish(Duration::from_secs(30));
    done.assert_success();
    assert_eq!(done.stdout.lines().filter(|l| l.starts_with('[')).count(), 2, "{}", done.stdout);
}

#[test]
fn kernel_function_specs_need_kprobes() {
    let exe = helper();
    let has_kprobes = std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists();
    if !has_kprobes {
        let done = run_tool("argdist", &["-C", "p::vfs_write(void *file, void *buf, size_t count):size_t:count"]);
        assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
        assert!(done.stderr.contains("kprobes"), "{}", done.stderr);
        // Without a signature, the names come from the kernel's BTF: a known one gets as far as attaching, an
        // unknown one is a usage error listing the real ones.
        let done = run_tool("argdist", &["-C", "p::vfs_write():size_t:count:count > 100"]);
        assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
        assert!(done.stderr.contains("kprobes"), "{}", done.stderr);
        let done = run_tool("argdist", &["-C", "p::vfs_write():size_t:cnt"]);
        assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
        assert!(done.stderr.contains("its parameters: file, buf, count"), "{}", done.stderr);
        return;
    }
    let _ = exe;
    let done = run_with_helper(&["-C", "p::vfs_write(void *file, void *buf, size_t count):size_t:count:count > 100"]);
    assert_eq!(count_rows(&last_report(&done.stdout)), vec![(M_LARGE, "count = 4096".into())], "{}", done.stdout);
}

#[test]
fn bad_specs_fail_with_one_line() {
    let cases = [
        ("t:syscalls:sys_enter_write():u64:args->cnt", "no field 'cnt'"),
        ("t:syscalls:sys_enter_wrte():u64:args->count", "unknown tracepoint"),
        ("t:syscalls:sys_enter_write():float:args->count", "unknown type 'float'"),
        ("t:syscalls:sys_enter_write():u64:args->count:args->count &", "missing"),
        ("t:syscalls:sys_enter_write():u64:args->count*", "missing"),
        ("t:syscalls:sys_enter_write():u64:args->count:(args->count > 1", "expected ')'"),
        ("t:syscalls:sys_enter_write():u64:args->count:STRCMP(args->count)", "STRCMP takes"),
        ("x:c:write()", "probe type"),
        ("p:c:write", "invalid format"),
        ("t:syscalls:sys_enter_write():u64,u32:args->count", "mismatched"),
        ("p:c:malloc(size_t size):u64:$latency", "only available in return probes"),
    ];
    for (spec, needle) in cases {
        let done = run_tool("argdist", &["-C", spec]);
        assert_eq!(done.status.code(), Some(2), "{spec}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{spec}: {}", done.stderr);
        assert!(done.stderr.contains(needle), "{spec}: expected '{needle}' in {}", done.stderr);
    }
    let done = run_tool("argdist", &[]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
}

/// `--prometheus`: a -H spec's cumulative buckets, count and sum, and a -C spec's counts per value, exactly the
/// helper's writes and calls; the exposition passes promtool; an interval, -c or -T is refused.
#[test]
fn prometheus_serves_the_histogram_and_counts() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let exe = helper();
    let child = Command::new(&exe).stdin(Stdio::piped()).spawn().expect("starting the helper");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id().to_string();
    let hist = "t:syscalls:sys_enter_write():u64:args->count";
    let count = format!("p:{}:work(int n):int:n", exe.display());
    let (run, addr) = serving("argdist", &["-p", &pid, "-H", hist, "-C", &count]);
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.0.wait().unwrap().success(), "helper failed");
    let text = scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    promtool_accepts(&text);

    // Cumulative buckets: `le` 2 holds the 1-byte writes, `le` 8192 (slot 12, 4096 to 8191) adds the 4096-byte ones.
    let probe = format!("probe=\"{hist}\"");
    let buckets: Vec<(f64, u64)> = text
        .lines()
        .filter(|l| l.starts_with("corebpf_argdist_value_bucket{") && l.contains(&probe))
        .map(|l| {
            let le = l.split("le=\"").nth(1).and_then(|r| r.split('"').next()).unwrap();
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() };
            (le, l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64)
        })
        .collect();
    let at = |le: f64| buckets.iter().find(|b| b.0 == le).map(|b| b.1);
    assert_eq!(at(1.0), None, "slot 0's `le` is 2: {text}");
    assert_eq!(at(2.0), Some(N_SMALL), "{text}");
    assert_eq!(at(4096.0), Some(N_SMALL), "{text}");
    assert_eq!(at(8192.0), Some(N_SMALL + M_LARGE), "{text}");
    assert_eq!(at(f64::INFINITY), Some(N_SMALL + M_LARGE), "{text}");
    let series = |name: &str| sample(&text, &format!("corebpf_argdist_value_{name}{{{probe}}}"));
    assert_eq!(series("count"), Some((N_SMALL + M_LARGE) as f64), "{text}");
    assert_eq!(series("sum"), Some((N_SMALL + 4096 * M_LARGE) as f64), "{text}");
    for (n, calls) in [(1, 10), (2, 20), (3, 30)] {
        let name = format!("corebpf_argdist_events_total{{probe=\"{count}\",event=\"n = {n}\"}}");
        assert_eq!(sample(&text, &name), Some(calls as f64), "{text}");
    }

    for extra in [&["-i", "5"][..], &["-c"][..], &["-T", "3"][..]] {
        let mut args = vec!["-H", hist, "--prometheus", "127.0.0.1:1"];
        args.extend(extra);
        let refused = run_tool("argdist", &args);
        assert_eq!(refused.status.code(), Some(2), "{extra:?}: {}", refused.stderr);
        assert_eq!(refused.stderr.lines().count(), 1, "{extra:?}: {}", refused.stderr);
    }
}
