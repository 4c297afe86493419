// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--prometheus ADDR:PORT`: a tool's cumulative kernel maps served as Prometheus metrics.
//!
//! Instead of printing intervals, a tool hands its endpoint ([`crate::host::endpoint`]) a closure that reads its
//! maps into a [`Snapshot`]; the closure runs on the tool's own thread once per scrape, so a scrape costs one map
//! read and nothing is lost between scrapes (the kernel's counts are cumulative). The exposition is written by the
//! official `prometheus-client` crate (OpenMetrics text, or the Prometheus text format 0.0.4 derived from it,
//! chosen from the request's `Accept` header: [`Format`]). Label sets are bounded ([`SeriesCap`]): past the cap
//! new ones are folded into one series labelled `other`, and the number folded is exported. Every tool's
//! exposition also carries the same self metrics ([`super::metrics_self`]): build, attach mechanism, lost
//! events, full maps, and each BPF program's run time and count.
//!
//! Conventions: names `corebpf_<tool>_...`, base units (seconds), counters `_total`, histograms with every
//! bucket and `+Inf`. A BCC log2 slot `i` counts values whose whole number of units (the floor: `ns / 1000` for
//! microseconds) is in `[2^i, 2^(i+1)-1]`, so the real values in it are below `2^(i+1)` units: its `le` is
//! `2^(i+1)` units, in seconds, as in ebpf_exporter's exp2 buckets (a value lands in the bucket whose `le` is the
//! next power of two above it). The last, clamped slot belongs to `+Inf` ([`log2_buckets_seconds`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use anyhow::{anyhow, Result};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

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

    /// A log2 histogram of sizes (counts per slot, in units of `bytes_per_unit` bytes, e.g. 1024 for BCC's
    /// Kbytes) with its exact sum in bytes: buckets `le = 2^(i+1)` units, in bytes.
    pub fn from_log2_slots_bytes(slots: &[u64], sum_bytes: u64, bytes_per_unit: u64) -> Self {
        let last = slots.len().saturating_sub(1);
        let buckets = slots
            .iter()
            .enumerate()
            .map(|(i, &c)| (if i == last { f64::INFINITY } else { 2f64.powi(i as i32 + 1) * bytes_per_unit as f64 }, c))
            .collect();
        HistogramValue { sum: sum_bytes as f64, count: slots.iter().sum(), buckets }
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
/// `le = 2^(i+1)` units (its values were floored to whole units, so each is below that), the last slot (where
/// larger values are clamped) `+Inf`.
pub fn log2_buckets_seconds(slots: &[u64], ns_per_unit: u64) -> Vec<(f64, u64)> {
    let last = slots.len().saturating_sub(1);
    slots
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let le = if i == last { f64::INFINITY } else { log2_le_seconds(i, ns_per_unit) };
            (le, count)
        })
        .collect()
}

/// The `le` of log2 slot `i` in seconds: `2^(i+1)` units of `ns_per_unit` nanoseconds.
pub fn log2_le_seconds(slot: usize, ns_per_unit: u64) -> f64 {
    2f64.powi(slot as i32 + 1) * ns_per_unit as f64 / 1e9
}

#[derive(Debug, Clone)]
enum Value {
    Counter(u64),
    /// A counter of a real quantity (seconds).
    CounterF(f64),
    Gauge(f64),
    Histogram(HistogramValue),
}

impl Value {
    fn add(&mut self, other: &Value) {
        match (self, other) {
            (Value::Counter(a), Value::Counter(b)) => *a += b,
            (Value::CounterF(a), Value::CounterF(b)) | (Value::Gauge(a), Value::Gauge(b)) => *a += b,
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
    kind: MetricType,
    /// A self metric: named `corebpf_<name>` (labelled by tool), not `corebpf_<tool>_<name>`.
    global: bool,
    labels: Vec<&'static str>,
    series: BTreeMap<Vec<String>, Value>,
}

/// The metrics of one scrape, filled by the tool's closure from its maps.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    tool: String,
    families: Vec<Family>,
}

impl Snapshot {
    /// An empty snapshot of `tool`'s metrics.
    pub fn new(tool: &str) -> Snapshot {
        Snapshot { tool: tool.to_string(), families: Vec::new() }
    }

    /// The tool whose metrics these are.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    fn family(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        kind: MetricType,
        labels: &[&'static str],
    ) -> &mut Family {
        if let Some(i) = self.families.iter().position(|f| f.name == name) {
            return &mut self.families[i];
        }
        let global = false;
        let (name, help, labels) = (name.to_string(), help.to_string(), labels.to_vec());
        self.families.push(Family { name, help, unit, kind, global, labels, series: BTreeMap::new() });
        self.families.last_mut().expect("just pushed")
    }

    fn add(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        labels: &[&'static str],
        values: Vec<String>,
        v: Value,
    ) {
        let kind = match v {
            Value::Counter(_) | Value::CounterF(_) => MetricType::Counter,
            Value::Gauge(_) => MetricType::Gauge,
            Value::Histogram(_) => MetricType::Histogram,
        };
        let family = self.family(name, help, unit, kind, labels);
        match family.series.get_mut(&values) {
            Some(old) => old.add(&v),
            None => {
                family.series.insert(values, v);
            }
        }
    }

    /// A self metric (`corebpf_<name>`, its first label `tool`), added by [`super::metrics_self`]; `None`
    /// declares the family only.
    pub(crate) fn add_global(&mut self, desc: &Global<'_>, mut values: Vec<String>, value: Option<f64>) {
        let Global { name, help, kind, labels, .. } = *desc;
        let unit = desc.unit.clone();
        let mut all = vec!["tool"];
        all.extend_from_slice(labels);
        values.insert(0, self.tool.clone());
        let real = unit.is_some();
        let family = self.family(&format!(" {name}"), help, unit, kind, &all);
        family.global = true;
        let Some(v) = value else { return };
        let v = match kind {
            MetricType::Gauge => Value::Gauge(v),
            _ if real => Value::CounterF(v),
            _ => Value::Counter(v as u64),
        };
        match family.series.get_mut(&values) {
            Some(old) => old.add(&v),
            None => {
                family.series.insert(values, v);
            }
        }
    }

    /// Declares counter `name` (exported as `corebpf_<tool>_<name>_total`), so it is exported even with no series.
    pub fn declare_counter(&mut self, name: &str, help: &str, labels: &[&'static str]) {
        self.family(name, help, None, MetricType::Counter, labels);
    }

    /// Adds `value` to counter `name`'s series with these label values (one per label name, in order).
    pub fn counter(&mut self, name: &str, help: &str, labels: &[&'static str], values: Vec<String>, value: u64) {
        self.add(name, help, None, labels, values, Value::Counter(value));
    }

    /// Declares histogram `name` in seconds, so it is exported (its HELP and TYPE) even with no series yet.
    pub fn declare_histogram_seconds(&mut self, name: &str, help: &str, labels: &[&'static str]) {
        self.family(name, help, Some(Unit::Seconds), MetricType::Histogram, labels);
    }

    /// Declares counter `name` in seconds (`corebpf_<tool>_<name>_seconds_total`), exported even with no series.
    pub fn declare_counter_seconds(&mut self, name: &str, help: &str, labels: &[&'static str]) {
        self.family(name, help, Some(Unit::Seconds), MetricType::Counter, labels);
    }

    /// Adds `seconds` to counter `name` in seconds (`corebpf_<tool>_<name>_seconds_total`).
    pub fn counter_seconds(
        &mut self,
        name: &str,
        help: &str,
        labels: &[&'static str],
        values: Vec<String>,
        seconds: f64,
    ) {
        self.add(name, help, Some(Unit::Seconds), labels, values, Value::CounterF(seconds));
    }

    /// Declares histogram `name` of a count with no unit, exported (its HELP and TYPE) even with no series yet.
    pub fn declare_histogram(&mut self, name: &str, help: &str, labels: &[&'static str]) {
        self.family(name, help, None, MetricType::Histogram, labels);
    }

    /// Declares histogram `name` in bytes, exported (its HELP and TYPE) even with no series yet.
    pub fn declare_histogram_bytes(&mut self, name: &str, help: &str, labels: &[&'static str]) {
        self.family(name, help, Some(Unit::Bytes), MetricType::Histogram, labels);
    }

    /// Declares gauge `name` with no unit, exported (its HELP and TYPE) even with no series yet.
    pub fn declare_gauge(&mut self, name: &str, help: &str, labels: &[&'static str]) {
        self.family(name, help, None, MetricType::Gauge, labels);
    }

    /// Declares gauge `name` in bytes (`corebpf_<tool>_<name>_bytes`), exported even with no series yet.
    pub fn declare_gauge_bytes(&mut self, name: &str, help: &str, labels: &[&'static str]) {
        self.family(name, help, Some(Unit::Bytes), MetricType::Gauge, labels);
    }

    /// Adds `bytes` to gauge `name` in bytes (`corebpf_<tool>_<name>_bytes`) of the series with these label values.
    pub fn gauge_bytes(&mut self, name: &str, help: &str, labels: &[&'static str], values: Vec<String>, bytes: f64) {
        self.add(name, help, Some(Unit::Bytes), labels, values, Value::Gauge(bytes));
    }

    /// Sets gauge `name` (`corebpf_<tool>_<name>`) of the series with these label values.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[&'static str], values: Vec<String>, value: f64) {
        self.add(name, help, None, labels, values, Value::Gauge(value));
    }

    /// Records records lost on their way to user space (a full ring buffer), `what` naming them (`events`),
    /// from a counter the BPF side keeps: `corebpf_lost_events_total{tool, what}`.
    pub fn lost_events(&mut self, what: &str, counter: &u64) {
        let help = "Records lost on their way to user space (a full ring or perf buffer)";
        let v = read_counter(counter) as f64;
        self.add_global(&Global::counter("lost_events", help, &["what"]), vec![what.into()], Some(v));
    }

    /// [`Snapshot::lost_events`] from a total already read (e.g. the kernel's count of missed probe hits).
    pub fn lost_events_total(&mut self, what: &str, total: u64) {
        let help = "Records lost on their way to user space (a full ring or perf buffer)";
        self.add_global(&Global::counter("lost_events", help, &["what"]), vec![what.into()], Some(total as f64));
    }

    /// [`Snapshot::map_full`] for a count kept in several objects' `.bss` (one object per attach site).
    pub fn map_full_sum<'a>(&mut self, map: &str, counters: impl IntoIterator<Item = &'a u64>) {
        let total: u64 = counters.into_iter().map(read_counter).sum();
        let help = "Events not counted because a BPF map was full";
        self.add_global(&Global::counter("map_full", help, &["map"]), vec![map.into()], Some(total as f64));
    }

    /// Records events not counted because BPF map `map` was full, from a counter the BPF side keeps:
    /// `corebpf_map_full_total{tool, map}`.
    pub fn map_full(&mut self, map: &str, counter: &u64) {
        let help = "Events not counted because a BPF map was full";
        let v = read_counter(counter) as f64;
        self.add_global(&Global::counter("map_full", help, &["map"]), vec![map.into()], Some(v));
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
        self.add(name, help, Some(Unit::Seconds), labels, values, Value::Histogram(value));
    }

    /// Adds a histogram of a count with no unit (`corebpf_<tool>_<name>`, e.g. a queue length).
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        labels: &[&'static str],
        values: Vec<String>,
        value: HistogramValue,
    ) {
        self.add(name, help, None, labels, values, Value::Histogram(value));
    }

    /// Adds a histogram in bytes (`corebpf_<tool>_<name>_bytes`); `value`'s sum and bounds are in bytes.
    pub fn histogram_bytes(
        &mut self,
        name: &str,
        help: &str,
        labels: &[&'static str],
        values: Vec<String>,
        value: HistogramValue,
    ) {
        self.add(name, help, Some(Unit::Bytes), labels, values, Value::Histogram(value));
    }
}

/// What a self metric is: its name (without `corebpf_`), help, unit, type and labels (besides `tool`).
#[derive(Debug, Clone)]
pub(crate) struct Global<'a> {
    pub name: &'a str,
    pub help: &'a str,
    pub unit: Option<Unit>,
    pub kind: MetricType,
    pub labels: &'a [&'static str],
}

impl Global<'_> {
    pub const fn counter<'a>(name: &'a str, help: &'a str, labels: &'a [&'static str]) -> Global<'a> {
        Global { name, help, unit: None, kind: MetricType::Counter, labels }
    }
}

/// A `u64` counter in a skeleton's memory-mapped `.bss`, which the kernel updates concurrently.
pub fn read_counter(counter: &u64) -> u64 {
    // SAFETY: an aligned u64 in live, mapped memory: read as volatile, not as a plain Rust value.
    unsafe { std::ptr::read_volatile(counter) }
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
            if family.labels.is_empty() || family.global {
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
            let name = match family.global {
                true => family.name.trim_start().to_string(),
                false => format!("{}_{}", self.0.tool, family.name),
            };
            let metric_type = family.kind;
            let mut metric = encoder.encode_descriptor(&name, &family.help, family.unit.as_ref(), metric_type)?;
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
            Value::CounterF(v) => encoder.encode_counter::<NoLabelSet, f64, f64>(v, None),
            Value::Gauge(v) if v.fract() == 0.0 && v.abs() < 9e15 => encoder.encode_gauge(&(*v as i64)),
            Value::Gauge(v) => encoder.encode_gauge(v),
            Value::Histogram(h) => encoder.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None),
        }
    }

    fn metric_type(&self) -> MetricType {
        match self.0 {
            Value::Counter(_) | Value::CounterF(_) => MetricType::Counter,
            Value::Gauge(_) => MetricType::Gauge,
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

/// Adds the overflow gauge (`corebpf_<tool>_series_overflow`): `overflow` label sets were folded into `other`.
pub(crate) fn with_overflow(snapshot: &mut Snapshot, overflow: u64) {
    let help = "Label sets folded into the series labelled other (past --max-series)";
    snapshot.gauge("series_overflow", help, &[], Vec::new(), overflow as f64);
}

/// Encodes `snapshot` for tool `tool` in `format`, with the overflow gauge (`corebpf_<tool>_series_overflow`).
pub fn encode(tool: &str, mut snapshot: Snapshot, overflow: u64, format: Format) -> Result<String> {
    snapshot.tool = tool.to_string();
    with_overflow(&mut snapshot, overflow);
    encode_merged(vec![snapshot], format)
}

/// Encodes several tools' snapshots as one exposition (the exporter's): each tool's own families under its
/// prefix, and the self metrics, which all tools share, merged into one family each (their series differ by
/// the `tool` label).
pub fn encode_merged(snapshots: Vec<Snapshot>, format: Format) -> Result<String> {
    let mut registry = Registry::with_prefix("corebpf");
    let mut shared = Snapshot::default();
    for snapshot in snapshots {
        let (global, own): (Vec<Family>, Vec<Family>) = snapshot.families.into_iter().partition(|f| f.global);
        for family in global {
            match shared.families.iter_mut().find(|f| f.name == family.name) {
                Some(merged) => {
                    for (labels, value) in family.series {
                        match merged.series.get_mut(&labels) {
                            Some(old) => old.add(&value),
                            None => {
                                merged.series.insert(labels, value);
                            }
                        }
                    }
                }
                None => shared.families.push(family),
            }
        }
        registry.register_collector(Box::new(SnapshotCollector(Snapshot { tool: snapshot.tool, families: own })));
    }
    registry.register_collector(Box::new(SnapshotCollector(shared)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_edges_are_powers_of_two_and_last_is_inf() {
        let b = log2_buckets_seconds(&[1, 2, 3, 4], 1000);
        assert_eq!(b[0], (2e-6, 1));
        assert_eq!(b[1], (4e-6, 2));
        assert_eq!(b[2], (8e-6, 3));
        assert_eq!(b[3], (f64::INFINITY, 4));
        assert_eq!(log2_le_seconds(9, 1_000_000), 1.024);
    }

    #[test]
    fn every_value_is_at_most_its_bucket_le_and_above_the_one_below() {
        // Values in nanoseconds, floored to microseconds as the BPF side does, then slotted.
        for ns in (0..5_000_000u64).step_by(97).chain([1999, 2000, 3999, 4000, 1_048_575_999]) {
            let slot = super::super::hist::log2_slot(ns / 1000);
            let v = ns as f64 / 1e9;
            assert!(v < log2_le_seconds(slot, 1000), "{ns} ns in slot {slot}");
            if slot > 0 {
                assert!(v >= log2_le_seconds(slot - 1, 1000), "{ns} ns in slot {slot}");
            }
        }
    }

    #[test]
    fn counters_and_histograms_in_both_formats() {
        let mut s = Snapshot::new("t");
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
