// SPDX-License-Identifier: Apache-2.0 OR MIT
//! futexctn's `--prometheus`: the time contended FUTEX_WAITs slept, as one cumulative histogram per process name,
//! `corebpf_futexctn_wait_seconds{comm}`.
//!
//! The kernel side hands each wait to exactly one report and forgets it ([`crate::report::take`]), so the
//! exporter keeps the running totals here: each scrape takes what the kernel counted since the last one and adds
//! it. It runs with `-s` (per process and lock, no stacks) and in microseconds whatever the display flags say;
//! lock addresses are not labels (they mean nothing from one process to the next), the process name is, and with
//! `--container-label` the waiter's container (from the cgroup ID the kernel side notes in each histogram).

use std::collections::BTreeMap;

use anyhow::Result;
use common::attach::maps::c_string;
use common::domain::container_names::{ContainerNames, PidContainers};
use common::output::hist::Log2Hist;
use common::output::metrics::{HistogramValue, Snapshot};

use crate::bpf::types::hist;
use crate::report::Key;

const NAME: &str = "wait";
const HELP: &str = "Time a contended futex wait slept until woken, per process name";

/// The waits counted so far, per process name (and container, with --container-label): log2 slots of
/// microseconds and the exact sum in nanoseconds.
#[derive(Debug)]
pub struct Totals {
    series: BTreeMap<Vec<String>, Log2Hist>,
    /// `--container-label`: the containers of the waiters, by the cgroup ID each histogram noted.
    containers: Option<ContainerNames>,
}

impl Totals {
    pub fn new(containers: Option<ContainerNames>) -> Self {
        Totals { series: BTreeMap::new(), containers }
    }

    fn labels(&self) -> &'static [&'static str] {
        if self.containers.is_some() {
            &["comm", PidContainers::LABEL]
        } else {
            &["comm"]
        }
    }

    /// Adds one scrape's taken histograms to the totals.
    pub fn add(&mut self, taken: BTreeMap<Key, hist>) {
        for h in taken.values() {
            let mut values = vec![c_string(&h.comm)];
            values.extend(self.containers.as_mut().map(|c| c.label(h.cgroup_id)));
            let taken = Log2Hist { slots: h.slots.to_vec(), count: h.contended, sum: h.total_ns };
            self.series.entry(values).or_default().add(&taken);
        }
    }

    /// Writes the totals into `s`.
    pub fn write(&self, s: &mut Snapshot) -> Result<()> {
        let labels = self.labels();
        s.declare_histogram_seconds(NAME, HELP, labels);
        for (values, h) in &self.series {
            let value = HistogramValue::from_log2_slots(&h.slots, h.sum, 1000);
            s.histogram_seconds(NAME, HELP, labels, values.clone(), value);
        }
        Ok(())
    }
}
