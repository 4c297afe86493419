// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpretrans's output: BCC's `TIME PID IP LADDR:LPORT T> RADDR:RPORT STATE [SEQ]` lines, BCC's `-c` table
//! (`LADDR:LPORT RADDR:RPORT RETRANSMITS`), or JSON lines with tcplife's field names.

use std::io::{self, Write};
use std::net::IpAddr;

use common::domain::net::{ip_addr, Family};
use common::domain::tcp::state_name;
use common::output::sockevents::{Conn, JsonConn};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::consts::TLP;
use crate::bpf::types::{event, flow};

// SAFETY: #[repr(C)] structs of integers and integer arrays, with no padding the BPF side leaves unset.
unsafe impl plain::Plain for event {}
unsafe impl plain::Plain for flow {}

/// One retransmit, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct Retransmit {
    pub pid: u32,
    pub conn: Conn,
    pub state: u8,
    pub seq: u32,
    pub tlp: bool,
}

impl Retransmit {
    /// Decodes a record; `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn from_event(e: &event) -> Option<Retransmit> {
        Some(Retransmit {
            pid: e.pid,
            conn: Conn::decode(e.family, &e.saddr, e.lport, &e.daddr, e.rport)?,
            state: e.state,
            seq: e.seq,
            tlp: e.r#type as usize == TLP,
        })
    }
}

#[derive(Serialize)]
struct JsonRetransmit {
    time: String,
    pid: u32,
    #[serde(flatten)]
    conn: JsonConn,
    state: String,
    #[serde(rename = "type")]
    kind: &'static str,
    seq: u32,
}

#[derive(Serialize)]
struct JsonFlow {
    family: &'static str,
    laddr: String,
    lport: u16,
    raddr: String,
    rport: u16,
    retransmits: u64,
}

/// Prints the header and one line per retransmit, flushing each.
pub struct Printer {
    json: bool,
    sequence: bool,
}

impl Printer {
    pub fn new(json: bool, sequence: bool) -> Self {
        Printer { json, sequence }
    }

    /// BCC's header (nothing for JSON).
    pub fn write_header(&self, out: &mut Output) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        writeln!(out, "{}", self.header())?;
        out.flush()
    }

    fn header(&self) -> String {
        let tail = if self.sequence { format!(" {:<12} {:<10}", "STATE", "SEQ") } else { format!(" {:<4}", "STATE") };
        format!("{:<8} {:<7} {:<2} {:<20} {:>1}> {:<20}{tail}", "TIME", "PID", "IP", "LADDR:LPORT", "T", "RADDR:RPORT")
    }

    /// Prints one retransmit.
    pub fn write(&mut self, out: &mut Output, r: &Retransmit) -> io::Result<()> {
        if self.json {
            return out.json_line(&JsonRetransmit {
                time: clock_rfc3339(),
                pid: r.pid,
                conn: r.conn.json(),
                state: state_name(r.state),
                kind: if r.tlp { "L" } else { "R" },
                seq: r.seq,
            });
        }
        writeln!(out, "{}", self.line(&clock_hms(), r))?;
        out.flush()
    }

    /// BCC's `%-8s %-7d %-2d %-20s %1s> %-20s` then ` %s` (or ` %-12s %s` with -s).
    fn line(&self, time: &str, r: &Retransmit) -> String {
        let state = state_name(r.state);
        let tail = if self.sequence { format!(" {state:<12} {}", r.seq) } else { format!(" {state}") };
        format!(
            "{time:<8} {:<7} {:<2} {:<20} {:>1}> {:<20}{tail}",
            r.pid,
            r.conn.family.version(),
            format!("{}:{}", r.conn.laddr, r.conn.lport),
            if r.tlp { "L" } else { "R" },
            format!("{}:{}", r.conn.raddr, r.conn.rport),
        )
    }
}

/// The `-c` table at exit: BCC's `LADDR:LPORT RADDR:RPORT RETRANSMITS` and `[addr]#port <-> [addr]#port  N`
/// rows, IPv4 flows then IPv6, fewest retransmits first (as BCC sorts them).
pub fn write_counts(out: &mut Output, json: bool, flows: &[(flow, u64)]) -> io::Result<()> {
    let mut rows: Vec<(Family, IpAddr, u16, IpAddr, u16, u64)> = flows
        .iter()
        .filter_map(|(k, n)| {
            let family = Family::from_af(k.family)?;
            Some((family, ip_addr(k.family, &k.saddr)?, k.lport, ip_addr(k.family, &k.daddr)?, k.rport, *n))
        })
        .collect();
    rows.sort_by_key(|r| (r.0.version(), r.5, r.1, r.2, r.3, r.4));
    if !json {
        writeln!(out, "\n{:<25} {:<25} {:<10}", "LADDR:LPORT", "RADDR:RPORT", "RETRANSMITS")?;
    }
    for (family, laddr, lport, raddr, rport, n) in rows {
        if json {
            out.json_line(&JsonFlow {
                family: family.name(),
                laddr: laddr.to_string(),
                lport,
                raddr: raddr.to_string(),
                rport,
                retransmits: n,
            })?;
        } else {
            writeln!(out, "{}", count_row(laddr, lport, raddr, rport, n))?;
        }
    }
    out.flush()
}

/// `--prometheus`: each connection's count as `corebpf_tcpretrans_retransmits_total`, labelled with its local and
/// remote address and port (one series per connection, capped by `--max-series`).
pub fn metrics(s: &mut common::output::metrics::Snapshot, flows: &[(flow, u64)]) {
    const HELP: &str = "TCP segments retransmitted, per connection (tcp:tcp_retransmit_skb)";
    const LABELS: &[&str] = &["laddr", "lport", "raddr", "rport"];
    s.declare_counter("retransmits", HELP, LABELS);
    for (k, n) in flows {
        let (Some(laddr), Some(raddr)) = (ip_addr(k.family, &k.saddr), ip_addr(k.family, &k.daddr)) else { continue };
        let values = vec![laddr.to_string(), k.lport.to_string(), raddr.to_string(), k.rport.to_string()];
        s.counter("retransmits", HELP, LABELS, values, *n);
    }
}

/// BCC's `"%-20s <-> %-20s" % ("[%s]#%d", "[%s]#%d")` then ` %10d`.
fn count_row(laddr: IpAddr, lport: u16, raddr: IpAddr, rport: u16, n: u64) -> String {
    format!("{:<20} <-> {:<20} {n:>10}", format!("[{laddr}]#{lport}"), format!("[{raddr}]#{rport}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Retransmit {
        Retransmit {
            pid: 0,
            conn: Conn {
                family: Family::V4,
                laddr: "10.153.223.157".parse().unwrap(),
                lport: 22,
                raddr: "69.53.245.40".parse().unwrap(),
                rport: 34619,
            },
            state: 1,
            seq: 42,
            tlp: false,
        }
    }

    #[test]
    fn lines_match_bcc() {
        let p = Printer::new(false, false);
        assert_eq!(p.header(), "TIME     PID     IP LADDR:LPORT          T> RADDR:RPORT          STATE");
        assert_eq!(
            p.line("01:55:05", &sample()),
            "01:55:05 0       4  10.153.223.157:22    R> 69.53.245.40:34619   ESTABLISHED"
        );
        let p = Printer::new(false, true);
        assert_eq!(
            p.header(),
            "TIME     PID     IP LADDR:LPORT          T> RADDR:RPORT          STATE        SEQ       "
        );
        assert_eq!(
            p.line("01:55:05", &sample()),
            "01:55:05 0       4  10.153.223.157:22    R> 69.53.245.40:34619   ESTABLISHED  42"
        );
    }

    #[test]
    fn count_rows_match_bcc() {
        let s = sample().conn;
        assert_eq!(
            count_row(s.laddr, s.lport, s.raddr, s.rport, 700),
            "[10.153.223.157]#22  <-> [69.53.245.40]#34619        700"
        );
    }
}
