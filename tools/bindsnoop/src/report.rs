// SPDX-License-Identifier: Apache-2.0 OR MIT
//! bindsnoop's output: BCC's columns (`[TIME(s)] [UID] [RC] PID COMM PROT ADDR PORT OPTS IF`, narrow or `-w`
//! wide), `--count`'s `LADDR LPORT BINDS` table, or JSON lines, which name the process's container.

use std::io::{self, Write};
use std::net::IpAddr;

use common::domain::container_names::ContainerNames;
use common::domain::net::{ip_addr, Family};
use common::domain::syscalls::errno_name;
use common::output::name::Name;
use common::output::sockevents::SinceFirst;
use common::output::stdout::{clock_rfc3339, Output, TraceStart};
use serde::Serialize;

use crate::bpf::consts::{OPT_BIND_ADDRESS_NO_PORT, OPT_FREEBIND, OPT_REUSEADDR, OPT_REUSEPORT, OPT_TRANSPARENT};
use crate::bpf::types::{count_key, event};

// SAFETY: a #[repr(C)] struct of integers and integer arrays, with explicit padding fields.
unsafe impl plain::Plain for event {}

/// The OPTS column's letters, bit by bit, and the socket option each stands for.
const OPTIONS: [(usize, char, &str); 5] = [
    (OPT_FREEBIND, 'F', "IP_FREEBIND"),
    (OPT_TRANSPARENT, 'T', "IP_TRANSPARENT"),
    (OPT_BIND_ADDRESS_NO_PORT, 'N', "IP_BIND_ADDRESS_NO_PORT"),
    (OPT_REUSEADDR, 'R', "SO_REUSEADDR"),
    (OPT_REUSEPORT, 'r', "SO_REUSEPORT"),
];

/// One bind, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq)]
pub struct Bind {
    pub ts_ns: u64,
    /// The task's cgroup v2 ID, which names its container.
    pub cgroup_id: u64,
    pub pid: u32,
    pub uid: u32,
    pub comm: Name,
    pub ret: i32,
    pub family: Family,
    pub addr: IpAddr,
    pub port: u16,
    pub protocol: u16,
    pub opts: u8,
    pub bound_dev_if: u32,
}

impl Bind {
    /// Decodes a record; `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn from_event(e: &event) -> Option<Bind> {
        Some(Bind {
            ts_ns: e.ts_ns,
            cgroup_id: e.cgroup_id,
            pid: e.pid,
            uid: e.uid,
            comm: Name::from_c(&e.comm),
            ret: e.ret,
            family: Family::from_af(e.family)?,
            addr: ip_addr(e.family, &e.addr)?,
            port: e.port,
            protocol: e.protocol,
            opts: e.opts,
            bound_dev_if: e.bound_dev_if,
        })
    }
}

/// The OPTS column: a letter per option set, a dot per option not set (BCC's `FTNRr`).
pub fn opts_string(opts: u8) -> String {
    OPTIONS.iter().map(|&(bit, c, _)| if usize::from(opts) & bit != 0 { c } else { '.' }).collect()
}

/// The PROT column: the IPPROTO_ name without its prefix, as BCC prints it, or UNKNOWN.
pub fn protocol_name(protocol: u16) -> &'static str {
    match protocol {
        0 => "IP",
        1 => "ICMP",
        6 => "TCP",
        17 => "UDP",
        58 => "ICMPV6",
        132 => "SCTP",
        136 => "UDPLITE",
        255 => "RAW",
        262 => "MPTCP",
        _ => "UNKNOWN",
    }
}

/// The text of an error number, as strerror(3) gives it ("Success" for 0).
fn error_text(errno: i32) -> String {
    let text = io::Error::from_raw_os_error(errno).to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Which optional columns to print.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub json: bool,
    /// `-t`: seconds since the first bind shown.
    pub timestamp: bool,
    /// `-w`: wide columns, and the error's text in RC.
    pub wide: bool,
    /// `-E`: the RC column.
    pub errors: bool,
    /// `-U`: the UID column.
    pub uid: bool,
}

#[derive(Serialize)]
struct JsonBind<'a> {
    time: String,
    ts: f64,
    pid: u32,
    uid: u32,
    comm: &'a Name,
    ret: i32,
    error: Option<&'static str>,
    protocol: &'static str,
    protocol_number: u16,
    family: &'static str,
    addr: String,
    port: u16,
    opts: String,
    options: Vec<&'static str>,
    bound_if: u32,
    /// The container the process runs in (absent for the host's processes).
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
}

/// The banner BCC prints before anything else (not in JSON).
pub fn write_banner(out: &mut Output) -> io::Result<()> {
    writeln!(out, "Tracing binds ... Hit Ctrl-C to end")?;
    out.flush()
}

/// Prints the header and one line per bind, flushing each.
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
        let mut line = String::new();
        if self.style.timestamp {
            line += &format!("{:<9} ", "TIME(s)");
        }
        if self.style.uid {
            line += &format!("{:>6} ", "UID");
        }
        if self.style.errors {
            line += &self.rc_column("RC");
        }
        line += &header_columns(self.style.wide);
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// Prints one bind.
    pub fn write(&mut self, out: &mut Output, b: &Bind) -> io::Result<()> {
        let since_first = self.since_first.secs(b.ts_ns);
        if self.style.json {
            let container = self.containers.of_cgroup(b.cgroup_id);
            return out.json_line(&JsonBind {
                time: clock_rfc3339(),
                ts: self.start.secs(b.ts_ns),
                pid: b.pid,
                uid: b.uid,
                comm: &b.comm,
                ret: b.ret,
                error: if b.ret < 0 { errno_name(-b.ret) } else { None },
                protocol: protocol_name(b.protocol),
                protocol_number: b.protocol,
                family: b.family.name(),
                addr: b.addr.to_string(),
                port: b.port,
                opts: opts_string(b.opts),
                options: OPTIONS.iter().filter(|o| usize::from(b.opts) & o.0 != 0).map(|o| o.2).collect(),
                bound_if: b.bound_dev_if,
                container: container.as_deref(),
            });
        }
        let mut line = String::new();
        if self.style.timestamp {
            line += &format!("{since_first:<9.6} ");
        }
        if self.style.uid {
            line += &format!("{:>6} ", b.uid);
        }
        if self.style.errors {
            let rc = if self.style.wide { error_text(-b.ret) } else { b.ret.to_string() };
            line += &self.rc_column(&rc);
        }
        line += &row_columns(self.style.wide, b);
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// BCC's `%3s ` RC column; when wide, as wide as the longest error text a bind on an IP socket can give
    /// (BCC's 25 columns put the rest of a row with EADDRNOTAVAIL's 31 characters six to the right).
    fn rc_column(&self, text: &str) -> String {
        if self.style.wide {
            format!("{text:<width$} ", width = wide_rc_width())
        } else {
            format!("{text:>3} ")
        }
    }
}

/// The errors bind(2) can give on an IPv4 or IPv6 socket.
const BIND_ERRORS: [i32; 12] = [
    libc::EACCES,
    libc::EADDRINUSE,
    libc::EADDRNOTAVAIL,
    libc::EAFNOSUPPORT,
    libc::EBADF,
    libc::EFAULT,
    libc::EINVAL,
    libc::ENOMEM,
    libc::ENOTSOCK,
    libc::EOPNOTSUPP,
    libc::EPERM,
    libc::ENOBUFS,
];

/// The wide RC column's width: the longest of [`BIND_ERRORS`]' texts, at least BCC's 25.
fn wide_rc_width() -> usize {
    BIND_ERRORS.iter().map(|&e| error_text(e).chars().count()).max().unwrap_or(0).max(25)
}

/// BCC's `%8s %-12.12s %-4s %-15s %-5s %5s %2s` header (`%10s ... %-39s` wide).
fn header_columns(wide: bool) -> String {
    let [pid, comm, prot, addr, port, opts, ifx] = ["PID", "COMM", "PROT", "ADDR", "PORT", "OPTS", "IF"];
    if wide {
        format!("{pid:>10} {comm:<12.12} {prot:<4} {addr:<39} {port:<5} {opts:>5} {ifx:>2}")
    } else {
        format!("{pid:>8} {comm:<12.12} {prot:<4} {addr:<15} {port:<5} {opts:>5} {ifx:>2}")
    }
}

/// BCC's `%8d %-12.12s %-4.4s %-15s %5d %-5s %2d` row (`%10d %-12.12s %-4s %-39s %5d %-5s %2d` wide), with the
/// address whole: one longer than its column (IPv6) pushes the rest of the row right, as tcplife's does, where
/// BCC cuts it to 15 characters with no mark.
fn row_columns(wide: bool, b: &Bind) -> String {
    let (pid, comm, prot, addr) = (b.pid, &b.comm, protocol_name(b.protocol), b.addr.to_string());
    let (port, opts, ifx) = (b.port, opts_string(b.opts), b.bound_dev_if);
    if wide {
        format!("{pid:>10} {comm:<12.12} {prot:<4} {addr:<39} {port:>5} {opts:<5} {ifx:>2}")
    } else {
        format!("{pid:>8} {comm:<12.12} {prot:<4.4} {addr:<15} {port:>5} {opts:<5} {ifx:>2}")
    }
}

#[derive(Serialize)]
struct JsonCount {
    family: &'static str,
    addr: String,
    port: u16,
    binds: u64,
}

/// `--count`: BCC's `LADDR LPORT BINDS` table (IPv4 first, then IPv6; most binds first), or a JSON line per
/// address and port.
pub fn write_counts(out: &mut Output, entries: &[(count_key, u64)], json: bool) -> io::Result<()> {
    let mut rows: Vec<(Family, IpAddr, u16, u64)> = entries
        .iter()
        .filter_map(|(k, n)| Some((Family::from_af(k.family)?, ip_addr(k.family, &k.addr)?, k.port, *n)))
        .collect();
    rows.sort_by(|a, b| {
        (a.0.version(), std::cmp::Reverse(a.3), a.1, a.2).cmp(&(b.0.version(), std::cmp::Reverse(b.3), b.1, b.2))
    });
    if json {
        for (family, addr, port, binds) in rows {
            out.json_line(&JsonCount { family: family.name(), addr: addr.to_string(), port, binds })?;
        }
        return Ok(());
    }
    writeln!(out, "\n{:<32} {:>20}     {:<10}", "LADDR", "LPORT", "BINDS")?;
    for (_, addr, port, binds) in rows {
        writeln!(out, "{:<32} {:>20}     {:<10}", addr.to_string(), port, binds)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(addr: &str, port: u16, opts: u8, ret: i32) -> Bind {
        Bind {
            ts_ns: 0,
            cgroup_id: 0,
            pid: 3941081,
            uid: 0,
            comm: "test_bind_op_long".into(),
            ret,
            family: Family::V4,
            addr: addr.parse().unwrap(),
            port,
            protocol: 6,
            opts,
            bound_dev_if: 0,
        }
    }

    #[test]
    fn columns_match_bcc() {
        assert_eq!(header_columns(false), "     PID COMM         PROT ADDR            PORT   OPTS IF");
        let b = bind("192.168.1.102", 0, (OPT_FREEBIND | OPT_BIND_ADDRESS_NO_PORT) as u8, 0);
        assert_eq!(row_columns(false, &b), " 3941081 test_bind_op TCP  192.168.1.102       0 F.N..  0");
        assert_eq!(opts_string(OPT_REUSEADDR as u8), "...R.");
        assert_eq!(opts_string(0x1f), "FTNRr");
        assert!(header_columns(true).starts_with("       PID COMM         PROT ADDR "));
    }

    #[test]
    fn narrow_rows_keep_ipv6_addresses_whole() {
        let mut b = bind("::1", 8080, 0, 0);
        b.family = Family::V6;
        b.addr = "fd00:1234:5678:9abc:def0:1234:5678:9abc".parse().unwrap();
        let row = row_columns(false, &b);
        assert!(row.contains(" fd00:1234:5678:9abc:def0:1234:5678:9abc  8080 "), "{row}");
    }

    #[test]
    fn wide_error_texts_fit_their_column() {
        let printer = Printer::new(Style { json: false, timestamp: false, wide: true, errors: true, uid: false });
        let heading = printer.rc_column("RC");
        assert_eq!(heading.len(), "Address family not supported by protocol ".len());
        for errno in BIND_ERRORS {
            let rc = printer.rc_column(&error_text(errno));
            assert_eq!(rc.chars().count(), heading.len(), "{rc:?}");
        }
    }

    #[test]
    fn error_texts() {
        assert_eq!(error_text(98), "Address already in use");
        assert_eq!(error_text(0), "Success");
    }
}
