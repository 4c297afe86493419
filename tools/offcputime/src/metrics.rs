// SPDX-License-Identifier: Apache-2.0 OR MIT
//! offcputime's `--prometheus`: the kernel's cumulative off-CPU time per (thread, stacks) as the counter
//! `corebpf_offcputime_offcpu_seconds_total`, labelled by process name and the stack folded outermost first (user
//! frames, then kernel frames without the tracing machinery's own, `;` between: BCC's folded line without its
//! command). Each entry is named once and keeps its name (`common::output::stackseries`), so no counter goes back;
//! the series are capped by `--max-series`.

use anyhow::Result;
use common::attach::maps::{c_string, hash_entries};
use common::output::metrics::Snapshot;
use common::output::stackseries::{Entry, StackNames};
use libbpf_rs::MapCore;

use crate::bpf::types::stack_key;

const NAME: &str = "offcpu";
const HELP: &str = "Time threads spent off CPU (blocked or waiting to run), per process name and the stack where they \
                    blocked (folded, outermost frame first)";
const LABELS: &[&str] = &["comm", "stack"];

/// One scrape: every total of `totals` (microseconds), its stacks named through `stackmap`, added up by process
/// name and stack, in seconds.
pub fn write(s: &mut Snapshot, names: &mut StackNames, totals: &impl MapCore, stackmap: &impl MapCore) -> Result<()> {
    let entries = hash_entries::<stack_key, u64>(totals)?
        .into_iter()
        .map(|(k, value)| Entry {
            pid: k.tgid,
            tid: k.pid,
            comm: c_string(&k.comm),
            user_stack_id: k.user_stack_id,
            kern_stack_id: k.kern_stack_id,
            value,
        })
        .collect();
    s.declare_counter_seconds(NAME, HELP, LABELS);
    for (comm, stack, us) in names.name(stackmap, entries) {
        s.counter_seconds(NAME, HELP, LABELS, vec![comm, stack], us as f64 / 1e6);
    }
    Ok(())
}
