// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcppktlat's output: libbpf-tools' columns (`PID TID COMM LADDR LPORT RADDR RPORT MS`, with `-T` a time
//! column first, with `-w` address columns wide enough for IPv6) or JSON lines.
//!
//! The text layout is that of libbpf-tools' `tcppktlat.c`: the addresses take 15 characters (26 with `-w`), MS
//! is the wait's whole microseconds divided by 1000, with two decimals. Its `-T` header says `TIME(s)` above
//! times of day, and so does this one. JSON lines carry the exact nanoseconds beside the milliseconds.

use std::io::{self, Write};

use common::output::name::Name;
use common::output::sockevents::{Conn, JsonConn};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

// SAFETY: a #[repr(C)] struct of integers and integer arrays, with no padding the BPF side leaves unset.
unsafe impl plain::Plain for crate::bpf::types::event {}

/// The address columns' width, and with `-w`.
const ADDR_WIDTH: usize = 15;
const WIDE_ADDR_WIDTH: usize = 26;

/// One pick-up of received data, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct Pickup {
    pub delta_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: Name,
    pub conn: Conn,
}

impl Pickup {
    /// Decodes a record; `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn from_event(e: &crate::bpf::types::event) -> Option<Pickup> {
        Some(Pickup {
            delta_ns: e.delta_ns,
            pid: e.pid,
            tid: e.tid,
            comm: Name::from_c(&e.comm),
            conn: Conn::decode(e.family, &e.saddr, e.lport, &e.daddr, e.rport)?,
        })
    }

    /// The wait in milliseconds, from whole microseconds as libbpf-tools computes it.
    fn ms(&self) -> f64 {
        (self.delta_ns / 1000) as f64 / 1000.0
    }
}

/// How to print pick-ups.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub json: bool,
    /// `-w`: address columns of 26 characters.
    pub wide: bool,
    /// `-T`: the time of day first.
    pub clock: bool,
}

#[derive(Serialize)]
struct JsonPickup<'a> {
    time: String,
    pid: u32,
    tid: u32,
    comm: &'a Name,
    #[serde(flatten)]
    conn: JsonConn,
    latency_ms: f64,
    latency_ns: u64,
}

/// Prints the header and one line per pick-up, flushing each.
pub struct Printer {
    style: Style,
}

impl Printer {
    pub fn new(style: Style) -> Self {
        Printer { style }
    }

    /// The column header (nothing for JSON).
    pub fn write_header(&self, out: &mut Output) -> io::Result<()> {
        if self.style.json {
            return Ok(());
        }
        writeln!(out, "{}", self.header())?;
        out.flush()
    }

    fn header(&self) -> String {
        let time = if self.style.clock { format!("{:<8} ", "TIME(s)") } else { String::new() };
        format!("{time}{}", self.columns(HEADER.map(String::from)))
    }

    /// Prints one pick-up.
    pub fn write(&self, out: &mut Output, p: &Pickup) -> io::Result<()> {
        if self.style.json {
            return out.json_line(&JsonPickup {
                time: clock_rfc3339(),
                pid: p.pid,
                tid: p.tid,
                comm: &p.comm,
                conn: p.conn.json(),
                latency_ms: p.delta_ns as f64 / 1e6,
                latency_ns: p.delta_ns,
            });
        }
        let time = if self.style.clock { format!("{:<8} ", clock_hms()) } else { String::new() };
        writeln!(out, "{time}{}", self.columns(cells(p)))?;
        out.flush()
    }

    /// libbpf-tools' columns: `%-7d %-7d %-16s %-*s %-5d %-*s %-5d %-.2f`.
    fn columns(&self, c: [String; 8]) -> String {
        let w = if self.style.wide { WIDE_ADDR_WIDTH } else { ADDR_WIDTH };
        let [pid, tid, comm, laddr, lport, raddr, rport, ms] = c;
        format!("{pid:<7} {tid:<7} {comm:<16} {laddr:<w$} {lport:<5} {raddr:<w$} {rport:<5} {ms}")
    }
}

const HEADER: [&str; 8] = ["PID", "TID", "COMM", "LADDR", "LPORT", "RADDR", "RPORT", "MS"];

/// One pick-up's values in the order of the columns.
fn cells(p: &Pickup) -> [String; 8] {
    [
        p.pid.to_string(),
        p.tid.to_string(),
        p.comm.shown(),
        p.conn.laddr.to_string(),
        p.conn.lport.to_string(),
        p.conn.raddr.to_string(),
        p.conn.rport.to_string(),
        format!("{:.2}", p.ms()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::domain::net::Family;

    fn pickup(delta_ns: u64, v6: bool) -> Pickup {
        let (family, laddr, raddr) = if v6 {
            (Family::V6, "fd00::1".parse().unwrap(), "fd00:1234:5678::abcd".parse().unwrap())
        } else {
            (Family::V4, "127.0.0.1".parse().unwrap(), "172.22.130.115".parse().unwrap())
        };
        Pickup {
            delta_ns,
            pid: 4424,
            tid: 4431,
            comm: "etcd".into(),
            conn: Conn { family, laddr, lport: 2379, raddr, rport: 53202 },
        }
    }

    fn plain() -> Printer {
        Printer::new(Style { json: false, wide: false, clock: false })
    }

    #[test]
    fn columns_match_libbpf_tools() {
        let p = plain();
        assert_eq!(p.header(), "PID     TID     COMM             LADDR           LPORT RADDR           RPORT MS");
        assert_eq!(
            p.columns(cells(&pickup(65_999, false))),
            "4424    4431    etcd             127.0.0.1       2379  172.22.130.115  53202 0.07"
        );
        let wide = Printer::new(Style { json: false, wide: true, clock: true });
        assert_eq!(
            wide.header(),
            "TIME(s)  PID     TID     COMM             LADDR                      LPORT RADDR                      \
             RPORT MS"
        );
        assert_eq!(
            wide.columns(cells(&pickup(1_234_567_890, true))),
            "4424    4431    etcd             fd00::1                    2379  fd00:1234:5678::abcd       53202 \
             1234.57"
        );
    }

    #[test]
    fn milliseconds_from_whole_microseconds_rounded_as_printf() {
        // printf's %.2f rounds a tie (an exact .xx5) to the even digit; so does Rust's formatting.
        for (ns, shown) in [(125_999, "0.12"), (375_000, "0.38"), (625_000, "0.62"), (875_000, "0.88"), (999, "0.00")] {
            assert_eq!(cells(&pickup(ns, false))[7], shown, "{ns} ns");
        }
    }
}
