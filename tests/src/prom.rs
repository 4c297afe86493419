// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Scraping a tool's `--prometheus` endpoint in tests: start it on a free port, read a sample, check the
//! exposition with `promtool check metrics` (Debian's `prometheus` package; a missing promtool fails the test).

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{http_get, Running};

/// Starts `tool args --prometheus ADDR` on a free local port and waits until it serves; returns it and ADDR.
pub fn serving(tool: &str, args: &[&str]) -> (Running, String) {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--prometheus", &addr]);
    let mut run = Running::start(tool, &all);
    run.wait_for_line(&format!("Serving Prometheus metrics on http://{addr}/metrics"), Duration::from_secs(30));
    (run, addr)
}

/// `/metrics` in the Prometheus text format (status 200 asserted).
pub fn scrape(addr: &str) -> String {
    let (status, text) = http_get(addr, "/metrics", None);
    assert_eq!(status, 200, "{text}");
    text
}

/// The value of the sample whose name and labels are exactly `series` (e.g. `x_count{pid="1"}`), if present.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// `promtool check metrics` accepts the exposition with no lint problem.
pub fn promtool_accepts(body: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (apt-get install prometheus)");
    child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics: {said}\n{body}");
}

/// Percent-encodes a PromQL query for a URL.
pub fn encode_query(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A free local port (bound, then released for the tool; ports are handed out in turn, so not soon reused).
pub fn free_addr() -> String {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    format!("127.0.0.1:{port}")
}

/// A Prometheus server of its own scraping `target` every second.
pub struct Prometheus {
    child: Child,
    addr: String,
    dir: PathBuf,
}

impl Prometheus {
    pub fn start(target: &str) -> Prometheus {
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
    pub fn query(&self, q: &str) -> Option<(f64, f64)> {
        let (status, body) = http_get(&self.addr, &format!("/api/v1/query?query={}", encode_query(q)), None);
        assert_eq!(status, 200, "query {q}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let result = v["data"]["result"].as_array()?;
        assert!(result.len() <= 1, "query {q} gave several series: {body}");
        let value = &result.first()?["value"];
        Some((value[1].as_str()?.parse().ok()?, value[0].as_f64()?))
    }

    /// Waits until Prometheus holds a sample of `series` scraped after `after` (seconds since the epoch).
    pub fn wait_scraped_after(&self, series: &str, after: f64) {
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

pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Every sample of `family` (its full sample name, e.g. `corebpf_x_total`) as its labels and value, label values
/// unescaped (`\\`, `\"`, `\n`).
pub fn samples_of(text: &str, family: &str) -> Vec<(std::collections::BTreeMap<String, String>, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(family) else { continue };
        let mut labels = std::collections::BTreeMap::new();
        let value = match rest.strip_prefix('{') {
            Some(mut rest) => {
                while let Some((name, tail)) = rest.split_once("=\"") {
                    let mut value = String::new();
                    let mut chars = tail.char_indices();
                    let mut end = tail.len();
                    while let Some((i, c)) = chars.next() {
                        match c {
                            '\\' => match chars.next() {
                                Some((_, 'n')) => value.push('\n'),
                                Some((_, other)) => value.push(other),
                                None => {}
                            },
                            '"' => {
                                end = i + 1;
                                break;
                            }
                            c => value.push(c),
                        }
                    }
                    labels.insert(name.trim_start_matches(',').to_string(), value);
                    rest = &tail[end..];
                    if let Some(after) = rest.strip_prefix('}') {
                        rest = after;
                        break;
                    }
                }
                rest
            }
            None => rest,
        };
        let Some(value) = value.strip_prefix(' ').and_then(|v| v.trim().parse().ok()) else { continue };
        out.push((labels, value));
    }
    out
}

/// Scrapes `addr` until `done` holds of the exposition (the kernel's maps fill as the workload runs), at most 60 s;
/// returns that exposition.
pub fn scrape_until(addr: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = scrape(addr);
        if done(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what} not seen within 60 s:\n{text}");
        thread::sleep(Duration::from_millis(200));
    }
}
