// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--prometheus`: a real Prometheus server (Debian's package, its own config and data directory, a free port,
//! scraping every second) scrapes biolatency and funccount; its HTTP API must agree with the ground truth and
//! with the tools' own JSON, and `promtool check metrics` must accept both exposition formats.
//!
//! biolatency counts only a cgroup made for the test (so other tests' I/O running at the same time is not seen),
//! funccount only the PID of a helper that calls a function N times.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use corebpf_tests::*;

const BANNER: &str = "Serving Prometheus metrics on http://";
const BLOCKS: u32 = 1500;
const MIN_IOS: u64 = 1200;
const CALLS: u64 = 41;

/// Percent-encodes a PromQL query for a URL.
fn encode_query(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A free local port (bound, then released for the tool; ports are handed out in turn, so not soon reused).
fn free_addr() -> String {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    format!("127.0.0.1:{port}")
}

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

/// A Prometheus server of its own scraping `target` every second.
struct Prometheus {
    child: Child,
    addr: String,
    dir: PathBuf,
}

impl Prometheus {
    fn start(target: &str) -> Prometheus {
        let addr = free_addr();
        let dir = std::env::temp_dir().join(format!("corebpf-prometheus-{}", addr.replace([':', '.'], "-")));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: corebpf\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian's package) installed");
        let prom = Prometheus { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(&prom.addr).is_err() || http_get(&prom.addr, "/-/ready", None).0 != 200 {
            assert!(Instant::now() < deadline, "prometheus not ready within 60 s");
            thread::sleep(Duration::from_millis(200));
        }
        prom
    }

    /// An instant query's single value and its sample timestamp (the query must give one series).
    fn query(&self, q: &str) -> Option<(f64, f64)> {
        let (status, body) = http_get(&self.addr, &format!("/api/v1/query?query={}", encode_query(q)), None);
        assert_eq!(status, 200, "query {q}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let result = v["data"]["result"].as_array()?;
        assert!(result.len() <= 1, "query {q} gave several series: {body}");
        let value = &result.first()?["value"];
        Some((value[1].as_str()?.parse().ok()?, value[0].as_f64()?))
    }

    /// Waits until Prometheus holds a sample of `series` scraped after `after` (seconds since the epoch).
    fn wait_scraped_after(&self, series: &str, after: f64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some((ts, _)) = self.query(&format!("timestamp({series})")) {
                if ts > after + 0.5 {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "no scrape of {series} after the workload within 60 s");
            thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// `promtool check metrics` on an exposition: accepted, no lint problems.
fn promtool_accepts(body: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics: {said}\n{body}");
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

    // The JSON's median bucket [low, high] usecs: Prometheus's edges for it are (low-1, high] usecs.
    let buckets = hist["buckets"].as_array().unwrap();
    let rank = truth as f64 * 0.5;
    let mut seen = 0;
    let median_bucket = buckets
        .iter()
        .find(|b| {
            seen += b["count"].as_u64().unwrap();
            seen as f64 >= rank
        })
        .unwrap();
    let (low, high) = (median_bucket["low"].as_f64().unwrap(), median_bucket["high"].as_f64().unwrap());
    let us = median * 1e6;
    assert!(
        us >= (low - 1.0) - 1e-6 && us <= high + 1e-6,
        "histogram_quantile(0.5) = {us} us, outside the JSON's median bucket {low} -> {high}: {}",
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
