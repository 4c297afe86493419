// SPDX-License-Identifier: Apache-2.0 OR MIT
//! stackcount's output: each interval's new counts per stack, in BCC's layout (kernel frames then user frames,
//! two spaces in, `    --` between them with -d, `    comm [pid]` with -P, then the count), folded (-f), as JSON
//! lines, and at the end a flame graph of everything counted.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use common::attach::maps::hash_entries;
use common::output::name::Name;
use common::output::stdout::{clock_hms, Output};
use common::process::symbols::Symbolizer;
use common::stacks::{self, Collected, FlameGraph, Frame, MergeBy, Palette, Sample, Stack, StackTraces, Style};

use crate::bpf::types::stack_key;
use crate::bpf::BpfSkel;

// SAFETY: a plain C struct of integers and chars, generated from stackcount.h.
unsafe impl plain::Plain for stack_key {}

/// How stacks are printed.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Stacks of different processes apart (-P, or -p).
    pub per_pid: bool,
    /// The `    comm [pid]` line (-P without -p, as BCC).
    pub show_process: bool,
    pub timestamp: bool,
    /// -v: each frame's address before its name.
    pub raw_addresses: bool,
    pub folded: bool,
    pub json: bool,
    pub style: Style,
}

impl Layout {
    /// Which stacks are one entry: those that print the same. Addresses show with -v and in JSON, offsets with
    /// -s; otherwise the names alone (BCC prints one entry per stack id, which may print alike).
    fn merge(&self) -> MergeBy {
        if self.json || (self.raw_addresses && !self.folded) {
            MergeBy::Addresses
        } else if self.style.offsets {
            MergeBy::Frames
        } else {
            MergeBy::Names
        }
    }
}

type Key = (u32, i32, i32, u64, [u8; 16]);

pub struct Report {
    layout: Layout,
    collected: Collected,
    previous: HashMap<Key, u64>,
    /// Stacks lost to a full or colliding stack map, per interval as BCC warns.
    missing: stacks::Missing,
}

impl Report {
    pub fn new(layout: Layout, collected: Collected) -> Self {
        Report { layout, collected, previous: HashMap::new(), missing: stacks::Missing::default() }
    }

    /// Reads the cumulative counts, and names the stacks counted since the last call.
    pub fn interval(
        &mut self,
        skel: &BpfSkel<'_>,
        symbolizer: &mut Symbolizer,
        verbose: bool,
    ) -> Result<Vec<Sample<Frame>>> {
        let samples = self.read(skel, true)?;
        let named = self.name(samples, symbolizer, verbose);
        self.missing = stacks::missing(&named);
        Ok(named)
    }

    /// The samples of the map: what was added since the last read (`since_last`), or everything so far.
    fn read(&mut self, skel: &BpfSkel<'_>, since_last: bool) -> Result<Vec<Sample<u64>>> {
        let mut traces = StackTraces::new(&skel.maps.stackmap, self.collected);
        let mut samples = Vec::new();
        for (k, total) in hash_entries::<stack_key, u64>(&skel.maps.counts).context("reading the counts")? {
            let key: Key = (k.pid, k.user_stack_id, k.kern_stack_id, k.entry_caller, k.comm.map(|c| c as u8));
            let value = if since_last {
                let before = self.previous.insert(key, total).unwrap_or(0);
                total.saturating_sub(before)
            } else {
                total
            };
            if value > 0 {
                let mut task = traces.task(k.pid, k.pid, Name::from_c(&k.comm), k.user_stack_id, k.kern_stack_id);
                with_entry_caller(&mut task.user, k.entry_caller);
                samples.push(Sample { task, waker: None, value });
            }
        }
        Ok(samples)
    }

    /// Names the frames; without -P, adds up the same stacks of different processes.
    fn name(&self, samples: Vec<Sample<u64>>, symbolizer: &mut Symbolizer, verbose: bool) -> Vec<Sample<Frame>> {
        let merge = self.layout.merge();
        let named = stacks::symbolize_by(samples, symbolizer, verbose, merge);
        let named = stacks::drop_tracing_frames_by(named, merge);
        if self.layout.per_pid {
            return named;
        }
        // The same stack in different processes, once.
        let anonymous = named.into_iter().map(|mut s| {
            s.task.pid = 0;
            s.task.shown_id = 0;
            s.task.comm = Name::default();
            s
        });
        stacks::merge_same(anonymous, merge)
    }

    /// One interval: a blank line, the time with -T, the stacks least counted first, and `Detaching...` last.
    pub fn write(&mut self, out: &mut Output, samples: &[Sample<Frame>], last: bool) -> Result<()> {
        let layout = self.layout;
        if layout.json {
            stacks::write_json(out, samples, "count", false)?;
        } else if layout.folded {
            for s in samples {
                let line = stacks::folded_stack(s, layout.style);
                // Without -P the command is not part of the key: the line starts at the outermost frame.
                let line = if layout.per_pid { line.as_str() } else { line.trim_start_matches(';') };
                writeln!(out, "{line} {}", s.value)?;
            }
        } else {
            writeln!(out)?;
            if layout.timestamp {
                writeln!(out, "{:<8}", clock_hms())?;
            }
            for s in samples {
                self.write_stack(out, s)?;
            }
        }
        if last && !layout.folded && !layout.json {
            writeln!(out, "Detaching...")?;
        }
        out.flush()?;
        if last {
            self.missing.warn();
        }
        Ok(())
    }

    fn write_stack(&self, out: &mut Output, s: &Sample<Frame>) -> Result<()> {
        let layout = self.layout;
        let frame = |out: &mut Output, f: &Frame| -> std::io::Result<()> {
            write!(out, "  ")?;
            if layout.raw_addresses {
                write!(out, "{:<16x} ", f.addr)?;
            }
            if layout.style.offsets && f.name != common::process::symbols::UNKNOWN {
                writeln!(out, "{}+{:#x}", f.name, f.offset)
            } else {
                writeln!(out, "{}", f.name)
            }
        };
        let task = &s.task;
        match &task.kernel {
            Stack::Frames(frames) => frames.iter().try_for_each(|f| frame(out, f))?,
            Stack::Lost(_) => writeln!(out, "  [Missed Kernel Stack]")?,
            Stack::Skipped | Stack::Absent => {}
        }
        if layout.style.delimited {
            writeln!(out, "    --")?;
        }
        match &task.user {
            Stack::Frames(frames) => frames.iter().try_for_each(|f| frame(out, f))?,
            Stack::Lost(_) => writeln!(out, "  [Missed User Stack]")?,
            Stack::Skipped | Stack::Absent => {}
        }
        if layout.show_process {
            writeln!(out, "    {} [{}]", task.comm, task.pid)?;
        }
        writeln!(out, "    {}\n", s.value)?;
        Ok(())
    }

    /// `--flamegraph FILE`: every stack counted since the start.
    pub fn write_flamegraph(
        &mut self,
        skel: &BpfSkel<'_>,
        symbolizer: &mut Symbolizer,
        file: File,
        path: &Path,
        pattern: &str,
    ) -> Result<()> {
        let samples = self.read(skel, false)?;
        let named = self.name(samples, symbolizer, false);
        if named.is_empty() {
            let _ = std::fs::remove_file(path);
            eprintln!(
                "{}: no events, so no flame graph written to {}",
                common::identity::invoked_name(),
                path.display()
            );
            return Ok(());
        }
        let graph = FlameGraph {
            title: format!("stackcount {pattern}: stacks per event"),
            count_name: "events".into(),
            palette: Palette::Hot,
        };
        stacks::write_flamegraph(file, &named, self.layout.style, &graph)
            .with_context(|| format!("writing the flame graph to {}", path.display()))
    }
}

/// Puts the key's `entry_caller` into the user stack where the walk missed it ([`stacks::with_entry_caller`]).
fn with_entry_caller(user: &mut Stack<u64>, caller: u64) {
    if let Stack::Frames(frames) = user {
        stacks::with_entry_caller(frames, caller);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_caller_goes_second_once() {
        let mut user = Stack::Frames(vec![10, 30]);
        with_entry_caller(&mut user, 20);
        assert_eq!(user, Stack::Frames(vec![10, 20, 30]));
        with_entry_caller(&mut user, 20);
        assert_eq!(user, Stack::Frames(vec![10, 20, 30]));
        with_entry_caller(&mut user, 0);
        assert_eq!(user, Stack::Frames(vec![10, 20, 30]));
        let mut absent: Stack<u64> = Stack::Absent;
        with_entry_caller(&mut absent, 20);
        assert_eq!(absent, Stack::Absent);
    }
}
