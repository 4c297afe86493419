// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Where tool output goes: stdout, flushed per record or interval, with a quiet exit on a closed pipe.
//!
//! Tools write through [`Output`], which buffers stdout and is flushed by the tool after each event line or
//! interval so that `tool | grep ...` sees data at once. A write to a closed pipe (`tool | head -1`) surfaces as
//! an `io::Error` of kind `BrokenPipe`; [`is_closed_pipe`] recognises it anywhere in an error chain so that the
//! run loop ends the tool quietly with exit status 0 instead of a panic. `--json` output is one JSON object a
//! line ([`Output::json_line`]).

use std::io::{self, BufWriter, Stdout, Write};

use chrono::Local;
use serde::Serialize;

/// Buffered stdout that the tool flushes after each record.
pub struct Output {
    inner: BufWriter<Stdout>,
}

impl Default for Output {
    fn default() -> Self {
        Self::new()
    }
}

impl Output {
    pub fn new() -> Self {
        Output { inner: BufWriter::with_capacity(64 * 1024, io::stdout()) }
    }

    /// Writes `value` as one line of JSON and flushes.
    pub fn json_line<T: Serialize>(&mut self, value: &T) -> io::Result<()> {
        serde_json::to_writer(&mut self.inner, value).map_err(io::Error::from)?;
        self.inner.write_all(b"\n")?;
        self.inner.flush()
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// True if the error, or any error it wraps, is a write to a closed pipe.
pub fn is_closed_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe))
}

/// Local wall-clock time as `HH:MM:SS`, BCC's `-T` format.
pub fn clock_hms() -> String {
    Local::now().format("%H:%M:%S").to_string()
}

/// Local wall-clock time in RFC 3339 with milliseconds, for JSON records.
pub fn clock_rfc3339() -> String {
    Local::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_pipe_is_found_through_context() {
        let err = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("printing");
        assert!(is_closed_pipe(&err));
        let other = anyhow::Error::from(io::Error::from(io::ErrorKind::NotFound));
        assert!(!is_closed_pipe(&other));
    }

    #[test]
    fn clock_formats() {
        let hms = clock_hms();
        assert_eq!(hms.len(), 8);
        assert_eq!(hms.as_bytes()[2], b':');
        assert!(chrono::DateTime::parse_from_rfc3339(&clock_rfc3339()).is_ok());
    }
}
