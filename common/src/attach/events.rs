// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The event stream: one poll loop over a tool's BPF ring buffer, and one way to count and report lost records.
//!
//! The BPF side sends records with the helpers of `bpf/include/ringbuf.bpf.h` (`ringbuf_reserve`,
//! `ringbuf_reserve_zeroed`, `ringbuf_output`), which count a record the ring buffer had no room for in a `__u64`
//! of the program's `.bss` (`lost`, by convention; `lost_notices` for the stack tools' process notices).
//! [`EventStream`] names the ring buffer and that counter; [`EventStream::poll`] wakes on new records, on
//! SIGINT/SIGTERM/SIGHUP, or when the reader of a stdout pipe goes away (all polled together, so `tool | head -1`
//! ends at once), drains what the probes had reserved when the stop came before returning, and turns an error of
//! the record handler (a closed stdout pipe, typically) into its error instead of a panic inside libbpf's C
//! callback. It returns the [`Lost`] records,
//! which every tool reports the same way at the end ([`Lost::report`]): one line `tool: lost N <what> (<why>)` on
//! stderr and, with `--json`, one more JSON line `{"lost":N,"what":...,"why":...}` on stdout; nothing if none was
//! lost. A tool whose BPF side also drops records for want of room in a map of its own (calls in flight, sockets
//! being timed) names that counter with [`EventStream::also_dropped`]: the loop reports what it dropped as it
//! happens and at the end ([`DropCounter`]). Two more losses are said the same way at the end: records still
//! queued [`STOP_GRACE`] after a stop signal (not shown, so a stop always ends the tool), and the probe runs the
//! kernel skipped ([`crate::attach::skipped`]), an upper bound on the records those runs would have made.

use std::cell::{Cell, OnceCell, RefCell};
use std::io;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{libbpf_sys, AsRawLibbpf, ErrorKind, MapCore, RingBufferBuilder};
use serde::Serialize;

use crate::attach::maps::DropCounter;
use crate::output::stdout::Output;
use crate::run::Signals;

/// How often the loop wakes without events, to check for a stop request.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// How long records still in the ring buffer are handed on after a stop signal. A handler slower than the records
/// arrive (naming stacks on a busy host) would otherwise keep the drain going for ever: past this, the rest are
/// skipped, so a stop always ends the tool.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Why records are lost unless told otherwise ([`EventStream::because`]).
const RING_FULL: &str = "ring buffer full";
/// Why records still queued after [`STOP_GRACE`] are lost.
const NOT_DRAINED: &str = "still queued when the stop's grace time ran out";

/// A tool's ring buffer of records and the `.bss` counters of the records the BPF side could not send.
pub struct EventStream<'a> {
    rings: Vec<&'a dyn MapCore>,
    lost: Vec<&'a u64>,
    what: &'static str,
    why: &'static str,
    /// Other `.bss` counters of records the BPF side dropped, with what they count and why.
    dropped: Vec<(&'a u64, &'static str, &'static str)>,
}

impl<'a> EventStream<'a> {
    /// The records of ring buffer `ring`, called `what` (`execs`, `connects`) when lost; `lost` is the BPF side's
    /// counter of those it could not send (a `u64` in the skeleton's `.bss`).
    pub fn new(ring: &'a dyn MapCore, lost: &'a u64, what: &'static str) -> Self {
        EventStream { rings: vec![ring], lost: vec![lost], what, why: RING_FULL, dropped: Vec::new() }
    }

    /// One stream over several BPF objects (trace's one object per probe): their ring buffers (often one map,
    /// shared: give it once) and each object's own counter.
    pub fn shared(rings: Vec<&'a dyn MapCore>, lost: Vec<&'a u64>, what: &'static str) -> Self {
        EventStream { rings, lost, what, why: RING_FULL, dropped: Vec::new() }
    }

    /// Says `why` the records were lost, when a full ring buffer is not all a user should know.
    pub fn because(self, why: &'static str) -> Self {
        EventStream { why, ..self }
    }

    /// Another counter of `what` the BPF side dropped, because of `why` (`too many calls in flight`): a `u64` in
    /// the skeleton's `.bss`, reported by [`EventStream::run`] while it runs and at the end.
    pub fn also_dropped(mut self, counter: &'a u64, what: &'static str, why: &'static str) -> Self {
        self.dropped.push((counter, what, why));
        self
    }

    /// The records lost so far.
    pub fn lost(&self) -> Lost {
        // SAFETY: each counter points into a skeleton's memory-mapped .bss, an aligned u64 that the kernel updates
        // concurrently: it must be read as volatile, not as a plain Rust value.
        let count = self.lost.iter().map(|&c| unsafe { std::ptr::read_volatile(c) }).sum();
        Lost { count, what: self.what, why: self.why }
    }

    /// Calls `handle` for every record until a stop signal arrives, `until` returns true (it is polled between
    /// batches: for `-d DURATION` style limits and interval reports) or `handle` fails. Returns the records lost:
    /// those the BPF side could not send, and those not handled because they were still queued [`STOP_GRACE`]
    /// after a stop. The trace ends at the stop: records already reserved then are handled (for up to that long),
    /// those the probes, still attached, make after it are left unread, neither shown nor lost (a stream of
    /// records as fast as the handler, threshold 0 on a busy host, would otherwise never let the drain end).
    pub fn poll(
        &self,
        signals: &Signals,
        mut until: impl FnMut() -> bool,
        handle: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<[Lost; 2]> {
        let failure: RefCell<Option<anyhow::Error>> = RefCell::new(None);
        let handle = RefCell::new(handle);
        // libbpf's rings, in the order they were added; set once the ring buffer is built, before any record.
        let rings: OnceCell<Vec<*mut libbpf_sys::ring>> = OnceCell::new();
        let stop: OnceCell<StopMark> = OnceCell::new();
        let mark_stop = || stop.get_or_init(|| StopMark::now(rings.get().map_or(&[][..], Vec::as_slice)));
        let not_drained = Cell::new(0u64);
        let lost = || [self.lost(), Lost { count: not_drained.get(), what: self.what, why: NOT_DRAINED }];
        let mut builder = RingBufferBuilder::new();
        for (index, ring) in self.rings.iter().enumerate() {
            let (failure, handle, rings, not_drained, mark_stop) =
                (&failure, &handle, &rings, &not_drained, &mark_stop);
            builder
                .add(*ring, move |data: &[u8]| {
                    if failure.borrow().is_some() {
                        return -1;
                    }
                    if signals.stop_noted() {
                        let mark = mark_stop();
                        if rings.get().is_some_and(|rings| mark.passed(rings, index)) {
                            return PAST_THE_STOP;
                        }
                        if mark.at.elapsed() > STOP_GRACE {
                            not_drained.set(not_drained.get() + 1);
                            return 0;
                        }
                    }
                    match (handle.borrow_mut())(data) {
                        Ok(()) => 0,
                        Err(err) => {
                            *failure.borrow_mut() = Some(err);
                            -1
                        }
                    }
                })
                .context("setting up the ring buffer")?;
        }
        let ring = builder.build().context("setting up the ring buffer")?;
        let manager = ring.as_libbpf_object().as_ptr();
        // SAFETY: `manager` is the ring buffer just built, which holds one ring per map added (`index` < its count);
        // the rings live as long as `ring`, which outlives every use of these pointers in this function.
        _ = rings.set(
            (0..self.rings.len())
                .map(|index| unsafe { libbpf_sys::ring_buffer__ring(manager, index as u32) })
                .collect(),
        );
        let rings = rings.get().expect("set just above");

        // SAFETY: the ring buffer's epoll descriptor lives as long as `ring`, which outlives this borrow.
        let epoll = unsafe { BorrowedFd::borrow_raw(ring.epoll_fd()) };
        while !signals.stopped() && !until() {
            if !signals.wait_readable(epoll, POLL_INTERVAL) {
                continue;
            }
            let polled = ring.consume();
            if let Some(err) = failure.borrow_mut().take() {
                return Err(err);
            }
            match polled {
                Ok(()) => {}
                Err(_) if stop.get().is_some() => break,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) => return Err(err).context("polling the ring buffer"),
            }
        }
        if signals.stdout_gone() {
            return Ok(lost());
        }
        // Records already reserved when the stop came are still reported, ring by ring up to where its producer
        // stood then.
        mark_stop();
        for &one in rings {
            // SAFETY: `one` is a ring of the live ring buffer `ring` (see above).
            let drained = unsafe { libbpf_sys::ring__consume(one) };
            if let Some(err) = failure.borrow_mut().take() {
                return Err(err);
            }
            if drained < 0 && drained != PAST_THE_STOP {
                return Err(io::Error::from_raw_os_error(-drained)).context("draining the ring buffer");
            }
        }
        Ok(lost())
    }
}

/// What a record handler returns to end the consumption of a ring at the first record reserved after the stop.
const PAST_THE_STOP: i32 = -libc::ECANCELED;

/// When the stop was noted and where each ring's producer stood then: records from there on came after the stop.
struct StopMark {
    at: Instant,
    ends: Vec<u64>,
}

impl StopMark {
    fn now(rings: &[*mut libbpf_sys::ring]) -> StopMark {
        // SAFETY: each pointer is a ring of the live ring buffer of [`EventStream::poll`].
        let ends = rings.iter().map(|&ring| unsafe { libbpf_sys::ring__producer_pos(ring) } as u64).collect();
        StopMark { at: Instant::now(), ends }
    }

    /// True if the record being handled from ring `index` was reserved after the stop. (Inside a record's
    /// handler, the ring's consumer position is the start of that record: libbpf moves it past a record once
    /// its handler has returned.)
    fn passed(&self, rings: &[*mut libbpf_sys::ring], index: usize) -> bool {
        let Some(&end) = self.ends.get(index) else { return false };
        // SAFETY: as in [`StopMark::now`].
        (unsafe { libbpf_sys::ring__consumer_pos(rings[index]) } as u64) >= end
    }
}

impl EventStream<'_> {
    /// The whole event-stream run of a tool: [`EventStream::poll`], handing each record to `handle` with `out`
    /// (whose flushes are held back until the batch of records the ring buffer had is handled: [`Output::hold`]),
    /// then the [`Lost::report`] of each loss, with the probe runs the kernel skipped (unless the reader of stdout
    /// went away: nobody reads it). The counters of [`EventStream::also_dropped`] are checked between batches and
    /// once more at the end.
    pub fn run(
        &self,
        signals: &Signals,
        out: &mut Output,
        json: bool,
        mut until: impl FnMut() -> bool,
        mut handle: impl FnMut(&mut Output, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut dropped: Vec<(DropCounter, &u64)> =
            self.dropped.iter().map(|&(counter, what, why)| (DropCounter::new(what, why), counter)).collect();
        let mut check_dropped = || dropped.iter_mut().for_each(|(drops, counter)| _ = drops.check(counter));
        // The lines of a batch of records go out in one write, once the batch is handled, not one write each.
        out.hold();
        let held = RefCell::new(&mut *out);
        let unwritten: RefCell<Option<io::Error>> = RefCell::new(None);
        let polled = self.poll(
            signals,
            || {
                if let Err(err) = held.borrow_mut().flush_held() {
                    *unwritten.borrow_mut() = Some(err);
                    return true;
                }
                check_dropped();
                until()
            },
            |data| handle(&mut held.borrow_mut(), data),
        );
        let released = out.release();
        let lost = polled?;
        if let Some(err) = unwritten.into_inner() {
            return Err(err).context("writing the records");
        }
        released.context("writing the records")?;
        check_dropped();
        if !signals.stdout_gone() {
            let skipped = Lost {
                count: crate::attach::skipped::skipped_runs(),
                what: self.what,
                why: crate::attach::skipped::WHY,
            };
            for loss in lost.iter().chain([&skipped]) {
                loss.report(out, json)?;
            }
        }
        Ok(())
    }

    /// [`EventStream::run`] until a stop signal: the loop of a tool that prints every record as it comes.
    pub fn print(
        &self,
        signals: &Signals,
        out: &mut Output,
        json: bool,
        handle: impl FnMut(&mut Output, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.run(signals, out, json, || false, handle)
    }
}

/// Records an [`EventStream`] lost: `count` `what`, because `why`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Lost {
    #[serde(rename = "lost")]
    pub count: u64,
    pub what: &'static str,
    pub why: &'static str,
}

impl Lost {
    /// The stderr line, `tool: lost N <what> (<why>)`, or none if nothing was lost.
    pub fn line(&self, tool: &str) -> Option<String> {
        (self.count > 0).then(|| format!("{tool}: lost {} {} ({})", self.count, self.what, self.why))
    }

    /// Reports the loss at the end of a run, if any: its line on stderr and, for `--json` output, the same as one
    /// more JSON line on `out`.
    pub fn report(&self, out: &mut Output, json: bool) -> io::Result<()> {
        let Some(line) = self.line(crate::identity::invoked_name()) else { return Ok(()) };
        eprintln!("{line}");
        if json {
            out.json_line(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_records_are_one_line_or_none() {
        let lost = Lost { count: 3, what: "execs", why: RING_FULL };
        assert_eq!(lost.line("execsnoop").as_deref(), Some("execsnoop: lost 3 execs (ring buffer full)"));
        assert_eq!(Lost { count: 0, ..lost }.line("execsnoop"), None);
        assert_eq!(serde_json::to_string(&lost).unwrap(), r#"{"lost":3,"what":"execs","why":"ring buffer full"}"#);
    }

    #[test]
    fn counters_of_several_objects_add_up() {
        let (a, b) = (2u64, 5u64);
        let stream = EventStream::shared(Vec::new(), vec![&a, &b], "events");
        assert_eq!(stream.lost().count, 7);
    }
}
