//! profile's output: BCC's multi-line stacks, folded stacks for flame-graph tools (`-f`), JSON lines (`--json`)
//! and an SVG flame graph drawn with inferno (`--flamegraph FILE`).
//!
//! Multi-line stacks are printed kernel frames first (innermost first), then user frames, then `-    comm (pid)`
//! and the count, least frequent first so the hottest stack ends up next to the prompt, as BCC does. Folded lines
//! go from the outermost user frame to the innermost kernel frame: `comm;main;outer_fn;hot_fn 42`.

use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::Result;
use common::output::stdout::Output;
use serde::Serialize;

use crate::stacks::{Frame, Sample, Stack};

/// How stacks are written.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// `-d`: a `--` (multi-line) or `-` (folded) between the kernel and user stacks.
    pub delimited: bool,
    /// `-a`: `_[k]` after kernel function names.
    pub annotate_kernel: bool,
}

impl Style {
    fn kernel_name(&self, frame: &Frame) -> String {
        if self.annotate_kernel {
            format!("{}_[k]", frame.name)
        } else {
            frame.name.clone()
        }
    }
}

/// BCC's default output: one block per unique stack.
pub fn write_multiline(out: &mut Output, samples: &[Sample<Frame>], style: Style) -> Result<()> {
    for s in samples {
        match &s.kernel {
            Stack::Lost(_) => writeln!(out, "    [Missed Kernel Stack]")?,
            Stack::Frames(frames) => {
                for f in frames {
                    writeln!(out, "    {}", style.kernel_name(f))?;
                }
            }
            Stack::Skipped | Stack::Absent => {}
        }
        if style.delimited && has_frames(&s.user) && has_frames(&s.kernel) {
            writeln!(out, "    --")?;
        }
        match &s.user {
            Stack::Lost(_) => writeln!(out, "    [Missed User Stack]")?,
            Stack::Frames(frames) => {
                for f in frames {
                    writeln!(out, "    {}", f.name)?;
                }
            }
            Stack::Skipped | Stack::Absent => {}
        }
        writeln!(out, "    {:<16} {} ({})", "-", s.comm, s.pid)?;
        writeln!(out, "        {}\n", s.count)?;
        out.flush()?;
    }
    Ok(())
}

fn has_frames(stack: &Stack<Frame>) -> bool {
    matches!(stack, Stack::Frames(_))
}

/// The folded line of a sample, without its count: `comm;outer;...;leaf`.
pub fn folded_stack(s: &Sample<Frame>, style: Style) -> String {
    let mut line = vec![s.comm.clone()];
    match &s.user {
        Stack::Lost(_) => line.push("[Missed User Stack]".into()),
        Stack::Frames(frames) => line.extend(frames.iter().rev().map(|f| f.name.clone())),
        Stack::Skipped | Stack::Absent => {}
    }
    if style.delimited && has_frames(&s.user) && has_frames(&s.kernel) {
        line.push("-".into());
    }
    match &s.kernel {
        Stack::Lost(_) => line.push("[Missed Kernel Stack]".into()),
        Stack::Frames(frames) => line.extend(frames.iter().rev().map(|f| style.kernel_name(f))),
        Stack::Skipped | Stack::Absent => {}
    }
    line.join(";")
}

/// `-f`: one folded line per unique stack.
pub fn write_folded(out: &mut Output, samples: &[Sample<Frame>], style: Style) -> Result<()> {
    for s in samples {
        writeln!(out, "{} {}", folded_stack(s, style), s.count)?;
    }
    out.flush()?;
    Ok(())
}

#[derive(Serialize)]
struct JsonFrame<'a> {
    /// Hexadecimal (`0xffffffff81a2b3c4`): kernel addresses do not fit a JSON number exactly in most parsers.
    addr: String,
    name: &'a str,
}

#[derive(Serialize)]
struct JsonSample<'a> {
    pid: u32,
    comm: &'a str,
    count: u64,
    /// Innermost first; absent when not collected or when the sample had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    user_stack: Option<Vec<JsonFrame<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_stack: Option<Vec<JsonFrame<'a>>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    user_stack_lost: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    kernel_stack_lost: bool,
}

fn json_frames(stack: &Stack<Frame>) -> Option<Vec<JsonFrame<'_>>> {
    match stack {
        Stack::Frames(frames) => {
            Some(frames.iter().map(|f| JsonFrame { addr: format!("{:#x}", f.addr), name: &f.name }).collect())
        }
        _ => None,
    }
}

/// `--json`: one object per unique stack.
pub fn write_json(out: &mut Output, samples: &[Sample<Frame>]) -> Result<()> {
    for s in samples {
        out.json_line(&JsonSample {
            pid: s.pid,
            comm: &s.comm,
            count: s.count,
            user_stack: json_frames(&s.user),
            kernel_stack: json_frames(&s.kernel),
            user_stack_lost: matches!(s.user, Stack::Lost(_)),
            kernel_stack_lost: matches!(s.kernel, Stack::Lost(_)),
        })?;
    }
    Ok(())
}

/// `--flamegraph FILE`: an SVG flame graph of the folded stacks, written to `file`.
pub fn write_flamegraph(file: File, samples: &[Sample<Frame>], style: Style, title: &str) -> Result<()> {
    let lines: Vec<String> = samples.iter().map(|s| format!("{} {}", folded_stack(s, style), s.count)).collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = "samples".to_string();
    let mut writer = BufWriter::new(file);
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut writer)?;
    writer.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(names: &[&str]) -> Stack<Frame> {
        Stack::Frames(names.iter().enumerate().map(|(i, n)| Frame { addr: i as u64, name: n.to_string() }).collect())
    }

    fn sample() -> Sample<Frame> {
        Sample {
            pid: 7,
            comm: "spin".into(),
            user: frames(&["hot_fn", "outer_fn", "main"]),
            kernel: frames(&["irqentry_exit", "asm_sysvec"]),
            count: 5,
        }
    }

    #[test]
    fn folded_goes_from_outermost_user_to_innermost_kernel() {
        let plain = Style { delimited: false, annotate_kernel: false };
        assert_eq!(folded_stack(&sample(), plain), "spin;main;outer_fn;hot_fn;asm_sysvec;irqentry_exit");
        let both = Style { delimited: true, annotate_kernel: true };
        assert_eq!(folded_stack(&sample(), both), "spin;main;outer_fn;hot_fn;-;asm_sysvec_[k];irqentry_exit_[k]");
        let mut lost = sample();
        lost.kernel = Stack::Absent;
        lost.user = Stack::Lost(-17);
        assert_eq!(folded_stack(&lost, both), "spin;[Missed User Stack]");
    }
}
