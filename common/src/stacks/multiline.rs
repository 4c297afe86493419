// SPDX-License-Identifier: Apache-2.0 OR MIT
//! BCC's default output: one block of frames per unique stack, the command and the value below
//! ([`write_multiline`]), each frame as the tool's BCC original writes it ([`FrameFormat`]).

use std::io::Write;

use anyhow::Result;

use super::{Frame, Sample, Stack, Style, Task};
use crate::output::stdout::Output;

/// How each frame of a multi-line stack is written: BCC's tools differ.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameFormat {
    /// BCC's profile (`b.ksym(addr, show_module=True, show_offset=True)`, and `b.sym` likewise): `name+0x1f
    /// [module]`, the module `kernel` (or the kernel module's name) for kernel frames and the file's base name for
    /// user frames; an unnamed frame is `[unknown]`. Otherwise the name, `+0x1f` under [`Style::offsets`]
    /// (offcputime, offwaketime, stackcount).
    pub module_and_offset: bool,
    /// profile `-A`: the address first, as BCC prints it (`0x%-16x` kernel, `0x%016x` user).
    pub addresses: bool,
}

impl FrameFormat {
    /// One kernel frame as this format writes it.
    pub fn kernel(&self, frame: &Frame, style: Style) -> String {
        let text = if self.module_and_offset {
            let module = frame.module.as_deref().map(kernel_module_name).unwrap_or("kernel");
            with_module(frame, module)
        } else {
            style.kernel_name(frame)
        };
        if self.addresses {
            format!("0x{:<16x} {text}", frame.addr)
        } else {
            text
        }
    }

    /// One user frame as this format writes it.
    pub fn user(&self, frame: &Frame, style: Style) -> String {
        let text = match frame.module.as_deref() {
            Some(module) if self.module_and_offset => with_module(frame, base_name(module)),
            _ if self.module_and_offset => symbol_offset(frame),
            _ => style.user_name(frame),
        };
        if self.addresses {
            format!("0x{:016x} {text}", frame.addr)
        } else {
            text
        }
    }
}

/// `name+0x1f`, or `[unknown]`.
fn symbol_offset(frame: &Frame) -> String {
    if frame.name == crate::process::symbols::UNKNOWN {
        frame.name.clone()
    } else {
        format!("{}+{:#x}", frame.name, frame.offset)
    }
}

/// `name+0x1f [module]`; an unnamed kernel frame is `[unknown]` alone, as BCC's kallsyms lookup has no module
/// for it either.
fn with_module(frame: &Frame, module: &str) -> String {
    if frame.name == crate::process::symbols::UNKNOWN && frame.module.is_none() {
        return frame.name.clone();
    }
    format!("{} [{module}]", symbol_offset(frame))
}

/// The file name of a module path (`/usr/lib/x86_64-linux-gnu/libc.so.6` → `libc.so.6`), as BCC prints it.
fn base_name(module: &str) -> &str {
    module.rsplit('/').next().unwrap_or(module)
}

/// A kernel module as BCC names it: kallsyms' `[nf_tables]` → `nf_tables`.
fn kernel_module_name(module: &str) -> &str {
    let module = module.trim_start_matches('[').trim_end_matches(']');
    if module.is_empty() || module.contains('/') || module == "kallsyms" {
        "kernel"
    } else {
        module
    }
}

fn write_task_frames(
    out: &mut Output,
    task: &Task<Frame>,
    style: Style,
    format: FrameFormat,
    reversed: bool,
) -> Result<()> {
    let mut lines = Vec::new();
    match &task.kernel {
        Stack::Lost(_) => lines.push("[Missed Kernel Stack]".to_string()),
        Stack::Frames(frames) => lines.extend(frames.iter().map(|f| format.kernel(f, style))),
        Stack::Skipped | Stack::Absent => {}
    }
    if style.delimited && task.user.has_frames() && task.kernel.has_frames() {
        lines.push("--".into());
    }
    match &task.user {
        Stack::Lost(_) => lines.push("[Missed User Stack]".into()),
        Stack::Frames(frames) => lines.extend(frames.iter().map(|f| format.user(f, style))),
        Stack::Skipped | Stack::Absent => {}
    }
    if reversed {
        lines.reverse();
    }
    for line in lines {
        writeln!(out, "    {line}")?;
    }
    Ok(())
}

/// BCC's default output: one block per unique stack. A waker's stack (offwaketime) follows its name, innermost
/// frame last, below BCC's `--` separator, as BCC prints it.
pub fn write_multiline(out: &mut Output, samples: &[Sample<Frame>], style: Style) -> Result<()> {
    write_multiline_as(out, samples, style, FrameFormat::default())
}

/// [`write_multiline`] with each frame written as `format` says (profile's `name+0x1f [module]`, `-A`).
pub fn write_multiline_as(
    out: &mut Output,
    samples: &[Sample<Frame>],
    style: Style,
    format: FrameFormat,
) -> Result<()> {
    for s in samples {
        if let Some(waker) = &s.waker {
            writeln!(out, "    {:<16} {} {}", "waker:", waker.comm, waker.shown_id)?;
            write_task_frames(out, waker, style, format, true)?;
            writeln!(out, "    {:<16} --", "--")?;
        }
        write_task_frames(out, &s.task, style, format, false)?;
        if s.waker.is_some() {
            writeln!(out, "    {:<16} {} {}", "target:", s.task.comm, s.task.shown_id)?;
        } else {
            writeln!(out, "    {:<16} {} ({})", "-", s.task.comm, s.task.shown_id)?;
        }
        writeln!(out, "        {}\n", s.value)?;
        out.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_frames_are_symbol_offset_module() {
        let f = |name: &str, offset, module: Option<&str>| Frame {
            addr: 0xffff_ffff_8100_0010,
            name: name.into(),
            offset,
            module: module.map(str::to_string),
        };
        let bcc = FrameFormat { module_and_offset: true, addresses: false };
        let style = Style { annotate_kernel: true, ..Style::default() };
        assert_eq!(bcc.kernel(&f("vfs_read", 0xbb, None), style), "vfs_read+0xbb [kernel]");
        assert_eq!(bcc.kernel(&f("nft_do_chain", 0x1f, Some("nf_tables")), style), "nft_do_chain+0x1f [nf_tables]");
        assert_eq!(bcc.kernel(&f("[unknown]", 0, None), style), "[unknown]");
        assert_eq!(bcc.user(&f("read", 0xd, Some("/usr/lib/libc.so.6")), style), "read+0xd [libc.so.6]");
        assert_eq!(bcc.user(&f("[unknown]", 0, Some("/usr/bin/stripped")), style), "[unknown] [stripped]");
        assert_eq!(bcc.user(&f("[unknown]", 0, None), style), "[unknown]");
        let addresses = FrameFormat { addresses: true, ..bcc };
        assert_eq!(addresses.kernel(&f("vfs_read", 0xbb, None), style), "0xffffffff81000010 vfs_read+0xbb [kernel]");
        let user = Frame { addr: 0x5555_1234, ..f("main", 4, Some("/bin/x")) };
        assert_eq!(addresses.user(&user, style), "0x0000000055551234 main+0x4 [x]");
        // The other tools' frames are unchanged: names, `+0x..` only under -s, `_[k]` under -a.
        let plain = FrameFormat::default();
        assert_eq!(plain.kernel(&f("vfs_read", 0xbb, None), style), "vfs_read_[k]");
        assert_eq!(plain.user(&f("read", 0xd, Some("/lib/libc.so.6")), Style { offsets: true, ..style }), "read+0xd");
    }
}
