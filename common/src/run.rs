//! The life of a tool: start, wait for intervals or events, stop on a signal, exit with one clear line.
//!
//! [`main`] wraps a tool's body: it reports an error as one line `tool: message` on stderr with exit status 1,
//! and treats a closed stdout pipe as a normal, quiet end (exit 0). [`Signals`] catches SIGINT, SIGTERM and SIGHUP
//! so the tool can print what it has and detach cleanly; [`run_intervals`] drives histogram tools through
//! `[interval] [count]` and calls the report once more, for the partial interval, when a signal arrives.

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::output::stdout::is_closed_pipe;

/// Runs a tool's body and turns its result into an exit status: 0 on success or on a closed stdout pipe,
/// 1 with `tool: error` on stderr otherwise (the tool named as it was invoked). Usage errors (exit 2) are
/// [`crate::cli::parse`]'s, before this runs.
pub fn main(body: impl FnOnce() -> Result<()>) -> ExitCode {
    let tool = crate::tool::invoked_name();
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if is_closed_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{tool}: {}", one_line(&err));
            ExitCode::FAILURE
        }
    }
}

/// [`main`] for a tool that loads BPF programs: the preflight checks (privileges, kernel BTF) come first, and
/// libbpf's own messages are shown at the tool's `-v` level, so no tool can forget either.
pub fn bpf_main(verbose: crate::cli::Verbose, body: impl FnOnce() -> Result<()>) -> ExitCode {
    main(|| {
        crate::attach::features::preflight()?;
        crate::attach::loader::init_libbpf_log(verbose.level);
        body()
    })
}

/// The error and its causes on one line, without repeating a cause the message already contains.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}

/// SIGINT, SIGTERM and SIGHUP, caught: the first one asks the tool to stop.
pub struct Signals {
    stop: Arc<AtomicBool>,
    wake: UnixStream,
}

impl Signals {
    /// Installs the handlers. Call before attaching so that a signal during start-up still ends the tool cleanly.
    pub fn install() -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (wake, notify) = UnixStream::pair().context("creating the signal pipe")?;
        wake.set_nonblocking(true)?;
        notify.set_nonblocking(true)?;
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            signal_hook::flag::register(sig, Arc::clone(&stop)).context("installing signal handlers")?;
            signal_hook::low_level::pipe::register(sig, notify.try_clone()?).context("installing signal handlers")?;
        }
        Ok(Signals { stop, wake })
    }

    /// True once a stop signal has arrived.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Sleeps until `deadline` or a stop signal, whichever comes first. Returns true if a signal arrived.
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
            let mut fds = [PollFd::new(self.wake.as_fd(), PollFlags::POLLIN)];
            // EINTR just loops; a readable pipe means a signal was caught.
            if let Ok(n) = poll(&mut fds, timeout) {
                if n > 0 {
                    let mut drain = [0u8; 64];
                    let _ = (&self.wake).read(&mut drain);
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
/// interval, waits for a signal and reports once.
pub fn run_intervals(
    signals: &Signals,
    interval: Option<Duration>,
    count: Option<u64>,
    mut report: impl FnMut(Tick) -> Result<()>,
) -> Result<()> {
    let start = Instant::now();
    let mut done = 0u64;
    loop {
        let deadline = interval.map(|i| start + i * (done as u32 + 1));
        let signalled = signals.sleep_until(deadline);
        done += 1;
        let last = signalled || count.is_some_and(|c| done >= c) || interval.is_none();
        report(if last { Tick::Last } else { Tick::Interval })?;
        if last {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_causes_without_repeats() {
        let err = anyhow::anyhow!("disk not found").context("resolving -d sdz");
        assert_eq!(one_line(&err), "resolving -d sdz: disk not found");
        let err = anyhow::anyhow!("x").context("x failed: x");
        assert_eq!(one_line(&err), "x failed: x");
    }

    #[test]
    fn intervals_stop_after_count() {
        let signals = Signals::install().unwrap();
        let mut ticks = Vec::new();
        run_intervals(&signals, Some(Duration::from_millis(10)), Some(3), |t| {
            ticks.push(t);
            Ok(())
        })
        .unwrap();
        assert_eq!(ticks, vec![Tick::Interval, Tick::Interval, Tick::Last]);
    }
}
