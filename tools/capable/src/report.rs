// SPDX-License-Identifier: Apache-2.0 OR MIT
//! capable's output: BCC's line per check (`TIME UID PID COMM CAP NAME AUDIT`, with `-x` the TID and INSETID
//! columns) followed by libbpf-tools' VERDICT, then the kernel and user stacks asked for, one frame a line as
//! BCC writes them (`name+0x1f [module]`); or one JSON object per check.

use std::io::{self, Write};

use libbpf_rs::MapCore;
use serde::Serialize;

use common::domain::capabilities;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use common::process::symbols::Symbolizer;
use common::stacks::json::JsonStacks;
use common::stacks::{self, Collected, Frame, FrameFormat, Sample, Stack, StackTraces, Task};

use crate::bpf::types::event;

/// What the flags ask for.
pub struct Style {
    pub extra: bool,
    pub json: bool,
    pub kernel_stack: bool,
    pub user_stack: bool,
}

/// Prints checks as they come.
pub struct Printer {
    style: Style,
    symbolizer: Symbolizer,
}

#[derive(Serialize)]
struct JsonCheck<'a> {
    time: String,
    uid: u32,
    pid: u32,
    tid: u32,
    comm: &'a Name,
    cap: i32,
    name: &'static str,
    audit: u8,
    verdict: &'static str,
    /// 1 if the check came from a set*id() call; absent where the kernel does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    insetid: Option<u8>,
    /// With -K or -U.
    #[serde(flatten)]
    stacks: Option<JsonStacks<'a>>,
}

/// libbpf-tools' verdict: cap_capable() returned 0 (granted) or an error.
fn verdict(ret: i32) -> &'static str {
    if ret == 0 {
        "allow"
    } else {
        "deny"
    }
}

impl Printer {
    /// Prints with `style`, naming frames with `symbolizer`. Create it after the tool's programs are loaded: the
    /// kernel's symbols are read here, once, and must hold those programs for their frames to be known (and left
    /// out).
    pub fn new(style: Style, symbolizer: Symbolizer) -> Self {
        if style.kernel_stack {
            symbolizer.preload_kernel();
        }
        Printer { style, symbolizer }
    }

    pub fn write_header(&self, out: &mut Output) -> io::Result<()> {
        if self.style.json {
            return Ok(());
        }
        if self.style.extra {
            writeln!(
                out,
                "{:<9} {:<6} {:<6} {:<6} {:<16} {:<4} {:<20} {:<6} {:<7} INSETID",
                "TIME", "UID", "PID", "TID", "COMM", "CAP", "NAME", "AUDIT", "VERDICT"
            )?;
        } else {
            writeln!(
                out,
                "{:<9} {:<6} {:<6} {:<16} {:<4} {:<20} {:<6} VERDICT",
                "TIME", "UID", "PID", "COMM", "CAP", "NAME", "AUDIT"
            )?;
        }
        out.flush()
    }

    /// One check: its line and the stacks asked for, or its JSON object.
    pub fn write(&mut self, out: &mut Output, e: &event, stack_map: &impl MapCore) -> io::Result<()> {
        let comm = Name::from_c(&e.comm);
        let name = capabilities::name(e.cap);
        let insetid = u8::try_from(e.insetid).ok();
        let task = self.stacks(e, stack_map);
        if self.style.json {
            return out.json_line(&JsonCheck {
                time: clock_rfc3339(),
                uid: e.uid,
                pid: e.pid,
                tid: e.tid,
                comm: &comm,
                cap: e.cap,
                name,
                audit: e.audit,
                verdict: verdict(e.ret),
                insetid,
                stacks: task.as_ref().map(|t| JsonStacks::of(&t.user, &t.kernel)),
            });
        }
        let time = clock_hms();
        if self.style.extra {
            let insetid = insetid.map_or("N/A".to_string(), |i| i.to_string());
            writeln!(
                out,
                "{time:<9} {:<6} {:<6} {:<6} {comm:<16} {:<4} {name:<20} {:<6} {:<7} {insetid}",
                e.uid,
                e.pid,
                e.tid,
                e.cap,
                e.audit,
                verdict(e.ret)
            )?;
        } else {
            writeln!(
                out,
                "{time:<9} {:<6} {:<6} {comm:<16} {:<4} {name:<20} {:<6} {}",
                e.uid,
                e.pid,
                e.cap,
                e.audit,
                verdict(e.ret)
            )?;
        }
        let (kernel, user) = task.as_ref().map(stack_lines).unwrap_or_default();
        for line in kernel.iter().chain(&user) {
            // BCC indents a missed stack's note by four spaces and frames by eight.
            let indent = if line.starts_with("[Missed") { "    " } else { "        " };
            writeln!(out, "{indent}{line}")?;
        }
        out.flush()
    }

    /// The kernel and user stacks of the check asked for, named; None without -K and -U.
    fn stacks(&mut self, e: &event, stack_map: &impl MapCore) -> Option<Task<Frame>> {
        if !self.style.kernel_stack && !self.style.user_stack {
            return None;
        }
        let collected = Collected { user: self.style.user_stack, kernel: self.style.kernel_stack };
        let task = StackTraces::new(stack_map, collected).task(
            e.pid,
            e.pid,
            Name::default(),
            e.user_stack_id,
            e.kern_stack_id,
        );
        if self.style.user_stack {
            self.symbolizer.remember_process(e.pid);
        }
        let sample = Sample { task, waker: None, value: 1 };
        let mut named = stacks::drop_tracing_frames(stacks::symbolize(vec![sample], &mut self.symbolizer, false));
        stacks::add_modules(&mut named);
        named.pop().map(|named| named.task)
    }
}

/// A check's kernel and user stacks as the text's lines (a lost one as BCC's `[Missed ... Stack]`).
fn stack_lines(task: &Task<Frame>) -> (Vec<String>, Vec<String>) {
    let format = FrameFormat { module_and_offset: true, addresses: false };
    let style = stacks::Style::default();
    let lines = |stack: &Stack<Frame>, kind: &str, each: &dyn Fn(&Frame) -> String| match stack {
        Stack::Frames(frames) => frames.iter().map(each).collect(),
        Stack::Lost(_) => vec![format!("[Missed {kind} Stack]")],
        Stack::Skipped | Stack::Absent => Vec::new(),
    };
    (lines(&task.kernel, "Kernel", &|f| format.kernel(f, style)), lines(&task.user, "User", &|f| format.user(f, style)))
}
