// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Stack traces, the family of the stack tools (profile, stackcount, offcputime, offwaketime, wakeuptime,
//! tcpdrop's kernel stacks): from the kernel's stack-trace map to named frames, and out in BCC's forms.
//!
//! A tool counts (process, stacks) → value in BPF with stack ids from `bpf_get_stackid` (see
//! `bpf/include/stacks.bpf.h`). At the end it reads them with [`StackTraces`] ([`maps`]) into [`Sample`]s of raw
//! addresses, names every frame with [`symbolize`] ([`symbolize`](mod@symbolize): one batch through the run's one
//! [`Symbolizer`](crate::process::symbols::Symbolizer), which saved the maps of processes as they were first seen
//! so that exited ones are still named), adds up the samples that print the same ([`merge`]), drops the tracing
//! machinery's own frames ([`tracing_frames`]), names kernel modules from /proc/kallsyms ([`kallsyms`]) and writes
//! them with a [`Style`]: BCC's multi-line stacks ([`multiline`]), folded lines (`-f`, [`folded`]), JSON lines
//! (`--json`, [`json`]) or an SVG flame graph (`--flamegraph FILE`, [`flamegraph`]). A sample may
//! carry a second, "waker" side (offwaketime), printed after BCC's `--` separator and folded on top of the blocked
//! stack.
//!
//! Multi-line stacks are printed kernel frames first (innermost first), then user frames, then `-    comm (pid)`
//! and the value, least first so the largest ends next to the prompt, as BCC does. Folded lines go from the
//! outermost user frame to the innermost kernel frame: `comm;main;outer_fn;hot_fn 42`.

pub mod flamegraph;
pub mod folded;
pub mod json;
pub mod kallsyms;
pub mod maps;
pub mod merge;
pub mod multiline;
pub mod symbolize;
pub mod tracing_frames;

pub use flamegraph::{create_flamegraph_file, write_flamegraph, FlameGraph, Palette};
pub use folded::{folded_stack, write_folded};
pub use json::{json_frame_list, write_json, JsonFrame};
pub use kallsyms::add_modules;
pub use maps::{missing, Missing, StackTraces};
pub use merge::{merge_same, merge_same_names, MergeBy};
pub use multiline::{write_multiline, write_multiline_as, FrameFormat};
pub use symbolize::{symbolize, symbolize_by};
pub use tracing_frames::{drop_tracing_frames, drop_tracing_frames_by};

pub const EFAULT: i32 = 14;
pub const EEXIST: i32 = 17;
pub const ENOMEM: i32 = 12;

/// One side (user or kernel) of a stack, before or after naming.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stack<T> {
    /// Not collected (`-U` drops kernel stacks, `-K` user stacks).
    Skipped,
    /// There was no stack of this kind (user mode has no kernel stack; kernel threads no user stack).
    Absent,
    /// The stack was lost: stack map full or a hash collision (the stack id's error code).
    Lost(i32),
    /// Frames, innermost (leaf) first.
    Frames(Vec<T>),
}

impl<T> Stack<T> {
    pub fn has_frames(&self) -> bool {
        matches!(self, Stack::Frames(_))
    }
}

/// Puts `caller` after a user stack's first frame where the kernel's frame-pointer walk missed it: at a uprobe on
/// a function's first instruction the function has no frame record yet, so the walk goes from it to its caller's
/// caller. `caller` is what the BPF side read at that uprobe (`entry_caller()`, bpf/include/arch.bpf.h: arm64's
/// link register, x86's top of the stack); 0 is none. Kernels that add the caller themselves (x86 from 6.11) have
/// it second already, and then nothing changes.
pub fn with_entry_caller(frames: &mut Vec<u64>, caller: u64) {
    if caller != 0 && !frames.is_empty() && frames.get(1) != Some(&caller) {
        frames.insert(1, caller);
    }
}

/// A frame after naming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub addr: u64,
    /// The function's name, or `[unknown]`.
    pub name: String,
    /// The address's offset into the function (0 when unknown).
    pub offset: u64,
    /// The file the function is in (user frames), when known.
    pub module: Option<String>,
}

/// The stacks of one task: its process, command, user and kernel stacks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Task<T> {
    /// The process, whose memory maps name the user frames.
    pub pid: u32,
    /// The id printed after the command: the process (profile) or the thread (offcputime), as in BCC.
    pub shown_id: u32,
    /// Escaped in text, plain in JSON.
    pub comm: crate::output::name::Name,
    pub user: Stack<T>,
    pub kernel: Stack<T>,
}

/// A unique stack (and, for offwaketime, its waker's) with its value (samples, microseconds).
#[derive(Debug, Clone)]
pub struct Sample<T> {
    pub task: Task<T>,
    pub waker: Option<Task<T>>,
    pub value: u64,
}

/// Which stacks were collected.
#[derive(Debug, Clone, Copy)]
pub struct Collected {
    pub user: bool,
    pub kernel: bool,
}

/// How stacks are written.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// `-d`: a `--` (multi-line) or `-` (folded) between the kernel and user stacks.
    pub delimited: bool,
    /// With `delimited`, the folded `-` even where one of the two stacks is empty, as BCC's stackcount prints it
    /// (BCC's profile prints it only between two stacks).
    pub delimit_empty: bool,
    /// `-a`: `_[k]` after kernel function names.
    pub annotate_kernel: bool,
    /// `-s`: `name+0x1f` (BCC's show_offset) in multi-line output.
    pub offsets: bool,
}

impl Style {
    fn kernel_name(&self, frame: &Frame) -> String {
        if self.annotate_kernel {
            format!("{}_[k]", self.user_name(frame))
        } else {
            self.user_name(frame)
        }
    }

    fn user_name(&self, frame: &Frame) -> String {
        if self.offsets && frame.name != crate::process::symbols::UNKNOWN {
            format!("{}+{:#x}", frame.name, frame.offset)
        } else {
            frame.name.clone()
        }
    }
}
