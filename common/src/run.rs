// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The life of a running tool: wait for intervals or events, stop on a signal.
//!
//! (A tool's body is run, and its result turned into an exit status, by [`crate::host::entry`].) [`Signals`]
//! catches SIGINT, SIGTERM and SIGHUP
//! so the tool can print what it has and detach cleanly, and watches a pipe on stdout: when its reader goes away
//! (`tool | head -1`), that is a stop too, noticed at once rather than at the next write; [`run_intervals`] drives histogram tools through
//! `[interval] [count]` and calls the report once more, for the partial interval, when a signal arrives.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// SIGINT, SIGTERM and SIGHUP, caught: the first one asks the tool to stop. So does the reader of a stdout pipe
/// going away.
pub struct Signals {
    stop: Arc<AtomicBool>,
    wake: UnixStream,
    /// Stdout is a pipe, watched for its reader going away.
    stdout_pipe: bool,
    /// The reader of the stdout pipe went away.
    stdout_gone: AtomicBool,
    /// The handlers installed, removed when this ends (the exporter starts and stops tools in one process).
    handlers: Vec<signal_hook::SigId>,
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.handlers.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// True if file descriptor `fd` is a pipe (or FIFO).
fn is_pipe(fd: BorrowedFd<'_>) -> bool {
    nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO)
}

/// The descriptor of this process's stdout.
fn stdout_fd() -> BorrowedFd<'static> {
    // SAFETY: descriptor 1 stays open for the life of the process (nothing here closes it).
    unsafe { BorrowedFd::borrow_raw(libc::STDOUT_FILENO) }
}

impl Signals {
    /// Installs the handlers: SIGINT, SIGTERM and, if `stop_on_hup`, SIGHUP. A tool is given them by its host
    /// ([`crate::host::Host::signals`]) before it loads anything, so a signal during start-up still ends it
    /// cleanly; under the exporter SIGHUP is the exporter's reload, not a stop.
    pub fn install(stop_on_hup: bool) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (wake, notify) = UnixStream::pair().context("creating the signal pipe")?;
        wake.set_nonblocking(true)?;
        notify.set_nonblocking(true)?;
        let mut handlers = Vec::new();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            if sig == libc::SIGHUP && !stop_on_hup {
                continue;
            }
            handlers.push(signal_hook::flag::register(sig, Arc::clone(&stop)).context("installing signal handlers")?);
            handlers.push(
                signal_hook::low_level::pipe::register(sig, notify.try_clone()?)
                    .context("installing signal handlers")?,
            );
        }
        Ok(Signals { stop, wake, stdout_pipe: is_pipe(stdout_fd()), stdout_gone: AtomicBool::new(false), handlers })
    }

    /// True once a stop signal has arrived or the reader of a stdout pipe has gone away.
    pub fn stopped(&self) -> bool {
        if self.stop.load(Ordering::SeqCst) || self.stdout_gone.load(Ordering::SeqCst) {
            return true;
        }
        let mut fds = self.stdout_pollfd();
        if !fds.is_empty() && poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0) {
            self.note_stdout(&fds[0]);
        }
        self.stdout_gone.load(Ordering::SeqCst)
    }

    /// True once a stop has been noted: a stop signal, or the reader of stdout gone as last polled. Unlike
    /// [`Signals::stopped`] it makes no system call, so it can be asked once per record.
    pub fn stop_noted(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.stdout_gone.load(Ordering::SeqCst)
    }

    /// True once the reader of the stdout pipe has gone away (the tool ends quietly: nobody reads its report).
    pub fn stdout_gone(&self) -> bool {
        self.stdout_gone.load(Ordering::SeqCst)
    }

    /// Stdout to poll for POLLERR (always reported; no events asked), if it is a pipe.
    fn stdout_pollfd(&self) -> Vec<PollFd<'static>> {
        if self.stdout_pipe {
            vec![PollFd::new(stdout_fd(), PollFlags::empty())]
        } else {
            Vec::new()
        }
    }

    /// Records the reader of the stdout pipe going away, from a polled stdout descriptor.
    fn note_stdout(&self, fd: &PollFd<'_>) {
        if fd.revents().is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL)) {
            self.stdout_gone.store(true, Ordering::SeqCst);
        }
    }

    /// Waits up to `timeout` for descriptor `fd` to be readable, a stop signal or the reader of the stdout pipe
    /// going away. Returns true if `fd` is readable (the caller then reads it); check [`Signals::stopped`] after.
    pub fn wait_readable(&self, fd: BorrowedFd<'_>, timeout: Duration) -> bool {
        if self.stopped() {
            return false;
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
        let mut fds = vec![PollFd::new(fd, PollFlags::POLLIN), PollFd::new(self.wake.as_fd(), PollFlags::POLLIN)];
        fds.extend(self.stdout_pollfd());
        if poll(&mut fds, timeout).is_err() {
            return false;
        }
        if fds[1].any().unwrap_or(false) {
            let mut drain = [0u8; 64];
            let _ = (&self.wake).read(&mut drain);
        }
        if let Some(out) = fds.get(2) {
            self.note_stdout(out);
        }
        fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN))
    }

    /// Waits up to `timeout` for any of `fds` (their events set on return), a stop signal or the reader of the
    /// stdout pipe going away; check [`Signals::stopped`] after.
    pub fn poll_with<'a>(&'a self, fds: &mut Vec<PollFd<'a>>, timeout: Duration) {
        if self.stopped() {
            return;
        }
        let n = fds.len();
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        fds.push(PollFd::new(self.wake.as_fd(), PollFlags::POLLIN));
        fds.extend(self.stdout_pollfd());
        if poll(fds, PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)).is_ok() {
            if fds[n].any().unwrap_or(false) {
                let mut drain = [0u8; 64];
                let _ = (&self.wake).read(&mut drain);
            }
            if let Some(out) = fds.get(n + 1) {
                self.note_stdout(out);
            }
        }
        fds.truncate(n);
    }

    /// Sleeps until `deadline` or a stop signal (or the reader of a stdout pipe going away), whichever comes first.
    /// Returns true if the sleep was cut short by a stop.
    pub fn sleep_until(&self, deadline: Option<Instant>) -> bool {
        loop {
            if self.stopped() {
                return true;
            }
            let timeout = match deadline {
                None => PollTimeout::NONE,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    // Round up so we never wake a hair early and spin.
                    let ms = left.as_millis().saturating_add(1).min(i32::MAX as u128) as i32;
                    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
                }
            };
            let mut fds = vec![PollFd::new(self.wake.as_fd(), PollFlags::POLLIN)];
            fds.extend(self.stdout_pollfd());
            // EINTR just loops; a readable pipe means a signal was caught.
            if let Ok(n) = poll(&mut fds, timeout) {
                if n > 0 {
                    if fds[0].any().unwrap_or(false) {
                        let mut drain = [0u8; 64];
                        let _ = (&self.wake).read(&mut drain);
                    }
                    if let Some(out) = fds.get(1) {
                        self.note_stdout(out);
                    }
                }
            }
        }
    }
}

/// Whether a report is the last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// More intervals follow.
    Interval,
    /// The last report: count reached, or a signal arrived.
    Last,
}

/// Calls `report` every `interval` (on a fixed schedule, so intervals do not drift) until `count` reports have
/// been made or a signal arrives; a signal triggers one final report for the partial interval. Without an
/// interval, waits for a signal and reports once. A deadline too far to compute is waited for as "until a
/// signal" (no arithmetic here can panic, whatever the interval). When the reader of a stdout pipe has gone
/// away, nothing more is reported. Before each report, the runs of the tool's probes the kernel skipped since the
/// last one are said on stderr ([`crate::attach::skipped`]): events the report cannot hold.
pub fn run_intervals(
    signals: &Signals,
    interval: Option<Duration>,
    count: Option<u64>,
    mut report: impl FnMut(Tick) -> Result<()>,
) -> Result<()> {
    let start = Instant::now();
    let mut done = 0u64;
    let mut skipped = crate::attach::maps::DropCounter::new("events", crate::attach::skipped::WHY);
    loop {
        let deadline = interval.and_then(|i| {
            let n = u32::try_from(done.saturating_add(1)).ok()?;
            start.checked_add(i.checked_mul(n)?)
        });
        let signalled = signals.sleep_until(deadline);
        if signals.stdout_gone() {
            return Ok(());
        }
        done = done.saturating_add(1);
        let last = signalled || count.is_some_and(|c| done >= c) || interval.is_none();
        skipped.check(&crate::attach::skipped::skipped_runs());
        report(if last { Tick::Last } else { Tick::Interval })?;
        if last {
            return Ok(());
        }
    }
}

/// The length of each report of [`run_intervals`], for tools that print rates: the whole interval, or the part
/// of the last one that a signal cut short. Made just before `run_intervals` takes its own start, so an interval
/// that ends before this clock's deadline ended before the loop's.
pub struct IntervalClock {
    start: Instant,
    interval: Duration,
    reports: u32,
}

impl IntervalClock {
    pub fn start(interval: Duration) -> Self {
        IntervalClock { start: Instant::now(), interval, reports: 0 }
    }

    /// How long the interval now being reported lasted (within a millisecond of the whole: the whole).
    pub fn next_length(&mut self) -> Duration {
        let began = self.start + self.interval.saturating_mul(self.reports);
        self.reports = self.reports.saturating_add(1);
        let length = Instant::now().saturating_duration_since(began).min(self.interval);
        if length + Duration::from_millis(1) >= self.interval {
            self.interval
        } else {
            length
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_stop_after_count() {
        let signals = Signals::install(true).unwrap();
        let mut ticks = Vec::new();
        run_intervals(&signals, Some(Duration::from_millis(10)), Some(3), |t| {
            ticks.push(t);
            Ok(())
        })
        .unwrap();
        assert_eq!(ticks, vec![Tick::Interval, Tick::Interval, Tick::Last]);
    }

    #[test]
    fn a_cut_interval_has_its_own_length() {
        let mut clock = IntervalClock::start(Duration::from_secs(3600));
        let length = clock.next_length();
        assert!(length < Duration::from_secs(1), "{length:?}");
        let mut clock = IntervalClock::start(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(clock.next_length(), Duration::from_millis(1));
    }
}
