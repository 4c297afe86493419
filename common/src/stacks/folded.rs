// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Folded stacks (`-f`, and the lines a flame graph is drawn from): `comm;outer;...;leaf value`, one line per
//! unique stack, a waker's stack folded on top ([`folded_stack`]).

use std::io::Write;

use anyhow::Result;

use super::{Frame, Sample, Stack, Style, Task};
use crate::output::stdout::Output;

fn folded_frames(task: &Task<Frame>, style: Style, line: &mut Vec<String>) {
    match &task.user {
        Stack::Lost(_) => line.push("[Missed User Stack]".into()),
        Stack::Frames(frames) => line.extend(frames.iter().rev().map(|f| style.user_name(f))),
        Stack::Skipped | Stack::Absent => {}
    }
    if style.delimited && (style.delimit_empty || task.user.has_frames() && task.kernel.has_frames()) {
        line.push("-".into());
    }
    match &task.kernel {
        Stack::Lost(_) => line.push("[Missed Kernel Stack]".into()),
        Stack::Frames(frames) => line.extend(frames.iter().rev().map(|f| style.kernel_name(f))),
        Stack::Skipped | Stack::Absent => {}
    }
}

/// The folded line of a sample, without its value: `comm;outer;...;leaf`, and for a waker (offwaketime, as BCC
/// folds it) `comm;outer;...;leaf;--;waker leaf;...;waker outer;waker comm`.
pub fn folded_stack(s: &Sample<Frame>, style: Style) -> String {
    let mut line = vec![s.task.comm.shown()];
    folded_frames(&s.task, style, &mut line);
    if let Some(waker) = &s.waker {
        line.push("--".into());
        let mut waker_line = vec![waker.comm.shown()];
        folded_frames(waker, style, &mut waker_line);
        line.extend(waker_line.into_iter().rev());
    }
    line.join(";")
}

/// `-f`: one folded line per unique stack.
pub fn write_folded(out: &mut Output, samples: &[Sample<Frame>], style: Style) -> Result<()> {
    for s in samples {
        writeln!(out, "{} {}", folded_stack(s, style), s.value)?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(names: &[&str]) -> Stack<Frame> {
        Stack::Frames(
            names
                .iter()
                .enumerate()
                .map(|(i, n)| Frame { addr: i as u64, name: n.to_string(), offset: 0, module: None })
                .collect(),
        )
    }

    fn task(user: Stack<Frame>, kernel: Stack<Frame>) -> Task<Frame> {
        Task { pid: 7, shown_id: 7, comm: "spin".into(), user, kernel }
    }

    fn sample() -> Sample<Frame> {
        Sample {
            task: task(frames(&["hot_fn", "outer_fn", "main"]), frames(&["irqentry_exit", "asm_sysvec"])),
            waker: None,
            value: 5,
        }
    }

    #[test]
    fn folded_goes_from_outermost_user_to_innermost_kernel() {
        let plain = Style::default();
        assert_eq!(folded_stack(&sample(), plain), "spin;main;outer_fn;hot_fn;asm_sysvec;irqentry_exit");
        let both = Style { delimited: true, annotate_kernel: true, ..Style::default() };
        assert_eq!(folded_stack(&sample(), both), "spin;main;outer_fn;hot_fn;-;asm_sysvec_[k];irqentry_exit_[k]");
        let mut lost = sample();
        lost.task.kernel = Stack::Absent;
        lost.task.user = Stack::Lost(-17);
        assert_eq!(folded_stack(&lost, both), "spin;[Missed User Stack]");
        // BCC's stackcount: the `-` whatever the stacks hold.
        let always = Style { delimit_empty: true, ..both };
        assert_eq!(folded_stack(&lost, always), "spin;[Missed User Stack];-");
        let mut user_only = sample();
        user_only.task.kernel = Stack::Absent;
        assert_eq!(folded_stack(&user_only, always), "spin;main;outer_fn;hot_fn;-");
    }

    #[test]
    fn folded_waker_is_on_top_reversed() {
        let mut s = sample();
        s.task.kernel = Stack::Absent;
        let mut waker = task(frames(&["write", "waker_fn", "main"]), Stack::Absent);
        waker.comm = "w".into();
        s.waker = Some(waker);
        assert_eq!(folded_stack(&s, Style::default()), "spin;main;outer_fn;hot_fn;--;write;waker_fn;main;w");
    }
}
