// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpaccept's output: BCC's columns (`[TIME] [TIME(s)] PID COMM IP RADDR RPORT LADDR LPORT`) or JSON lines with
//! tcplife's field names.

use std::io::{self, Write};

use common::output::name::Name;
use common::output::sockevents::{Conn, JsonConn, SinceFirst};
use common::output::stdout::{clock_hms, clock_rfc3339, Output, TraceStart};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and integer arrays, with no padding the BPF side leaves unset.
unsafe impl plain::Plain for event {}

/// One accepted connection, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct Accept {
    pub ts_ns: u64,
    pub pid: u32,
    pub comm: Name,
    pub conn: Conn,
}

impl Accept {
    /// Decodes a record; `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn from_event(e: &event) -> Option<Accept> {
        Some(Accept {
            ts_ns: e.ts_ns,
            pid: e.pid,
            comm: Name::from_c(&e.comm),
            conn: Conn::decode(e.family, &e.laddr, e.lport, &e.raddr, e.rport)?,
        })
    }
}

/// Which optional columns to print.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub json: bool,
    /// `-T`: wall-clock HH:MM:SS.
    pub time: bool,
    /// `-t`: seconds since the first accept.
    pub timestamp: bool,
}

#[derive(Serialize)]
struct JsonAccept<'a> {
    time: String,
    ts: f64,
    pid: u32,
    comm: &'a Name,
    #[serde(flatten)]
    conn: JsonConn,
}

/// Prints the header and one line per accept, flushing each.
pub struct Printer {
    style: Style,
    since_first: SinceFirst,
    /// JSON's `ts` counts from it.
    start: TraceStart,
}

impl Printer {
    pub fn new(style: Style) -> Self {
        Printer { style, since_first: SinceFirst::default(), start: TraceStart::now() }
    }

    /// The column header (nothing for JSON).
    pub fn write_header(&self, out: &mut Output) -> io::Result<()> {
        if self.style.json {
            return Ok(());
        }
        let line = self.prefix("TIME", "TIME(s)")
            + &columns(["PID", "COMM", "IP", "RADDR", "RPORT", "LADDR", "LPORT"].map(String::from));
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// Prints one accept.
    pub fn write(&mut self, out: &mut Output, a: &Accept) -> io::Result<()> {
        let since_first = self.since_first.secs(a.ts_ns);
        if self.style.json {
            return out.json_line(&JsonAccept {
                time: clock_rfc3339(),
                ts: self.start.secs(a.ts_ns),
                pid: a.pid,
                comm: &a.comm,
                conn: a.conn.json(),
            });
        }
        let line = self.prefix(&clock_hms(), &format!("{since_first:.3}"))
            + &columns([
                a.pid.to_string(),
                a.comm.shown(),
                a.conn.family.version().to_string(),
                a.conn.raddr.to_string(),
                a.conn.rport.to_string(),
                a.conn.laddr.to_string(),
                a.conn.lport.to_string(),
            ]);
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// BCC's `%-9s` time and `%-9.3f` timestamp columns.
    fn prefix(&self, clock: &str, since: &str) -> String {
        let mut s = String::new();
        if self.style.time {
            s += &format!("{clock:<9}");
        }
        if self.style.timestamp {
            s += &format!("{since:<9}");
        }
        s
    }
}

/// BCC's `%-7s %-12.12s %-2s %-16s %-5s %-16s %-5s`.
fn columns(c: [String; 7]) -> String {
    let [pid, comm, ip, raddr, rport, laddr, lport] = c;
    format!("{pid:<7} {comm:<12.12} {ip:<2} {raddr:<16} {rport:<5} {laddr:<16} {lport:<5}").trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_match_bcc() {
        let h = columns(["PID", "COMM", "IP", "RADDR", "RPORT", "LADDR", "LPORT"].map(String::from));
        assert_eq!(h, "PID     COMM         IP RADDR            RPORT LADDR            LPORT");
        let r = columns(
            ["907", "sshd-with-long-name", "4", "192.168.56.1", "32324", "192.168.56.102", "22"].map(String::from),
        );
        assert_eq!(r, "907     sshd-with-lo 4  192.168.56.1     32324 192.168.56.102   22");
    }
}
