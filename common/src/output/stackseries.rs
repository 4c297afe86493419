// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--prometheus` for the stack tools (profile, offcputime): their BPF maps keep a cumulative value per (process,
//! thread, user stack, kernel stack), and their metrics label each value by process name and the stack folded
//! outermost first (user frames, then kernel frames, `;` between: BCC's folded line without its command).
//!
//! [`StackNames`] names each entry once, at the first scrape that sees it (the process's memory maps saved then,
//! so its frames are still named after it exits), and keeps that name: an entry's value only grows and its series
//! never changes, so no counter goes back. A lost stack is `[Missed User Stack]` or `[Missed Kernel Stack]`, as in
//! folded output.

use std::collections::HashMap;

use libbpf_rs::MapCore;

use crate::process::symbols::{Batch, Resolved, Symbolizer};
use crate::stacks::symbolize::lookup_addr;
use crate::stacks::tracing_frames::is_tracing_frame;
use crate::stacks::{Collected, Stack, StackTraces, Task};

/// One entry of a tool's map, decoded: the process (whose maps name the user frames), the thread, the command,
/// the stack ids and the cumulative value.
pub struct Entry {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub user_stack_id: i32,
    pub kern_stack_id: i32,
    pub value: u64,
}

/// What makes an entry: (pid, tid, user stack id, kernel stack id, comm).
type Key = (u32, u32, i32, i32, String);

/// The names given to the entries seen so far.
pub struct StackNames {
    collected: Collected,
    /// Drop the tracing machinery's innermost kernel frames (stacks taken in a tracepoint program).
    drop_tracing: bool,
    symbolizer: Symbolizer,
    named: HashMap<Key, String>,
}

impl StackNames {
    pub fn new(collected: Collected, drop_tracing: bool) -> Self {
        StackNames { collected, drop_tracing, symbolizer: Symbolizer::new(), named: HashMap::new() }
    }

    /// Each entry as (comm, folded stack, value), its stacks read from `stackmap` and named if new.
    pub fn name(&mut self, stackmap: &impl MapCore, entries: Vec<Entry>) -> Vec<(String, String, u64)> {
        let mut traces = StackTraces::new(stackmap, self.collected);
        let mut new: Vec<(Key, Task<u64>)> = Vec::new();
        let key = |e: &Entry| (e.pid, e.tid, e.user_stack_id, e.kern_stack_id, e.comm.clone());
        for e in &entries {
            if !self.named.contains_key(&key(e)) {
                self.symbolizer.remember_process(e.pid);
                new.push((key(e), traces.task(e.pid, e.tid, e.comm.clone(), e.user_stack_id, e.kern_stack_id)));
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
                let folded = self.folded(&task, &resolved);
                self.named.insert(key, folded);
            }
        }
        entries.into_iter().filter_map(|e| Some((e.comm.clone(), self.named.get(&key(&e))?.clone(), e.value))).collect()
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
                let skip = if self.drop_tracing { names.iter().take_while(|n| is_tracing_frame(n)).count() } else { 0 };
                frames.extend(names[skip..].iter().rev());
            }
            Stack::Lost(_) => frames.push("[Missed Kernel Stack]"),
            Stack::Skipped | Stack::Absent => {}
        }
        frames.join(";")
    }
}
