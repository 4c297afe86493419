// SPDX-License-Identifier: Apache-2.0 OR MIT
//! profile's `--prometheus`: the kernel's cumulative sample counts as the counter `corebpf_profile_samples_total`,
//! labelled by process name and the stack folded outermost first (user frames, then kernel frames, `;` between:
//! BCC's folded line without its command), so that a flame graph of any time range is a `rate()` or `increase()`
//! away. Each entry is named once and keeps its name (`common::output::stackseries`), so no counter goes back; the
//! series are capped by `--max-series`.

use anyhow::Result;
use common::attach::maps::{c_string, hash_entries};
use common::output::metrics::Snapshot;
use common::output::stackseries::{Entry, StackNames};
use libbpf_rs::MapCore;

use crate::bpf::types::stack_key;

const NAME: &str = "samples";
const HELP: &str = "Stack samples taken, per process name and stack (folded, outermost frame first)";
const LABELS: &[&str] = &["comm", "stack"];

/// One scrape: every entry of `counts`, its stacks named through `stackmap`, added up by process name and stack.
pub fn write(s: &mut Snapshot, names: &mut StackNames, counts: &impl MapCore, stackmap: &impl MapCore) -> Result<()> {
    let entries = hash_entries::<stack_key, u64>(counts)?
        .into_iter()
        .map(|(k, value)| Entry {
            pid: k.pid,
            tid: k.pid,
            comm: c_string(&k.comm),
            user_stack_id: k.user_stack_id,
            kern_stack_id: k.kern_stack_id,
            value,
        })
        .collect();
    s.declare_counter(NAME, HELP, LABELS);
    for (comm, stack, samples) in names.name(stackmap, entries) {
        s.counter(NAME, HELP, LABELS, vec![comm, stack], samples);
    }
    Ok(())
}
