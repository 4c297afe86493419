// SPDX-License-Identifier: Apache-2.0 OR MIT
//! profile's `--prometheus`: the kernel's cumulative sample counts as the counter `corebpf_profile_samples_total`,
//! labelled by process name and the stack folded outermost first (user frames, then kernel frames, `;` between:
//! BCC's folded line without its command), so that a flame graph of any time range is a `rate()` or `increase()`
//! away. The series are capped by `--max-series`.
//!
//! Each entry of the kernel's map (process, user stack, kernel stack) is named once, at the first scrape that sees
//! it, with the process's memory maps saved then (`common::process::symbols`), and keeps that name: an entry's
//! count only grows and its series never changes, so no counter goes back, even after its process has exited.

use std::collections::HashMap;

use anyhow::Result;
use common::attach::maps::{c_string, hash_entries};
use common::output::metrics::Snapshot;
use common::process::symbols::{Batch, Resolved, Symbolizer};
use common::stacks::symbolize::lookup_addr;
use common::stacks::{Collected, Stack, StackTraces, Task};
use libbpf_rs::MapCore;

use crate::bpf::types::stack_key;

const NAME: &str = "samples";
const HELP: &str = "Stack samples taken, per process name and stack (folded, outermost frame first)";
const LABELS: &[&str] = &["comm", "stack"];

/// An entry of the kernel's map: PID, user and kernel stack ids, comm.
type Key = (u32, i32, i32, [u8; 16]);

/// The names given to the entries seen so far.
pub struct Stacks {
    collected: Collected,
    symbolizer: Symbolizer,
    named: HashMap<Key, (String, String)>,
}

impl Stacks {
    pub fn new(collected: Collected) -> Self {
        Stacks { collected, symbolizer: Symbolizer::new(), named: HashMap::new() }
    }

    /// One scrape: every entry of `counts`, named through `stackmap`, added up by process name and folded stack.
    pub fn write(&mut self, s: &mut Snapshot, counts: &impl MapCore, stackmap: &impl MapCore) -> Result<()> {
        let entries = hash_entries::<stack_key, u64>(counts)?;
        let mut traces = StackTraces::new(stackmap, self.collected);
        let mut new: Vec<(Key, Task<u64>)> = Vec::new();
        for (k, _) in &entries {
            let key = (k.pid, k.user_stack_id, k.kern_stack_id, k.comm.map(|c| c as u8));
            if !self.named.contains_key(&key) {
                self.symbolizer.remember_process(k.pid);
                new.push((key, traces.task(k.pid, k.pid, c_string(&k.comm), k.user_stack_id, k.kern_stack_id)));
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
            for (key, task) in new {
                let folded = folded(&task, &resolved);
                self.named.insert(key, (task.comm, folded));
            }
        }
        s.declare_counter(NAME, HELP, LABELS);
        for (k, count) in entries {
            let key = (k.pid, k.user_stack_id, k.kern_stack_id, k.comm.map(|c| c as u8));
            if let Some((comm, stack)) = self.named.get(&key) {
                s.counter(NAME, HELP, LABELS, vec![comm.clone(), stack.clone()], count);
            }
        }
        Ok(())
    }
}

/// A task's stacks folded outermost first: user frames, then kernel frames, as BCC's folded lines (without the
/// command); a lost stack is `[Missed User Stack]` or `[Missed Kernel Stack]`.
fn folded(task: &Task<u64>, resolved: &Resolved) -> String {
    let mut frames: Vec<&str> = Vec::new();
    match &task.user {
        Stack::Frames(addrs) => {
            frames.extend(addrs.iter().enumerate().rev().map(|(i, &a)| resolved.user_name(task.pid, lookup_addr(i, a))))
        }
        Stack::Lost(_) => frames.push("[Missed User Stack]"),
        Stack::Skipped | Stack::Absent => {}
    }
    match &task.kernel {
        Stack::Frames(addrs) => {
            frames.extend(addrs.iter().enumerate().rev().map(|(i, &a)| resolved.kernel_name(lookup_addr(i, a))))
        }
        Stack::Lost(_) => frames.push("[Missed Kernel Stack]"),
        Stack::Skipped | Stack::Absent => {}
    }
    frames.join(";")
}
