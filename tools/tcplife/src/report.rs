// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcplife's output: BCC's columns (default, `-w` wide, `-s` CSV, with `-T`/`-t` time columns) or JSON lines.
//!
//! The text layouts are BCC's `tools/tcplife.py` format strings: `PID COMM LADDR LPORT RADDR RPORT TX_KB RX_KB MS`,
//! with an `IP` column under `-w` and `-s`; TX_KB and RX_KB are whole KiB (truncated, as BCC's `%d` of a float
//! does) of the kernel's sequence-space counters as BCC reads them, MS has two decimals of the microsecond span.
//! JSON lines carry the exact payload bytes (SYN and FIN left out, see tcplife.bpf.c) and durations, and the
//! process's container.

use std::io::{self, Write};

use common::domain::container_names::ContainerNames;
use common::output::name::Name;
use common::output::sockevents::{time_prefix, Conn, JsonConn, Layout, SinceFirst, Style};
use common::output::stdout::{clock_hms, clock_rfc3339, Output, TraceStart};
use serde::Serialize;

// SAFETY: a #[repr(C)] struct of integers and integer arrays, with no padding the BPF side leaves unset.
unsafe impl plain::Plain for crate::bpf::types::event {}

/// One closed session, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub ts_ns: u64,
    pub span_ns: u64,
    /// The owner's cgroup v2 ID, which names its container.
    pub cgroup_id: u64,
    pub pid: u32,
    pub comm: Name,
    pub conn: Conn,
    /// Payload bytes sent and acked, received (what the application wrote and read).
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    /// The kernel's bytes_acked and bytes_received, which BCC's TX_KB and RX_KB columns show.
    pub tx_kernel: u64,
    pub rx_kernel: u64,
}

impl Session {
    /// Decodes a record; `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn from_event(e: &crate::bpf::types::event) -> Option<Session> {
        let comm: Vec<u8> = e.comm.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
        Some(Session {
            ts_ns: e.ts_ns,
            span_ns: e.span_ns,
            cgroup_id: e.cgroup_id,
            pid: e.pid,
            comm: Name::from(comm),
            conn: Conn::decode(e.family, &e.saddr, e.lport, &e.daddr, e.rport)?,
            tx_bytes: e.tx_payload,
            rx_bytes: e.rx_payload,
            tx_kernel: e.tx_b,
            rx_kernel: e.rx_b,
        })
    }

    /// The span in milliseconds, from whole microseconds as BCC computes it.
    fn ms(&self) -> f64 {
        (self.span_ns / 1000) as f64 / 1000.0
    }
}

#[derive(Serialize)]
struct JsonSession<'a> {
    time: String,
    ts: f64,
    pid: u32,
    comm: &'a Name,
    #[serde(flatten)]
    conn: JsonConn,
    tx_bytes: u64,
    rx_bytes: u64,
    duration_ms: f64,
    duration_ns: u64,
    /// The container the process runs in (absent for the host's processes).
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
}

/// Prints the header and one line per session, flushing each.
pub struct Printer {
    style: Style,
    since_first: SinceFirst,
    /// JSON's `ts` counts from it.
    start: TraceStart,
    containers: ContainerNames,
}

impl Printer {
    pub fn new(style: Style) -> Self {
        Printer {
            style,
            since_first: SinceFirst::default(),
            start: TraceStart::now(),
            containers: ContainerNames::new(),
        }
    }

    /// The column header (nothing for JSON).
    pub fn write_header(&self, out: &mut Output) -> io::Result<()> {
        if self.style.json {
            return Ok(());
        }
        let mut line = self.prefix("TIME", "TIME(s)");
        line += &columns(
            self.style.layout,
            ["PID", "COMM", "IP", "LADDR", "LPORT", "RADDR", "RPORT", "TX_KB", "RX_KB", "MS"].map(String::from),
        );
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// Prints one session.
    pub fn write(&mut self, out: &mut Output, s: &Session) -> io::Result<()> {
        let since_first = self.since_first.secs(s.ts_ns);
        if self.style.json {
            let container = self.containers.of_cgroup(s.cgroup_id);
            return out.json_line(&JsonSession {
                time: clock_rfc3339(),
                ts: self.start.secs(s.ts_ns),
                pid: s.pid,
                comm: &s.comm,
                conn: s.conn.json(),
                tx_bytes: s.tx_bytes,
                rx_bytes: s.rx_bytes,
                duration_ms: s.span_ns as f64 / 1e6,
                duration_ns: s.span_ns,
                container: container.as_deref(),
            });
        }
        let mut line = self.prefix(&clock_hms(), &format!("{since_first:.6}"));
        line += &columns(self.style.layout, cells(s));
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// The `-T` and `-t` columns, as BCC prints them before the others.
    fn prefix(&self, clock: &str, since: &str) -> String {
        let style = self.style;
        time_prefix(style.clock.then_some(clock), style.since_first.then_some(since), style.layout == Layout::Csv)
    }
}

/// BCC's ten columns (the IP column is left out of the default layout).
fn columns(layout: Layout, c: [String; 10]) -> String {
    let [pid, comm, ip, laddr, lport, raddr, rport, tx, rx, ms] = c;
    match layout {
        Layout::Default => {
            format!("{pid:<5} {comm:<10.10} {laddr:<15} {lport:<5} {raddr:<15} {rport:<5} {tx:>5} {rx:>5} {ms}")
        }
        Layout::Wide => {
            format!("{pid:<5} {comm:<16.16} {ip:<2} {laddr:<26} {lport:<5} {raddr:<26} {rport:<5} {tx:>6} {rx:>6} {ms}")
        }
        Layout::Csv => format!("{pid},{comm},{ip},{laddr},{lport},{raddr},{rport},{tx},{rx},{ms}"),
    }
}

/// One session's values, in the order of BCC's columns (`columns` drops IP in the default layout).
fn cells(s: &Session) -> [String; 10] {
    [
        s.pid.to_string(),
        s.comm.shown(),
        s.conn.family.version().to_string(),
        s.conn.laddr.to_string(),
        s.conn.lport.to_string(),
        s.conn.raddr.to_string(),
        s.conn.rport.to_string(),
        (s.tx_kernel / 1024).to_string(),
        (s.rx_kernel / 1024).to_string(),
        format!("{:.2}", s.ms()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session {
            ts_ns: 5_000_000_000,
            span_ns: 1_234_567,
            cgroup_id: 0,
            pid: 4242,
            comm: "curl-with-long-name".into(),
            conn: Conn {
                family: common::domain::net::Family::V4,
                laddr: "127.0.0.1".parse().unwrap(),
                lport: 50000,
                raddr: "10.0.0.2".parse().unwrap(),
                rport: 80,
            },
            tx_bytes: 2045,
            rx_bytes: 1024 * 1024 - 1,
            tx_kernel: 2047,
            rx_kernel: 1024 * 1024,
        }
    }

    #[test]
    fn default_layout_matches_bcc() {
        let s = session();
        let header = columns(
            Layout::Default,
            ["PID", "COMM", "IP", "LADDR", "LPORT", "RADDR", "RPORT", "TX_KB", "RX_KB", "MS"].map(String::from),
        );
        assert_eq!(header, "PID   COMM       LADDR           LPORT RADDR           RPORT TX_KB RX_KB MS");
        let row = columns(Layout::Default, cells(&s));
        assert_eq!(row, "4242  curl-with- 127.0.0.1       50000 10.0.0.2        80        1  1024 1.23");
    }

    #[test]
    fn wide_and_csv_headers_match_bcc() {
        let h = ["PID", "COMM", "IP", "LADDR", "LPORT", "RADDR", "RPORT", "TX_KB", "RX_KB", "MS"].map(String::from);
        assert_eq!(
            columns(Layout::Wide, h.clone()),
            "PID   COMM             IP LADDR                      LPORT RADDR                      RPORT  TX_KB  RX_KB MS"
        );
        assert_eq!(columns(Layout::Csv, h), "PID,COMM,IP,LADDR,LPORT,RADDR,RPORT,TX_KB,RX_KB,MS");
    }

    #[test]
    fn time_columns() {
        let p = Printer::new(Style { layout: Layout::Default, json: false, clock: true, since_first: true });
        assert_eq!(p.prefix("TIME", "TIME(s)"), "TIME     TIME(s)   ");
        let p = Printer::new(Style { layout: Layout::Csv, json: false, clock: true, since_first: true });
        assert_eq!(p.prefix("12:00:00", "0.000000"), "12:00:00,0.000000,");
    }
}
