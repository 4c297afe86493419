// SPDX-License-Identifier: Apache-2.0 OR MIT
//! futexctn's reports: taking an interval's histograms from the kernel ([`take`]) and writing them in
//! libbpf-tools' layout (a `comm[tid] lock 0x... contended N times, ...` line, the user stack between `-` lines,
//! the log2 histogram) or as JSON lines.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;
use common::attach::maps::from_bytes;
use common::output::heatmap::{sum_slots, HeatmapFile};
use common::output::hist::{log2_buckets, write_log2_hist, Bucket};
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use common::process::symbols::{Batch, Symbolizer, UNKNOWN};
use common::stacks::{Collected, Missing, Stack, StackTraces, EEXIST, EFAULT, ENOMEM};
use libbpf_rs::{MapCore, MapFlags};
use serde::Serialize;

use crate::bpf::types::{hist, hist_key};
use crate::bpf::BpfSkel;

// SAFETY: plain C structs of integers and chars, generated from futexctn.h.
unsafe impl plain::Plain for hist_key {}
unsafe impl plain::Plain for hist {}

/// One histogram of the interval: whose (thread, or process with -s), which futex, which stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub pid: u32,
    /// The thread, or with -s the process again (libbpf-tools prints that number in brackets).
    pub id: u32,
    pub lock: u64,
    pub stack_id: i32,
}

/// Moves the kernel's epoch on, lets the waits being counted in the old one finish, then reads and deletes every
/// entry of the epochs before: the interval's histograms, each wait in exactly one report.
pub fn take(skel: &mut BpfSkel<'_>) -> Result<BTreeMap<Key, hist>> {
    let bss = skel.maps.bss_data.as_deref_mut().ok_or_else(|| anyhow::anyhow!("BPF object has no .bss"))?;
    // SAFETY: `epoch` is an aligned u32 of the memory-mapped .bss, read by the BPF programs concurrently.
    let now = unsafe {
        let now = std::ptr::read_volatile(&bss.epoch).wrapping_add(1);
        std::ptr::write_volatile(&mut bss.epoch, now);
        now
    };
    std::thread::sleep(crate::EPOCH_SETTLE);
    let mut taken: BTreeMap<Key, hist> = BTreeMap::new();
    let keys: Vec<Vec<u8>> = skel.maps.hists.keys().collect();
    for raw in keys {
        let k: hist_key = from_bytes(&raw);
        if k.epoch == now {
            continue;
        }
        // Read, then delete: the epoch has moved on, so nothing updates this entry any more (a lookup-and-delete
        // would do both at once, but hash maps have it from 5.14 only).
        let Some(bytes) = skel.maps.hists.lookup(&raw, MapFlags::ANY)? else { continue };
        skel.maps.hists.delete(&raw)?;
        let h: hist = from_bytes(&bytes);
        let key =
            Key { pid: (k.pid_tgid >> 32) as u32, id: k.pid_tgid as u32, lock: k.uaddr, stack_id: k.user_stack_id };
        let key = if k.pid_tgid >> 32 == 0 { Key { pid: k.pid_tgid as u32, ..key } } else { key };
        match taken.get_mut(&key) {
            None => drop(taken.insert(key, h)),
            Some(t) => merge(t, &h),
        }
    }
    Ok(taken)
}

/// Adds `b` (the same key, counted in an older epoch) to `a`.
fn merge(a: &mut hist, b: &hist) {
    for (x, y) in a.slots.iter_mut().zip(b.slots.iter()) {
        *x += y;
    }
    a.min = if a.contended == 0 {
        b.min
    } else if b.contended == 0 {
        a.min
    } else {
        a.min.min(b.min)
    };
    a.max = a.max.max(b.max);
    a.contended += b.contended;
    a.total += b.total;
    a.total_ns += b.total_ns;
}

/// `--heatmap FILE.svg`: a column per report. The reports take their waits out of the kernel's map, so the heat
/// map keeps their running total (what [`HeatmapFile`] columns are the growth of).
pub struct Heat {
    file: Option<HeatmapFile>,
    total: Vec<u64>,
}

impl Heat {
    /// The file is created now, so a path that cannot be written fails before tracing starts.
    pub fn open(path: Option<&std::path::Path>, unit: &'static str) -> Result<Heat> {
        Ok(Heat { file: HeatmapFile::open(path, "Futex wait time (contended)", unit)?, total: Vec::new() })
    }

    /// Adds one report's histograms as a column.
    pub fn push(&mut self, entries: &BTreeMap<Key, hist>) {
        let Some(file) = self.file.as_mut() else { return };
        let column = sum_slots(entries.values().map(|h| &h.slots[..]));
        self.total = sum_slots([&self.total[..], &column[..]]);
        file.push(&self.total);
    }

    /// Writes the SVG (nothing without --heatmap).
    pub fn finish(&self) -> Result<()> {
        self.file.as_ref().map_or(Ok(()), HeatmapFile::finish)
    }
}

/// A frame of a named stack.
#[derive(Debug, Clone, Serialize)]
struct JsonFrame {
    addr: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<String>,
}

#[derive(Serialize)]
struct JsonHist<'a> {
    time: &'a str,
    pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    comm: Name,
    lock: String,
    unit: &'static str,
    contended: u64,
    avg: u64,
    min: u64,
    max: u64,
    total: u64,
    total_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_stack: Option<Vec<JsonFrame>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    user_stack_lost: bool,
    buckets: Vec<Bucket>,
}

pub struct Report {
    unit: &'static str,
    summary: bool,
    timestamp: bool,
    json: bool,
    missing: Missing,
}

impl Report {
    pub fn new(milliseconds: bool, summary: bool, timestamp: bool, json: bool) -> Report {
        let unit = if milliseconds { "msecs" } else { "usecs" };
        Report { unit, summary, timestamp, json, missing: Missing::default() }
    }

    /// The stacks that could not be shown over the whole run (BCC's warning at the end).
    pub fn missing(&self) -> Missing {
        self.missing
    }

    /// Writes one report: the interval's histograms, in order of process, thread, lock and stack.
    pub fn write(
        &mut self,
        out: &mut Output,
        stackmap: &impl MapCore,
        entries: BTreeMap<Key, hist>,
        symbolizer: &mut Symbolizer,
        depth: usize,
    ) -> Result<()> {
        let stacks = self.stacks(stackmap, &entries, symbolizer, depth);
        let time = if self.json { clock_rfc3339() } else { clock_hms() };
        if !self.json {
            writeln!(out)?;
            if self.timestamp {
                writeln!(out, "{time:<8}")?;
            }
        }
        for (key, h) in &entries {
            let avg = h.total.checked_div(h.contended).unwrap_or(0);
            let comm = Name::from_c(&h.comm);
            let stack = stacks.get(key);
            if self.json {
                let slots: Vec<u64> = h.slots.to_vec();
                out.json_line(&JsonHist {
                    time: &time,
                    pid: key.pid,
                    tid: (!self.summary).then_some(key.id),
                    comm,
                    lock: format!("{:#x}", key.lock),
                    unit: self.unit,
                    contended: h.contended,
                    avg,
                    min: h.min,
                    max: h.max,
                    total: h.total,
                    total_ns: h.total_ns,
                    user_stack: stack.and_then(|s| s.clone()),
                    user_stack_lost: !self.summary && stack.is_some_and(Option::is_none),
                    buckets: log2_buckets(&slots),
                })?;
                continue;
            }
            let u = self.unit;
            writeln!(out, "\n")?;
            writeln!(
                out,
                "{comm}[{}] lock {:#x} contended {} times, {avg} avg {u} [max: {} {u}, min {} {u}]",
                key.id, key.lock, h.contended, h.max, h.min
            )?;
            if !self.summary {
                writeln!(out, "    -")?;
                match stack.and_then(Option::as_ref) {
                    Some(frames) => {
                        for f in frames {
                            writeln!(out, "    {}", f.name)?;
                        }
                    }
                    None => writeln!(out, "    [Missed User Stack]")?,
                }
                writeln!(out, "    -")?;
            }
            write_log2_hist(out, &h.slots, u)?;
        }
        out.flush()?;
        Ok(())
    }

    /// Every entry's user stack, named (None: lost), in one batch of lookups; none with -s.
    fn stacks(
        &mut self,
        stackmap: &impl MapCore,
        entries: &BTreeMap<Key, hist>,
        symbolizer: &mut Symbolizer,
        depth: usize,
    ) -> BTreeMap<Key, Option<Vec<JsonFrame>>> {
        let mut named = BTreeMap::new();
        if self.summary {
            return named;
        }
        let mut traces = StackTraces::new(stackmap, Collected { user: true, kernel: false });
        let mut raw = Vec::new();
        let mut batch = Batch::new();
        for (key, h) in entries {
            let task = traces.task(key.pid, key.id, Name::from_c(&h.comm), key.stack_id, -EFAULT);
            let addrs = match task.user {
                Stack::Frames(mut addrs) => {
                    addrs.truncate(depth);
                    addrs
                }
                Stack::Absent | Stack::Skipped => Vec::new(),
                Stack::Lost(err) => {
                    self.missing.stacks += 1;
                    self.missing.map_too_small |= err == -EEXIST || err == -ENOMEM;
                    raw.push((*key, None));
                    continue;
                }
            };
            batch.add_user(key.pid, addrs.iter().enumerate().map(|(i, &a)| call_site(i, a)));
            raw.push((*key, Some(addrs)));
        }
        symbolizer.refresh_live();
        let resolved = batch.resolve(symbolizer);
        for (key, addrs) in raw {
            let frames = addrs.map(|addrs| {
                addrs
                    .iter()
                    .enumerate()
                    .map(|(i, &a)| {
                        let sym = resolved.user(key.pid, call_site(i, a));
                        JsonFrame {
                            addr: format!("{a:#x}"),
                            name: sym.map_or_else(|| UNKNOWN.to_string(), |s| s.name.clone()),
                            module: sym.and_then(|s| s.module.clone()),
                        }
                    })
                    .collect()
            });
            named.insert(key, frames);
        }
        named
    }
}

/// The address to name for frame `i`: the innermost is where the thread is; the others are return addresses,
/// named at the call just before them (a call may be the last instruction of its function).
fn call_site(i: usize, addr: u64) -> u64 {
    if i == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}
