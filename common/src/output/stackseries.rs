// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--prometheus` for the stack tools (profile, offcputime, stackcount, wakeuptime, offwaketime, memleak): their
//! BPF maps keep a value per key that carries stack ids (of one task, or of a blocked task and its waker), and
//! their metrics label each value by the tool's own labels (process names) and each task's stacks folded
//! outermost first (user frames, then kernel frames, `;` between: BCC's folded line without its command).
//!
//! [`StackNames`] names each task's stacks once, at the first scrape that sees them (the process's memory maps
//! saved then, so its frames are still named after it exits), and keeps that name: an entry's series never
//! changes, so no counter goes back. A lost stack is `[Missed User Stack]` or `[Missed Kernel Stack]`, as in
//! folded output. [`write_counters`] is the whole scrape of a tool whose map holds one counter per key; a tool
//! with several values per key (memleak's bytes and allocations) calls [`StackNames::name`] and adds its own.

use std::collections::HashMap;

use anyhow::Result;
use libbpf_rs::MapCore;

use crate::attach::maps::hash_entries;
use crate::output::metrics::Snapshot;
use crate::process::symbols::{Batch, Resolved, Symbolizer};
use crate::stacks::symbolize::lookup_addr;
use crate::stacks::tracing_frames::is_tracing_frame;
use crate::stacks::{Collected, Stack, StackTraces, Task};

/// One task's part of a key: the process (whose maps name the user frames), the thread, the command and the
/// stack ids (negative: none, lost or not collected, as `bpf_get_stackid` returns them; `-EFAULT` for none).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Side {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub user_stack_id: i32,
    pub kern_stack_id: i32,
}

/// One entry of a tool's map, decoded: its label values before the stacks, the tasks whose stacks follow them as
/// labels (one folded stack each, in this order), and its value.
pub struct Entry<V> {
    pub labels: Vec<String>,
    pub sides: Vec<Side>,
    pub value: V,
}

impl<V> Entry<V> {
    /// The entry of one task's stacks labelled by its command alone (`comm`, then `stack`): the keys of profile,
    /// stackcount and offcputime (stacks.bpf.h's `stack_key` layout, typed anew by each tool's skeleton).
    pub fn of_task(pid: u32, tid: u32, comm: String, user_stack_id: i32, kern_stack_id: i32, value: V) -> Self {
        let side = Side { pid, tid, comm: comm.clone(), user_stack_id, kern_stack_id };
        Entry { labels: vec![comm], sides: vec![side], value }
    }
}

/// The names given to the stacks of the tasks seen so far.
pub struct StackNames {
    collected: Collected,
    /// Drop the tracing machinery's innermost kernel frames (stacks taken in a tracepoint program).
    drop_tracing: bool,
    /// Innermost kernel frames dropped as well, after the tracing machinery's (the tool's own probe point).
    drop_also: &'static [&'static str],
    symbolizer: Symbolizer,
    named: HashMap<Side, String>,
}

impl StackNames {
    pub fn new(collected: Collected, drop_tracing: bool) -> Self {
        StackNames { collected, drop_tracing, drop_also: &[], symbolizer: Symbolizer::new(), named: HashMap::new() }
    }

    /// Also drops these innermost kernel frames (after the tracing machinery's): where the tool's tracepoint fires,
    /// below the code of interest (wakeuptime's `try_to_wake_up`).
    pub fn dropping(mut self, frames: &'static [&'static str]) -> Self {
        self.drop_also = frames;
        self
    }

    /// Each entry as its label values (its own, then one folded stack per side) and value, the stacks read from
    /// `stackmap` and named if new.
    pub fn name<V>(&mut self, stackmap: &impl MapCore, entries: Vec<Entry<V>>) -> Vec<(Vec<String>, V)> {
        let mut traces = StackTraces::new(stackmap, self.collected);
        let mut new: Vec<(Side, Task<u64>)> = Vec::new();
        for side in entries.iter().flat_map(|e| &e.sides) {
            if !self.named.contains_key(side) && !new.iter().any(|(s, _)| s == side) {
                if self.collected.user {
                    self.symbolizer.remember_process(side.pid);
                }
                let task =
                    traces.task(side.pid, side.tid, side.comm.as_str().into(), side.user_stack_id, side.kern_stack_id);
                new.push((side.clone(), task));
            }
        }
        if !new.is_empty() {
            let mut batch = Batch::new();
            for (_, task) in &new {
                if let Stack::Frames(addrs) = &task.user {
                    batch.add_user(task.pid, addrs.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)));
                }
                if let Stack::Frames(addrs) = &task.kernel {
                    batch.add_kernel(addrs.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)));
                }
            }
            self.symbolizer.refresh_live();
            let resolved = batch.resolve(&self.symbolizer);
            for (side, task) in new {
                let folded = self.folded(&task, &resolved);
                self.named.insert(side, folded);
            }
        }
        entries
            .into_iter()
            .filter_map(|e| {
                let mut labels = e.labels;
                for side in &e.sides {
                    labels.push(self.named.get(side)?.clone());
                }
                Some((labels, e.value))
            })
            .collect()
    }

    /// A task's stacks folded outermost first: user frames, then kernel frames.
    fn folded(&self, task: &Task<u64>, resolved: &Resolved) -> String {
        let mut frames: Vec<&str> = Vec::new();
        match &task.user {
            Stack::Frames(addrs) => frames
                .extend(addrs.iter().enumerate().rev().map(|(i, &a)| resolved.user_name(task.pid, lookup_addr(i, a)))),
            Stack::Lost(_) => frames.push("[Missed User Stack]"),
            Stack::Skipped | Stack::Absent => {}
        }
        match &task.kernel {
            Stack::Frames(addrs) => {
                let names: Vec<&str> =
                    addrs.iter().enumerate().map(|(i, &a)| resolved.kernel_name(lookup_addr(i, a))).collect();
                let tracing = match self.drop_tracing {
                    true => names.iter().take_while(|n| is_tracing_frame(n)).count(),
                    false => 0,
                };
                let also = names[tracing..].iter().take_while(|n| self.drop_also.contains(n)).count();
                frames.extend(names[tracing + also..].iter().rev());
            }
            Stack::Lost(_) => frames.push("[Missed Kernel Stack]"),
            Stack::Skipped | Stack::Absent => {}
        }
        frames.join(";")
    }
}

/// What a counter of stack series counts: events, or time the map keeps in micro- or nanoseconds (exported in
/// seconds, `_seconds_total`).
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    Count,
    Microseconds,
    Nanoseconds,
}

/// A counter family of stack series: its name (without `corebpf_<tool>_` and the unit's suffix), help, labels
/// (the tool's own, then one per side) and unit.
pub struct Counter {
    pub name: &'static str,
    pub help: &'static str,
    pub labels: &'static [&'static str],
    pub unit: Unit,
}

/// One scrape of a map of cumulative values: every entry of `map`, decoded by `decode`, its stacks named through
/// `stackmap`, added up by label values into `counter`'s series.
pub fn write_counters<K: plain::Plain + Default>(
    s: &mut Snapshot,
    names: &mut StackNames,
    map: &impl MapCore,
    stackmap: &impl MapCore,
    counter: &Counter,
    decode: impl Fn(&K, u64) -> Entry<u64>,
) -> Result<()> {
    let entries = hash_entries::<K, u64>(map)?.iter().map(|(k, value)| decode(k, *value)).collect();
    let Counter { name, help, labels, unit } = *counter;
    match unit {
        Unit::Count => s.declare_counter(name, help, labels),
        Unit::Microseconds | Unit::Nanoseconds => s.declare_counter_seconds(name, help, labels),
    }
    for (values, v) in names.name(stackmap, entries) {
        match unit {
            Unit::Count => s.counter(name, help, labels, values, v),
            Unit::Microseconds => s.counter_seconds(name, help, labels, values, v as f64 / 1e6),
            Unit::Nanoseconds => s.counter_seconds(name, help, labels, values, v as f64 / 1e9),
        }
    }
    Ok(())
}
