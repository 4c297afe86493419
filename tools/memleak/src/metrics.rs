// SPDX-License-Identifier: Apache-2.0 OR MIT
//! memleak's `--prometheus`: the per-stack totals the BPF side keeps as allocations are made and freed (the map
//! `--combined-only` prints) as two gauges, `corebpf_memleak_outstanding_bytes` and
//! `corebpf_memleak_outstanding_allocations`, labelled `stack`: the allocating stack folded outermost first (user
//! frames of the traced process, or kernel frames in kernel mode). Each stack is named once and keeps its name
//! (`common::output::stackseries`); a stack whose allocations are all freed leaves the map and its series goes.

use anyhow::Result;
use common::attach::maps::hash_entries;
use common::output::metrics::Snapshot;
use common::output::stackseries::{Entry, Side, StackNames};
use libbpf_rs::MapCore;

use crate::bpf::types::combined_info;

const BYTES: &str = "outstanding";
const BYTES_HELP: &str = "Bytes allocated and not yet freed, per allocating stack (folded, outermost frame first)";
const ALLOCS: &str = "outstanding_allocations";
const ALLOCS_HELP: &str = "Allocations made and not yet freed, per allocating stack (folded, outermost frame first)";
const LABELS: &[&str] = &["stack"];

/// One scrape: every total of `combined` (by stack id), its stack named through `stackmap` (the user stacks of
/// process `pid`, or kernel stacks without one).
pub fn write(
    s: &mut Snapshot,
    names: &mut StackNames,
    combined: &impl MapCore,
    stackmap: &impl MapCore,
    pid: Option<u32>,
) -> Result<()> {
    let entries = hash_entries::<u64, combined_info>(combined)?
        .into_iter()
        .filter(|(_, c)| c.number_of_allocs > 0)
        .map(|(id, value)| {
            // The key is the stack id, sign-extended (a lost stack's error stays negative).
            let id = id as i64 as i32;
            let side = match pid {
                Some(pid) => Side { pid, tid: pid, comm: String::new(), user_stack_id: id, kern_stack_id: -1 },
                None => Side { pid: 0, tid: 0, comm: String::new(), user_stack_id: -1, kern_stack_id: id },
            };
            Entry { labels: Vec::new(), sides: vec![side], value }
        })
        .collect();
    s.declare_gauge_bytes(BYTES, BYTES_HELP, LABELS);
    s.declare_gauge(ALLOCS, ALLOCS_HELP, LABELS);
    for (values, total) in names.name(stackmap, entries) {
        s.gauge_bytes(BYTES, BYTES_HELP, LABELS, values.clone(), total.total_size as f64);
        s.gauge(ALLOCS, ALLOCS_HELP, LABELS, values, total.number_of_allocs as f64);
    }
    Ok(())
}
