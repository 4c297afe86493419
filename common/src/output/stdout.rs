// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Where tool output goes: stdout, flushed per record or interval, with a quiet exit on a closed pipe.
//!
//! Tools write through [`Output`], which buffers stdout and is flushed by the tool after each event line or
//! interval so that `tool | grep ...` sees data at once (an event stream holds those flushes back until the
//! batch of records at hand is handled: [`Output::hold`]). A write to a closed pipe (`tool | head -1`) surfaces as
//! an `io::Error` of kind `BrokenPipe`; [`is_closed_pipe`] recognises it anywhere in an error chain so that the
//! run loop ends the tool quietly with exit status 0 instead of a panic. `--json` output is one JSON object a
//! line ([`Output::json_line`]).

use std::io::{self, BufWriter, Stdout, Write};

use chrono::Local;
use serde::Serialize;

/// Buffered stdout that the tool flushes after each record.
pub struct Output {
    inner: BufWriter<Stdout>,
    /// Flushes are held back ([`Output::hold`]).
    held: bool,
}

impl Default for Output {
    fn default() -> Self {
        Self::new()
    }
}

impl Output {
    pub fn new() -> Self {
        Output { inner: BufWriter::with_capacity(64 * 1024, io::stdout()), held: false }
    }

    /// Holds the tool's flushes back, so that the lines of a batch of records go out in one write
    /// ([`Output::flush_held`] once the batch is handled) rather than one write per line: an event tool's
    /// front end keeps up with bursts at less cost. (A full buffer is still written at once.)
    pub fn hold(&mut self) {
        self.held = true;
    }

    /// Writes what the held flushes kept back.
    pub fn flush_held(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    /// Ends [`Output::hold`], writing what is buffered.
    pub fn release(&mut self) -> io::Result<()> {
        self.held = false;
        self.inner.flush()
    }

    /// Writes `value` as one line of JSON and flushes.
    pub fn json_line<T: Serialize>(&mut self, value: &T) -> io::Result<()> {
        serde_json::to_writer(&mut self.inner, value).map_err(io::Error::from)?;
        self.inner.write_all(b"\n")?;
        self.flush()
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.held {
            return Ok(());
        }
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

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`, so that an event's time minus this at the
/// start of tracing is the time since tracing started (JSON's `ts`, docs/json.md).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// When the tool began tracing, on CLOCK_MONOTONIC (the clock of `bpf_ktime_get_ns`): what JSON's `ts` counts
/// from in every tool (docs/json.md), whatever the text columns count from (BCC's TIME(s) starts at the first
/// event shown).
#[derive(Debug, Clone, Copy)]
pub struct TraceStart(u64);

impl TraceStart {
    pub fn now() -> TraceStart {
        TraceStart(monotonic_ns())
    }

    /// Seconds from the start to an event the BPF side stamped `ts_ns` (0 for one stamped before it).
    pub fn secs(self, ts_ns: u64) -> f64 {
        ts_ns.saturating_sub(self.0) as f64 / 1e9
    }

    /// Seconds from the start to now (a report's `ts`).
    pub fn elapsed(self) -> f64 {
        self.secs(monotonic_ns())
    }
}

impl Default for TraceStart {
    fn default() -> Self {
        TraceStart::now()
    }
}

/// Local wall-clock time in RFC 3339 with milliseconds, for JSON records (their `time`, docs/json.md).
pub fn clock_rfc3339() -> String {
    Local::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, false)
}

/// A name from the traced system (a file name, a comm, a command line) as a text column shows it, escaped the way
/// `ls -b` does so that no byte of it can split a row or reach the terminal as a control sequence: `\n`, `\t`,
/// `\r` (and `\a`, `\b`, `\v`, `\f`) by name, other control characters in octal (`\033`, `\177`), a backslash
/// doubled, bytes that are not UTF-8 and C1 control characters (U+0080 to U+009F) as `\xHH` per byte. Printable
/// text, non-ASCII included, is left as it is. JSON output escapes on its own: give it the plain text.
pub fn printable(bytes: &[u8]) -> String {
    escaped(bytes, false)
}

/// Text of several lines from the traced system (sslsniff's payload) escaped as [`printable`] escapes a name,
/// except that its line ends stay as they are: a newline, and a carriage return just before one (CRLF), which
/// cannot move the cursor anywhere a newline does not; tabs stay too.
pub fn printable_lines(bytes: &[u8]) -> String {
    escaped(bytes, true)
}

fn escaped(bytes: &[u8], keep_lines: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        let mut chars = chunk.valid().chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\n' | '\t' if keep_lines => out.push(c),
                '\r' if keep_lines && chars.peek() == Some(&'\n') => out.push(c),
                '\\' if !keep_lines => out.push_str("\\\\"),
                '\x07' => out.push_str("\\a"),
                '\x08' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\x0b' => out.push_str("\\v"),
                '\x0c' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                c if c.is_ascii_control() => {
                    let _ = write!(out, "\\{:03o}", c as u32);
                }
                c if c.is_control() => {
                    for b in c.encode_utf8(&mut [0; 4]).bytes() {
                        let _ = write!(out, "\\x{b:02x}");
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_print_as_ls_b_shows_them() {
        assert_eq!(printable(b"plain name.txt"), "plain name.txt");
        assert_eq!(printable("caf\u{e9} \u{65e5}".as_bytes()), "caf\u{e9} \u{65e5}");
        assert_eq!(printable(b"a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(printable(b"\x1b[31mred\x1b[0m"), "\\033[31mred\\033[0m");
        assert_eq!(printable(b"del\x7f\x01"), "del\\177\\001");
        assert_eq!(printable(b"back\\slash"), "back\\\\slash");
        assert_eq!(printable(b"bad\xff\xfe utf8 \xe6\x97"), "bad\\xff\\xfe utf8 \\xe6\\x97");
        // C1 controls (U+009B is a CSI to some terminals).
        assert_eq!(printable("x\u{9b}2J".as_bytes()), "x\\xc2\\x9b2J");
        assert_eq!(
            printable_lines(b"GET / HTTP/1.1\r\nHost: a\tb\r\n\x1b[2J\rX\\\xff\n"),
            "GET / HTTP/1.1\r\nHost: a\tb\r\n\\033[2J\\rX\\\\xff\n"
        );
    }

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
