// SPDX-License-Identifier: Apache-2.0 OR MIT
//! trace's output, as BCC prints it: a header (`[TIME] [CPU] PID TID COMM FUNC -`), then one line per event
//! with the probe's message formatted from its values (`common::probe::printf`); `-n` and `-f` filter lines,
//! `-M` stops after that many, `-A` counts identical lines and prints them at the end; `--json` one object per
//! event.

use std::collections::HashMap;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use common::output::stdout::{clock_hms, clock_rfc3339, monotonic_ns, printable, Output};
use common::probe::printf::{SymbolKind, Value};
use common::process::symbols::{Symbol, Symbolizer, UNKNOWN};
use common::stacks::{Frame, FrameFormat, Style};
use serde_json::json;

use crate::bpf::consts::{
    EV_COMM, EV_CPU, EV_ENTRY_CALLER, EV_KSTACK, EV_KSTACK_LEN, EV_PROBE, EV_STRS, EV_TGID, EV_TID, EV_TS, EV_USTACK,
    EV_USTACK_LEN, EV_VALS, STR_MAX,
};
use crate::Probe;

/// The printing flags.
pub struct Options {
    pub timestamp: bool,
    pub unix_timestamp: bool,
    pub time: bool,
    pub print_cpu: bool,
    pub name: Option<String>,
    pub msg_filter: Option<String>,
    pub max_events: Option<u64>,
    pub aggregate: bool,
    pub json: bool,
    /// -K, -U: the stacks printed below each event; -a: with their addresses.
    pub kernel_stack: bool,
    pub user_stack: bool,
    pub address: bool,
}

/// What a probe prints: its FUNC column and how to build its message.
struct Shape {
    func: String,
    format: Option<common::probe::printf::Format>,
    /// Per format argument: the fetch it shows, or the string slot for %s.
    args: Vec<Arg>,
    /// Per format argument: whether it is an address to name (%K, %U).
    symbols: Vec<Option<SymbolKind>>,
    texts: Vec<String>,
}

enum Arg {
    Int(usize),
    Str(usize),
}

pub struct Printer {
    options: Options,
    shapes: Vec<Shape>,
    trivial: bool,
    start_mono_ns: u64,
    start_real: f64,
    printed: u64,
    counts: HashMap<String, u64>,
    order: Vec<String>,
    /// Names stack frames and %K/%U addresses (created only when a probe needs it).
    symbolizer: Option<Symbolizer>,
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    data.get(at..at + 4).map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap()))
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    data.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()))
}

/// A frame from an address and its symbol (`[unknown]` when it has none).
fn frame_of(addr: u64, symbol: Option<Symbol>) -> Frame {
    match symbol {
        Some(s) => Frame { addr, name: s.name, offset: s.offset, module: s.module },
        None => Frame { addr, name: UNKNOWN.to_owned(), offset: 0, module: None },
    }
}

fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl Printer {
    pub fn new(options: Options, probes: &[Probe]) -> Self {
        let shapes: Vec<Shape> = probes
            .iter()
            .map(|p| {
                let mut strings = 0;
                let args = p
                    .plan
                    .exprs
                    .iter()
                    .map(|e| {
                        if e.ctype.string {
                            strings += 1;
                            Arg::Str(strings - 1)
                        } else {
                            Arg::Int(e.slot)
                        }
                    })
                    .collect();
                let spec = &p.trace.spec;
                Shape {
                    func: spec.function.clone(),
                    symbols: p.trace.format.as_ref().map(|f| f.symbols()).unwrap_or_default(),
                    format: p.trace.format.clone(),
                    args,
                    texts: p.plan.exprs.iter().map(|e| e.text.clone()).collect(),
                }
            })
            .collect();
        let trivial = shapes.iter().all(|s| s.format.is_none());
        let symbols = shapes.iter().any(|s| s.symbols.iter().any(Option::is_some));
        let symbolizer = (options.kernel_stack || options.user_stack || symbols).then(Symbolizer::new);
        let start_real = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        Printer {
            options,
            shapes,
            trivial,
            start_mono_ns: monotonic_ns(),
            start_real,
            printed: 0,
            counts: HashMap::new(),
            order: Vec::new(),
            symbolizer,
        }
    }

    /// A stack's frames as BCC's trace prints them (`name+0x1f [module]`, the address first with -a), or its
    /// error number when there is none.
    fn stack_lines(&self, data: &[u8], len_at: usize, frames_at: usize, pid: Option<u32>) -> Vec<String> {
        let len = u32_at(data, len_at) as i32;
        if len < 0 {
            return vec![format!("        {len}")];
        }
        let mut addrs: Vec<u64> = (0..len as usize / 8).map(|i| u64_at(data, frames_at + 8 * i)).collect();
        if pid.is_some() {
            common::stacks::with_entry_caller(&mut addrs, u64_at(data, EV_ENTRY_CALLER));
        }
        let Some(symbolizer) = &self.symbolizer else { return Vec::new() };
        let symbols = match pid {
            Some(pid) => symbolizer.user(pid, &addrs),
            None => symbolizer.kernel(&addrs),
        };
        let format = FrameFormat { module_and_offset: true, addresses: false };
        addrs
            .iter()
            .zip(symbols)
            .map(|(addr, sym)| {
                let frame = frame_of(*addr, sym);
                let text = match pid {
                    Some(_) => format.user(&frame, Style::default()),
                    None => format.kernel(&frame, Style::default()),
                };
                if self.options.address {
                    format!("        {addr:16x} {text}")
                } else {
                    format!("        {text}")
                }
            })
            .collect()
    }

    /// A %K or %U value: the address's symbol with its offset (and, for %U, its module), as BCC names it.
    fn symbol_text(&self, kind: SymbolKind, addr: u64, pid: u32) -> String {
        let Some(symbolizer) = &self.symbolizer else { return format!("{addr:#x}") };
        let format = FrameFormat { module_and_offset: true, addresses: false };
        match kind {
            SymbolKind::Kernel => {
                let frame = frame_of(addr, symbolizer.kernel(&[addr]).pop().flatten());
                if frame.name == UNKNOWN {
                    frame.name
                } else {
                    format!("{}+{:#x}", frame.name, frame.offset)
                }
            }
            SymbolKind::User => {
                format.user(&frame_of(addr, symbolizer.user(pid, &[addr]).pop().flatten()), Style::default())
            }
        }
    }

    /// BCC's header line.
    pub fn header(&self, out: &mut Output) -> Result<()> {
        let o = &self.options;
        let mut line = String::new();
        if o.timestamp || o.time {
            line.push_str(&if o.unix_timestamp { format!("{:<17} ", "TIME") } else { format!("{:<8} ", "TIME") });
        }
        if o.print_cpu {
            line.push_str(&format!("{:<3} ", "CPU"));
        }
        line.push_str(&format!(
            "{:<7} {:<7} {:<15} {:<16} {}",
            "PID",
            "TID",
            "COMM",
            "FUNC",
            if self.trivial { "" } else { "-" }
        ));
        writeln!(out, "{line}")?;
        Ok(())
    }

    /// Saves process `pid`'s memory maps now (-p), so that its user frames are named even if it exits before its
    /// last events are printed.
    pub fn remember(&mut self, pid: u32) {
        if let Some(symbolizer) = self.symbolizer.as_mut() {
            symbolizer.remember_process(pid);
            symbolizer.preload_kernel();
        }
    }

    /// True once -M events have been printed.
    pub fn done(&self) -> bool {
        self.options.max_events.is_some_and(|m| self.printed >= m)
    }

    /// Formats and prints one record.
    pub fn event(&mut self, out: &mut Output, data: &[u8]) -> Result<()> {
        if self.done() {
            return Ok(());
        }
        let index = u32_at(data, EV_PROBE) as usize;
        let Some(shape) = self.shapes.get(index) else { return Ok(()) };
        let comm = c_str(data.get(EV_COMM..EV_COMM + 16).unwrap_or(&[]));
        if let Some(name) = &self.options.name {
            if !comm.contains(name.as_str()) {
                return Ok(());
            }
        }
        let tgid = u32_at(data, EV_TGID);
        let user_symbols = self.options.user_stack || shape.symbols.contains(&Some(SymbolKind::User));
        if let (true, Some(symbolizer)) = (user_symbols, self.symbolizer.as_mut()) {
            // Its maps, saved while it lives, name its frames even once it has exited.
            symbolizer.remember_process(tgid);
        }
        let shape = &self.shapes[index];
        let values: Vec<Value> = shape
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                Arg::Int(f) => {
                    let raw = u64_at(data, EV_VALS + 8 * f);
                    match shape.symbols.get(i).copied().flatten() {
                        Some(kind) => Value::Str(self.symbol_text(kind, raw, tgid)),
                        None => Value::Int(raw),
                    }
                }
                Arg::Str(s) => {
                    let at = EV_STRS + STR_MAX * s;
                    Value::Str(c_str(data.get(at..at + STR_MAX).unwrap_or(&[])))
                }
            })
            .collect();
        let render = |values: &[Value]| shape.format.as_ref().map(|f| f.render(values)).unwrap_or_default();
        // The message as the program gave it: for JSON and -f (text shows it escaped, rendered below).
        let msg = (self.options.json || self.options.msg_filter.is_some()).then(|| render(&values));
        if let (Some(filter), Some(msg)) = (&self.options.msg_filter, &msg) {
            if !msg.contains(filter.as_str()) {
                return Ok(());
            }
        }
        let (tid, cpu, ts) = (u32_at(data, EV_TID), u32_at(data, EV_CPU), u64_at(data, EV_TS));
        let mut stack = Vec::new();
        if self.options.kernel_stack {
            stack.extend(self.stack_lines(data, EV_KSTACK_LEN, EV_KSTACK, None));
        }
        if self.options.user_stack {
            stack.extend(self.stack_lines(data, EV_USTACK_LEN, EV_USTACK, Some(tgid)));
        }
        let offset = ts.saturating_sub(self.start_mono_ns) as f64 / 1e9;
        let o = &self.options;
        if o.json {
            let shown: Vec<serde_json::Value> = values
                .iter()
                .map(|v| match v {
                    Value::Int(i) => json!(i),
                    Value::Str(s) => json!(s),
                })
                .collect();
            out.json_line(&json!({
                "time": clock_rfc3339(), "ts": offset, "pid": tgid, "tid": tid, "cpu": cpu, "comm": comm, "func": shape.func,
                "msg": msg.unwrap_or_default(), "args": shape.texts, "values": shown,
                "stack": stack.iter().map(|l| l.trim()).collect::<Vec<_>>(),
            }))?;
        } else {
            let mut line = String::new();
            if o.time {
                line.push_str(&format!("{:<8} ", clock_hms()));
            } else if o.timestamp {
                let t =
                    if o.unix_timestamp { format!("{:.6}", offset + self.start_real) } else { format!("{offset:.6}") };
                let width = if o.unix_timestamp { 17 } else { 8 };
                let t: String = t.chars().take(width).collect();
                line.push_str(&format!("{t:<width$} "));
            }
            if o.print_cpu {
                line.push_str(&format!("{cpu:<3} "));
            }
            // The traced system's strings (its command, %s values), escaped: [`printable`].
            let escaped: Vec<Value> = values
                .iter()
                .map(|v| match v {
                    Value::Str(s) => Value::Str(printable(s.as_bytes())),
                    Value::Int(i) => Value::Int(*i),
                })
                .collect();
            let msg = render(&escaped);
            let comm = printable(comm.as_bytes());
            line.push_str(&format!("{tgid:<7} {tid:<7} {comm:<15} {:<16} {msg}", shape.func));
            for frame in &stack {
                line.push('\n');
                line.push_str(frame);
            }
            if o.aggregate {
                if !self.counts.contains_key(&line) {
                    self.order.push(line.clone());
                }
                *self.counts.entry(line).or_default() += 1;
            } else {
                writeln!(out, "{line}")?;
                // BCC ends an event's stacks with an empty line.
                if o.kernel_stack || o.user_stack {
                    writeln!(out)?;
                }
                out.flush()?;
            }
        }
        self.printed += 1;
        Ok(())
    }

    /// With -A: every distinct line and its count, most frequent first.
    pub fn finish(&self, out: &mut Output) -> Result<()> {
        if !self.options.aggregate || self.options.json {
            return Ok(());
        }
        let mut lines: Vec<(&String, u64)> = self.order.iter().map(|l| (l, self.counts[l])).collect();
        lines.sort_by_key(|l| std::cmp::Reverse(l.1));
        for (line, n) in lines {
            write!(out, "{line}\n-->COUNT {n}\n\n")?;
        }
        Ok(())
    }
}
