// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The off-CPU family: what offcputime, offwaketime and wakeuptime share, on both sides of the kernel boundary.
//!
//! [`sched`] is the scheduler side, the user-space half of `bpf/include/offcpu.bpf.h`: the thread and block-time
//! filters of the flags, written into a skeleton before load, and the `sched_switch` and wakeup tracepoints it
//! attaches to. [`report`] is the run and the report: BCC's header, tracing until Ctrl-C or the duration while
//! remembering the processes seen, then naming the stacks (over [`crate::stacks`]) and writing them in the form
//! the flags chose, with the flame graph, and what the BPF side lost. profile and stackcount share the stacks, not
//! this family: they sample or count, they do not time blocks.

pub mod report;
pub mod sched;

pub use report::{
    collect, deadline, flamegraph_file, header, read_totals, run, serve, start, warn_lost, write_flamegraph, Form,
    Report, ReportArgs, StackSkel, StackToolArgs,
};
