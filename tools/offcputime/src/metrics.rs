// SPDX-License-Identifier: Apache-2.0 OR MIT
//! offcputime's `--prometheus`: the kernel's cumulative off-CPU time per (thread, stacks) as the counter
//! `corebpf_offcputime_offcpu_seconds_total`, labelled by process name and the stack folded outermost first (user
//! frames, then kernel frames without the tracing machinery's own, `;` between: BCC's folded line without its
//! command). Each entry is named once and keeps its name (`common::output::stackseries`), so no counter goes back;
//! the series are capped by `--max-series`.

use anyhow::Result;
use common::attach::maps::c_string;
use common::output::metrics::Snapshot;
use common::output::stackseries::{write_counters, Counter, Entry, StackNames, Unit};
use libbpf_rs::MapCore;

use crate::bpf::types::stack_key;

const OFFCPU: Counter = Counter {
    name: "offcpu",
    help: "Time threads spent off CPU (blocked or waiting to run), per process name and the stack where they \
           blocked (folded, outermost frame first)",
    labels: &["comm", "stack"],
    unit: Unit::Microseconds,
};

/// One scrape: every total of `totals` (microseconds), its stacks named through `stackmap`, added up by process
/// name and stack, in seconds.
pub fn write(s: &mut Snapshot, names: &mut StackNames, totals: &impl MapCore, stackmap: &impl MapCore) -> Result<()> {
    write_counters(s, names, totals, stackmap, &OFFCPU, |k: &stack_key, value| {
        Entry::of_task(k.tgid, k.pid, c_string(&k.comm), k.user_stack_id, k.kern_stack_id, value)
    })
}
