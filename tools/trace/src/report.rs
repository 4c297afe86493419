// SPDX-License-Identifier: Apache-2.0 OR MIT
//! trace's output, as BCC prints it: a header (`[TIME] [CPU] PID TID COMM FUNC -`), then one line per event
//! with the probe's message formatted from its values (`common::probe::printf`); `-n` and `-f` filter lines,
//! `-M` stops after that many, `-A` counts identical lines and prints them at the end; `--json` one object per
//! event.

use std::collections::HashMap;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use common::output::stdout::{clock_hms, Output};
use common::probe::printf::Value;
use serde_json::json;

use crate::bpf::consts::{EV_COMM, EV_CPU, EV_PROBE, EV_STRS, EV_TGID, EV_TID, EV_TS, EV_VALS, STR_MAX};
use crate::Probe;

/// The printing flags.
pub struct Options {
    pub timestamp: bool,
    pub unix_timestamp: bool,
    pub time: bool,
    pub print_cpu: bool,
    pub name: Option<String>,
    pub msg_filter: Option<String>,
    pub max_events: Option<u64>,
    pub aggregate: bool,
    pub json: bool,
}

/// What a probe prints: its FUNC column and how to build its message.
struct Shape {
    func: String,
    format: Option<common::probe::printf::Format>,
    /// Per format argument: the fetch it shows, or the string slot for %s.
    args: Vec<Arg>,
    texts: Vec<String>,
}

enum Arg {
    Int(usize),
    Str(usize),
}

pub struct Printer {
    options: Options,
    shapes: Vec<Shape>,
    trivial: bool,
    start_mono_ns: u64,
    start_real: f64,
    printed: u64,
    counts: HashMap<String, u64>,
    order: Vec<String>,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    data.get(at..at + 4).map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap()))
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    data.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()))
}

fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl Printer {
    pub fn new(options: Options, probes: &[Probe]) -> Self {
        let shapes: Vec<Shape> = probes
            .iter()
            .map(|p| {
                let mut strings = 0;
                let args = p
                    .plan
                    .exprs
                    .iter()
                    .map(|e| {
                        if e.ctype.string {
                            strings += 1;
                            Arg::Str(strings - 1)
                        } else {
                            Arg::Int(e.slot)
                        }
                    })
                    .collect();
                let spec = &p.trace.spec;
                Shape {
                    func: spec.function.clone(),
                    format: p.trace.format.clone(),
                    args,
                    texts: p.plan.exprs.iter().map(|e| e.text.clone()).collect(),
                }
            })
            .collect();
        let trivial = shapes.iter().all(|s| s.format.is_none());
        let start_real = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        Printer {
            options,
            shapes,
            trivial,
            start_mono_ns: monotonic_ns(),
            start_real,
            printed: 0,
            counts: HashMap::new(),
            order: Vec::new(),
        }
    }

    /// BCC's header line.
    pub fn header(&self, out: &mut Output) -> Result<()> {
        let o = &self.options;
        let mut line = String::new();
        if o.timestamp || o.time {
            line.push_str(&if o.unix_timestamp { format!("{:<17} ", "TIME") } else { format!("{:<8} ", "TIME") });
        }
        if o.print_cpu {
            line.push_str(&format!("{:<3} ", "CPU"));
        }
        line.push_str(&format!(
            "{:<7} {:<7} {:<15} {:<16} {}",
            "PID",
            "TID",
            "COMM",
            "FUNC",
            if self.trivial { "" } else { "-" }
        ));
        writeln!(out, "{line}")?;
        Ok(())
    }

    /// True once -M events have been printed.
    pub fn done(&self) -> bool {
        self.options.max_events.is_some_and(|m| self.printed >= m)
    }

    /// Formats and prints one record.
    pub fn event(&mut self, out: &mut Output, data: &[u8]) -> Result<()> {
        if self.done() {
            return Ok(());
        }
        let index = u32_at(data, EV_PROBE) as usize;
        let Some(shape) = self.shapes.get(index) else { return Ok(()) };
        let comm = c_str(data.get(EV_COMM..EV_COMM + 16).unwrap_or(&[]));
        if let Some(name) = &self.options.name {
            if !comm.contains(name.as_str()) {
                return Ok(());
            }
        }
        let values: Vec<Value> = shape
            .args
            .iter()
            .map(|a| match a {
                Arg::Int(f) => Value::Int(u64_at(data, EV_VALS + 8 * f)),
                Arg::Str(s) => {
                    let at = EV_STRS + STR_MAX * s;
                    Value::Str(c_str(data.get(at..at + STR_MAX).unwrap_or(&[])))
                }
            })
            .collect();
        let msg = shape.format.as_ref().map(|f| f.render(&values)).unwrap_or_default();
        if let Some(filter) = &self.options.msg_filter {
            if !msg.contains(filter.as_str()) {
                return Ok(());
            }
        }
        let (tgid, tid, cpu, ts) =
            (u32_at(data, EV_TGID), u32_at(data, EV_TID), u32_at(data, EV_CPU), u64_at(data, EV_TS));
        let offset = ts.saturating_sub(self.start_mono_ns) as f64 / 1e9;
        let o = &self.options;
        if o.json {
            let shown: Vec<serde_json::Value> = values
                .iter()
                .map(|v| match v {
                    Value::Int(i) => json!(i),
                    Value::Str(s) => json!(s),
                })
                .collect();
            out.json_line(&json!({
                "time": offset, "pid": tgid, "tid": tid, "cpu": cpu, "comm": comm, "func": shape.func,
                "msg": msg, "args": shape.texts, "values": shown,
            }))?;
        } else {
            let mut line = String::new();
            if o.time {
                line.push_str(&format!("{:<8} ", clock_hms()));
            } else if o.timestamp {
                let t =
                    if o.unix_timestamp { format!("{:.6}", offset + self.start_real) } else { format!("{offset:.6}") };
                let width = if o.unix_timestamp { 17 } else { 8 };
                let t: String = t.chars().take(width).collect();
                line.push_str(&format!("{t:<width$} "));
            }
            if o.print_cpu {
                line.push_str(&format!("{cpu:<3} "));
            }
            line.push_str(&format!("{tgid:<7} {tid:<7} {comm:<15} {:<16} {msg}", shape.func));
            if o.aggregate {
                if !self.counts.contains_key(&line) {
                    self.order.push(line.clone());
                }
                *self.counts.entry(line).or_default() += 1;
            } else {
                writeln!(out, "{line}")?;
                out.flush()?;
            }
        }
        self.printed += 1;
        Ok(())
    }

    /// With -A: every distinct line and its count, most frequent first.
    pub fn finish(&self, out: &mut Output) -> Result<()> {
        if !self.options.aggregate || self.options.json {
            return Ok(());
        }
        let mut lines: Vec<(&String, u64)> = self.order.iter().map(|l| (l, self.counts[l])).collect();
        lines.sort_by_key(|l| std::cmp::Reverse(l.1));
        for (line, n) in lines {
            write!(out, "{line}\n-->COUNT {n}\n\n")?;
        }
        Ok(())
    }
}
