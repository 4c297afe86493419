// SPDX-License-Identifier: Apache-2.0 OR MIT
//! offwaketime's `--prometheus`: the kernel's cumulative blocked time per (blocked thread and stacks, waker and
//! stacks) as the counter `corebpf_offwaketime_blocked_seconds_total`, labelled `comm` and `stack` (the blocked
//! thread's name and stacks) and `waker` and `waker_stack` (the waker's, empty when no wakeup was seen), each stack
//! folded outermost first (user frames, then kernel frames without the tracing machinery's own, `;` between).
//! Each stack is named once and keeps its name (`common::output::stackseries`), so no counter goes back; the
//! series are capped by `--max-series`.

use anyhow::Result;
use common::attach::maps::c_string;
use common::output::metrics::Snapshot;
use common::output::stackseries::{write_counters, Counter, Entry, Side, StackNames, Unit};
use libbpf_rs::MapCore;

use crate::bpf::types::{wake_key, waker};

const BLOCKED: Counter = Counter {
    name: "blocked",
    help: "Time threads spent blocked, per process name and stack where they blocked, and the name and stack of \
           the thread that woke them (folded, outermost frame first)",
    labels: &["comm", "waker", "stack", "waker_stack"],
    unit: Unit::Microseconds,
};

/// -EFAULT: no stack of that kind.
const NO_STACK: i32 = -14;

/// One scrape: every total of `totals` (microseconds), its stacks named through `stackmap`, in seconds.
pub fn write(s: &mut Snapshot, names: &mut StackNames, totals: &impl MapCore, stackmap: &impl MapCore) -> Result<()> {
    write_counters(s, names, totals, stackmap, &BLOCKED, |k: &wake_key, value| {
        let side = |w: &waker| Side {
            pid: w.tgid,
            tid: w.pid,
            comm: c_string(&w.comm),
            user_stack_id: w.user_stack_id,
            kern_stack_id: w.kern_stack_id,
        };
        let target = side(&k.target);
        // No waker seen (woken before tracing began, or by no traced wakeup): no name, no stacks.
        let waker = if k.waker.pid == 0 && k.waker.user_stack_id == -1 && k.waker.kern_stack_id == -1 {
            Side { pid: 0, tid: 0, comm: String::new(), user_stack_id: NO_STACK, kern_stack_id: NO_STACK }
        } else {
            side(&k.waker)
        };
        // The names, then the stacks (added in the sides' order).
        Entry { labels: vec![target.comm.clone(), waker.comm.clone()], sides: vec![target, waker], value }
    })
}
