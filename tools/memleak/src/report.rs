// SPDX-License-Identifier: Apache-2.0 OR MIT
//! memleak's output. Each interval: `[HH:MM:SS] Top N stacks with outstanding allocations:`, then (with -a) a line
//! per allocation, then one entry per stack, smallest first so that the largest ends next to the prompt:
//! `\tBYTES bytes in COUNT allocations from stack` and its frames, innermost first, `\t\tname+0xoff [module]`.
//! By default the outstanding allocations are read one by one (those younger than -o left out) and added up per
//! stack here; with --combined-only the kernel's running totals per stack are printed as they are. JSON lines
//! hold the same numbers, one object per stack. -t's per-call lines are written by [`write_trace`].

use std::collections::HashMap;
use std::io::Write;

use anyhow::{Context, Result};
use common::attach::maps::hash_entries;
use common::output::stdout::{clock_hms, clock_rfc3339, monotonic_ns, Output};
use common::process::symbols::{Batch, Resolved, Symbolizer, UNKNOWN};
use common::stacks::{self, Frame, Missing};
use libbpf_rs::{MapCore, MapFlags};
use serde::Serialize;

use crate::bpf::consts::*;
use crate::bpf::types::{alloc_info, combined_info};
use crate::bpf::BpfSkel;

// SAFETY: plain C structs of integers, generated from memleak.h.
unsafe impl plain::Plain for alloc_info {}
unsafe impl plain::Plain for combined_info {}

/// --sort: what orders the stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    Size,
    Count,
}

/// What the report shows.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The traced process (user stacks), or None for the kernel.
    pub pid: Option<u32>,
    pub top: usize,
    pub sort: SortKey,
    pub show_allocs: bool,
    pub combined_only: bool,
    pub min_age_ns: u64,
    pub json: bool,
    pub verbose: bool,
}

/// The outstanding allocations of one stack.
#[derive(Debug, Default)]
struct Entry {
    stack_id: i32,
    size: u64,
    count: u64,
    /// (address, size) of each, with -a.
    allocs: Vec<(u64, u64)>,
}

/// -a's (address, size) lines.
type AddrLines = Vec<(u64, u64)>;

pub struct Report {
    layout: Layout,
}

#[derive(Serialize)]
struct JsonAlloc {
    addr: String,
    size: u64,
}

#[derive(Serialize)]
struct JsonStack<'a> {
    time: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    bytes: u64,
    allocations: u64,
    /// Innermost first; empty when the stack was lost.
    stack: Vec<stacks::JsonFrame<'a>>,
    stack_lost: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    addresses: Option<Vec<JsonAlloc>>,
}

impl Report {
    pub fn new(layout: Layout) -> Self {
        Report { layout }
    }

    /// Reads the maps and writes one interval's report.
    pub fn write(&mut self, out: &mut Output, skel: &BpfSkel<'_>, symbolizer: &mut Symbolizer) -> Result<()> {
        let layout = self.layout;
        let (mut entries, addr_lines) =
            if layout.combined_only { self.combined(skel)? } else { self.outstanding(skel)? };
        entries.sort_by_key(|e| match layout.sort {
            SortKey::Size => (e.size, e.count),
            SortKey::Count => (e.count, e.size),
        });
        let skip = entries.len().saturating_sub(layout.top);
        let shown = &entries[skip..];

        let traces: HashMap<i32, Vec<u64>> =
            shown.iter().filter_map(|e| Some((e.stack_id, read_stack(&skel.maps.stack_traces, e.stack_id)?))).collect();
        let mut batch = Batch::new();
        for addrs in traces.values() {
            let lookups = addrs.iter().enumerate().map(|(i, &a)| lookup_addr(i, a));
            match layout.pid {
                Some(pid) => batch.add_user(pid, lookups),
                None => batch.add_kernel(lookups),
            }
        }
        symbolizer.refresh_live();
        let resolved = batch.resolve(symbolizer);
        if layout.verbose {
            resolved.report_unresolved();
        }
        let mut missing = Missing::default();
        let framed: Vec<(&Entry, Option<Vec<Frame>>)> = shown
            .iter()
            .map(|e| {
                let frames = traces.get(&e.stack_id).map(|addrs| name_frames(addrs, &resolved, layout.pid));
                if frames.is_none() {
                    missing.stacks += 1;
                    missing.map_too_small |= e.stack_id == -stacks::ENOMEM || e.stack_id == -stacks::EEXIST;
                }
                (e, frames)
            })
            .collect();

        if layout.json {
            let timestamp = clock_rfc3339();
            for (e, frames) in &framed {
                let line = JsonStack {
                    time: &timestamp,
                    pid: layout.pid,
                    bytes: e.size,
                    allocations: e.count,
                    stack: frames.as_deref().map(stacks::json_frame_list).unwrap_or_default(),
                    stack_lost: frames.is_none(),
                    addresses: layout.show_allocs.then(|| {
                        e.allocs.iter().map(|&(a, size)| JsonAlloc { addr: format!("{a:#x}"), size }).collect()
                    }),
                };
                out.json_line(&line)?;
            }
        } else {
            writeln!(out, "[{}] Top {} stacks with outstanding allocations:", clock_hms(), layout.top)?;
            for (addr, size) in &addr_lines {
                writeln!(out, "\taddr = {addr:x} size = {size}")?;
            }
            for (e, frames) in &framed {
                writeln!(out, "\t{} bytes in {} allocations from stack", e.size, e.count)?;
                match frames {
                    Some(frames) => {
                        for f in frames {
                            writeln!(out, "\t\t{}", frame_text(f))?;
                        }
                    }
                    None => writeln!(out, "\t\tstack information lost")?,
                }
            }
        }
        out.flush()?;
        missing.warn();
        Ok(())
    }

    /// The outstanding allocations old enough, added up per stack; and the (address, size) lines of -a, smallest
    /// first as BCC prints them.
    fn outstanding(&self, skel: &BpfSkel<'_>) -> Result<(Vec<Entry>, AddrLines)> {
        let mut all: Vec<(u64, alloc_info)> =
            hash_entries(&skel.maps.allocs).context("reading the outstanding allocations")?;
        let now = monotonic_ns();
        all.retain(|(_, info)| now.saturating_sub(self.layout.min_age_ns) >= info.timestamp_ns);
        all.sort_by_key(|(addr, info)| (info.size, *addr));
        let mut per_stack: HashMap<i32, Entry> = HashMap::new();
        let mut lines = Vec::new();
        for (addr, info) in &all {
            let e =
                per_stack.entry(info.stack_id).or_insert_with(|| Entry { stack_id: info.stack_id, ..Entry::default() });
            e.size += info.size;
            e.count += 1;
            if self.layout.show_allocs {
                e.allocs.push((*addr, info.size));
                lines.push((*addr, info.size));
            }
        }
        Ok((per_stack.into_values().collect(), if self.layout.json { Vec::new() } else { lines }))
    }

    /// The kernel's running totals per stack (stacks whose allocations were all freed are left out).
    fn combined(&self, skel: &BpfSkel<'_>) -> Result<(Vec<Entry>, AddrLines)> {
        let totals: Vec<(u64, combined_info)> =
            hash_entries(&skel.maps.combined_allocs).context("reading the per-stack totals")?;
        let entries = totals
            .into_iter()
            .filter(|(_, c)| c.number_of_allocs > 0)
            .map(|(id, c)| Entry {
                stack_id: id as i64 as i32,
                size: c.total_size,
                count: c.number_of_allocs,
                allocs: Vec::new(),
            })
            .collect();
        Ok((entries, Vec::new()))
    }
}

/// The frames of stack `id`, innermost first, or None if it was lost (a negative id, or gone from the map).
fn read_stack(map: &impl MapCore, id: i32) -> Option<Vec<u64>> {
    if id < 0 {
        return None;
    }
    let bytes = map.lookup(&(id as u32).to_ne_bytes(), MapFlags::ANY).ok().flatten()?;
    Some(
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
            .take_while(|&a| a != 0)
            .collect(),
    )
}

/// Every frame but the innermost is a return address: its call site is the one looked up.
fn lookup_addr(i: usize, addr: u64) -> u64 {
    if i == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

fn name_frames(addrs: &[u64], resolved: &Resolved, pid: Option<u32>) -> Vec<Frame> {
    addrs
        .iter()
        .enumerate()
        .map(|(i, &addr)| {
            let at = lookup_addr(i, addr);
            let sym = match pid {
                Some(pid) => resolved.user(pid, at),
                None => resolved.kernel(at),
            };
            match sym {
                Some(sym) => Frame {
                    addr,
                    name: sym.name.clone(),
                    offset: sym.offset + (addr - at),
                    module: match pid {
                        Some(_) => sym.module.clone(),
                        None => Some(sym.module.clone().unwrap_or_else(|| "kernel".into())),
                    },
                },
                None => Frame { addr, name: UNKNOWN.into(), offset: 0, module: None },
            }
        })
        .collect()
}

/// `name+0xoff [module]` as BCC prints a frame (the module by its file name).
fn frame_text(f: &Frame) -> String {
    if f.name == UNKNOWN {
        return format!("{} ({:#x})", UNKNOWN, f.addr);
    }
    let module = f.module.as_deref().map(|m| m.rsplit('/').next().unwrap_or(m));
    match module {
        Some(m) => format!("{}+{:#x} [{m}]", f.name, f.offset),
        None => format!("{}+{:#x}", f.name, f.offset),
    }
}

fn kind_name(kind: u32) -> &'static str {
    match kind as usize {
        KIND_KERNEL => "kernel",
        KIND_MALLOC => "malloc",
        KIND_CALLOC => "calloc",
        KIND_REALLOC => "realloc",
        KIND_MMAP => "mmap",
        KIND_POSIX_MEMALIGN => "posix_memalign",
        KIND_VALLOC => "valloc",
        KIND_MEMALIGN => "memalign",
        KIND_PVALLOC => "pvalloc",
        KIND_ALIGNED_ALLOC => "aligned_alloc",
        KIND_FREE => "free",
        KIND_MUNMAP => "munmap",
        _ => "?",
    }
}

/// -t: one line per allocator entry, return and free (the record of `struct alloc_event`).
pub fn write_trace(out: &mut Output, data: &[u8]) -> Result<()> {
    let u32_at = |o: usize| data.get(o..o + 4).map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap_or_default()));
    let u64_at = |o: usize| data.get(o..o + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or_default()));
    let (kind, pid, tid, size, addr) = (u32_at(4), u32_at(8), u32_at(12), u64_at(16), u64_at(24));
    let who = format!("{pid}/{tid} {}", kind_name(kind));
    match u32_at(0) as usize {
        EV_ALLOC_ENTER => writeln!(out, "{who}: alloc entered, size = {size}")?,
        EV_ALLOC_EXIT => writeln!(out, "{who}: alloc exited, size = {size}, result = {addr:x}")?,
        _ => writeln!(out, "{who}: free entered, address = {addr:x}, size = {size}")?,
    }
    out.flush()?;
    Ok(())
}
