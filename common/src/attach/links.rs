// SPDX-License-Identifier: Apache-2.0 OR MIT
//! A tool's links, detached in parallel when dropped.
//!
//! Detaching a classic tracepoint or a uprobe link waits in the kernel for an RCU grace period (tens of
//! milliseconds each, here), and closing links one after another adds those waits up: opensnoop's six syscall
//! tracepoints took 0.4 s to detach after Ctrl-C. [`Links`] closes its links from several threads at once, whose
//! waits overlap. Links that detach at once (raw tracepoints, tp_btf, fentry) lose nothing by it.

use libbpf_rs::Link;

/// At most this many threads close links (funccount may hold hundreds).
const DETACH_THREADS: usize = 32;

/// Attached links; dropping them detaches them all, in parallel.
#[derive(Default)]
pub struct Links(Vec<Link>);

impl Links {
    /// Adds one link.
    pub fn push(&mut self, link: Link) {
        self.0.push(link);
    }

    /// How many links there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Hits the kernel's probes missed so far, over the links that count them (kprobe_multi and kprobe links,
    /// 6.7+; 0 elsewhere): a return probe whose slots were all in use, or a probe fired inside another BPF program.
    pub fn missed(&self) -> u64 {
        use libbpf_rs::query::{LinkTypeInfo, PerfEventType};
        let missed = |link: &Link| match link.info().map(|i| i.info) {
            Ok(LinkTypeInfo::KprobeMulti(info)) => info.missed,
            Ok(LinkTypeInfo::PerfEvent(info)) => match info.event_type {
                PerfEventType::Kprobe { missed, .. } => missed,
                _ => 0,
            },
            _ => 0,
        };
        self.0.iter().map(missed).sum()
    }
}

impl From<Vec<Link>> for Links {
    fn from(links: Vec<Link>) -> Self {
        Links(links)
    }
}

impl FromIterator<Link> for Links {
    fn from_iter<I: IntoIterator<Item = Link>>(iter: I) -> Self {
        Links(iter.into_iter().collect())
    }
}

impl Extend<Link> for Links {
    fn extend<I: IntoIterator<Item = Link>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        let links = std::mem::take(&mut self.0);
        if links.len() < 2 {
            return;
        }
        let per_thread = links.len().div_ceil(DETACH_THREADS);
        let mut links = links.into_iter();
        std::thread::scope(|scope| loop {
            let chunk: Vec<Link> = links.by_ref().take(per_thread).collect();
            if chunk.is_empty() {
                break;
            }
            // A thread that cannot start drops its chunk right here: those links close one by one.
            let _ = std::thread::Builder::new().spawn_scoped(scope, move || drop(chunk));
        });
    }
}
