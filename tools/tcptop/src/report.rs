// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcptop's output: BCC's screen (a loadavg line, then `PID COMM LADDR RADDR RX_KB TX_KB` for IPv4 and the same
//! with LADDR6/RADDR6 for IPv6, sorted) or one JSON object per connection per interval.

use std::io::Write;
use std::net::IpAddr;

use anyhow::Result;
use common::domain::net::{ip_addr, Family};
use common::output::name::Name;
use serde::Serialize;

use crate::bpf::types::conn;
use crate::Sort;

// SAFETY: plain C structs of integers and byte arrays, no padding the C side leaves uninitialised to read.
unsafe impl plain::Plain for conn {}
unsafe impl plain::Plain for crate::bpf::types::traffic {}

/// A connection map key as a hashable value: (PID, family, ports, addresses, comm).
pub type Key = (u32, u16, u16, u16, [u8; 16], [u8; 16], [u8; 16]);

pub fn key(k: &conn) -> Key {
    (k.pid, k.family, k.lport, k.rport, k.laddr, k.raddr, k.comm.map(|c| c as u8))
}

/// One connection's bytes in one interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conn {
    pub pid: u32,
    pub comm: Name,
    pub family: Family,
    pub laddr: IpAddr,
    pub lport: u16,
    pub raddr: IpAddr,
    pub rport: u16,
    pub sent: u64,
    pub received: u64,
}

impl Conn {
    pub fn from_key(k: &conn, sent: u64, received: u64) -> Option<Conn> {
        Some(Conn {
            pid: k.pid,
            comm: Name::from_c(&k.comm),
            family: Family::from_af(k.family)?,
            laddr: ip_addr(k.family, &k.laddr)?,
            lport: k.lport,
            raddr: ip_addr(k.family, &k.raddr)?,
            rport: k.rport,
            sent,
            received,
        })
    }
}

#[derive(Serialize)]
struct JsonConn<'a> {
    time: &'a str,
    pid: u32,
    comm: &'a Name,
    family: &'static str,
    laddr: String,
    lport: u16,
    raddr: String,
    rport: u16,
    tx_bytes: u64,
    rx_bytes: u64,
}

/// One JSON line per connection that moved bytes in the interval (all of them; -r limits the screen only).
pub fn write_json(out: &mut common::output::stdout::Output, conns: &[Conn]) -> Result<()> {
    let timestamp = common::output::stdout::clock_rfc3339();
    for c in conns {
        out.json_line(&JsonConn {
            time: &timestamp,
            pid: c.pid,
            comm: &c.comm,
            family: c.family.name(),
            laddr: c.laddr.to_string(),
            lport: c.lport,
            raddr: c.raddr.to_string(),
            rport: c.rport,
            tx_bytes: c.sent,
            rx_bytes: c.received,
        })?;
    }
    Ok(())
}

/// The screen's options.
pub struct Screen {
    pub clear: bool,
    pub summary: bool,
    pub sort: Sort,
    pub rows: usize,
}

impl Screen {
    /// One interval's screen, as BCC's tcptop prints it.
    pub fn write(&self, out: &mut impl Write, conns: Vec<Conn>) -> Result<()> {
        common::output::topscreen::write_top(out, self.clear, self.summary)?;
        write!(out, "{}", self.table(conns))?;
        out.flush()?;
        Ok(())
    }

    /// The IPv4 table then the IPv6 table (BCC's layout), each sorted: the `rows` largest connections of both
    /// families together, each printed in its family's table.
    pub fn table(&self, mut conns: Vec<Conn>) -> String {
        let key = |c: &Conn| match self.sort {
            Sort::All => c.sent + c.received,
            Sort::Sent => c.sent,
            Sort::Received => c.received,
        };
        conns.sort_by(|a, b| key(b).cmp(&key(a)).then(a.pid.cmp(&b.pid)));
        conns.truncate(self.rows);
        let mut s = String::new();
        for (family, width, laddr, raddr, lead) in
            [(Family::V4, 21, "LADDR", "RADDR", ""), (Family::V6, 32, "LADDR6", "RADDR6", "\n")]
        {
            let rows: Vec<&Conn> = conns.iter().filter(|c| c.family == family).collect();
            if rows.is_empty() {
                continue;
            }
            s += &format!(
                "{lead}{:<7} {:<12} {laddr:<width$} {raddr:<width$} {:>6} {:>6}\n",
                "PID", "COMM", "RX_KB", "TX_KB"
            );
            for c in rows {
                s += &format!(
                    "{:<7} {:<12.12} {:<width$} {:<width$} {:>6} {:>6}\n",
                    c.pid,
                    c.comm,
                    format!("{}:{}", c.laddr, c.lport),
                    format!("{}:{}", c.raddr, c.rport),
                    c.received / 1024,
                    c.sent / 1024
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn conn(pid: u32, v6: bool, sent: u64, received: u64) -> Conn {
        let (family, l, r) = if v6 {
            (Family::V6, IpAddr::V6(Ipv6Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST))
        } else {
            (Family::V4, IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)))
        };
        Conn {
            pid,
            comm: "a-very-long-command".into(),
            family,
            laddr: l,
            lport: 80,
            raddr: r,
            rport: 5000,
            sent,
            received,
        }
    }

    #[test]
    fn bcc_columns_sorted_ipv4_first() {
        let screen = Screen { clear: false, summary: false, sort: Sort::All, rows: 20 };
        let t = screen.table(vec![conn(3, true, 4096, 0), conn(1, false, 1024, 0), conn(2, false, 10240, 2047)]);
        let want = "\
PID     COMM         LADDR                 RADDR                  RX_KB  TX_KB
2       a-very-long- 127.0.0.1:80          10.0.0.2:5000              1     10
1       a-very-long- 127.0.0.1:80          10.0.0.2:5000              0      1

PID     COMM         LADDR6                           RADDR6                            RX_KB  TX_KB
3       a-very-long- ::1:80                           ::1:5000                              0      4
";
        assert_eq!(t, want);
    }

    #[test]
    fn sort_and_rows() {
        let screen = Screen { clear: false, summary: false, sort: Sort::Received, rows: 1 };
        let t = screen.table(vec![conn(1, false, 9000, 0), conn(2, false, 0, 2048)]);
        assert_eq!(t.lines().count(), 2);
        assert!(t.lines().nth(1).unwrap().starts_with("2 "));
    }

    #[test]
    fn rows_are_ranked_across_both_families() {
        let screen = Screen { clear: false, summary: false, sort: Sort::Sent, rows: 2 };
        let t =
            screen.table(vec![conn(1, false, 74 << 10, 0), conn(2, false, 70 << 10, 0), conn(3, true, 879 << 10, 0)]);
        let pids: Vec<&str> = t.lines().filter_map(|l| l.split_whitespace().next()).filter(|w| *w != "PID").collect();
        assert_eq!(pids, ["1", "3"], "{t}");
    }
}
