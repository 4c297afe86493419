// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ucalls' output: every interval (or once at the end), a blank line and BCC's `METHOD # CALLS` table (with -L,
//! `TIME (us)` or `TIME (ms)`, the calls' total time), its rows the methods and system calls called in the interval
//! sorted by calls (with -L by time), least first, cut to the last -T; or one JSON object per row; or, with
//! `--prometheus`, counters per method. The BPF maps are cumulative: each report is the difference from the last
//! one's reading.

use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;
use common::attach::maps::{c_string, hash_entries, DropCounter};
use common::domain::syscalls;
use common::output::metrics::Snapshot;
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, Output};
use libbpf_rs::MapCore;
use serde::Serialize;

use crate::bpf::types::{info, method_key};

// SAFETY: #[repr(C)] structs of integers and char arrays, generated from ucalls.h.
unsafe impl plain::Plain for info {}
unsafe impl plain::Plain for method_key {}

#[derive(Serialize)]
struct JsonRow<'a> {
    /// When the report was made (RFC 3339, local time): the rows of one report share it.
    time: &'a str,
    /// `method` (a runtime's method, as class.method) or `syscall`.
    kind: &'a str,
    name: &'a str,
    calls: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_ns: Option<u64>,
}

/// One row: what was called, how often in the interval and for how long in total.
struct Row {
    syscall: bool,
    name: String,
    calls: u64,
    total_ns: u64,
}

pub struct Report {
    latency: bool,
    milliseconds: bool,
    top: Option<u64>,
    json: bool,
    /// The cumulative (calls, time) of each row at the last report.
    last: HashMap<(bool, String), (u64, u64)>,
    methods_full: DropCounter,
    untimed: DropCounter,
}

impl Report {
    pub fn new(latency: bool, milliseconds: bool, top: Option<u64>, json: bool) -> Self {
        Report {
            latency,
            milliseconds,
            top,
            json,
            last: HashMap::new(),
            methods_full: DropCounter::new("calls", "too many distinct methods"),
            untimed: DropCounter::new("call times", "calls nested too deep or too many threads"),
        }
    }

    /// Says on stderr what the BPF side dropped since the last call.
    pub fn check_drops(&mut self, methods_full: &u64, untimed: &u64) {
        self.methods_full.check(methods_full);
        self.untimed.check(untimed);
    }

    /// Prints the interval's table (or JSON rows) from the cumulative maps.
    pub fn print<M: MapCore>(&mut self, out: &mut Output, methods: &M, sys: Option<&M>) -> Result<()> {
        let mut rows = Vec::new();
        for (k, v) in hash_entries::<method_key, info>(methods)? {
            // Escaped (the traced program names its classes and methods), in JSON too: one name per row.
            let name = format!("{}.{}", Name::from_c(&k.clazz), Name::from_c(&k.method));
            rows.push(self.delta(false, name, v));
        }
        if let Some(sys) = sys {
            for (nr, v) in hash_entries::<u32, info>(sys)? {
                rows.push(self.delta(true, syscalls::display_name(nr), v));
            }
        }
        rows.retain(|r| r.calls > 0);
        let latency = self.latency;
        rows.sort_by(|a, b| {
            let key = |r: &Row| if latency { (r.total_ns, r.calls) } else { (r.calls, r.total_ns) };
            key(a).cmp(&key(b)).then_with(|| a.name.cmp(&b.name))
        });
        if let Some(top) = self.top {
            let keep = usize::try_from(top).unwrap_or(usize::MAX);
            rows.drain(..rows.len().saturating_sub(keep));
        }
        if self.json {
            let timestamp = clock_rfc3339();
            for r in &rows {
                out.json_line(&JsonRow {
                    time: &timestamp,
                    kind: if r.syscall { "syscall" } else { "method" },
                    name: &r.name,
                    calls: r.calls,
                    total_ns: latency.then_some(r.total_ns),
                })?;
            }
            out.flush()?;
            return Ok(());
        }
        writeln!(out)?;
        if latency {
            let time = if self.milliseconds { "TIME (ms)" } else { "TIME (us)" };
            writeln!(out, "{:<50} {:>8} {:>8}", "METHOD", "# CALLS", time)?;
        } else {
            writeln!(out, "{:<50} {:>8}", "METHOD", "# CALLS")?;
        }
        let divisor = if self.milliseconds { 1e6 } else { 1e3 };
        for r in &rows {
            if latency {
                writeln!(out, "{:<50} {:>8} {:>6.2}", r.name, r.calls, r.total_ns as f64 / divisor)?;
            } else {
                writeln!(out, "{:<50} {:>8}", r.name, r.calls)?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// `--prometheus`: the cumulative maps as `corebpf_ucalls_calls_total` and, with -L,
    /// `corebpf_ucalls_call_time_seconds_total`, labelled `kind` (`method` or `syscall`) and `name` (`Class.method`,
    /// or the system call's name). The maps only grow (one entry per method), so neither counter goes back.
    pub fn metrics<M: MapCore>(&self, s: &mut Snapshot, methods: &M, sys: Option<&M>) -> Result<()> {
        const CALLS: &str = "Calls made by the traced process, per method or system call";
        const TIME: &str = "Time spent in those calls, from entry to return";
        const LABELS: &[&str] = &["kind", "name"];
        s.declare_counter("calls", CALLS, LABELS);
        if self.latency {
            s.declare_counter_seconds("call_time", TIME, LABELS);
        }
        let mut rows: Vec<(&str, String, info)> = hash_entries::<method_key, info>(methods)?
            .into_iter()
            .map(|(k, v)| ("method", format!("{}.{}", c_string(&k.clazz), c_string(&k.method)), v))
            .collect();
        if let Some(sys) = sys {
            rows.extend(
                hash_entries::<u32, info>(sys)?.into_iter().map(|(nr, v)| ("syscall", syscalls::display_name(nr), v)),
            );
        }
        for (kind, name, v) in rows {
            let values = vec![kind.to_string(), name];
            s.counter("calls", CALLS, LABELS, values.clone(), v.calls);
            if self.latency {
                s.counter_seconds("call_time", TIME, LABELS, values, v.total_ns as f64 / 1e9);
            }
        }
        Ok(())
    }

    /// The row of `name` for this interval: its cumulative figures minus the last report's.
    fn delta(&mut self, syscall: bool, name: String, now: info) -> Row {
        let before = self.last.insert((syscall, name.clone()), (now.calls, now.total_ns)).unwrap_or((0, 0));
        Row {
            syscall,
            name,
            calls: now.calls.saturating_sub(before.0),
            total_ns: now.total_ns.saturating_sub(before.1),
        }
    }
}
