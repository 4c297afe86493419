//! From the kernel's counts to named stacks: reads the (process, stacks) → count map and the stack-trace map,
//! sorts out stacks that were not collected, absent (-EFAULT: no stack of that kind) or lost (full or colliding
//! stack map), and names every frame with one batched symbolizer call per process plus one for the kernel.

use std::collections::HashMap;

use anyhow::Result;
use common::process::symbols::{Batch, Symbolizer};
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::types::stack_key;

unsafe impl plain::Plain for stack_key {}

const EFAULT: i32 = 14;
const EEXIST: i32 = 17;
const ENOMEM: i32 = 12;

/// One side (user or kernel) of a sampled stack, before or after naming.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stack<T> {
    /// Not collected (`-U` drops kernel stacks, `-K` user stacks).
    Skipped,
    /// The sample had no stack of this kind (user mode has no kernel stack; kernel threads no user stack).
    Absent,
    /// The stack was lost: stack map full or a hash collision (the stack id's error code).
    Lost(i32),
    /// Frames, innermost (leaf) first.
    Frames(Vec<T>),
}

/// A frame after naming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub addr: u64,
    pub name: String,
}

/// A unique (process, command, user stack, kernel stack) and how many samples had it.
#[derive(Debug, Clone)]
pub struct Sample<T> {
    pub pid: u32,
    pub comm: String,
    pub user: Stack<T>,
    pub kernel: Stack<T>,
    pub count: u64,
}

/// Which stacks were collected.
#[derive(Debug, Clone, Copy)]
pub struct Collected {
    pub user: bool,
    pub kernel: bool,
}

/// Stacks that could not be shown, as BCC counts them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Missing {
    pub stacks: u64,
    /// Some were lost to a full or colliding stack map: a bigger --stack-storage-size helps.
    pub map_too_small: bool,
}

/// Reads every counted sample with its raw stack addresses.
pub fn read_samples(counts: &impl MapCore, stackmap: &impl MapCore, collected: Collected) -> Result<Vec<Sample<u64>>> {
    let mut traces: HashMap<i32, Option<Vec<u64>>> = HashMap::new();
    let mut trace = |id: i32| -> Option<Vec<u64>> {
        traces
            .entry(id)
            .or_insert_with(|| {
                let bytes = stackmap.lookup(&(id as u32).to_ne_bytes(), MapFlags::ANY).ok().flatten()?;
                Some(
                    bytes
                        .chunks_exact(8)
                        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
                        .take_while(|&a| a != 0)
                        .collect(),
                )
            })
            .clone()
    };
    let mut samples = Vec::new();
    for (key, count) in common::attach::maps::hash_entries::<stack_key, u64>(counts)? {
        if count == 0 {
            continue;
        }
        let mut stack = |wanted: bool, id: i32| -> Stack<u64> {
            match id {
                _ if !wanted => Stack::Skipped,
                id if id == -EFAULT => Stack::Absent,
                id if id < 0 => Stack::Lost(id),
                id => trace(id).map_or(Stack::Lost(-ENOMEM), Stack::Frames),
            }
        };
        let user = stack(collected.user, key.user_stack_id);
        let kernel = stack(collected.kernel, key.kern_stack_id);
        samples.push(Sample { pid: key.pid, comm: comm_name(&key.comm), user, kernel, count });
    }
    Ok(samples)
}

/// The command name from its NUL-padded bytes.
fn comm_name(comm: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = comm.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Counts the stacks that cannot be shown, as BCC does (one per lost side of each unique sample).
pub fn missing(samples: &[Sample<u64>]) -> Missing {
    let mut missing = Missing::default();
    for sample in samples {
        for stack in [&sample.user, &sample.kernel] {
            if let Stack::Lost(err) = stack {
                missing.stacks += 1;
                missing.map_too_small |= *err == -EEXIST || *err == -ENOMEM;
            }
        }
    }
    missing
}

/// The address to look up for frame `i`: every frame but the innermost is a return address, which may already
/// belong to the next function when the call was the caller's last instruction, so its call site is looked up.
fn lookup_addr(i: usize, addr: u64) -> u64 {
    if i == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

/// Names every frame of every sample, resolving all addresses in one batch.
pub fn symbolize(samples: Vec<Sample<u64>>, symbolizer: &mut Symbolizer) -> Vec<Sample<Frame>> {
    let mut batch = Batch::new();
    for sample in &samples {
        if let Stack::Frames(addrs) = &sample.user {
            batch.add_user(sample.pid, addrs.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)));
        }
        if let Stack::Frames(addrs) = &sample.kernel {
            batch.add_kernel(addrs.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)));
        }
    }
    symbolizer.refresh_live();
    let resolved = batch.resolve(symbolizer);
    let named = samples.into_iter().map(|s| Sample {
        user: name_stack(s.user, |a| resolved.user_name(s.pid, a).to_string()),
        kernel: name_stack(s.kernel, |a| resolved.kernel_name(a).to_string()),
        pid: s.pid,
        comm: s.comm,
        count: s.count,
    });
    merge_same_names(named)
}

/// Adds up samples whose stacks differ only in addresses within the same functions (hot_fn+0x10, hot_fn+0x14),
/// which print identically; the result is sorted by count, least frequent first.
fn merge_same_names(samples: impl IntoIterator<Item = Sample<Frame>>) -> Vec<Sample<Frame>> {
    let mut index: HashMap<(u32, String, Stack<String>, Stack<String>), usize> = HashMap::new();
    let mut merged: Vec<Sample<Frame>> = Vec::new();
    for sample in samples {
        let key = (sample.pid, sample.comm.clone(), names_of(&sample.user), names_of(&sample.kernel));
        match index.get(&key) {
            Some(&i) => merged[i].count += sample.count,
            None => {
                index.insert(key, merged.len());
                merged.push(sample);
            }
        }
    }
    merged.sort_by_key(|s| s.count);
    merged
}

fn names_of(stack: &Stack<Frame>) -> Stack<String> {
    match stack {
        Stack::Skipped => Stack::Skipped,
        Stack::Absent => Stack::Absent,
        Stack::Lost(e) => Stack::Lost(*e),
        Stack::Frames(frames) => Stack::Frames(frames.iter().map(|f| f.name.clone()).collect()),
    }
}

fn name_stack(stack: Stack<u64>, name: impl Fn(u64) -> String) -> Stack<Frame> {
    match stack {
        Stack::Skipped => Stack::Skipped,
        Stack::Absent => Stack::Absent,
        Stack::Lost(e) => Stack::Lost(e),
        Stack::Frames(addrs) => Stack::Frames(
            addrs.into_iter().enumerate().map(|(i, addr)| Frame { addr, name: name(lookup_addr(i, addr)) }).collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(user: Stack<u64>, kernel: Stack<u64>) -> Sample<u64> {
        Sample { pid: 1, comm: "x".into(), user, kernel, count: 1 }
    }

    #[test]
    fn missing_counts_lost_sides_only() {
        let samples = vec![
            sample(Stack::Frames(vec![1]), Stack::Absent),
            sample(Stack::Lost(-EEXIST), Stack::Frames(vec![2])),
            sample(Stack::Lost(-ENOMEM), Stack::Lost(-ENOMEM)),
            sample(Stack::Skipped, Stack::Frames(vec![3])),
        ];
        assert_eq!(missing(&samples), Missing { stacks: 3, map_too_small: true });
        assert_eq!(missing(&samples[..1]), Missing::default());
    }

    #[test]
    fn stacks_with_the_same_names_are_merged() {
        let frame = |addr, name: &str| Frame { addr, name: name.into() };
        let s = |user: Vec<Frame>, count| Sample {
            pid: 1,
            comm: "x".into(),
            user: Stack::Frames(user),
            kernel: Stack::Absent,
            count,
        };
        let merged = merge_same_names(vec![
            s(vec![frame(0x10, "hot_fn"), frame(0x20, "main")], 5),
            s(vec![frame(0x30, "main")], 2),
            s(vec![frame(0x14, "hot_fn"), frame(0x20, "main")], 3),
        ]);
        assert_eq!(merged.iter().map(|m| m.count).collect::<Vec<_>>(), vec![2, 8]);
    }

    #[test]
    fn return_addresses_are_looked_up_at_the_call() {
        assert_eq!(lookup_addr(0, 0x1000), 0x1000);
        assert_eq!(lookup_addr(1, 0x1000), 0xfff);
    }

    #[test]
    fn comm_stops_at_nul() {
        let raw: Vec<std::os::raw::c_char> = b"spin\0\0garbage\0\0\0".iter().map(|&b| b as _).collect();
        assert_eq!(comm_name(&raw), "spin");
    }
}
