//! Stack traces, shared by the stack tools (profile, offcputime, offwaketime, wakeuptime, stackcount): from the
//! kernel's stack-trace map to named frames, and out as BCC's multi-line stacks, folded lines (`-f`), JSON lines
//! (`--json`) and SVG flame graphs drawn by inferno (`--flamegraph FILE`).
//!
//! A tool counts (process, stacks) → value in BPF with stack ids from `bpf_get_stackid` (see
//! `bpf/include/stacks.bpf.h`). At the end it reads them with [`StackTraces`] into [`Sample`]s of raw addresses,
//! names every frame with [`symbolize`] (one batch through the run's one
//! [`Symbolizer`](crate::process::symbols::Symbolizer), which saved the maps of processes as they were first seen so
//! that exited ones are still named) and prints them with a [`Style`]. A sample may carry a second, "waker" side
//! (offwaketime), printed after BCC's `--` separator and folded on top of the blocked stack.
//!
//! Multi-line stacks are printed kernel frames first (innermost first), then user frames, then `-    comm (pid)`
//! and the value, least first so the largest ends next to the prompt, as BCC does. Folded lines go from the
//! outermost user frame to the innermost kernel frame: `comm;main;outer_fn;hot_fn 42`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::Result;
use libbpf_rs::{MapCore, MapFlags};
use serde::Serialize;

use crate::output::stdout::Output;
use crate::process::symbols::{Batch, Symbolizer};

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
    pub comm: String,
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

/// Stacks that could not be shown, as BCC counts them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Missing {
    pub stacks: u64,
    /// Some were lost to a full or colliding stack map: a bigger --stack-storage-size helps.
    pub map_too_small: bool,
}

impl Missing {
    /// BCC's warning, on stderr, if any stack could not be shown.
    pub fn warn(&self) {
        if self.stacks > 0 {
            let hint = if self.map_too_small { " Consider increasing --stack-storage-size." } else { "" };
            eprintln!("WARNING: {} stack traces could not be displayed.{hint}", self.stacks);
        }
    }
}

/// Reads stack traces from a BPF stack-trace map, each id once.
pub struct StackTraces<'a, M: MapCore> {
    map: &'a M,
    collected: Collected,
    cache: HashMap<i32, Option<Vec<u64>>>,
}

impl<'a, M: MapCore> StackTraces<'a, M> {
    pub fn new(map: &'a M, collected: Collected) -> Self {
        StackTraces { map, collected, cache: HashMap::new() }
    }

    fn trace(&mut self, id: i32) -> Option<Vec<u64>> {
        let map = self.map;
        self.cache
            .entry(id)
            .or_insert_with(|| {
                let bytes = map.lookup(&(id as u32).to_ne_bytes(), MapFlags::ANY).ok().flatten()?;
                Some(
                    bytes
                        .chunks_exact(8)
                        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
                        .take_while(|&a| a != 0)
                        .collect(),
                )
            })
            .clone()
    }

    fn stack(&mut self, wanted: bool, id: i32) -> Stack<u64> {
        match id {
            _ if !wanted => Stack::Skipped,
            id if id == -EFAULT => Stack::Absent,
            id if id < 0 => Stack::Lost(id),
            id => self.trace(id).map_or(Stack::Lost(-ENOMEM), Stack::Frames),
        }
    }

    /// The task with the stacks of these ids (a negative id: none, lost, or not collected).
    pub fn task(&mut self, pid: u32, shown_id: u32, comm: String, user_stack_id: i32, kern_stack_id: i32) -> Task<u64> {
        let user = self.stack(self.collected.user, user_stack_id);
        let kernel = self.stack(self.collected.kernel, kern_stack_id);
        Task { pid, shown_id, comm, user, kernel }
    }
}

/// Counts the stacks that cannot be shown, as BCC does (one per lost side of each unique sample).
pub fn missing(samples: &[Sample<u64>]) -> Missing {
    let mut missing = Missing::default();
    for sample in samples {
        for task in std::iter::once(&sample.task).chain(&sample.waker) {
            for stack in [&task.user, &task.kernel] {
                if let Stack::Lost(err) = stack {
                    missing.stacks += 1;
                    missing.map_too_small |= *err == -EEXIST || *err == -ENOMEM;
                }
            }
        }
    }
    missing
}

/// The address to look up for frame `i`: every frame but the innermost is a return address, which may already
/// belong to the next function when the call was the caller's last instruction, so its call site is looked up.
fn lookup_addr(i: usize, addr: u64) -> u64 {
    if i == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

/// Which samples [`symbolize_by`] adds up: those whose frames have the same names, or only those whose frames are
/// also at the same offsets in the same modules (for output that shows offsets: profile's `name+0x1f [module]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeBy {
    Names,
    Frames,
}

/// Names every frame of every sample, resolving all addresses in one batch, and adds up samples that print the
/// same; sorted by value, least first. With `verbose`, says on stderr which addresses could not be named.
pub fn symbolize(samples: Vec<Sample<u64>>, symbolizer: &mut Symbolizer, verbose: bool) -> Vec<Sample<Frame>> {
    symbolize_by(samples, symbolizer, verbose, MergeBy::Names)
}

/// [`symbolize`], adding up samples as `merge` says.
pub fn symbolize_by(
    samples: Vec<Sample<u64>>,
    symbolizer: &mut Symbolizer,
    verbose: bool,
    merge: MergeBy,
) -> Vec<Sample<Frame>> {
    let mut batch = Batch::new();
    for sample in &samples {
        for task in std::iter::once(&sample.task).chain(&sample.waker) {
            if let Stack::Frames(addrs) = &task.user {
                batch.add_user(task.pid, addrs.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)));
            }
            if let Stack::Frames(addrs) = &task.kernel {
                batch.add_kernel(addrs.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)));
            }
        }
    }
    symbolizer.refresh_live();
    let resolved = batch.resolve(symbolizer);
    if verbose {
        resolved.report_unresolved();
    }
    let name_task = |t: Task<u64>| Task {
        user: name_stack(t.user, |a| resolved.user(t.pid, a)),
        kernel: name_stack(t.kernel, |a| resolved.kernel(a)),
        pid: t.pid,
        shown_id: t.shown_id,
        comm: t.comm,
    };
    let named =
        samples.into_iter().map(|s| Sample { task: name_task(s.task), waker: s.waker.map(name_task), value: s.value });
    merge_same(named, merge)
}

fn name_stack<'r>(
    stack: Stack<u64>,
    symbol: impl Fn(u64) -> Option<&'r crate::process::symbols::Symbol>,
) -> Stack<Frame> {
    match stack {
        Stack::Skipped => Stack::Skipped,
        Stack::Absent => Stack::Absent,
        Stack::Lost(e) => Stack::Lost(e),
        Stack::Frames(addrs) => Stack::Frames(
            addrs
                .into_iter()
                .enumerate()
                .map(|(i, addr)| match symbol(lookup_addr(i, addr)) {
                    Some(sym) => Frame {
                        addr,
                        name: sym.name.clone(),
                        // The offset of the address itself, as BCC prints it, not of the call site looked up.
                        offset: sym.offset + (addr - lookup_addr(i, addr)),
                        module: sym.module.clone(),
                    },
                    None => Frame { addr, name: crate::process::symbols::UNKNOWN.into(), offset: 0, module: None },
                })
                .collect(),
        ),
    }
}

/// Names the module of the frames the symbolizer leaves without one, as BCC's `show_module` does: kernel frames
/// in a kernel module or a BPF program (`[nf_tables]`, `[bpf]`, from /proc/kallsyms: the module of the nearest
/// text symbol at or below the address; core kernel frames keep none and print as `[kernel]`), and unnamed user
/// frames inside an executable file mapping of a process that still runs (`[unknown] [libfoo.so]`).
pub fn add_modules(samples: &mut [Sample<Frame>]) {
    let tasks = || samples.iter().flat_map(|s| std::iter::once(&s.task).chain(&s.waker));
    if tasks().any(|t| t.kernel.has_frames()) {
        set_kernel_modules(samples, &kallsyms_modules());
    }
    let mut maps: HashMap<u32, Vec<(u64, u64, String)>> = HashMap::new();
    for sample in samples.iter_mut() {
        for task in std::iter::once(&mut sample.task).chain(sample.waker.as_mut()) {
            if let Stack::Frames(frames) = &mut task.user {
                let pid = task.pid;
                for frame in frames.iter_mut().filter(|f| f.module.is_none()) {
                    let mappings = maps.entry(pid).or_insert_with(|| executable_mappings(pid));
                    if let Some((_, _, path)) = mappings.iter().find(|(lo, hi, _)| (*lo..*hi).contains(&frame.addr)) {
                        frame.module = Some(path.clone());
                    }
                }
            }
        }
    }
}

/// Sets the module of each kernel frame from `modules` (see [`kallsyms_modules`]).
fn set_kernel_modules(samples: &mut [Sample<Frame>], modules: &[(u64, Option<String>)]) {
    for sample in samples.iter_mut() {
        for task in std::iter::once(&mut sample.task).chain(sample.waker.as_mut()) {
            if let Stack::Frames(frames) = &mut task.kernel {
                for frame in frames.iter_mut().filter(|f| f.module.is_none()) {
                    let at = modules.partition_point(|(addr, _)| *addr <= frame.addr);
                    if let Some((_, Some(module))) = at.checked_sub(1).map(|i| &modules[i]) {
                        frame.module = Some(module.clone());
                    }
                }
            }
        }
    }
}

/// Where the modules are, from the text symbols of /proc/kallsyms: (address, module) at each address where the
/// module of the nearest symbol changes (`None`: the core kernel), sorted by address.
fn kallsyms_modules() -> Vec<(u64, Option<String>)> {
    match File::open("/proc/kallsyms") {
        Ok(file) => parse_kallsyms_modules(std::io::BufReader::with_capacity(1 << 16, file)),
        Err(_) => Vec::new(),
    }
}

fn parse_kallsyms_modules(mut reader: impl std::io::BufRead) -> Vec<(u64, Option<String>)> {
    // Module names are few: symbols carry an index into them (0: the core kernel).
    let mut names: Vec<String> = vec![String::new()];
    let mut symbols: Vec<(u64, u16)> = Vec::new();
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        let mut fields = line.split_whitespace();
        let addr = fields.next().and_then(|a| u64::from_str_radix(a, 16).ok()).unwrap_or(0);
        // Data symbols are not functions (BCC skips them too).
        let text = fields.next().is_some_and(|k| !matches!(k, "b" | "B" | "d" | "D" | "r" | "R"));
        if addr != 0 && text {
            let module = fields.nth(1).map(|m| m.trim_start_matches('[').trim_end_matches(']'));
            let index = match module {
                None => 0,
                Some(m) => names.iter().position(|n| n == m).unwrap_or_else(|| {
                    names.push(m.to_string());
                    names.len() - 1
                }),
            };
            symbols.push((addr, u16::try_from(index).unwrap_or(0)));
        }
        line.clear();
    }
    symbols.sort_unstable_by_key(|&(addr, _)| addr);
    symbols.dedup_by_key(|&mut (_, module)| module);
    symbols.into_iter().map(|(addr, i)| (addr, (i > 0).then(|| names[i as usize].clone()))).collect()
}

/// The executable file mappings of a running process: (start, end, path).
fn executable_mappings(pid: u32) -> Vec<(u64, u64, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (lo, hi) = fields.next()?.split_once('-')?;
            let perms = fields.next()?;
            let path = fields.nth(3)?;
            (perms.contains('x') && path.starts_with('/'))
                .then(|| Some((u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?, path.to_string())))
                .flatten()
        })
        .collect()
}

/// True for the kernel frames of the tracing machinery itself (the BPF program and the tracepoint's calls into it),
/// which a stack taken in a tracepoint program has innermost.
fn is_tracing_frame(name: &str) -> bool {
    name.starts_with("bpf_prog_")
        || name.starts_with("bpf_trace_run")
        || name.starts_with("__bpf_trace_")
        || name.starts_with("__traceiter_")
        || name == "bpf_get_stackid"
        || name.starts_with("bpf_get_stackid_")
}

/// Drops the tracing machinery's innermost kernel frames (see [`is_tracing_frame`]) from every task, so that a
/// stack taken in a tracepoint ends where the traced code was (`__schedule`), as BCC's kprobe stacks do.
pub fn drop_tracing_frames(samples: Vec<Sample<Frame>>) -> Vec<Sample<Frame>> {
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
    merge_same_names(trimmed)
}

/// A frame as it prints: its name, and under [`MergeBy::Frames`] its offset and module.
type FrameKey = (String, u64, Option<String>);
type NameKey = (u32, u32, String, Stack<FrameKey>, Stack<FrameKey>);

fn names_of(task: &Task<Frame>, merge: MergeBy) -> NameKey {
    let key = |f: &Frame| match merge {
        MergeBy::Names => (f.name.clone(), 0, None),
        MergeBy::Frames => (f.name.clone(), f.offset, f.module.clone()),
    };
    let names = |stack: &Stack<Frame>| match stack {
        Stack::Skipped => Stack::Skipped,
        Stack::Absent => Stack::Absent,
        Stack::Lost(e) => Stack::Lost(*e),
        Stack::Frames(frames) => Stack::Frames(frames.iter().map(key).collect()),
    };
    (task.pid, task.shown_id, task.comm.clone(), names(&task.user), names(&task.kernel))
}

/// Adds up samples whose stacks differ only in addresses within the same functions (hot_fn+0x10, hot_fn+0x14),
/// which print identically without offsets; the result is sorted by value, least first.
pub fn merge_same_names(samples: impl IntoIterator<Item = Sample<Frame>>) -> Vec<Sample<Frame>> {
    merge_same(samples, MergeBy::Names)
}

fn merge_same(samples: impl IntoIterator<Item = Sample<Frame>>, merge: MergeBy) -> Vec<Sample<Frame>> {
    let mut index: HashMap<(NameKey, Option<NameKey>), usize> = HashMap::new();
    let mut merged: Vec<Sample<Frame>> = Vec::new();
    for sample in samples {
        let key = (names_of(&sample.task, merge), sample.waker.as_ref().map(|w| names_of(w, merge)));
        match index.get(&key) {
            Some(&i) => merged[i].value += sample.value,
            None => {
                index.insert(key, merged.len());
                merged.push(sample);
            }
        }
    }
    merged.sort_by_key(|s| s.value);
    merged
}

/// How stacks are written.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// `-d`: a `--` (multi-line) or `-` (folded) between the kernel and user stacks.
    pub delimited: bool,
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
    fn kernel(&self, frame: &Frame, style: Style) -> String {
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

    fn user(&self, frame: &Frame, style: Style) -> String {
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

fn folded_frames(task: &Task<Frame>, style: Style, line: &mut Vec<String>) {
    match &task.user {
        Stack::Lost(_) => line.push("[Missed User Stack]".into()),
        Stack::Frames(frames) => line.extend(frames.iter().rev().map(|f| style.user_name(f))),
        Stack::Skipped | Stack::Absent => {}
    }
    if style.delimited && task.user.has_frames() && task.kernel.has_frames() {
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
    let mut line = vec![s.task.comm.clone()];
    folded_frames(&s.task, style, &mut line);
    if let Some(waker) = &s.waker {
        line.push("--".into());
        let mut waker_line = vec![waker.comm.clone()];
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

#[derive(Serialize)]
struct JsonTask<'a> {
    pid: u32,
    /// The thread, for tools that count per thread (offcputime).
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    comm: &'a str,
    /// Innermost first; always present, empty when not collected, absent or lost.
    user_stack: Vec<JsonFrame<'a>>,
    kernel_stack: Vec<JsonFrame<'a>>,
    user_stack_lost: bool,
    kernel_stack_lost: bool,
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
        user_stack: json_frames(&task.user),
        kernel_stack: json_frames(&task.kernel),
        user_stack_lost: matches!(task.user, Stack::Lost(_)),
        kernel_stack_lost: matches!(task.kernel, Stack::Lost(_)),
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

/// The colours of a flame graph.
#[derive(Debug, Clone, Copy)]
pub enum Palette {
    /// On-CPU: the usual warm colours.
    Hot,
    /// Off-CPU: blue, as in the usual off-CPU flame graphs.
    Io,
    /// Wakeups and chains: aqua.
    Wakeup,
}

/// How a flame graph is drawn: its title, the unit of the values, and its colours.
#[derive(Debug, Clone)]
pub struct FlameGraph {
    pub title: String,
    pub count_name: String,
    pub palette: Palette,
}

/// `--flamegraph FILE`: an SVG flame graph of the folded stacks, written to `file`.
pub fn write_flamegraph(file: File, samples: &[Sample<Frame>], style: Style, graph: &FlameGraph) -> Result<()> {
    use inferno::flamegraph::color::{BasicPalette, Palette as InfernoPalette};
    let lines: Vec<String> = samples.iter().map(|s| format!("{} {}", folded_stack(s, style), s.value)).collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = graph.title.clone();
    options.count_name = graph.count_name.clone();
    options.colors = InfernoPalette::Basic(match graph.palette {
        Palette::Hot => BasicPalette::Hot,
        Palette::Io => BasicPalette::Io,
        Palette::Wakeup => BasicPalette::Aqua,
    });
    let mut writer = BufWriter::new(file);
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut writer)?;
    writer.flush()?;
    Ok(())
}

/// Creates the flame graph's file now, so that a bad path fails before tracing, not after.
pub fn create_flamegraph_file(path: Option<&std::path::Path>) -> Result<Option<File>> {
    use anyhow::Context;
    path.map(|path| File::create(path).with_context(|| format!("cannot create {}", path.display()))).transpose()
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
        let plain = Style { delimited: false, annotate_kernel: false, offsets: false };
        assert_eq!(folded_stack(&sample(), plain), "spin;main;outer_fn;hot_fn;asm_sysvec;irqentry_exit");
        let both = Style { delimited: true, annotate_kernel: true, offsets: false };
        assert_eq!(folded_stack(&sample(), both), "spin;main;outer_fn;hot_fn;-;asm_sysvec_[k];irqentry_exit_[k]");
        let mut lost = sample();
        lost.task.kernel = Stack::Absent;
        lost.task.user = Stack::Lost(-17);
        assert_eq!(folded_stack(&lost, both), "spin;[Missed User Stack]");
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

    fn raw(user: Stack<u64>, kernel: Stack<u64>) -> Sample<u64> {
        Sample { task: Task { pid: 1, shown_id: 1, comm: "x".into(), user, kernel }, waker: None, value: 1 }
    }

    #[test]
    fn missing_counts_lost_sides_only() {
        let samples = vec![
            raw(Stack::Frames(vec![1]), Stack::Absent),
            raw(Stack::Lost(-EEXIST), Stack::Frames(vec![2])),
            raw(Stack::Lost(-ENOMEM), Stack::Lost(-ENOMEM)),
            raw(Stack::Skipped, Stack::Frames(vec![3])),
        ];
        assert_eq!(missing(&samples), Missing { stacks: 3, map_too_small: true });
        assert_eq!(missing(&samples[..1]), Missing::default());
    }

    #[test]
    fn stacks_with_the_same_names_are_merged() {
        let frame = |addr, name: &str| Frame { addr, name: name.into(), offset: 0, module: None };
        let s = |user: Vec<Frame>, value| Sample {
            task: Task { pid: 1, shown_id: 1, comm: "x".into(), user: Stack::Frames(user), kernel: Stack::Absent },
            waker: None,
            value,
        };
        let merged = merge_same_names(vec![
            s(vec![frame(0x10, "hot_fn"), frame(0x20, "main")], 5),
            s(vec![frame(0x30, "main")], 2),
            s(vec![frame(0x14, "hot_fn"), frame(0x20, "main")], 3),
        ]);
        assert_eq!(merged.iter().map(|m| m.value).collect::<Vec<_>>(), vec![2, 8]);
    }

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

    #[test]
    fn kernel_frames_take_the_module_of_the_nearest_text_symbol() {
        let kallsyms = "\
ffffffff81000000 T _stext
ffffffff81000100 T vfs_read
ffffffff82000000 D some_data
ffffffffc0001000 t nft_do_chain\t[nf_tables]
ffffffffc0001800 t nft_other\t[nf_tables]
ffffffffc0002000 t bpf_prog_1234_do_perf_event\t[bpf]
ffffffffc0003000 r ro_data\t[nf_tables]
";
        let modules = parse_kallsyms_modules(kallsyms.as_bytes());
        let frame = |addr| Frame { addr, name: "f".into(), offset: 0, module: None };
        let mut samples = vec![Sample {
            task: Task {
                pid: 0,
                shown_id: 0,
                comm: "x".into(),
                user: Stack::Absent,
                kernel: Stack::Frames(vec![
                    frame(0xffff_ffff_8100_0110),
                    frame(0xffff_ffff_c000_1900),
                    frame(0xffff_ffff_c000_2010),
                    frame(0xffff_ffff_c000_3010),
                ]),
            },
            waker: None,
            value: 1,
        }];
        set_kernel_modules(&mut samples, &modules);
        let Stack::Frames(frames) = &samples[0].task.kernel else { panic!() };
        let got: Vec<Option<&str>> = frames.iter().map(|f| f.module.as_deref()).collect();
        assert_eq!(got, vec![None, Some("nf_tables"), Some("bpf"), Some("bpf")]);
    }

    #[test]
    fn return_addresses_are_looked_up_at_the_call() {
        assert_eq!(lookup_addr(0, 0x1000), 0x1000);
        assert_eq!(lookup_addr(1, 0x1000), 0xfff);
    }
}
