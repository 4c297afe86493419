// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Reading a tool's BPF stack-trace map: [`StackTraces`] turns the stack ids of a key into a [`Task`]'s stacks
//! (each id read once), and [`missing`] counts, as BCC does, the stacks that were lost to a full or colliding map.

use std::collections::HashMap;

use libbpf_rs::{MapCore, MapFlags};

use super::{Collected, Sample, Stack, Task, EEXIST, EFAULT, ENOMEM};

/// Stacks that could not be shown, as BCC counts them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Missing {
    pub stacks: u64,
    /// Some were lost to a full or colliding stack map: a bigger --stack-storage-size helps.
    pub map_too_small: bool,
}

impl Missing {
    /// BCC's warning, on stderr, if any stack could not be shown.
    pub fn warn(&self) {
        if self.stacks > 0 {
            let hint = if self.map_too_small { " Consider increasing --stack-storage-size." } else { "" };
            eprintln!("WARNING: {} stack traces could not be displayed.{hint}", self.stacks);
        }
    }
}

/// Reads stack traces from a BPF stack-trace map, each id once.
pub struct StackTraces<'a, M: MapCore> {
    map: &'a M,
    collected: Collected,
    cache: HashMap<i32, Option<Vec<u64>>>,
}

impl<'a, M: MapCore> StackTraces<'a, M> {
    pub fn new(map: &'a M, collected: Collected) -> Self {
        StackTraces { map, collected, cache: HashMap::new() }
    }

    fn trace(&mut self, id: i32) -> Option<Vec<u64>> {
        let map = self.map;
        self.cache
            .entry(id)
            .or_insert_with(|| {
                let bytes = map.lookup(&(id as u32).to_ne_bytes(), MapFlags::ANY).ok().flatten()?;
                Some(
                    bytes
                        .chunks_exact(8)
                        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
                        .take_while(|&a| a != 0)
                        .collect(),
                )
            })
            .clone()
    }

    fn stack(&mut self, wanted: bool, id: i32) -> Stack<u64> {
        match id {
            _ if !wanted => Stack::Skipped,
            id if id == -EFAULT => Stack::Absent,
            id if id < 0 => Stack::Lost(id),
            id => self.trace(id).map_or(Stack::Lost(-ENOMEM), Stack::Frames),
        }
    }

    /// The task with the stacks of these ids (a negative id: none, lost, or not collected). The idle task (PID 0,
    /// `swapper/N`, a waker whenever an interrupt wakes a thread on an idle CPU) has no user space, so it has no
    /// user stack whatever error the kernel gave for it: never a lost one.
    pub fn task(
        &mut self,
        pid: u32,
        shown_id: u32,
        comm: crate::output::name::Name,
        user_stack_id: i32,
        kern_stack_id: i32,
    ) -> Task<u64> {
        let user = match self.stack(self.collected.user, user_stack_id) {
            Stack::Lost(_) if pid == 0 => Stack::Absent,
            user => user,
        };
        let kernel = self.stack(self.collected.kernel, kern_stack_id);
        Task { pid, shown_id, comm, user, kernel }
    }
}

/// Counts the stacks that cannot be shown: one per lost side of each sample as it is printed. BCC prints one entry
/// per key of its map; where entries that print alike are added up into one, that one is counted once, so that the
/// warning's number is the number of lost stacks a reader finds in the output.
pub fn missing<T>(samples: &[Sample<T>]) -> Missing {
    let mut missing = Missing::default();
    for sample in samples {
        for task in std::iter::once(&sample.task).chain(&sample.waker) {
            for stack in [&task.user, &task.kernel] {
                if let Stack::Lost(err) = stack {
                    missing.stacks += 1;
                    missing.map_too_small |= *err == -EEXIST || *err == -ENOMEM;
                }
            }
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(user: Stack<u64>, kernel: Stack<u64>) -> Sample<u64> {
        Sample { task: Task { pid: 1, shown_id: 1, comm: "x".into(), user, kernel }, waker: None, value: 1 }
    }

    #[test]
    fn missing_counts_lost_sides_only() {
        let samples = vec![
            raw(Stack::Frames(vec![1]), Stack::Absent),
            raw(Stack::Lost(-EEXIST), Stack::Frames(vec![2])),
            raw(Stack::Lost(-ENOMEM), Stack::Lost(-ENOMEM)),
            raw(Stack::Skipped, Stack::Frames(vec![3])),
        ];
        assert_eq!(missing(&samples), Missing { stacks: 3, map_too_small: true });
        assert_eq!(missing(&samples[..1]), Missing::default());
    }

    #[test]
    fn samples_added_up_into_one_entry_count_one_lost_stack() {
        // Two keys of the map (kernel stacks at two unnamed addresses) print as one entry with one lost user stack.
        let unknown = |addr| super::super::Frame { addr, name: "[unknown]".into(), offset: 0, module: None };
        let sample = |addr| Sample {
            task: Task {
                pid: 7,
                shown_id: 7,
                comm: "x".into(),
                user: Stack::Lost(-EEXIST),
                kernel: Stack::Frames(vec![unknown(addr)]),
            },
            waker: None,
            value: 1,
        };
        let raw = [sample(0x10), sample(0x20)];
        assert_eq!(missing(&raw).stacks, 2);
        let printed = super::super::merge_same(raw, super::super::MergeBy::Frames);
        assert_eq!((printed.len(), missing(&printed)), (1, Missing { stacks: 1, map_too_small: true }));
    }
}
