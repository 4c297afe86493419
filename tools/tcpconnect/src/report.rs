// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpconnect's output: BCC's columns (`[TIME(s)] [UID] PID COMM IP SADDR [LPORT] DADDR DPORT [QUERY]`), BCC's `-c`
//! table (`LADDR RADDR RPORT CONNECTS`), or JSON lines with tcplife's field names.

use std::io::{self, Write};
use std::net::IpAddr;

use common::domain::net::{ip_addr, Family};
use common::output::name::Name;
use common::output::sockevents::{Conn, JsonConn, SinceFirst};
use common::output::stdout::{clock_rfc3339, Output, TraceStart};
use serde::Serialize;

use crate::bpf::types::{event, flow};

// SAFETY: #[repr(C)] structs of integers and integer arrays, with no padding the BPF side leaves unset.
unsafe impl plain::Plain for event {}
unsafe impl plain::Plain for flow {}

/// One connect, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct Connect {
    pub ts_ns: u64,
    pub pid: u32,
    pub uid: u32,
    pub comm: Name,
    pub conn: Conn,
}

impl Connect {
    /// Decodes a record; `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn from_event(e: &event) -> Option<Connect> {
        Some(Connect {
            ts_ns: e.ts_ns,
            pid: e.pid,
            uid: e.uid,
            comm: Name::from_c(&e.comm),
            conn: Conn::decode(e.family, &e.saddr, e.lport, &e.daddr, e.dport)?,
        })
    }
}

/// Which optional columns to print.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub json: bool,
    /// `-t`: seconds since the first connect.
    pub timestamp: bool,
    /// `-L`: the local port.
    pub lport: bool,
    /// `-U`: the UID.
    pub uid: bool,
    /// `-d`: the QUERY column, the name the destination was looked up by.
    pub dns: bool,
}

#[derive(Serialize)]
struct JsonConnect<'a> {
    time: String,
    ts: f64,
    pid: u32,
    uid: u32,
    comm: &'a Name,
    #[serde(flatten)]
    conn: JsonConn,
    /// `-d`: the QUERY column.
    #[serde(skip_serializing_if = "Option::is_none")]
    query: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonFlow {
    family: &'static str,
    laddr: String,
    raddr: String,
    rport: u16,
    connects: u64,
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
        let mut line = String::new();
        if self.style.timestamp {
            line += &format!("{:<9}", "TIME(s)");
        }
        if self.style.uid {
            line += &format!("{:<6}", "UID");
        }
        line += &self.columns(["PID", "COMM", "IP", "SADDR", "LPORT", "DADDR", "DPORT"].map(String::from));
        if self.style.dns {
            line += " QUERY";
        }
        writeln!(out, "{}", line.trim_end())?;
        out.flush()
    }

    /// Prints one connect; `query` is its QUERY column (with -d).
    pub fn write(&mut self, out: &mut Output, c: &Connect, query: Option<&str>) -> io::Result<()> {
        let since_first = self.since_first.secs(c.ts_ns);
        if self.style.json {
            return out.json_line(&JsonConnect {
                time: clock_rfc3339(),
                ts: self.start.secs(c.ts_ns),
                pid: c.pid,
                uid: c.uid,
                comm: &c.comm,
                conn: c.conn.json(),
                query,
            });
        }
        let mut line = String::new();
        if self.style.timestamp {
            line += &format!("{since_first:<9.3}");
        }
        if self.style.uid {
            line += &format!("{:<6}", c.uid);
        }
        line += &self.columns([
            c.pid.to_string(),
            c.comm.shown(),
            c.conn.family.version().to_string(),
            c.conn.laddr.to_string(),
            c.conn.lport.to_string(),
            c.conn.raddr.to_string(),
            c.conn.rport.to_string(),
        ]);
        if let Some(query) = query.filter(|_| self.style.dns) {
            line += " ";
            line += query;
        }
        writeln!(out, "{}", line.trim_end())?;
        out.flush()
    }

    /// BCC's `%-7s %-12.12s %-2s %-16s [%-6s] %-16s %-6s` (the caller trims the end of the line).
    fn columns(&self, c: [String; 7]) -> String {
        let [pid, comm, ip, saddr, lport, daddr, dport] = c;
        let lport = if self.style.lport { format!("{lport:<6} ") } else { String::new() };
        format!("{pid:<7} {comm:<12.12} {ip:<2} {saddr:<16} {lport}{daddr:<16} {dport:<6}")
    }
}

/// The `-c` table at exit: BCC's `LADDR RADDR RPORT CONNECTS`, IPv4 flows then IPv6, most connects first.
pub fn write_counts(out: &mut Output, json: bool, flows: &[(flow, u64)]) -> io::Result<()> {
    let mut rows: Vec<(Family, IpAddr, IpAddr, u16, u64)> = flows
        .iter()
        .filter_map(|(k, n)| {
            Some((Family::from_af(k.family)?, ip_addr(k.family, &k.saddr)?, ip_addr(k.family, &k.daddr)?, k.dport, *n))
        })
        .collect();
    rows.sort_by_key(|r| (r.0.version(), std::cmp::Reverse(r.4), r.1, r.2, r.3));
    if !json {
        writeln!(out, "\n{:<25} {:<25} {:<20} {:<10}", "LADDR", "RADDR", "RPORT", "CONNECTS")?;
    }
    for (family, laddr, raddr, rport, n) in rows {
        if json {
            out.json_line(&JsonFlow {
                family: family.name(),
                laddr: laddr.to_string(),
                raddr: raddr.to_string(),
                rport,
                connects: n,
            })?;
        } else {
            writeln!(out, "{:<25} {:<25} {:<20} {:<10}", laddr.to_string(), raddr.to_string(), rport, n)?;
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn style(lport: bool) -> Style {
        Style { json: false, timestamp: false, lport, uid: false, dns: false }
    }

    #[test]
    fn columns_match_bcc() {
        let p = Printer::new(style(false));
        let h = p.columns(["PID", "COMM", "IP", "SADDR", "LPORT", "DADDR", "DPORT"].map(String::from));
        assert_eq!(h.trim_end(), "PID     COMM         IP SADDR            DADDR            DPORT");
        let p = Printer::new(style(true));
        let h = p.columns(["PID", "COMM", "IP", "SADDR", "LPORT", "DADDR", "DPORT"].map(String::from));
        assert_eq!(h.trim_end(), "PID     COMM         IP SADDR            LPORT  DADDR            DPORT");
        let row =
            p.columns(["1479", "telnet-with-long", "4", "127.0.0.1", "50000", "127.0.0.1", "23"].map(String::from));
        assert_eq!(row.trim_end(), "1479    telnet-with- 4  127.0.0.1        50000  127.0.0.1        23");
        // -d: BCC's ` QUERY` after the padded DPORT column.
        assert_eq!(
            format!("{row} localhost"),
            "1479    telnet-with- 4  127.0.0.1        50000  127.0.0.1        23     localhost"
        );
    }
}
