// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--prometheus ADDR:PORT`: a tool's cumulative kernel maps served as Prometheus metrics.
//!
//! Instead of printing intervals, a tool hands [`serve`] a closure that reads its maps into a [`Snapshot`]; the
//! closure runs on the tool's own thread once per scrape, so a scrape costs one map read and nothing is lost
//! between scrapes (the kernel's counts are cumulative). The exposition is written by the official
//! `prometheus-client` crate (OpenMetrics text, or the Prometheus text format 0.0.4 derived from it, chosen from
//! the request's `Accept` header) and served by `tiny_http`, whose threads read requests: a slow or malformed
//! request holds only its own connection, never the tool. Label sets are bounded ([`SeriesCap`]): past the cap
//! new ones are folded into one series labelled `other`, and the number folded is exported.
//!
//! Conventions: names `corebpf_<tool>_...`, base units (seconds), counters `_total`, histograms with every
//! bucket and `+Inf`. A BCC log2 slot `i` holds `[2^i, 2^(i+1)-1]` units, so its `le` is `2^(i+1)-1` units; the
//! last, clamped slot belongs to `+Inf` ([`log2_buckets_seconds`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use anyhow::{anyhow, Result};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

pub use crate::cli::{parse_listen, DEFAULT_MAX_SERIES};
use crate::run::Signals;

/// Responses being written at once; a scrape beyond this is answered `503` at once.
const MAX_RESPONDERS: usize = 16;

/// A bucketed value: sum (in seconds), count and per-bucket counts with their upper bounds (last `+Inf`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramValue {
    pub sum: f64,
    pub count: u64,
    pub buckets: Vec<(f64, u64)>,
}

impl HistogramValue {
    /// A BCC log2 histogram (counts per slot, in units of `ns_per_unit` nanoseconds) with its exact sum: the
    /// count is the slots' sum, from the same read, so it always equals the `+Inf` bucket.
    pub fn from_log2_slots(slots: &[u64], sum_ns: u64, ns_per_unit: u64) -> Self {
        HistogramValue {
            sum: sum_ns as f64 / 1e9,
            count: slots.iter().sum(),
            buckets: log2_buckets_seconds(slots, ns_per_unit),
        }
    }

    fn add(&mut self, other: &HistogramValue) {
        self.sum += other.sum;
        self.count += other.count;
        if self.buckets.is_empty() {
            self.buckets = other.buckets.clone();
        } else {
            for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
                mine.1 += theirs.1;
            }
        }
    }
}

/// BCC log2 slots (counts per slot, in units of `ns_per_unit` nanoseconds) as buckets in seconds: slot `i` up to
/// `le = (2^(i+1)-1)` units, the last slot (where larger values are clamped) `+Inf`.
pub fn log2_buckets_seconds(slots: &[u64], ns_per_unit: u64) -> Vec<(f64, u64)> {
    let last = slots.len().saturating_sub(1);
    slots
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let le = if i == last {
                f64::INFINITY
            } else {
                let (_, high) = super::hist::log2_bounds(i);
                high as f64 * ns_per_unit as f64 / 1e9
            };
            (le, count)
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Value {
    Counter(u64),
    Histogram(HistogramValue),
}

impl Value {
    fn add(&mut self, other: &Value) {
        match (self, other) {
            (Value::Counter(a), Value::Counter(b)) => *a += b,
            (Value::Histogram(a), Value::Histogram(b)) => a.add(b),
            _ => {}
        }
    }
}

#[derive(Debug, Clone)]
struct Family {
    name: String,
    help: String,
    unit: Option<Unit>,
    labels: Vec<&'static str>,
    series: BTreeMap<Vec<String>, Value>,
}

/// The metrics of one scrape, filled by the tool's closure from its maps.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    families: Vec<Family>,
}

impl Snapshot {
    fn family(&mut self, name: &str, help: &str, unit: Option<Unit>, labels: &[&'static str]) -> &mut Family {
        if let Some(i) = self.families.iter().position(|f| f.name == name) {
            return &mut self.families[i];
        }
        self.families.push(Family {
            name: name.to_string(),
            help: help.to_string(),
            unit,
            labels: labels.to_vec(),
            series: BTreeMap::new(),
        });
        self.families.last_mut().expect("just pushed")
    }

    /// Declares counter `name` (exported as `corebpf_<tool>_<name>_total`), so it is exported even with no series.
    pub fn declare_counter(&mut self, name: &str, help: &str, labels: &[&'static str]) {
        self.family(name, help, None, labels);
    }

    /// Adds `value` to counter `name`'s series with these label values (one per label name, in order).
    pub fn counter(&mut self, name: &str, help: &str, labels: &[&'static str], values: Vec<String>, value: u64) {
        let family = self.family(name, help, None, labels);
        family.series.entry(values).or_insert(Value::Counter(0)).add(&Value::Counter(value));
    }

    /// Adds a histogram in seconds (`corebpf_<tool>_<name>_seconds`) to the series with these label values.
    pub fn histogram_seconds(
        &mut self,
        name: &str,
        help: &str,
        labels: &[&'static str],
        values: Vec<String>,
        value: HistogramValue,
    ) {
        let family = self.family(name, help, Some(Unit::Seconds), labels);
        let value = Value::Histogram(value);
        match family.series.get_mut(&values) {
            Some(old) => old.add(&value),
            None => {
                family.series.insert(values, value);
            }
        }
    }
}

/// The label sets admitted per metric, kept across scrapes so a series never moves in or out of `other` (which
/// would make counters jump): the first `max` distinct sets seen are exported, later ones fold into `other`.
#[derive(Debug)]
pub struct SeriesCap {
    max: usize,
    admitted: BTreeMap<String, BTreeSet<Vec<String>>>,
}

impl SeriesCap {
    pub fn new(max: usize) -> Self {
        SeriesCap { max: max.max(1), admitted: BTreeMap::new() }
    }

    /// Folds the label sets beyond the cap into `other`; returns how many distinct sets were folded.
    pub fn apply(&mut self, snapshot: &mut Snapshot) -> u64 {
        let mut folded = 0;
        for family in &mut snapshot.families {
            if family.labels.is_empty() {
                continue;
            }
            let admitted = self.admitted.entry(family.name.clone()).or_default();
            let series = std::mem::take(&mut family.series);
            for (labels, value) in series {
                if !admitted.contains(&labels) && admitted.len() < self.max {
                    admitted.insert(labels.clone());
                }
                let key = if admitted.contains(&labels) {
                    labels
                } else {
                    folded += 1;
                    vec!["other".to_string(); family.labels.len()]
                };
                match family.series.get_mut(&key) {
                    Some(old) => old.add(&value),
                    None => {
                        family.series.insert(key, value);
                    }
                }
            }
        }
        folded
    }
}

/// A snapshot as a `prometheus-client` collector: encoded by the crate at scrape time.
#[derive(Debug)]
struct SnapshotCollector(Snapshot);

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.0.families {
            let metric_type = match family.series.values().next() {
                Some(Value::Histogram(_)) => MetricType::Histogram,
                _ if family.unit.is_some() => MetricType::Histogram,
                _ => MetricType::Counter,
            };
            let mut metric =
                encoder.encode_descriptor(&family.name, &family.help, family.unit.as_ref(), metric_type)?;
            if family.labels.is_empty() {
                if let Some(value) = family.series.values().next() {
                    SeriesValue(value).encode(metric)?;
                }
                continue;
            }
            for (values, value) in &family.series {
                let labels: Vec<(String, String)> =
                    family.labels.iter().map(|l| l.to_string()).zip(values.iter().cloned()).collect();
                let series = metric.encode_family(&labels)?;
                SeriesValue(value).encode(series)?;
            }
        }
        Ok(())
    }
}

struct SeriesValue<'a>(&'a Value);

impl EncodeMetric for SeriesValue<'_> {
    fn encode(&self, mut encoder: prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error> {
        match self.0 {
            Value::Counter(v) => encoder.encode_counter::<NoLabelSet, u64, f64>(v, None),
            Value::Histogram(h) => encoder.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None),
        }
    }

    fn metric_type(&self) -> MetricType {
        match self.0 {
            Value::Counter(_) => MetricType::Counter,
            Value::Histogram(_) => MetricType::Histogram,
        }
    }
}

/// The two exposition formats, negotiated from `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`
    OpenMetrics,
}

impl Format {
    /// OpenMetrics when the client accepts it (Prometheus asks for it first), else the Prometheus text format.
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Encodes `snapshot` for tool `tool` in `format`, with the overflow gauge (`corebpf_<tool>_series_overflow`).
pub fn encode(tool: &str, snapshot: Snapshot, overflow: u64, format: Format) -> Result<String> {
    let mut registry = Registry::with_prefix(format!("corebpf_{tool}"));
    registry.register_collector(Box::new(SnapshotCollector(snapshot)));
    let gauge = prometheus_client::metrics::gauge::Gauge::<i64>::default();
    gauge.set(overflow.min(i64::MAX as u64) as i64);
    registry.register("series_overflow", "Label sets folded into the series labelled other (past --max-series)", gauge);
    let mut open = String::new();
    prometheus_client::encoding::text::encode(&mut open, &registry).map_err(|_| anyhow!("encoding metrics"))?;
    Ok(match format {
        Format::OpenMetrics => open,
        Format::Prometheus => openmetrics_to_prometheus(&open),
    })
}

/// The Prometheus text format 0.0.4 from the crate's OpenMetrics text: no `# EOF` or `# UNIT`, and a counter's
/// `# HELP`/`# TYPE` name its samples' `_total` name (0.0.4 has no family name apart from the samples').
fn openmetrics_to_prometheus(open: &str) -> String {
    let counters: BTreeSet<&str> =
        open.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(open.len());
    for line in open.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{prefix}{name}_total {tail}"))
        });
        let _ = writeln!(out, "{}", renamed.as_deref().unwrap_or(line));
    }
    out
}

/// Serves `/metrics` on `listen` until a stop signal: prints where, then answers each scrape with what `collect`
/// reads at that moment (on this thread), capped at `max_series` label sets per metric.
pub fn serve(
    tool: &str,
    listen: SocketAddr,
    max_series: usize,
    signals: &Signals,
    mut collect: impl FnMut(&mut Snapshot) -> Result<()>,
) -> Result<()> {
    let server = tiny_http::Server::http(listen).map_err(|e| anyhow!("cannot listen on {listen}: {e}"))?;
    let server = Arc::new(server);
    let bound = server.server_addr().to_ip().unwrap_or(listen);
    {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "Serving Prometheus metrics on http://{bound}/metrics... Hit Ctrl-C to end.");
        let _ = stdout.flush();
    }

    let (wake_rx, wake_tx) = UnixStream::pair()?;
    wake_rx.set_nonblocking(true)?;
    let (tx, rx) = mpsc::sync_channel::<tiny_http::Request>(MAX_RESPONDERS);
    let stop = Arc::new(AtomicBool::new(false));
    let accept = {
        let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
        thread::spawn(move || accept_loop(&server, &stop, &tx, &wake_tx))
    };

    let mut cap = SeriesCap::new(max_series);
    let responders = Arc::new(AtomicUsize::new(0));
    let result = loop {
        if signals.stopped() {
            break Ok(());
        }
        if !signals.wait_readable(wake_rx.as_fd(), Duration::from_secs(3600)) {
            continue;
        }
        let mut drain = [0u8; 256];
        while matches!((&wake_rx).read(&mut drain), Ok(n) if n > 0) {}
        let mut failed = None;
        while let Ok(request) = rx.try_recv() {
            let accept =
                request.headers().iter().find(|h| h.field.equiv("Accept")).map(|h| h.value.as_str().to_string());
            let format = Format::from_accept(accept.as_deref());
            let mut snapshot = Snapshot::default();
            let response = match collect(&mut snapshot) {
                Ok(()) => {
                    let overflow = cap.apply(&mut snapshot);
                    encode(tool, snapshot, overflow, format).map(|body| (body, format.content_type(), 200))
                }
                Err(e) => Err(e),
            };
            let (body, content_type, status) = match response {
                Ok(r) => r,
                Err(e) => {
                    let text = format!("{e:#}\n");
                    failed = Some(e);
                    (text, "text/plain; charset=utf-8", 500)
                }
            };
            respond(request, body, content_type, status, &responders);
            if failed.is_some() {
                break;
            }
        }
        if let Some(e) = failed {
            break Err(e.context("reading the maps for a scrape"));
        }
    };
    stop.store(true, Ordering::SeqCst);
    server.unblock();
    let _ = accept.join();
    result
}

/// Receives requests (tiny_http's threads parse them) and passes scrapes of `/metrics` to the tool's thread;
/// anything else is answered here.
fn accept_loop(
    server: &tiny_http::Server,
    stop: &AtomicBool,
    scrapes: &mpsc::SyncSender<tiny_http::Request>,
    wake: &UnixStream,
) {
    let responders = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        let Ok(request) = server.recv() else { continue };
        let path = request.url().split('?').next().unwrap_or("");
        let get = matches!(request.method(), tiny_http::Method::Get | tiny_http::Method::Head);
        match (path, get) {
            ("/metrics", true) => match scrapes.try_send(request) {
                Ok(()) => {
                    let _ = (&*wake).write(&[1]);
                }
                Err(mpsc::TrySendError::Full(r)) | Err(mpsc::TrySendError::Disconnected(r)) => {
                    respond(r, "too many scrapes at once\n".into(), "text/plain", 503, &responders)
                }
            },
            ("/metrics", false) => respond(request, "use GET\n".into(), "text/plain", 405, &responders),
            ("/", true) => respond(
                request,
                "<html><body><a href=\"/metrics\">/metrics</a></body></html>\n".into(),
                "text/html",
                200,
                &responders,
            ),
            _ => respond(request, "not found: try /metrics\n".into(), "text/plain", 404, &responders),
        }
    }
}

/// Writes a response from its own thread, so a client that does not read never holds the caller; past
/// MAX_RESPONDERS at once, the request is dropped (its connection closed).
fn respond(request: tiny_http::Request, body: String, content_type: &str, status: u16, busy: &Arc<AtomicUsize>) {
    if busy.fetch_add(1, Ordering::SeqCst) >= MAX_RESPONDERS {
        busy.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes()).ok();
    let mut response = tiny_http::Response::from_string(body).with_status_code(status);
    if let Some(header) = header {
        response = response.with_header(header);
    }
    let busy = Arc::clone(busy);
    thread::spawn(move || {
        let _ = request.respond(response);
        busy.fetch_sub(1, Ordering::SeqCst);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_edges_are_slot_tops_and_last_is_inf() {
        let b = log2_buckets_seconds(&[1, 2, 3, 4], 1000);
        assert_eq!(b[0], (1e-6, 1));
        assert_eq!(b[1], (3e-6, 2));
        assert_eq!(b[2], (7e-6, 3));
        assert_eq!(b[3], (f64::INFINITY, 4));
    }

    #[test]
    fn counters_and_histograms_in_both_formats() {
        let mut s = Snapshot::default();
        s.counter("calls", "Calls", &["function"], vec!["vfs_read".into()], 5);
        let h = HistogramValue { sum: 0.5, count: 3, buckets: log2_buckets_seconds(&[1, 2, 0], 1000) };
        s.histogram_seconds("io_latency", "Latency", &["disk"], vec!["vda".into()], h);
        let om = encode("t", s.clone(), 0, Format::OpenMetrics).unwrap();
        assert!(om.contains("# TYPE corebpf_t_calls counter\n"), "{om}");
        assert!(om.contains("corebpf_t_calls_total{function=\"vfs_read\"} 5\n"), "{om}");
        assert!(om.contains("corebpf_t_io_latency_seconds_bucket{le=\"+Inf\",disk=\"vda\"} 3\n"), "{om}");
        assert!(om.ends_with("# EOF\n"));
        let text = encode("t", s, 0, Format::Prometheus).unwrap();
        assert!(text.contains("# TYPE corebpf_t_calls_total counter\n"), "{text}");
        assert!(text.contains("corebpf_t_io_latency_seconds_count{disk=\"vda\"} 3\n"), "{text}");
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
    }

    #[test]
    fn series_past_the_cap_fold_into_other_and_stay_there() {
        let mut cap = SeriesCap::new(2);
        let mut s = Snapshot::default();
        for (f, n) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
            s.counter("calls", "Calls", &["function"], vec![f.into()], n);
        }
        assert_eq!(cap.apply(&mut s), 2);
        let text = encode("t", s, 2, Format::Prometheus).unwrap();
        assert!(text.contains("corebpf_t_calls_total{function=\"other\"} 7\n"), "{text}");
        assert!(text.contains("corebpf_t_series_overflow 2\n"), "{text}");
        let mut s = Snapshot::default();
        s.counter("calls", "Calls", &["function"], vec!["a".into()], 1);
        s.counter("calls", "Calls", &["function"], vec!["z".into()], 1);
        assert_eq!(cap.apply(&mut s), 1);
    }
}
