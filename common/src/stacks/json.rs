// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--json` for stacks: one object per unique stack with its frames (address, name, offset, module), innermost
//! first, and its value under the tool's name for it ([`write_json`]); [`JsonStacks`], the same fields for the
//! event tools that show an event's stacks (capable, funcslower). The fields are the shared `user_stack`,
//! `kernel_stack` and their `_lost` flags of docs/json.md.

use anyhow::Result;
use serde::Serialize;

use super::{Frame, Sample, Stack, Task};
use crate::output::stdout::Output;

/// One frame in the tools' JSON: address, name, offset and (where known) module.
#[derive(Serialize)]
pub struct JsonFrame<'a> {
    /// Hexadecimal (`0xffffffff81a2b3c4`): kernel addresses do not fit a JSON number exactly in most parsers.
    addr: String,
    name: &'a str,
    offset: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<&'a str>,
}

/// A task's two stacks as JSON fields, flattened into a line: the frames innermost first (empty when not collected,
/// absent or lost) and whether each was lost.
#[derive(Serialize)]
pub struct JsonStacks<'a> {
    user_stack: Vec<JsonFrame<'a>>,
    kernel_stack: Vec<JsonFrame<'a>>,
    user_stack_lost: bool,
    kernel_stack_lost: bool,
}

impl<'a> JsonStacks<'a> {
    pub fn of(user: &'a Stack<Frame>, kernel: &'a Stack<Frame>) -> Self {
        JsonStacks {
            user_stack: json_frames(user),
            kernel_stack: json_frames(kernel),
            user_stack_lost: matches!(user, Stack::Lost(_)),
            kernel_stack_lost: matches!(kernel, Stack::Lost(_)),
        }
    }
}

#[derive(Serialize)]
struct JsonTask<'a> {
    pid: u32,
    /// The thread, for tools that count per thread (offcputime).
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    comm: &'a crate::output::name::Name,
    #[serde(flatten)]
    stacks: JsonStacks<'a>,
}

#[derive(Serialize)]
struct JsonSample<'a> {
    #[serde(flatten)]
    task: JsonTask<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    waker: Option<JsonTask<'a>>,
}

fn json_frames(stack: &Stack<Frame>) -> Vec<JsonFrame<'_>> {
    match stack {
        Stack::Frames(frames) => json_frame_list(frames),
        _ => Vec::new(),
    }
}

/// Symbolized frames as JSON frames, innermost first.
pub fn json_frame_list(frames: &[Frame]) -> Vec<JsonFrame<'_>> {
    frames
        .iter()
        .map(|f| JsonFrame {
            addr: format!("{:#x}", f.addr),
            name: &f.name,
            offset: f.offset,
            module: f.module.as_deref(),
        })
        .collect()
}

fn json_task(task: &Task<Frame>, per_thread: bool) -> JsonTask<'_> {
    JsonTask {
        pid: task.pid,
        tid: per_thread.then_some(task.shown_id),
        comm: &task.comm,
        stacks: JsonStacks::of(&task.user, &task.kernel),
    }
}

/// `--json`: one object per unique stack, its value under `value_name` (`count`, `total_us`); `per_thread` adds
/// each task's `tid`.
pub fn write_json(out: &mut Output, samples: &[Sample<Frame>], value_name: &str, per_thread: bool) -> Result<()> {
    for s in samples {
        let sample = JsonSample {
            task: json_task(&s.task, per_thread),
            waker: s.waker.as_ref().map(|w| json_task(w, per_thread)),
        };
        let mut value = serde_json::to_value(sample)?;
        if let Some(object) = value.as_object_mut() {
            object.insert(value_name.to_string(), s.value.into());
        }
        out.json_line(&value)?;
    }
    Ok(())
}
