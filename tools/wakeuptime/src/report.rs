// SPDX-License-Identifier: Apache-2.0 OR MIT
//! wakeuptime's report: the totals read from the BPF maps, named, and written as BCC writes them.
//!
//! A total is kept per (waker kernel stack, waker command, target command). It is read as a stack [`Sample`] whose
//! task is the target (no stacks) and whose waker carries the kernel stack, so that the shared stack module names
//! the frames and adds up stacks that print the same. Multi-line output is BCC's: `target:`, the waker's frames
//! (innermost first, with their addresses), `waker:`, the total; folded lines go `waker;outermost;...;innermost;
//! target total`, the flame graph draws them, and `--json` writes one object per total.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use common::offcpu::{self, Form, Report};
use common::output::name::Name;
use common::output::stdout::Output;
use common::process::symbols::Symbolizer;
use common::stacks::{self, json_frame_list, Collected, FlameGraph, Frame, Palette, Sample, Stack, Style, Task};
use libbpf_rs::MapCore;
use serde::Serialize;

use crate::bpf::types::wake_key;

unsafe impl plain::Plain for wake_key {}

/// The kernel frame the wakeup tracepoint fires in, below the waker's code (BCC's kprobe stacks leave it out).
pub const WAKEUP_FUNCTION: &str = "try_to_wake_up";

/// Every total, with the waker's raw stack addresses.
pub fn read_samples(totals: &impl MapCore, stackmap: &impl MapCore) -> Result<Vec<Sample<u64>>> {
    let collected = Collected { user: false, kernel: true };
    offcpu::read_totals(totals, stackmap, collected, |traces, key: &wake_key| {
        let target =
            Task { pid: 0, shown_id: 0, comm: Name::from_c(&key.target), user: Stack::Skipped, kernel: Stack::Skipped };
        let waker = traces.task(0, 0, Name::from_c(&key.waker), -1, key.w_k_stack_id);
        (target, Some(waker))
    })
}

/// wakeuptime's report: its header, form, flame graph.
pub fn report_of(form: Form, duration: Option<u64>, verbose: bool, flamegraph: Option<(File, PathBuf)>) -> Report {
    Report {
        tool: "wakeuptime",
        header: "Tracing blocked time (us) by kernel stack".into(),
        duration,
        verbose,
        form,
        style: Style::default(),
        graph: FlameGraph {
            title: "Wakeup Time Flame Graph".into(),
            count_name: "us".into(),
            palette: Palette::Wakeup,
        },
        per_thread: false,
        flamegraph,
    }
}

/// Names the stacks and writes them in the report's form, the flame graph too if asked; warns about lost stacks.
pub fn report(out: &mut Output, samples: Vec<Sample<u64>>, report: Report) -> Result<()> {
    let form = report.form;
    if form == Form::Multiline {
        writeln!(out)?;
    }
    let mut symbolizer = Symbolizer::new();
    let mut named = stacks::drop_tracing_frames(stacks::symbolize(samples, &mut symbolizer, report.verbose));
    for sample in &mut named {
        if let Some(Stack::Frames(frames)) = sample.waker.as_mut().map(|w| &mut w.kernel) {
            let n = frames.iter().take_while(|f| f.name == WAKEUP_FUNCTION).count();
            frames.drain(..n);
        }
    }
    let folded: Vec<Sample<Frame>> = named.iter().map(folded_sample).collect();
    // Folded lines are the named samples one for one, a lost waker stack shown as a frame.
    let missing = stacks::missing(&named);
    offcpu::write_flamegraph(&folded, &report)?;
    match form {
        Form::Multiline => {
            write_multiline(out, &named, report.verbose)?;
            writeln!(out, "Detaching...")?;
        }
        Form::Folded => stacks::write_folded(out, &folded, Style::default())?,
        Form::Json => write_json(out, &named)?,
    }
    out.flush()?;
    missing.warn();
    Ok(())
}

/// The waker's kernel stack, or none if it was lost (see [`missed`]).
fn waker_frames(s: &Sample<Frame>) -> (Name, &[Frame], bool) {
    match &s.waker {
        Some(w) => match &w.kernel {
            Stack::Frames(frames) => (w.comm.clone(), frames, false),
            Stack::Lost(_) => (w.comm.clone(), &[], true),
            _ => (w.comm.clone(), &[], false),
        },
        None => (Name::default(), &[], false),
    }
}

const MISSED: &str = "[Missed Kernel Stack]";

/// The sample as a folded stack tool sees it: the waker's command, its frames, then the target's command as the
/// innermost frame (`waker;outer;...;inner;target`).
fn folded_sample(s: &Sample<Frame>) -> Sample<Frame> {
    let (waker, frames, missed) = waker_frames(s);
    let frame = |name: &str| Frame { addr: 0, name: name.into(), offset: 0, module: None };
    let mut kernel = vec![frame(&s.task.comm.shown())];
    if missed {
        kernel.push(frame(MISSED));
    }
    kernel.extend(frames.iter().cloned());
    Sample {
        task: Task { pid: 0, shown_id: 0, comm: waker, user: Stack::Skipped, kernel: Stack::Frames(kernel) },
        waker: None,
        value: s.value,
    }
}

/// BCC's default output; with `-v`, frames as `name+0xoffset`.
fn write_multiline(out: &mut Output, samples: &[Sample<Frame>], offsets: bool) -> Result<()> {
    for s in samples {
        let (waker, frames, missed) = waker_frames(s);
        writeln!(out, "    {:<16} {}", "target:", s.task.comm)?;
        if missed {
            writeln!(out, "    {MISSED}")?;
        }
        for f in frames {
            if offsets && f.name != common::process::symbols::UNKNOWN {
                writeln!(out, "    {:<16x} {}+{:#x}", f.addr, f.name, f.offset)?;
            } else {
                writeln!(out, "    {:<16x} {}", f.addr, f.name)?;
            }
        }
        writeln!(out, "    {:<16} {}", "waker:", waker)?;
        writeln!(out, "        {}\n", s.value)?;
        out.flush()?;
    }
    Ok(())
}

#[derive(Serialize)]
struct JsonTotal<'a> {
    target: &'a Name,
    waker: Name,
    /// The waker's kernel stack, innermost first; empty when lost.
    waker_kernel_stack: Vec<stacks::JsonFrame<'a>>,
    waker_kernel_stack_lost: bool,
    total_us: u64,
}

/// `--json`: one object per total.
fn write_json(out: &mut Output, samples: &[Sample<Frame>]) -> Result<()> {
    for s in samples {
        let (waker, frames, missed) = waker_frames(s);
        out.json_line(&JsonTotal {
            target: &s.task.comm,
            waker,
            waker_kernel_stack: json_frame_list(frames),
            waker_kernel_stack_lost: missed,
            total_us: s.value,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str) -> Frame {
        Frame { addr: 0xffff_0000, name: name.into(), offset: 4, module: None }
    }

    fn sample(waker_kernel: Stack<Frame>) -> Sample<Frame> {
        let task = |comm: &str, kernel| Task { pid: 0, shown_id: 0, comm: comm.into(), user: Stack::Skipped, kernel };
        Sample { task: task("reader", Stack::Skipped), waker: Some(task("writer", waker_kernel)), value: 42 }
    }

    #[test]
    fn folded_goes_from_the_waker_to_the_target() {
        let s = folded_sample(&sample(Stack::Frames(vec![frame("pipe_write"), frame("vfs_write")])));
        assert_eq!(stacks::folded_stack(&s, Style::default()), "writer;vfs_write;pipe_write;reader");
        let lost = folded_sample(&sample(Stack::Lost(-12)));
        assert_eq!(stacks::folded_stack(&lost, Style::default()), "writer;[Missed Kernel Stack];reader");
    }
}
