// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpstates' output: BCC's columns (default, `-w` wide, `-s` CSV, with `-T`/`-t` time columns) or JSON lines.
//!
//! The text layouts are BCC's `tools/tcpstates.py` format strings: `SKADDR C-PID C-COMM LADDR LPORT RADDR RPORT
//! OLDSTATE -> NEWSTATE MS`, with an `IP` column under `-w` and `-s`; SKADDR is the socket's address in hex, MS the
//! time in the old state in milliseconds with three decimals of whole microseconds. JSON lines carry the exact
//! nanoseconds beside the milliseconds.

use std::io::{self, Write};

use common::domain::tcp::state_name;
use common::output::name::Name;
use common::output::sockevents::{time_prefix, Conn, JsonConn, Layout, SinceFirst, Style};
use common::output::stdout::{clock_hms, clock_rfc3339, Output, TraceStart};
use serde::Serialize;

// SAFETY: a #[repr(C)] struct of integers and integer arrays, with no padding the BPF side leaves unset.
unsafe impl plain::Plain for crate::bpf::types::event {}

/// One state change, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub ts_ns: u64,
    pub skaddr: u64,
    /// Time in the old state (0 when the socket's previous change was not seen).
    pub span_ns: u64,
    pub pid: u32,
    pub comm: Name,
    pub conn: Conn,
    pub oldstate: u8,
    pub newstate: u8,
}

impl Change {
    /// Decodes a record; `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn from_event(e: &crate::bpf::types::event) -> Option<Change> {
        Some(Change {
            ts_ns: e.ts_ns,
            skaddr: e.skaddr,
            span_ns: e.span_ns,
            pid: e.pid,
            comm: Name::from_c(&e.comm),
            conn: Conn::decode(e.family, &e.saddr, e.lport, &e.daddr, e.rport)?,
            oldstate: e.oldstate,
            newstate: e.newstate,
        })
    }

    /// The span in milliseconds, from whole microseconds as BCC computes it.
    fn ms(&self) -> f64 {
        (self.span_ns / 1000) as f64 / 1000.0
    }
}

#[derive(Serialize)]
struct JsonChange<'a> {
    time: String,
    ts: f64,
    skaddr: String,
    pid: u32,
    comm: &'a Name,
    #[serde(flatten)]
    conn: JsonConn,
    oldstate: String,
    newstate: String,
    duration_ms: f64,
    duration_ns: u64,
}

/// Prints the header and one line per change, flushing each.
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
        let mut line = self.prefix("TIME", "TIME(s)");
        line += &columns(self.style.layout, HEADER.map(String::from));
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// Prints one change.
    pub fn write(&mut self, out: &mut Output, c: &Change) -> io::Result<()> {
        let since_first = self.since_first.secs(c.ts_ns);
        if self.style.json {
            return out.json_line(&JsonChange {
                time: clock_rfc3339(),
                ts: self.start.secs(c.ts_ns),
                skaddr: format!("{:x}", c.skaddr),
                pid: c.pid,
                comm: &c.comm,
                conn: c.conn.json(),
                oldstate: state_name(c.oldstate),
                newstate: state_name(c.newstate),
                duration_ms: c.span_ns as f64 / 1e6,
                duration_ns: c.span_ns,
            });
        }
        let mut line = self.prefix(&clock_hms(), &format!("{since_first:.6}"));
        line += &columns(self.style.layout, cells(c));
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// The `-T` and `-t` columns, as BCC prints them before the others.
    fn prefix(&self, clock: &str, since: &str) -> String {
        let style = self.style;
        time_prefix(style.clock.then_some(clock), style.since_first.then_some(since), style.layout == Layout::Csv)
    }
}

const HEADER: [&str; 11] =
    ["SKADDR", "C-PID", "C-COMM", "IP", "LADDR", "LPORT", "RADDR", "RPORT", "OLDSTATE", "NEWSTATE", "MS"];

/// BCC's eleven columns (the IP column is left out of the default layout).
fn columns(layout: Layout, c: [String; 11]) -> String {
    let [sk, pid, comm, ip, laddr, lport, raddr, rport, old, new, ms] = c;
    match layout {
        Layout::Default => format!(
            "{sk:<16} {pid:<5} {comm:<10.10} {laddr:<15} {lport:<5} {raddr:<15} {rport:<5} {old:<11} -> {new:<11} {ms}"
        ),
        Layout::Wide => format!(
            "{sk:<16} {pid:<5} {comm:<16.16} {ip:<2} {laddr:<39} {lport:<5} {raddr:<39} {rport:<5} {old:<11} -> {new:<11} {ms}"
        ),
        Layout::Csv => format!("{sk},{pid},{comm},{ip},{laddr},{lport},{raddr},{rport},{old},{new},{ms}"),
    }
}

/// One change's values, in the order of BCC's columns (`columns` drops IP in the default layout).
fn cells(c: &Change) -> [String; 11] {
    [
        format!("{:x}", c.skaddr),
        c.pid.to_string(),
        c.comm.shown(),
        c.conn.family.version().to_string(),
        c.conn.laddr.to_string(),
        c.conn.lport.to_string(),
        c.conn.raddr.to_string(),
        c.conn.rport.to_string(),
        state_name(c.oldstate),
        state_name(c.newstate),
        format!("{:.3}", c.ms()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change() -> Change {
        Change {
            ts_ns: 5_000_000_000,
            skaddr: 0xffff9fd7e8192000,
            span_ns: 176_042_999,
            pid: 22384,
            comm: "curl-with-long-name".into(),
            conn: Conn {
                family: common::domain::net::Family::V4,
                laddr: "100.66.100.185".parse().unwrap(),
                lport: 63446,
                raddr: "52.33.159.26".parse().unwrap(),
                rport: 80,
            },
            oldstate: 1,
            newstate: 4,
        }
    }

    #[test]
    fn default_layout_matches_bcc() {
        assert_eq!(
            columns(Layout::Default, HEADER.map(String::from)),
            "SKADDR           C-PID C-COMM     LADDR           LPORT RADDR           RPORT OLDSTATE    -> NEWSTATE    MS"
        );
        assert_eq!(
            columns(Layout::Default, cells(&change())),
            "ffff9fd7e8192000 22384 curl-with- 100.66.100.185  63446 52.33.159.26    80    ESTABLISHED -> FIN_WAIT1   176.042"
        );
    }

    #[test]
    fn wide_and_csv_match_bcc() {
        let wide = columns(Layout::Wide, HEADER.map(String::from));
        assert!(wide.starts_with("SKADDR           C-PID C-COMM           IP LADDR    "), "{wide}");
        assert!(wide.ends_with(" RPORT OLDSTATE    -> NEWSTATE    MS"), "{wide}");
        assert_eq!(wide.len(), 16 + 1 + 5 + 1 + 16 + 1 + 2 + 1 + 39 + 1 + 5 + 1 + 39 + 1 + 5 + 1 + 11 + 4 + 11 + 1 + 2);
        assert_eq!(
            columns(Layout::Csv, HEADER.map(String::from)),
            "SKADDR,C-PID,C-COMM,IP,LADDR,LPORT,RADDR,RPORT,OLDSTATE,NEWSTATE,MS"
        );
        assert_eq!(
            columns(Layout::Csv, cells(&change())),
            "ffff9fd7e8192000,22384,curl-with-long-name,4,100.66.100.185,63446,52.33.159.26,80,ESTABLISHED,FIN_WAIT1,176.042"
        );
    }
}
