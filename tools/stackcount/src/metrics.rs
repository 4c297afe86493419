// SPDX-License-Identifier: Apache-2.0 OR MIT
//! stackcount's `--prometheus`: the kernel's cumulative event counts per (process, stacks) as the counter
//! `corebpf_stackcount_events_total`, labelled by process name and the stack folded outermost first (user frames,
//! then kernel frames, `;` between). Each entry is named once and keeps its name (`common::output::stackseries`),
//! so no counter goes back; the series are capped by `--max-series`.

use anyhow::Result;
use common::attach::maps::c_string;
use common::output::metrics::Snapshot;
use common::output::stackseries::{write_counters, Counter, Entry, StackNames, Unit};
use libbpf_rs::MapCore;

use crate::bpf::types::stack_key;

const EVENTS: Counter = Counter {
    name: "events",
    help: "Events of the pattern counted, per process name and the stack that led to them (folded, outermost \
           frame first)",
    labels: &["comm", "stack"],
    unit: Unit::Count,
};

/// One scrape: every entry of `counts`, its stacks named through `stackmap`, added up by process name and stack.
pub fn write(s: &mut Snapshot, names: &mut StackNames, counts: &impl MapCore, stackmap: &impl MapCore) -> Result<()> {
    write_counters(s, names, counts, stackmap, &EVENTS, |k: &stack_key, value| {
        Entry::of_task(k.pid, k.pid, c_string(&k.comm), k.user_stack_id, k.kern_stack_id, value)
    })
}
