// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--prometheus`: a real Prometheus server (Debian's package, its own config and data directory, a free port,
//! scraping every second) scrapes biolatency and funccount; its HTTP API must agree with the ground truth and
//! with the tools' own JSON, and `promtool check metrics` must accept both exposition formats.
//!
//! biolatency counts only a cgroup made for the test (so other tests' I/O running at the same time is not seen),
//! funccount only the PID of a helper that calls a function N times.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use corebpf_tests::prom::{free_addr, now, promtool_accepts, Prometheus};
use corebpf_tests::*;

const BANNER: &str = "Serving Prometheus metrics on http://";
const BLOCKS: u32 = 1500;
const MIN_IOS: u64 = 1200;
const CALLS: u64 = 41;

/// Starts `tool` serving on a free port (`args` then `--prometheus ADDR`, then `tail`); waits for its banner.
fn serving(tool: &str, args: &[&str], tail: &[&str]) -> (Running, String) {
    let addr = free_addr();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--prometheus", &addr]);
    all.extend(tail);
    let mut run = Running::start(tool, &all);
    run.wait_for_line(&format!("{BANNER}{addr}/metrics"), Duration::from_secs(30));
    (run, addr)
}

#[test]
fn prometheus_scraping_biolatency_sees_every_direct_write() {
    let cg = corebpf_tests::cgroup::TestCgroup::new("metrics");
    let cgs = cg.arg();
    let (tool, target) = serving("biolatency", &["-c", cgs], &[]);
    // The tool's own JSON over the same cgroup and time: one cumulative histogram when stopped.
    let mut json = Running::start("biolatency", &["-j", "-c", cgs]);
    for _ in 0..200 {
        if prog_ids_of(json.pid()).len() >= 2 {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    json.note_programs();
    thread::sleep(Duration::from_millis(300));

    // Before Prometheus starts: both formats, and what promtool thinks of them.
    let (status, text) = http_get(&target, "/metrics", None);
    assert_eq!(status, 200);
    assert!(text.contains("# TYPE corebpf_biolatency_io_latency_seconds histogram"), "{text}");
    assert!(text.contains("corebpf_biolatency_io_latency_seconds_bucket{le=\"+Inf\"} 0"), "{text}");
    promtool_accepts(&text);
    let (_, open) = http_get(&target, "/metrics", Some("application/openmetrics-text; version=1.0.0"));
    assert!(open.ends_with("# EOF\n") && open.contains("# UNIT corebpf_biolatency_io_latency_seconds seconds"));
    assert_eq!(http_get(&target, "/nothing", None).0, 404);

    let prom = Prometheus::start(&target);
    let count = "corebpf_biolatency_io_latency_seconds_count";
    prom.wait_scraped_after(count, now());
    let file = ScratchFile::new("metrics-biolatency");
    let script = format!(
        "echo $$ > {cgs}/cgroup.procs && exec dd if=/dev/zero of={} bs=4k count={BLOCKS} oflag=direct status=none",
        file.0.display()
    );
    assert!(Command::new("sh").args(["-c", &script]).status().unwrap().success());
    prom.wait_scraped_after(count, now());

    let (increase, _) = prom.query(&format!("max_over_time({count}[1h]) - min_over_time({count}[1h])")).unwrap();
    let (median, _) = prom.query("histogram_quantile(0.5, corebpf_biolatency_io_latency_seconds_bucket)").unwrap();
    let (sum, _) = prom.query("corebpf_biolatency_io_latency_seconds_sum").unwrap();
    // No I/O in the cgroup since: the tool's /metrics now holds what Prometheus last scraped.
    let (_, now_text) = http_get(&target, "/metrics", None);
    let direct_sum: f64 = now_text
        .lines()
        .find_map(|l| l.strip_prefix("corebpf_biolatency_io_latency_seconds_sum "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no _sum: {now_text}"));

    json.signal(libc::SIGINT);
    let json = json.finish(Duration::from_secs(20));
    json.assert_success();
    tool.signal(libc::SIGTERM);
    let done = tool.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    json.assert_no_programs_left();
    drop(prom);

    let lines = json_lines(&json.stdout);
    let hist = lines.last().expect("a JSON line");
    let truth = hist["count"].as_u64().unwrap();
    assert!(truth >= MIN_IOS && truth <= BLOCKS as u64 + 100, "JSON count {truth}: {}", json.stdout);
    assert_eq!(increase as u64, truth, "Prometheus's _count increase vs the tool's JSON");
    let sum_ns = hist["sum_ns"].as_u64().unwrap() as f64;
    assert_eq!(sum, direct_sum, "Prometheus's _sum vs the tool's exposition");
    // The JSON run timed the same I/Os with its own programs: close, not equal.
    assert!((sum * 1e9 - sum_ns).abs() <= sum_ns * 0.1, "_sum {sum} s vs JSON {sum_ns} ns");

    // The JSON's median bucket [low, high] usecs (floored values): Prometheus's edges for it are (low, high+1]. The
    // two runs time the same I/Os with programs of their own, so an I/O near a bucket's edge can fall on either
    // side of it in each: the median may be in any bucket the JSON's ranks within 2% of the count reach.
    let buckets = hist["buckets"].as_array().unwrap();
    let (rank, slack) = (truth as f64 * 0.5, truth as f64 * 0.02);
    let mut seen = 0.0;
    let mut reached = Vec::new();
    for b in buckets {
        let below = seen;
        seen += b["count"].as_f64().unwrap();
        if seen >= rank - slack && below <= rank + slack && b["count"].as_u64() > Some(0) {
            reached.push((b["low"].as_f64().unwrap(), b["high"].as_f64().unwrap()));
        }
    }
    let (low, high) = (reached.first().unwrap().0, reached.last().unwrap().1);
    let us = median * 1e6;
    assert!(
        us >= low - 1e-6 && us <= high + 1.0 + 1e-6,
        "histogram_quantile(0.5) = {us} us, outside the JSON's median buckets {low} -> {high}: {}",
        json.stdout
    );
}

const HELPER: &str = include_str!("metrics_tick.c");

#[test]
fn prometheus_scraping_funccount_counts_every_call() {
    let exe = build_c_helper("metrics-helper", HELPER, &["-O0"]);
    let mut helper =
        Command::new(&exe).arg(CALLS.to_string()).stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let pid = helper.id().to_string();
    let pattern = format!("{}:metrics_tick", exe.display());
    let (tool, target) = serving("funccount", &["-p", &pid], &[&pattern]);
    let (_, text) = http_get(&target, "/metrics", None);
    assert!(text.contains("corebpf_funccount_calls_total{function=\"metrics_tick\"} 0"), "{text}");
    promtool_accepts(&text);

    let prom = Prometheus::start(&target);
    let series = "corebpf_funccount_calls_total{function=\"metrics_tick\"}";
    prom.wait_scraped_after(series, now());
    let mut stdin = helper.stdin.take().unwrap();
    stdin.write_all(b"g").unwrap();
    // The helper has made its calls once it waits for its second byte; let it go only after the scrape.
    thread::sleep(Duration::from_millis(200));
    let (_, direct) = http_get(&target, "/metrics", None);
    assert!(direct.contains(&format!("{series} {CALLS}\n")), "{direct}");
    prom.wait_scraped_after(series, now());
    let (total, _) = prom.query(series).unwrap();
    let (increase, _) = prom.query(&format!("max_over_time({series}[1h]) - min_over_time({series}[1h])")).unwrap();
    drop(stdin);
    assert!(helper.wait().unwrap().success());
    tool.signal(libc::SIGINT);
    let done = tool.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    assert_eq!(total as u64, CALLS, "counter _total in Prometheus");
    assert_eq!(increase as u64, CALLS, "counter increase in Prometheus");
}

#[test]
fn label_sets_past_the_cap_are_one_other_series_and_counted() {
    // Two functions, a cap of one: the second is folded into "other" and counted.
    let exe = build_c_helper("metrics-helper", HELPER, &["-O0"]);
    let pattern = format!("{}:m*", exe.display());
    let (tool, target) = serving("funccount", &["--max-series", "1"], &[&pattern]);
    let (_, text) = http_get(&target, "/metrics", None);
    tool.signal(libc::SIGINT);
    let done = tool.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(text.contains("corebpf_funccount_calls_total{function=\"other\"} "), "{text}");
    assert!(text.contains("corebpf_funccount_series_overflow 1\n"), "{text}");
    promtool_accepts(&text);
}

#[test]
fn bad_listen_addresses_are_one_line() {
    for (args, code) in [
        (&["--prometheus", "localhost"][..], 2),
        (&["--prometheus", "127.0.0.1:99999"][..], 2),
        (&["--prometheus", "9435", "-j"][..], 2),
        (&["--prometheus", "192.0.2.1:9435"][..], 1),
    ] {
        let done = run_tool("biolatency", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.trim().lines().count(), 1, "{args:?}: {}", done.stderr);
    }
}

/// The `le` labels of a histogram family's buckets in an exposition, in order.
fn bucket_edges(text: &str, family: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!("{family}_bucket{{le=\""))?.split('"').next().map(str::to_string))
        .collect()
}

/// Scrapes `tool args --prometheus ADDR tail` once and stops it.
fn scrape_once(tool: &str, args: &[&str], tail: &[&str]) -> String {
    let (run, target) = serving(tool, args, tail);
    let (status, text) = http_get(&target, "/metrics", None);
    assert_eq!(status, 200, "{text}");
    run.signal(libc::SIGTERM);
    run.finish(Duration::from_secs(20)).assert_success();
    text
}

#[test]
fn display_flags_do_not_change_exported_buckets() {
    let exe = build_c_helper("metrics-helper", HELPER, &["-O0"]);
    let pattern = format!("{}:metrics_tick", exe.display());
    let cases = [
        ("biolatency", "-m", "corebpf_biolatency_io_latency_seconds"),
        ("wqlat", "-m", "corebpf_wqlat_latency_seconds"),
        ("wqlat", "-N", "corebpf_wqlat_latency_seconds"),
        ("funclatency", "-m", "corebpf_funclatency_call_latency_seconds"),
    ];
    for (tool, flag, family) in cases {
        let tail: &[&str] = if tool == "funclatency" { &[&pattern] } else { &[] };
        let base = bucket_edges(&scrape_once(tool, &[], tail), family);
        let with_flag = bucket_edges(&scrape_once(tool, &[flag], tail), family);
        assert!(base.len() > 10, "{tool}: {base:?}");
        assert_eq!(base, with_flag, "{tool} {flag} changed the exported buckets");
    }
    // The fixed base of biolatency and wqlat is the microsecond: the first bucket is le = 2 us.
    let text = scrape_once("biolatency", &["-m"], &[]);
    assert_eq!(bucket_edges(&text, "corebpf_biolatency_io_latency_seconds")[0].parse::<f64>().unwrap(), 2e-6);
}

#[test]
fn biolatency_labels_are_device_and_operation() {
    let cg = corebpf_tests::cgroup::TestCgroup::new("metrics-labels");
    let cgs = cg.arg();
    let (tool, target) = serving("biolatency", &["-D", "-F", "-c", cgs], &[]);
    let file = ScratchFile::new("metrics-labels");
    let script = format!(
        "echo $$ > {cgs}/cgroup.procs && exec dd if=/dev/zero of={} bs=4k count=300 oflag=direct status=none",
        file.0.display()
    );
    assert!(Command::new("sh").args(["-c", &script]).status().unwrap().success());
    let (_, text) = http_get(&target, "/metrics", None);
    tool.signal(libc::SIGTERM);
    tool.finish(Duration::from_secs(20)).assert_success();
    promtool_accepts(&text);
    let counts: Vec<(&str, u64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("corebpf_biolatency_io_latency_seconds_count{"))
        .map(|l| {
            let (labels, n) = l.split_once("} ").unwrap();
            (labels, n.parse().unwrap())
        })
        .collect();
    for (labels, _) in &counts {
        let (device, operation) = labels.split_once(',').unwrap_or_else(|| panic!("{labels}"));
        assert!(device.starts_with("device=\""), "{labels}");
        let op = operation.strip_prefix("operation=\"").and_then(|o| o.strip_suffix('"')).unwrap();
        assert!(["read", "write", "flush", "discard", "other"].contains(&op), "{labels}");
    }
    // One series per device and operation: the 300 direct writes are one write series (Sync or not). Adjacent
    // O_DIRECT writes queued together can merge into one request (more often on a busy disk), and a 4 KiB write
    // is never split: between 4 in 5 of them and all of them are counted.
    let writes: Vec<u64> = counts.iter().filter(|(l, _)| l.ends_with("operation=\"write\"")).map(|c| c.1).collect();
    assert_eq!(writes.len(), 1, "{text}");
    assert!((240..=300).contains(&writes[0]), "{text}");
    assert!(!text.contains("disk=") && !text.contains("flags="), "{text}");
}

#[test]
fn self_metrics_name_the_build_the_mechanism_and_the_programs() {
    let text = scrape_once("biolatency", &[], &[]);
    promtool_accepts(&text);
    assert!(text.contains("corebpf_build_info{tool=\"biolatency\",version=\""), "{text}");
    let mech = text
        .lines()
        .find_map(|l| l.strip_prefix("corebpf_attach_info{tool=\"biolatency\",mechanism=\"")?.split('"').next())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(["tp_btf", "raw_tp"].contains(&mech), "{mech}");
    assert!(text.contains("corebpf_map_full_total{tool=\"biolatency\",map=\"start\"} 0\n"), "{text}");
    assert!(text.contains("# TYPE corebpf_lost_events_total counter"), "{text}");
    for program in text.lines().filter_map(|l| l.strip_prefix("corebpf_bpf_program_runs_total{tool=\"biolatency\",")) {
        assert!(program.starts_with("program=\"block_rq_"), "{program}");
    }
    // Run time and runs only while the kernel counts them (another test may turn the sysctl on meanwhile): the
    // scrape's gauge says which.
    let counting = corebpf_tests::prom::sample(&text, "corebpf_bpf_stats_enabled{tool=\"biolatency\"}")
        .unwrap_or_else(|| panic!("no corebpf_bpf_stats_enabled: {text}"));
    let runs = text.lines().filter(|l| l.starts_with("corebpf_bpf_program_run_seconds_total{")).count();
    assert_eq!(runs, if counting == 1.0 { 2 } else { 0 }, "issue and complete, or none: {text}");
    let counts = text.lines().filter(|l| l.starts_with("corebpf_bpf_program_runs_total{")).count();
    assert_eq!(counts, runs, "{text}");
    let skipped = text.lines().filter(|l| l.starts_with("corebpf_bpf_program_skipped_runs_total{")).count();
    assert_eq!(skipped, 2, "issue and complete: {text}");
}

/// Threads of process `pid`.
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn thousands_of_idle_connections_hold_no_threads_and_a_scrape_still_works() {
    let (tool, target) = serving("wqlat", &[], &[]);
    let before = threads(tool.pid());
    // 2000 sockets need more descriptors than the usual soft limit of 1024.
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain getrlimit/setrlimit on this process with a valid struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(8192);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    let mut idle = Vec::new();
    for _ in 0..2000 {
        if let Ok(c) = TcpStream::connect_timeout(&target.parse().unwrap(), Duration::from_secs(5)) {
            idle.push(c);
        }
    }
    assert!(idle.len() >= 1900, "{} connections made", idle.len());
    let (status, text) = http_get(&target, "/metrics", None);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("corebpf_wqlat_latency_seconds_count"), "{text}");
    let during = threads(tool.pid());
    drop(idle);
    tool.signal(libc::SIGTERM);
    tool.finish(Duration::from_secs(20)).assert_success();
    assert!(during <= before + 1 && during <= 4, "threads: {before} before, {during} with 2000 idle connections");
}

#[test]
fn a_busy_port_fails_before_anything_is_loaded() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let done = run_tool("biolatency", &["--prometheus", &addr]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.trim().lines().count(), 1, "{}", done.stderr);
    assert!(done.stderr.contains(&format!("cannot listen on {addr}")), "{}", done.stderr);
    // Nothing loaded: with -v, no attach path is tried.
    let verbose = run_tool("biolatency", &["-v", "--prometheus", &addr]);
    assert!(!verbose.stderr.contains("tp_btf"), "{}", verbose.stderr);
    assert_eq!(verbose.status.code(), Some(1), "{}", verbose.stderr);
}

#[test]
fn interval_or_count_with_prometheus_is_a_usage_error() {
    for (tool, args) in [
        ("biolatency", &["--prometheus", "127.0.0.1:1", "1"][..]),
        ("biolatency", &["--prometheus", "127.0.0.1:1", "1", "2"][..]),
        ("wqlat", &["--prometheus", "127.0.0.1:1", "5"][..]),
    ] {
        let done = run_tool(tool, args);
        assert_eq!(done.status.code(), Some(2), "{tool} {args:?}: {}", done.stderr);
        assert_eq!(done.stderr.trim().lines().count(), 1, "{}", done.stderr);
        assert!(done.stderr.contains("no interval"), "{}", done.stderr);
    }
}

/// `kernel.bpf_stats_enabled` set to 1 for the life of the value, then put back.
struct BpfStats(String);

impl BpfStats {
    fn enable() -> BpfStats {
        let path = "/proc/sys/kernel/bpf_stats_enabled";
        let old = std::fs::read_to_string(path).unwrap().trim().to_string();
        std::fs::write(path, "1").unwrap();
        BpfStats(old)
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", &self.0);
    }
}

#[test]
fn program_runs_are_the_kernels_with_bpf_stats_enabled() {
    let _stats = BpfStats::enable();
    let (tool, target) = serving("hardirqs", &[], &[]);
    let file = ScratchFile::new("metrics-bpfstats");
    let script = format!("exec dd if=/dev/zero of={} bs=4k count=200 oflag=direct status=none", file.0.display());
    assert!(Command::new("sh").args(["-c", &script]).status().unwrap().success());
    let (_, text) = http_get(&target, "/metrics", None);
    tool.signal(libc::SIGTERM);
    tool.finish(Duration::from_secs(20)).assert_success();
    let value =
        |series: &str| corebpf_tests::prom::sample(&text, series).unwrap_or_else(|| panic!("{series}:\n{text}"));
    let entries = value("corebpf_bpf_program_runs_total{tool=\"hardirqs\",program=\"irq_handler_entry_btf\"}") as u64;
    let exits = value("corebpf_bpf_program_runs_total{tool=\"hardirqs\",program=\"irq_handler_exit_btf\"}") as u64;
    let events: u64 = text
        .lines()
        .filter(|l| l.starts_with("corebpf_hardirqs_handler_seconds_count{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    // Each handler run is one entry and one exit run, and one event (but a handler running as the programs were
    // attached, or scraped mid-way: one per CPU at most).
    let cpus = thread::available_parallelism().unwrap().get() as u64;
    assert!(events > 0, "{text}");
    assert!(entries.abs_diff(events) <= cpus && exits.abs_diff(events) <= cpus, "{entries} {exits} {events}:\n{text}");
    assert!(value("corebpf_bpf_program_run_seconds_total{tool=\"hardirqs\",program=\"irq_handler_exit_btf\"}") > 0.0);
    assert_eq!(value("corebpf_bpf_stats_enabled{tool=\"hardirqs\"}"), 1.0, "{text}");
}

/// Issue 53, item 14: with the kernel not counting (`kernel.bpf_stats_enabled` 0), the programs' runs and run time
/// are not published as zeros, which would read as programs that never run; the gauge says the kernel does not
/// count. Skipped runs, which the kernel always counts, stay.
#[test]
fn program_runs_are_left_out_while_the_kernel_does_not_count_them() {
    // The sysctl is 0 unless another test (program_runs_are_the_kernels_with_bpf_stats_enabled) has it on for a
    // while: the scrape's gauge says which, and the series follow it.
    let text = scrape_once("hardirqs", &[], &[]);
    let gauge = corebpf_tests::prom::sample(&text, "corebpf_bpf_stats_enabled{tool=\"hardirqs\"}")
        .unwrap_or_else(|| panic!("no corebpf_bpf_stats_enabled: {text}"));
    let runs = text.lines().filter(|l| l.starts_with("corebpf_bpf_program_runs_total{")).count();
    let seconds = text.lines().filter(|l| l.starts_with("corebpf_bpf_program_run_seconds_total{")).count();
    if gauge == 0.0 {
        assert_eq!((runs, seconds), (0, 0), "{text}");
    } else {
        assert_eq!((gauge, runs, seconds), (1.0, 2, 2), "{text}");
    }
    assert!(text.contains("# TYPE corebpf_bpf_program_runs_total counter"), "{text}");
    let skipped = text.lines().filter(|l| l.starts_with("corebpf_bpf_program_skipped_runs_total{")).count();
    assert_eq!(skipped, 2, "{text}");
}

#[test]
fn root_disk_prometheus_quantile_of_bitesize_is_the_workloads() {
    // 40 direct writes of 64 KiB and 30 of 4 KiB by a helper of a name of its own (bitesize's writer).
    let file = ScratchFile::new("metrics-bitesize");
    let mut f = std::fs::File::create(&file.0).unwrap();
    f.write_all(&vec![b'a'; 3 << 20]).unwrap();
    f.sync_all().unwrap();
    let exe = build_c_helper("bitesize-writer", include_str!("../../tools/bitesize/tests/writer.c"), &["-O1"]);
    let named = ScratchFile::new("bsw");
    std::os::unix::fs::symlink(&exe, &named.0).unwrap();
    let mut helper =
        KillOnDrop(Command::new(&named.0).arg(&file.0).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap());
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", helper.0.id())).unwrap().trim_end().to_string();
    let (tool, target) = serving("bitesize", &["-c", &comm], &[]);
    let prom = Prometheus::start(&target);
    let count = format!("corebpf_bitesize_io_size_bytes_count{{comm=\"{comm}\"}}");
    // No series of the helper before its first request: wait for a scrape of the self metrics.
    prom.wait_scraped_after("corebpf_build_info{tool=\"bitesize\"}", now());
    let mut stdin = helper.0.stdin.take().unwrap();
    stdin.write_all(b"g").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(helper.0.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line, "done\n", "the helper failed");
    prom.wait_scraped_after(&count, now());
    let q = format!("histogram_quantile(0.5, corebpf_bitesize_io_size_bytes_bucket{{comm=\"{comm}\"}})");
    let (median, _) = prom.query(&q).unwrap();
    let (n, _) = prom.query(&count).unwrap();
    drop(stdin);
    assert!(helper.0.wait().unwrap().success());
    tool.signal(libc::SIGTERM);
    tool.finish(Duration::from_secs(20)).assert_success();
    assert_eq!(n, 70.0);
    // Rank 35 of 70: the 5th of the 40 writes in (64 KiB, 128 KiB], interpolated: 64 KiB + 5/40 of 64 KiB.
    assert_eq!(median, 65536.0 + 5.0 / 40.0 * 65536.0, "{q}");
}
