// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpconnlat's output: BCC's columns (`PID COMM IP SADDR DADDR DPORT LAT(ms)`, with `-L` an LPORT column and
//! with `-t` a TIME(s) column first) or JSON lines.
//!
//! The text layout is BCC's `tools/tcpconnlat.py` format strings: LAT(ms) has two decimals of whole
//! microseconds, TIME(s) three decimals of the seconds since the first connect printed. JSON lines carry the
//! exact nanoseconds beside the milliseconds.

use std::io::{self, Write};

use common::output::name::Name;
use common::output::sockevents::{Conn, JsonConn, SinceFirst};
use common::output::stdout::{clock_rfc3339, Output, TraceStart};
use serde::Serialize;

// SAFETY: a #[repr(C)] struct of integers and integer arrays, with no padding the BPF side leaves unset.
unsafe impl plain::Plain for crate::bpf::types::event {}

/// One connect, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct Connect {
    pub ts_ns: u64,
    pub lat_ns: u64,
    pub pid: u32,
    pub comm: Name,
    pub conn: Conn,
}

impl Connect {
    /// Decodes a record; `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn from_event(e: &crate::bpf::types::event) -> Option<Connect> {
        Some(Connect {
            ts_ns: e.ts_ns,
            lat_ns: e.lat_ns,
            pid: e.pid,
            comm: Name::from_c(&e.comm),
            conn: Conn::decode(e.family, &e.saddr, e.lport, &e.daddr, e.rport)?,
        })
    }

    /// The latency in milliseconds, from whole microseconds as BCC computes it.
    fn ms(&self) -> f64 {
        (self.lat_ns / 1000) as f64 / 1000.0
    }
}

/// How to print connects.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub json: bool,
    /// `-L`: the local port column.
    pub lport: bool,
    /// `-t`: seconds since the first connect printed.
    pub since_first: bool,
}

#[derive(Serialize)]
struct JsonConnect<'a> {
    time: String,
    ts: f64,
    pid: u32,
    comm: &'a Name,
    #[serde(flatten)]
    conn: JsonConn,
    latency_ms: f64,
    latency_ns: u64,
}

/// Prints the header and one line per connect, flushing each.
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
        let time = if self.style.since_first { format!("{:<9}", "TIME(s)") } else { String::new() };
        let line = columns(self.style.lport, HEADER.map(String::from));
        writeln!(out, "{time}{line}")?;
        out.flush()
    }

    /// Prints one connect.
    pub fn write(&mut self, out: &mut Output, c: &Connect) -> io::Result<()> {
        let since_first = self.since_first.secs(c.ts_ns);
        if self.style.json {
            return out.json_line(&JsonConnect {
                time: clock_rfc3339(),
                ts: self.start.secs(c.ts_ns),
                pid: c.pid,
                comm: &c.comm,
                conn: c.conn.json(),
                latency_ms: c.lat_ns as f64 / 1e6,
                latency_ns: c.lat_ns,
            });
        }
        let time = if self.style.since_first { format!("{since_first:<9.3}") } else { String::new() };
        writeln!(out, "{time}{}", columns(self.style.lport, cells(c)))?;
        out.flush()
    }
}

const HEADER: [&str; 8] = ["PID", "COMM", "IP", "SADDR", "LPORT", "DADDR", "DPORT", "LAT(ms)"];

/// BCC's columns: LPORT only with `-L`.
fn columns(lport: bool, c: [String; 8]) -> String {
    let [pid, comm, ip, saddr, lp, daddr, dport, lat] = c;
    if lport {
        format!("{pid:<7} {comm:<12.12} {ip:<2} {saddr:<16} {lp:<6} {daddr:<16} {dport:<5} {lat}")
    } else {
        format!("{pid:<7} {comm:<12.12} {ip:<2} {saddr:<16} {daddr:<16} {dport:<5} {lat}")
    }
}

/// One connect's values in the order of BCC's columns.
fn cells(c: &Connect) -> [String; 8] {
    [
        c.pid.to_string(),
        c.comm.shown(),
        c.conn.family.version().to_string(),
        c.conn.laddr.to_string(),
        c.conn.lport.to_string(),
        c.conn.raddr.to_string(),
        c.conn.rport.to_string(),
        format!("{:.2}", c.ms()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect() -> Connect {
        Connect {
            ts_ns: 1_000_000,
            lat_ns: 1_650_999,
            pid: 1201,
            comm: "wget-with-a-long-name".into(),
            conn: Conn {
                family: common::domain::net::Family::V4,
                laddr: "10.153.223.157".parse().unwrap(),
                lport: 40000,
                raddr: "23.23.100.231".parse().unwrap(),
                rport: 80,
            },
        }
    }

    #[test]
    fn columns_match_bcc() {
        assert_eq!(
            columns(false, HEADER.map(String::from)),
            "PID     COMM         IP SADDR            DADDR            DPORT LAT(ms)"
        );
        assert_eq!(
            columns(false, cells(&connect())),
            "1201    wget-with-a- 4  10.153.223.157   23.23.100.231    80    1.65"
        );
        assert_eq!(
            columns(true, HEADER.map(String::from)),
            "PID     COMM         IP SADDR            LPORT  DADDR            DPORT LAT(ms)"
        );
        assert_eq!(
            columns(true, cells(&connect())),
            "1201    wget-with-a- 4  10.153.223.157   40000  23.23.100.231    80    1.65"
        );
    }

    #[test]
    fn timestamps_as_bcc() {
        let mut p = Printer::new(Style { json: false, lport: false, since_first: true });
        assert_eq!(p.since_first.secs(2_000_000_000), 0.0);
        assert_eq!(format!("{:<9.3}", p.since_first.secs(3_234_567_000)), "1.235    ");
    }
}
