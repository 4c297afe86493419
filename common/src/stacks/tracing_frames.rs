// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The tracing machinery's own kernel frames (the BPF program, `bpf_trace_run*`, `__traceiter_*`, an fentry or
//! fexit program's `bpf_trampoline_*`), which a stack taken in a tracing program has innermost:
//! [`drop_tracing_frames`] removes them from named samples.

use super::merge::{merge_same, MergeBy};
use super::{Frame, Sample, Stack, Task};

/// True for the kernel frames of the tracing machinery itself (the BPF program and the tracepoint's calls into it),
/// which a stack taken in a tracepoint program has innermost.
pub fn is_tracing_frame(name: &str) -> bool {
    name.starts_with("bpf_prog_")
        || name.starts_with("bpf_trace_run")
        || name.starts_with("__bpf_trace_")
        || name.starts_with("__traceiter_")
        || name.starts_with("bpf_trampoline_")
        || name == "bpf_get_stackid"
        || name.starts_with("bpf_get_stackid_")
}

/// Drops the tracing machinery's innermost kernel frames (see [`is_tracing_frame`]) from every task, so that a
/// stack taken in a tracepoint ends where the traced code was (`__schedule`), as BCC's kprobe stacks do.
pub fn drop_tracing_frames(samples: Vec<Sample<Frame>>) -> Vec<Sample<Frame>> {
    drop_tracing_frames_by(samples, MergeBy::Names)
}

/// [`drop_tracing_frames`], adding up the samples that become the same as `merge` says.
pub fn drop_tracing_frames_by(samples: Vec<Sample<Frame>>, merge: MergeBy) -> Vec<Sample<Frame>> {
    let trim = |task: &mut Task<Frame>| {
        if let Stack::Frames(frames) = &mut task.kernel {
            let n = frames.iter().take_while(|f| is_tracing_frame(&f.name)).count();
            frames.drain(..n);
        }
    };
    let trimmed = samples.into_iter().map(|mut s| {
        trim(&mut s.task);
        if let Some(w) = &mut s.waker {
            trim(w);
        }
        s
    });
    merge_same(trimmed, merge)
}
