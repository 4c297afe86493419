// SPDX-License-Identifier: Apache-2.0 OR MIT
//! wakeuptime's `--prometheus`: the kernel's cumulative blocked time per (waker kernel stack, waker name, target
//! name) as the counter `corebpf_wakeuptime_blocked_seconds_total`, labelled `target` (the thread that slept),
//! `waker` and `waker_stack` (the waker's kernel stack folded outermost first, without the tracing machinery's
//! frames and `try_to_wake_up`, as the tool's other forms). Each stack is named once and keeps its name (`common::output::stackseries`), so no counter goes back;
//! the series are capped by `--max-series`.

use anyhow::Result;
use common::attach::maps::c_string;
use common::output::metrics::Snapshot;
use common::output::stackseries::{write_counters, Counter, Entry, Side, StackNames, Unit};
use libbpf_rs::MapCore;

use crate::bpf::types::wake_key;

const BLOCKED: Counter = Counter {
    name: "blocked",
    help: "Time threads spent blocked until woken, per blocked process name, waker name and the kernel stack of \
           the wakeup (folded, outermost frame first)",
    labels: &["target", "waker", "waker_stack"],
    unit: Unit::Microseconds,
};

/// One scrape: every total of `totals` (microseconds), the waker stacks named through `stackmap`, in seconds.
pub fn write(s: &mut Snapshot, names: &mut StackNames, totals: &impl MapCore, stackmap: &impl MapCore) -> Result<()> {
    write_counters(s, names, totals, stackmap, &BLOCKED, |k: &wake_key, value| {
        let waker = c_string(&k.waker);
        let side = Side { pid: 0, tid: 0, comm: waker.clone(), user_stack_id: -1, kern_stack_id: k.w_k_stack_id };
        Entry { labels: vec![c_string(&k.target), waker], sides: vec![side], value }
    })
}
