// SPDX-License-Identifier: Apache-2.0 OR MIT
//! solisten's output: BCC's columns (`PID COMM [NETNS] PROTO BACKLOG PORT ADDR`, with libbpf-tools' time of day
//! (`TIME`) first under -t) or JSON lines.

use std::io::{self, Write};
use std::net::IpAddr;

use common::domain::net::{ip_addr, Family};
use common::domain::syscalls::errno_name;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and integer arrays, with explicit padding fields.
unsafe impl plain::Plain for event {}

/// One listen, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct Listen {
    pub ts_ns: u64,
    pub netns: u64,
    pub pid: u32,
    pub comm: Name,
    pub ret: i32,
    pub backlog: i32,
    pub family: Family,
    pub sock_type: u16,
    pub port: u16,
    pub addr: IpAddr,
}

impl Listen {
    /// Decodes a record; `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn from_event(e: &event) -> Option<Listen> {
        Some(Listen {
            ts_ns: e.ts_ns,
            netns: e.netns,
            pid: e.pid,
            comm: Name::from_c(&e.comm),
            ret: e.ret,
            backlog: e.backlog,
            family: Family::from_af(e.family)?,
            sock_type: e.r#type,
            port: e.port,
            addr: ip_addr(e.family, &e.addr)?,
        })
    }

    /// BCC's PROTO: TCP (a stream socket), UDP or UNK, then v4 or v6.
    pub fn proto(&self) -> String {
        let kind = match self.sock_type {
            1 => "TCP",
            2 => "UDP",
            _ => "UNK",
        };
        format!("{kind}v{}", self.family.version())
    }
}

/// Which optional columns to print.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub json: bool,
    /// `--show-netns`: the NETNS column.
    pub netns: bool,
    /// `-t`: the time of day first.
    pub timestamp: bool,
}

#[derive(Serialize)]
struct JsonListen<'a> {
    time: String,
    pid: u32,
    comm: &'a Name,
    netns: u64,
    proto: String,
    family: &'static str,
    backlog: i32,
    port: u16,
    addr: String,
    ret: i32,
    error: Option<&'static str>,
}

/// Prints the header and one line per listen, flushing each.
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
        let mut line = String::new();
        if self.style.timestamp {
            // The time of day, so not BCC's TIME(s), which heads seconds (libbpf-tools' solisten has TIME(s) here).
            line += &format!("{:<8} ", "TIME");
        }
        line +=
            &columns(self.style.netns, ["PID", "COMM", "NETNS", "PROTO", "BACKLOG", "PORT", "ADDR"].map(String::from));
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// Prints one listen.
    pub fn write(&mut self, out: &mut Output, l: &Listen) -> io::Result<()> {
        if self.style.json {
            return out.json_line(&JsonListen {
                time: clock_rfc3339(),
                pid: l.pid,
                comm: &l.comm,
                netns: l.netns,
                proto: l.proto(),
                family: l.family.name(),
                backlog: l.backlog,
                port: l.port,
                addr: l.addr.to_string(),
                ret: l.ret,
                error: if l.ret < 0 { errno_name(-l.ret) } else { None },
            });
        }
        let mut line = String::new();
        if self.style.timestamp {
            line += &format!("{:>8} ", clock_hms());
        }
        line += &columns(
            self.style.netns,
            [
                l.pid.to_string(),
                l.comm.shown(),
                l.netns.to_string(),
                l.proto(),
                l.backlog.to_string(),
                l.port.to_string(),
                l.addr.to_string(),
            ],
        );
        writeln!(out, "{line}")?;
        out.flush()
    }
}

/// BCC's `%-7s %-12.12s [%-12s] %-6s %-8s %-5s %-39s` (trailing blanks trimmed).
fn columns(netns: bool, c: [String; 7]) -> String {
    let [pid, comm, ns, proto, backlog, port, addr] = c;
    let ns = if netns { format!("{ns:<12} ") } else { String::new() };
    format!("{pid:<7} {comm:<12.12} {ns}{proto:<6} {backlog:<8} {port:<5} {addr:<39}").trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_match_bcc() {
        let h = ["PID", "COMM", "NETNS", "PROTO", "BACKLOG", "PORT", "ADDR"].map(String::from);
        assert_eq!(columns(false, h.clone()), "PID     COMM         PROTO  BACKLOG  PORT  ADDR");
        assert_eq!(columns(true, h), "PID     COMM         NETNS        PROTO  BACKLOG  PORT  ADDR");
        let r = ["4221", "redis-server", "4026532165", "TCPv6", "128", "6379", "::"].map(String::from);
        assert_eq!(columns(true, r), "4221    redis-server 4026532165   TCPv6  128      6379  ::");
    }
}
