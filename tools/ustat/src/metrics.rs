// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ustat's `--prometheus`: BCC's six columns as counters, `corebpf_ustat_method_calls_total`,
//! `_garbage_collections_total`, `_object_allocations_total`, `_class_loads_total`, `_exceptions_total` and
//! `_thread_starts_total`, labelled by the runtime's language and process name rather than by PID, so that the
//! series of a host stay few and outlive its processes.
//!
//! Each scrape reads the kernel's cumulative counts of every traced process. A process that has ended (its PID
//! gone or reused, as the screen decides) has its counts folded into totals kept here and its row deleted from the
//! kernel's map, so the map keeps to the living processes and no counter goes back.

use std::collections::{HashMap, HashSet};

use anyhow::{Context, Result};
use common::attach::maps::from_bytes;
use common::output::metrics::Snapshot;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::consts::{CAT_CLOAD, CAT_EXCP, CAT_GC, CAT_METHOD, CAT_OBJNEW, CAT_THREAD};
use crate::bpf::types::counts;
use crate::report::COLUMNS;
use crate::targets::Targets;

/// (language, comm).
type Labels = (&'static str, String);
const LABELS: &[&str] = &["language", "comm"];

/// Each column's counter name and help, in the kernel's column order.
const FAMILIES: [(usize, &str, &str); COLUMNS] = [
    (CAT_METHOD, "method_calls", "Method calls seen by the runtime's probes (entries)"),
    (CAT_GC, "garbage_collections", "Garbage collections the runtime began"),
    (CAT_OBJNEW, "object_allocations", "Objects the runtime allocated"),
    (CAT_CLOAD, "class_loads", "Classes the runtime loaded"),
    (CAT_EXCP, "exceptions", "Exceptions the runtime threw"),
    (CAT_THREAD, "thread_starts", "Threads the runtime started"),
];

/// The counts of processes that have ended, by labels.
#[derive(Default)]
pub struct Totals {
    gone: HashMap<Labels, [u64; COLUMNS]>,
}

impl Totals {
    /// One scrape: the counts of every process of `targets` in `map` (the BPF map, by PID), plus the folded ones;
    /// the rows of the processes in `ended` are folded and deleted.
    pub fn write(
        &mut self,
        s: &mut Snapshot,
        map: &impl MapCore,
        targets: &Targets,
        ended: &HashSet<u32>,
    ) -> Result<()> {
        let mut now = self.gone.clone();
        for t in targets.iter() {
            let key = t.pid.to_ne_bytes();
            let Some(value) = map.lookup(&key, MapFlags::ANY).context("reading the counts map")? else { continue };
            let n = from_bytes::<counts>(&value).n;
            let labels = (t.language.name(), t.comm.clone());
            add(now.entry(labels.clone()).or_default(), &n);
            if ended.contains(&t.pid) {
                add(self.gone.entry(labels).or_default(), &n);
                let _ = map.delete(&key);
            }
        }
        for (_, name, help) in FAMILIES {
            s.declare_counter(name, help, LABELS);
        }
        for ((language, comm), n) in now {
            for (column, name, help) in FAMILIES {
                s.counter(name, help, LABELS, vec![language.to_string(), comm.clone()], n[column]);
            }
        }
        Ok(())
    }
}

fn add(total: &mut [u64; COLUMNS], n: &[u64; COLUMNS]) {
    for (t, v) in total.iter_mut().zip(n) {
        *t += v;
    }
}
