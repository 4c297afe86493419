//! Event-stream tools: poll a BPF ring buffer until a signal, handing each record to the tool.
//!
//! [`poll_ring_buffer`] wakes on new records, on SIGINT/SIGTERM/SIGHUP, or when the reader of a stdout pipe goes
//! away (all three descriptors are polled together, so `tool | head -1` ends at once), drains
//! what is left before returning, and turns an error returned by the record handler (a closed stdout pipe,
//! typically) into the function's error instead of a panic inside libbpf's C callback. Records the BPF side
//! could not reserve are its to count (a `lost` counter in `.bss`, by convention) and the tool's to report.

use std::cell::RefCell;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use anyhow::{Context, Result};
use libbpf_rs::{ErrorKind, MapCore, RingBufferBuilder};

use crate::run::Signals;

/// How often the loop wakes without events, to check for a stop request.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Calls `handle` for every record of ring buffer `map` until a stop signal arrives or `handle` fails.
/// `until` is polled between batches; returning true ends the loop too (for `-d DURATION` style limits).
pub fn poll_ring_buffer(
    signals: &Signals,
    map: &dyn MapCore,
    mut until: impl FnMut() -> bool,
    handle: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let failure: RefCell<Option<anyhow::Error>> = RefCell::new(None);
    let handle = RefCell::new(handle);
    let mut builder = RingBufferBuilder::new();
    builder
        .add(map, |data: &[u8]| {
            if failure.borrow().is_some() {
                return -1;
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
    let ring = builder.build().context("setting up the ring buffer")?;

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
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) => return Err(err).context("polling the ring buffer"),
        }
    }
    if signals.stdout_gone() {
        return Ok(());
    }
    // Records already in the buffer when the stop came are still reported.
    let drained = ring.consume();
    if let Some(err) = failure.borrow_mut().take() {
        return Err(err);
    }
    drained.context("draining the ring buffer")
}
