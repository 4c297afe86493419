// SPDX-License-Identifier: Apache-2.0 OR MIT
//! futexctn's `--prometheus`: the time contended FUTEX_WAITs slept, as one cumulative histogram per process name,
//! `corebpf_futexctn_wait_seconds{comm}`.
//!
//! The kernel side hands each wait to exactly one report and forgets it ([`crate::report::take`]), so the
//! exporter keeps the running totals here: each scrape takes what the kernel counted since the last one and adds
//! it. It runs with `-s` (per process and lock, no stacks) and in microseconds whatever the display flags say;
//! lock addresses are not labels (they mean nothing from one process to the next), the process name is.

use std::collections::BTreeMap;

use anyhow::Result;
use common::attach::maps::c_string;
use common::output::metrics::{HistogramValue, Snapshot};

use crate::bpf::types::hist;
use crate::report::Key;

const NAME: &str = "wait";
const HELP: &str = "Time a contended futex wait slept until woken, per process name";
const LABELS: &[&str] = &["comm"];

/// The waits counted so far, per process name: log2 slots of microseconds and the exact sum in nanoseconds.
#[derive(Debug, Default)]
pub struct Totals {
    by_comm: BTreeMap<String, (Vec<u64>, u64)>,
}

impl Totals {
    /// Adds one scrape's taken histograms to the totals.
    pub fn add(&mut self, taken: BTreeMap<Key, hist>) {
        for h in taken.values() {
            let (slots, sum_ns) = self.by_comm.entry(c_string(&h.comm)).or_insert_with(|| (vec![0; h.slots.len()], 0));
            for (total, n) in slots.iter_mut().zip(h.slots.iter()) {
                *total += n;
            }
            *sum_ns += h.total_ns;
        }
    }

    /// Writes the totals into `s`.
    pub fn write(&self, s: &mut Snapshot) -> Result<()> {
        s.declare_histogram_seconds(NAME, HELP, LABELS);
        for (comm, (slots, sum_ns)) in &self.by_comm {
            let value = HistogramValue::from_log2_slots(slots, *sum_ns, 1000);
            s.histogram_seconds(NAME, HELP, LABELS, vec![comm.clone()], value);
        }
        Ok(())
    }
}
