// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Adding up samples that print the same: the merge key of a sample is its task (process, shown id, command) and
//! its frames as they print, names only ([`MergeBy::Names`]), with offset and module ([`MergeBy::Frames`]) or
//! with their addresses too ([`MergeBy::Addresses`]);
//! the result is sorted by value, least first.

use std::collections::HashMap;

use super::{Frame, Sample, Stack, Task};

/// Which samples [`symbolize_by`] adds up: those whose frames have the same names, or only those whose frames are
/// also at the same offsets in the same modules (for output that shows offsets: profile's `name+0x1f [module]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeBy {
    Names,
    Frames,
    Addresses,
}

/// A frame as it prints: its name, under [`MergeBy::Frames`] its offset and module, under [`MergeBy::Addresses`]
/// also its address (stackcount's -v prints it).
type FrameKey = (String, u64, Option<String>, u64);
type NameKey = (u32, u32, crate::output::name::Name, Stack<FrameKey>, Stack<FrameKey>);

fn names_of(task: &Task<Frame>, merge: MergeBy) -> NameKey {
    let key = |f: &Frame| match merge {
        MergeBy::Names => (f.name.clone(), 0, None, 0),
        MergeBy::Frames => (f.name.clone(), f.offset, f.module.clone(), 0),
        MergeBy::Addresses => (f.name.clone(), f.offset, f.module.clone(), f.addr),
    };
    let names = |stack: &Stack<Frame>| match stack {
        Stack::Skipped => Stack::Skipped,
        Stack::Absent => Stack::Absent,
        Stack::Lost(e) => Stack::Lost(*e),
        Stack::Frames(frames) => Stack::Frames(frames.iter().map(key).collect()),
    };
    (task.pid, task.shown_id, task.comm.clone(), names(&task.user), names(&task.kernel))
}

/// Adds up samples whose stacks differ only in addresses within the same functions (hot_fn+0x10, hot_fn+0x14),
/// which print identically without offsets; the result is sorted by value, least first.
pub fn merge_same_names(samples: impl IntoIterator<Item = Sample<Frame>>) -> Vec<Sample<Frame>> {
    merge_same(samples, MergeBy::Names)
}

/// Adds up samples whose tasks and stacks are the same as `merge` says; sorted by value, least first.
pub fn merge_same(samples: impl IntoIterator<Item = Sample<Frame>>, merge: MergeBy) -> Vec<Sample<Frame>> {
    let mut index: HashMap<(NameKey, Option<NameKey>), usize> = HashMap::new();
    let mut merged: Vec<Sample<Frame>> = Vec::new();
    for sample in samples {
        let key = (names_of(&sample.task, merge), sample.waker.as_ref().map(|w| names_of(w, merge)));
        match index.get(&key) {
            Some(&i) => merged[i].value += sample.value,
            None => {
                index.insert(key, merged.len());
                merged.push(sample);
            }
        }
    }
    merged.sort_by_key(|s| s.value);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_with_the_same_names_are_merged() {
        let frame = |addr, name: &str| Frame { addr, name: name.into(), offset: 0, module: None };
        let s = |user: Vec<Frame>, value| Sample {
            task: Task { pid: 1, shown_id: 1, comm: "x".into(), user: Stack::Frames(user), kernel: Stack::Absent },
            waker: None,
            value,
        };
        let merged = merge_same_names(vec![
            s(vec![frame(0x10, "hot_fn"), frame(0x20, "main")], 5),
            s(vec![frame(0x30, "main")], 2),
            s(vec![frame(0x14, "hot_fn"), frame(0x20, "main")], 3),
        ]);
        assert_eq!(merged.iter().map(|m| m.value).collect::<Vec<_>>(), vec![2, 8]);
    }
}
