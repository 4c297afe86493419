// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ugc's output: BCC's banner and `START TIME (us) DESCRIPTION` columns (seconds since the tool started, the
//! collection's duration in microseconds or with -m milliseconds, and what the runtime said of it), or one JSON
//! object per collection. The -F filter applies to the description in both.

use std::io::Write;

use anyhow::Result;
use common::attach::maps::from_bytes;
use common::output::name::Name;
use common::output::stdout::monotonic_ns;
use common::output::stdout::Output;
use common::runtime::{GcKind, Language};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and char arrays, generated from ugc.h.
unsafe impl plain::Plain for event {}

/// Node's collection type flags and their names, in BCC's order.
const NODE_TYPES: [(u64, &str); 4] =
    [(1, "GC scavenge"), (2, "GC mark-sweep-compact"), (4, "GC incremental mark"), (8, "GC weak callbacks")];

#[derive(Serialize)]
struct JsonGc<'a> {
    /// When the collection ended, in seconds since tracing started (the START column).
    ts: f64,
    duration_ns: u64,
    pid: u32,
    tid: u32,
    language: &'a str,
    probe: &'a str,
    description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    manager: Option<&'a Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<&'a Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    used_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    used_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    collected: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gc_type: Option<u64>,
}

pub struct Report {
    language: Language,
    pid: u32,
    milliseconds: bool,
    filter: Option<String>,
    json: bool,
    /// The monotonic clock (the BPF side's bpf_ktime_get_ns) when tracing started.
    start_ns: u64,
}

impl Report {
    pub fn new(language: Language, pid: u32, milliseconds: bool, filter: Option<String>, json: bool) -> Self {
        Report { language, pid, milliseconds, filter, json, start_ns: monotonic_ns() }
    }

    pub fn write_header(&self, out: &mut Output) -> Result<()> {
        if !self.json {
            writeln!(out, "Tracing garbage collections in {} process {}... Ctrl-C to quit.", self.language, self.pid)?;
            let time = if self.milliseconds { "TIME (ms)" } else { "TIME (us)" };
            writeln!(out, "{:<8} {:<8} {:<40}", "START", time, "DESCRIPTION")?;
            out.flush()?;
        }
        Ok(())
    }

    /// Writes one collection (unless -F leaves it out) and flushes.
    pub fn write_event(&mut self, out: &mut Output, data: &[u8]) -> Result<()> {
        let e: event = from_bytes(data);
        let Some(pair) = self.language.gc_probes().get(e.pair as usize) else { return Ok(()) };
        let (manager, pool) = (Name::from_c(&e.manager), Name::from_c(&e.pool));
        let description = match pair.kind {
            GcKind::Plain => "no additional info available".to_string(),
            GcKind::JavaPool => {
                format!("{manager} {pool} used={}->{} max={}->{}", e.field1, e.field3, e.field2, e.field4)
            }
            GcKind::PythonGen => format!("gen {} GC collected {} objects", e.field1 as i64, e.field2 as i64),
            GcKind::NodeType => {
                let names: Vec<&str> =
                    NODE_TYPES.iter().filter(|(bit, _)| e.field1 & bit != 0).map(|(_, name)| *name).collect();
                names.join(", ")
            }
            GcKind::RubyMark => "GC mark stage".to_string(),
            GcKind::RubySweep => "GC sweep stage".to_string(),
        };
        if self.filter.as_deref().is_some_and(|f| !description.contains(f)) {
            return Ok(());
        }
        let start_ns = e.ts.saturating_sub(self.start_ns);
        if self.json {
            let pool_kind = pair.kind == GcKind::JavaPool;
            let python = pair.kind == GcKind::PythonGen;
            out.json_line(&JsonGc {
                ts: start_ns as f64 / 1e9,
                duration_ns: e.elapsed_ns,
                pid: e.pid,
                tid: e.tid,
                language: self.language.name(),
                probe: pair.begin,
                description: &description,
                manager: pool_kind.then_some(&manager),
                pool: pool_kind.then_some(&pool),
                used_before: pool_kind.then_some(e.field1),
                used_after: pool_kind.then_some(e.field3),
                max_before: pool_kind.then_some(e.field2),
                max_after: pool_kind.then_some(e.field4),
                generation: python.then_some(e.field1),
                collected: python.then_some(e.field2),
                gc_type: (pair.kind == GcKind::NodeType).then_some(e.field1),
            })?;
        } else {
            let divisor = if self.milliseconds { 1e6 } else { 1e3 };
            writeln!(out, "{:<8.3} {:<8.2} {}", start_ns as f64 / 1e9, e.elapsed_ns as f64 / divisor, description)?;
            out.flush()?;
        }
        Ok(())
    }
}
