// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcptracer's output: BCC's columns (`[TIME(s)] [UID] T PID COMM IP SADDR DADDR SPORT DPORT`, IPv6 addresses in
//! brackets; with -v the type spelled out, nanoseconds and a NETNS column), or JSON lines with tcplife's names.

use std::io::{self, Write};
use std::net::IpAddr;

use common::output::name::Name;
use common::output::sockevents::{Conn, JsonConn, SinceFirst};
use common::output::stdout::{clock_rfc3339, Output, TraceStart};
use serde::Serialize;

use crate::bpf::consts::{EV_ACCEPT, EV_CLOSE, EV_CONNECT};
use crate::bpf::types::event;

// SAFETY: #[repr(C)] struct of integers and integer arrays, with explicit padding fields.
unsafe impl plain::Plain for event {}

/// What happened to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Connect,
    Accept,
    Close,
}

impl Kind {
    fn from_code(code: u32) -> Option<Kind> {
        match code as u64 {
            c if c == EV_CONNECT as u64 => Some(Kind::Connect),
            c if c == EV_ACCEPT as u64 => Some(Kind::Accept),
            c if c == EV_CLOSE as u64 => Some(Kind::Close),
            _ => None,
        }
    }

    /// BCC's one-letter type.
    pub fn letter(self) -> &'static str {
        match self {
            Kind::Connect => "C",
            Kind::Accept => "A",
            Kind::Close => "X",
        }
    }

    /// The type spelled out (-v, and JSON).
    pub fn word(self) -> &'static str {
        match self {
            Kind::Connect => "connect",
            Kind::Accept => "accept",
            Kind::Close => "close",
        }
    }
}

/// One event, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpEvent {
    pub ts_ns: u64,
    pub kind: Kind,
    pub pid: u32,
    pub uid: u32,
    pub netns: u32,
    pub comm: Name,
    pub conn: Conn,
}

impl TcpEvent {
    /// Decodes a record; `None` for an unknown type or family (which the BPF side never sends).
    pub fn from_event(e: &event) -> Option<TcpEvent> {
        Some(TcpEvent {
            ts_ns: e.ts_ns,
            kind: Kind::from_code(e.r#type)?,
            pid: e.pid,
            uid: e.uid,
            netns: e.netns,
            comm: Name::from_c(&e.comm),
            conn: Conn::decode(e.family, &e.laddr, e.lport, &e.raddr, e.rport)?,
        })
    }
}

/// Which optional columns to print.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub json: bool,
    /// `-t`: time since the first event (seconds; nanoseconds with -v).
    pub timestamp: bool,
    /// `-v`: the type spelled out, and the NETNS column unless `netns` is off.
    pub verbose: bool,
    /// No -N filter: the NETNS column is worth printing (with -v).
    pub netns: bool,
    /// `-U`: the UID.
    pub uid: bool,
}

#[derive(Serialize)]
struct JsonEvent<'a> {
    time: String,
    ts: f64,
    r#type: &'static str,
    pid: u32,
    uid: u32,
    comm: &'a Name,
    #[serde(flatten)]
    conn: JsonConn,
    netns: u32,
}

/// Prints the banner and header, and one line per event, flushing each.
pub struct Printer {
    style: Style,
    since_first: SinceFirst,
    /// JSON's `ts` counts from it.
    start: TraceStart,
    first_ns: Option<u64>,
}

/// BCC's address column: IPv6 in brackets.
fn addr(a: IpAddr) -> String {
    match a {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
}

impl Printer {
    pub fn new(style: Style) -> Self {
        Printer { style, since_first: SinceFirst::default(), start: TraceStart::now(), first_ns: None }
    }

    /// BCC's banner and column header (nothing for JSON).
    pub fn write_header(&self, out: &mut Output) -> io::Result<()> {
        if self.style.json {
            return Ok(());
        }
        writeln!(out, "Tracing TCP established connections. Ctrl-C to end.")?;
        writeln!(out, "{}", self.header())?;
        out.flush()
    }

    fn header(&self) -> String {
        let s = self.style;
        let mut line = String::new();
        if s.timestamp {
            line += &if s.verbose { format!("{:<14}", "TIME(ns)") } else { format!("{:<9}", "TIME(s)") };
        }
        if s.uid {
            line += &format!("{:<6}", "UID");
        }
        if s.verbose {
            line += &format!(
                "{:<12} {:<6} {:<16} {:<2} {:<16} {:<16} {:<6} {:<7}",
                "TYPE", "PID", "COMM", "IP", "SADDR", "DADDR", "SPORT", "DPORT"
            );
            if s.netns {
                line += &format!("{:<8}", "NETNS");
            }
        } else {
            line += &format!(
                "{:<2} {:<6} {:<16} {:<2} {:<16} {:<16} {:<6} {:<6}",
                "T", "PID", "COMM", "IP", "SADDR", "DADDR", "SPORT", "DPORT"
            );
        }
        line.trim_end().to_string()
    }

    /// Prints one event.
    pub fn write(&mut self, out: &mut Output, e: &TcpEvent) -> io::Result<()> {
        let since_first = self.since_first.secs(e.ts_ns);
        let first = *self.first_ns.get_or_insert(e.ts_ns);
        if self.style.json {
            return out.json_line(&JsonEvent {
                time: clock_rfc3339(),
                ts: self.start.secs(e.ts_ns),
                r#type: e.kind.word(),
                pid: e.pid,
                uid: e.uid,
                comm: &e.comm,
                conn: e.conn.json(),
                netns: e.netns,
            });
        }
        writeln!(out, "{}", self.row(e, since_first, e.ts_ns.saturating_sub(first)))?;
        out.flush()
    }

    /// BCC's `%-2s %-6d %-16s %-2d %-16s %-16s %-6d %-6d` (`%-12s` type with -v, then ` %-8d` NETNS).
    fn row(&self, e: &TcpEvent, since_first: f64, since_first_ns: u64) -> String {
        let s = self.style;
        let mut line = String::new();
        if s.timestamp {
            line += &if s.verbose { format!("{since_first_ns:<14}") } else { format!("{since_first:<9.3}") };
        }
        if s.uid {
            line += &format!("{:<6}", e.uid);
        }
        if s.verbose {
            line += &format!("{:<12} ", e.kind.word());
        } else {
            line += &format!("{:<2} ", e.kind.letter());
        }
        line += &format!(
            "{:<6} {:<16} {:<2} {:<16} {:<16} {:<6} {:<6}",
            e.pid,
            e.comm,
            e.conn.family.version(),
            addr(e.conn.laddr),
            addr(e.conn.raddr),
            e.conn.lport,
            e.conn.rport
        );
        if s.verbose && s.netns {
            line += &format!(" {:<8}", e.netns);
        }
        line.trim_end().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::domain::net::Family;

    fn style(verbose: bool, timestamp: bool) -> Style {
        Style { json: false, timestamp, verbose, netns: true, uid: false }
    }

    fn ev(kind: Kind, v6: bool) -> TcpEvent {
        let (family, l, r): (Family, IpAddr, IpAddr) = if v6 {
            (Family::V6, "::1".parse().unwrap(), "::1".parse().unwrap())
        } else {
            (Family::V4, "192.168.1.2".parse().unwrap(), "192.168.1.1".parse().unwrap())
        };
        TcpEvent {
            ts_ns: 0,
            kind,
            pid: 28943,
            uid: 0,
            netns: 4026531840,
            comm: "telnet".into(),
            conn: Conn { family, laddr: l, lport: 59306, raddr: r, rport: 23 },
        }
    }

    #[test]
    fn columns_match_bcc() {
        let p = Printer::new(style(false, false));
        assert_eq!(p.header(), "T  PID    COMM             IP SADDR            DADDR            SPORT  DPORT");
        assert_eq!(
            p.row(&ev(Kind::Connect, false), 0.0, 0),
            "C  28943  telnet           4  192.168.1.2      192.168.1.1      59306  23"
        );
        assert_eq!(
            p.row(&ev(Kind::Close, true), 0.0, 0),
            "X  28943  telnet           6  [::1]            [::1]            59306  23"
        );
        let p = Printer::new(style(false, true));
        assert_eq!(p.header(), "TIME(s)  T  PID    COMM             IP SADDR            DADDR            SPORT  DPORT");
        assert_eq!(
            p.row(&ev(Kind::Accept, false), 3.546, 0),
            "3.546    A  28943  telnet           4  192.168.1.2      192.168.1.1      59306  23"
        );
        let p = Printer::new(style(true, false));
        assert_eq!(
            p.header(),
            "TYPE         PID    COMM             IP SADDR            DADDR            SPORT  DPORT  NETNS"
        );
        assert_eq!(
            p.row(&ev(Kind::Connect, false), 0.0, 0),
            "connect      28943  telnet           4  192.168.1.2      192.168.1.1      59306  23     4026531840"
        );
    }
}
