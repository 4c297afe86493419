// SPDX-License-Identifier: Apache-2.0 OR MIT
//! argdist's output, as BCC prints it: per interval a `[HH:MM:SS]` line, then per spec (counts first, as BCC
//! creates them) either its title and `COUNT EVENT` rows (ascending, the top -T), or a log2 histogram labelled
//! with the expression (or the spec's label). The maps are cumulative; without -c each interval shows its own
//! difference, as BCC clears its tables after printing. `--json`: one object per spec per interval.

use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;
use common::output::hist::{log2_buckets, write_log2_hist};
use common::output::stdout::{printable, Output};
use common::probe::plan::Plan;
use common::probe::spec::{ProbeType, Spec};
use libbpf_rs::{MapCore, MapFlags};
use serde_json::{json, Map, Value};

use crate::attach::Attached;
use crate::bpf::consts::{HIST_SLOTS, MAX_KEYS, STR_MAX};

const HIST_HELP: &str = "Values of an argdist -H expression (log2 buckets)";
const COUNT_HELP: &str = "Events of an argdist -C spec, per value of its expressions";

/// Declares the counter family, so that it is exported before the first event (every -H spec has its histogram
/// series from the start).
pub fn declare_metrics(s: &mut common::output::metrics::Snapshot) {
    s.declare_counter("events", COUNT_HELP, &["probe", "event"]);
}

/// One spec's output state.
pub struct Probe {
    pub spec: Spec,
    pub plan: Plan,
    pub hist: bool,
    pub attached: Attached,
    prev_hist: Vec<u64>,
    prev_counts: HashMap<Vec<u8>, u64>,
}

/// A count key's decoded values, in expression order.
#[derive(Debug, Clone, PartialEq)]
enum KeyValue {
    Int(i128),
    Str(String),
}

impl std::fmt::Display for KeyValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyValue::Int(v) => write!(f, "{v}"),
            // A string from the traced system, escaped ([`printable`]); JSON has it plain.
            KeyValue::Str(s) => f.write_str(&printable(s.as_bytes())),
        }
    }
}

impl Probe {
    pub fn new(spec: Spec, plan: Plan, hist: bool, attached: Attached) -> Self {
        Probe { spec, plan, hist, attached, prev_hist: vec![0; HIST_SLOTS], prev_counts: HashMap::new() }
    }

    fn hist_now(&self) -> Vec<u64> {
        match self.attached.skel.maps.bss_data.as_ref() {
            // SAFETY: the slots live in the object's memory-mapped .bss, updated concurrently by the kernel.
            Some(bss) => bss.hist_slots.iter().map(|c| unsafe { std::ptr::read_volatile(c) }).collect(),
            None => vec![0; HIST_SLOTS],
        }
    }

    pub fn dropped(&self) -> &u64 {
        static ZERO: u64 = 0;
        self.attached.skel.maps.bss_data.as_ref().map_or(&ZERO, |b| &b.dropped)
    }

    fn counts_now(&self) -> Result<HashMap<Vec<u8>, u64>> {
        let map = &self.attached.skel.maps.counts;
        let mut out = HashMap::new();
        for key in map.keys() {
            if let Some(v) = map.lookup(&key, MapFlags::ANY)? {
                let count = u64::from_ne_bytes(v[..8].try_into().unwrap_or([0; 8]));
                out.insert(key, count);
            }
        }
        Ok(out)
    }

    /// The histogram's label: BCC's `label or expression or "retval"`.
    fn hist_label(&self) -> String {
        if let Some(label) = &self.spec.label {
            return label.clone();
        }
        if self.spec.default_expr {
            return "retval".into();
        }
        self.plan.exprs.first().map_or_else(|| "retval".into(), |e| e.text.clone())
    }

    fn decode(&self, key: &[u8]) -> Vec<KeyValue> {
        let mut strings = 0;
        self.plan
            .exprs
            .iter()
            .enumerate()
            .map(|(i, e)| {
                if e.ctype.string {
                    let start = 8 * MAX_KEYS + STR_MAX * strings;
                    strings += 1;
                    let bytes = key.get(start..start + STR_MAX).unwrap_or(&[]);
                    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                    KeyValue::Str(String::from_utf8_lossy(&bytes[..end]).into_owned())
                } else {
                    let raw = key.get(8 * i..8 * i + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()));
                    KeyValue::Int(if e.ctype.signed { raw as i64 as i128 } else { raw as i128 })
                }
            })
            .collect()
    }

    /// BCC's EVENT column for a key.
    fn event(&self, values: &[KeyValue]) -> String {
        if self.plan.exprs.is_empty() {
            return "total calls".into();
        }
        if self.spec.probe == ProbeType::Return && self.spec.default_expr {
            return format!("retval = {}", values[0]);
        }
        self.plan.exprs.iter().zip(values).map(|(e, v)| format!("{} = {v}", e.text)).collect::<Vec<_>>().join(", ")
    }

    /// `--prometheus`: this spec's cumulative values, a histogram `corebpf_argdist_value` (log2 buckets, `le` of
    /// slot i 2^(i+1), `_sum` the values' sum) or a counter `corebpf_argdist_events_total` per counted key (the
    /// EVENT column as the `event` label), each labelled with the spec (its label if it has one).
    pub fn metrics(&self, s: &mut common::output::metrics::Snapshot) -> Result<()> {
        use common::output::metrics::HistogramValue;
        let probe = self.spec.title().to_string();
        if self.hist {
            let slots = self.hist_now();
            let sum = self
                .attached
                .skel
                .maps
                .bss_data
                .as_ref()
                .map_or(0, |b| common::output::metrics::read_counter(&b.hist_sum));
            // Unitless log2 buckets: what from_log2_slots_bytes makes with one "byte" a unit.
            let value = HistogramValue::from_log2_slots_bytes(&slots, sum, 1);
            s.histogram("value", HIST_HELP, &["probe"], vec![probe], value);
            return Ok(());
        }
        for (key, count) in self.counts_now()? {
            let event = self.event(&self.decode(&key));
            s.counter("events", COUNT_HELP, &["probe", "event"], vec![probe.clone(), event], count);
        }
        Ok(())
    }

    /// Prints this interval's part (and remembers the totals, unless `cumulative`).
    pub fn write(
        &mut self,
        out: &mut Output,
        time: &str,
        top: Option<usize>,
        cumulative: bool,
        json: bool,
    ) -> Result<()> {
        if self.hist {
            let now = self.hist_now();
            let shown: Vec<u64> = if cumulative {
                now.clone()
            } else {
                now.iter().zip(&self.prev_hist).map(|(a, b)| a.saturating_sub(*b)).collect()
            };
            self.prev_hist = now;
            if json {
                out.json_line(&json!({
                    "time": time, "probe": self.spec.title(), "type": "histogram",
                    "label": self.hist_label(), "buckets": log2_buckets(&shown),
                }))?;
            } else {
                write_log2_hist(out, &shown, &self.hist_label())?;
            }
            return Ok(());
        }
        let now = self.counts_now()?;
        let mut rows: Vec<(u64, Vec<KeyValue>)> = now
            .iter()
            .filter_map(|(k, &c)| {
                let n = if cumulative { c } else { c.saturating_sub(self.prev_counts.get(k).copied().unwrap_or(0)) };
                (n > 0).then(|| (n, self.decode(k)))
            })
            .collect();
        self.prev_counts = now;
        rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| format!("{:?}", a.1).cmp(&format!("{:?}", b.1))));
        if let Some(top) = top {
            let skip = rows.len().saturating_sub(top);
            rows.drain(..skip);
        }
        if json {
            let counts: Vec<Value> = rows
                .iter()
                .map(|(n, values)| {
                    let mut keys = Map::new();
                    for (e, v) in self.plan.exprs.iter().zip(values) {
                        let value = match v {
                            KeyValue::Int(i) => json!(i),
                            KeyValue::Str(s) => json!(s),
                        };
                        keys.insert(e.text.clone(), value);
                    }
                    json!({"count": n, "values": keys})
                })
                .collect();
            out.json_line(&json!({"time": time, "probe": self.spec.title(), "type": "count", "counts": counts}))?;
            return Ok(());
        }
        writeln!(out, "{}", self.spec.title())?;
        writeln!(out, "\t{:<10} EVENT", "COUNT")?;
        for (n, values) in &rows {
            writeln!(out, "\t{:<10} {}", n, self.event(values))?;
        }
        Ok(())
    }
}
