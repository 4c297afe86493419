// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Naming the frames of raw stacks: [`symbolize`] resolves every address of every sample in one batch through the
//! run's [`Symbolizer`] (kernel and user), then adds up the samples that print the same ([`super::merge`]).

use super::merge::{merge_same, MergeBy};
use super::{Frame, Sample, Stack, Task};
use crate::process::symbols::{Batch, Symbolizer};

/// The address to look up for frame `i`: every frame but the innermost is a return address, which may already
/// belong to the next function when the call was the caller's last instruction, so its call site is looked up.
pub fn lookup_addr(i: usize, addr: u64) -> u64 {
    if i == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

/// Names every frame of every sample, resolving all addresses in one batch, and adds up samples that print the
/// same; sorted by value, least first. With `verbose`, says on stderr which addresses could not be named.
pub fn symbolize(samples: Vec<Sample<u64>>, symbolizer: &mut Symbolizer, verbose: bool) -> Vec<Sample<Frame>> {
    symbolize_by(samples, symbolizer, verbose, MergeBy::Names)
}

/// [`symbolize`], adding up samples as `merge` says.
pub fn symbolize_by(
    samples: Vec<Sample<u64>>,
    symbolizer: &mut Symbolizer,
    verbose: bool,
    merge: MergeBy,
) -> Vec<Sample<Frame>> {
    let mut batch = Batch::new();
    for sample in &samples {
        for task in std::iter::once(&sample.task).chain(&sample.waker) {
            if let Stack::Frames(addrs) = &task.user {
                batch.add_user(task.pid, addrs.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)));
            }
            if let Stack::Frames(addrs) = &task.kernel {
                batch.add_kernel(addrs.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)));
            }
        }
    }
    symbolizer.refresh_live();
    let resolved = batch.resolve(symbolizer);
    if verbose {
        resolved.report_unresolved();
    }
    let name_task = |t: Task<u64>| Task {
        user: name_stack(t.user, |a| resolved.user(t.pid, a)),
        kernel: name_stack(t.kernel, |a| resolved.kernel(a)),
        pid: t.pid,
        shown_id: t.shown_id,
        comm: t.comm,
    };
    let named =
        samples.into_iter().map(|s| Sample { task: name_task(s.task), waker: s.waker.map(name_task), value: s.value });
    merge_same(named, merge)
}

fn name_stack<'r>(
    stack: Stack<u64>,
    symbol: impl Fn(u64) -> Option<&'r crate::process::symbols::Symbol>,
) -> Stack<Frame> {
    match stack {
        Stack::Skipped => Stack::Skipped,
        Stack::Absent => Stack::Absent,
        Stack::Lost(e) => Stack::Lost(e),
        Stack::Frames(addrs) => Stack::Frames(
            addrs
                .into_iter()
                .enumerate()
                .map(|(i, addr)| match symbol(lookup_addr(i, addr)) {
                    Some(sym) => Frame {
                        addr,
                        name: sym.name.clone(),
                        // The offset of the address itself, as BCC prints it, not of the call site looked up.
                        offset: sym.offset + (addr - lookup_addr(i, addr)),
                        module: sym.module.clone(),
                    },
                    None => Frame { addr, name: crate::process::symbols::UNKNOWN.into(), offset: 0, module: None },
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_addresses_are_looked_up_at_the_call() {
        assert_eq!(lookup_addr(0, 0x1000), 0x1000);
        assert_eq!(lookup_addr(1, 0x1000), 0xfff);
    }
}
