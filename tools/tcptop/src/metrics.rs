// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcptop's `--prometheus`: the kernel's cumulative bytes per connection as two counters,
//! `corebpf_tcptop_sent_bytes_total` and `corebpf_tcptop_received_bytes_total`, labelled by process name, local
//! and remote address, the server's port and the role of this end (`server` or `client`) rather than by PID and
//! both ports, so that the many connections of one service make one series and series outlive processes.
//!
//! Which end is the server: the end whose port is listening on this host (`/proc/net/tcp`, `/proc/net/tcp6`) when
//! the connection is first seen; else the end whose port is outside the ephemeral range
//! (`net.ipv4.ip_local_port_range`); else the lower port. A row keeps the labels it was given when first read (a
//! row folded and made again is classified again).
//!
//! The kernel's map keeps a row per connection end for as long as it lives; a row unchanged over a whole scrape
//! interval (an idle or closed connection), or whose process has exited, is folded into totals kept here and
//! deleted from the map, so the map keeps to the connections that move data and no counter goes back (a folded
//! connection that moves data again starts a new row, added to the same totals). Bytes counted between the read
//! of a row and its deletion are lost: only an idle connection that wakes in that instant can have any.

use std::collections::{HashMap, HashSet};

use anyhow::{Context, Result};
use common::attach::maps::from_bytes;
use common::output::metrics::Snapshot;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::types::{conn, traffic};
use crate::report::Conn;

/// (comm, laddr, raddr, port, role).
type Labels = [String; 5];
const LABELS: &[&str] = &["comm", "laddr", "raddr", "port", "role"];
const SENT: &str = "TCP payload bytes sent (what the application wrote)";
const RECEIVED: &str = "TCP payload bytes received (what the application read)";

/// The totals of folded rows, and the rows read at the previous scrape.
pub struct Totals {
    gone: HashMap<Labels, (u64, u64)>,
    last: HashMap<Vec<u8>, ((u64, u64), Labels)>,
    ephemeral: (u16, u16),
}

impl Default for Totals {
    fn default() -> Self {
        Totals { gone: HashMap::new(), last: HashMap::new(), ephemeral: ephemeral_ports() }
    }
}

impl Totals {
    /// One scrape: every row of `conns` (the BPF map) plus the folded ones, as the two counters.
    pub fn write(&mut self, s: &mut Snapshot, conns: &impl MapCore) -> Result<()> {
        let mut now = self.gone.clone();
        let mut last = HashMap::new();
        let mut listening = None;
        for key in conns.keys() {
            let Some(value) = conns.lookup(&key, MapFlags::ANY).context("reading the connection map")? else {
                continue;
            };
            let (k, t) = (from_bytes::<conn>(&key), from_bytes::<traffic>(&value));
            let bytes = (t.sent, t.received);
            let (labels, idle) = match self.last.remove(&key) {
                Some((before, labels)) => (labels, before == bytes),
                None => {
                    let Some(c) = Conn::from_key(&k, 0, 0) else { continue };
                    let listening = listening.get_or_insert_with(listening_ports);
                    (self.labels(&c, listening), false)
                }
            };
            add(now.entry(labels.clone()).or_default(), bytes);
            if idle || !std::path::Path::new(&format!("/proc/{}", k.pid)).exists() {
                add(self.gone.entry(labels).or_default(), bytes);
                let _ = conns.delete(&key);
            } else {
                last.insert(key, (bytes, labels));
            }
        }
        self.last = last;
        s.declare_counter("sent_bytes", SENT, LABELS);
        s.declare_counter("received_bytes", RECEIVED, LABELS);
        for (labels, (sent, received)) in now {
            s.counter("sent_bytes", SENT, LABELS, labels.to_vec(), sent);
            s.counter("received_bytes", RECEIVED, LABELS, labels.to_vec(), received);
        }
        Ok(())
    }

    /// A connection end's labels: its process name, addresses, the server's port and this end's role.
    fn labels(&self, c: &Conn, listening: &HashSet<u16>) -> Labels {
        let ephemeral = |p: u16| (self.ephemeral.0..=self.ephemeral.1).contains(&p);
        let server = match (listening.contains(&c.lport), listening.contains(&c.rport)) {
            (true, false) => true,
            (false, true) => false,
            _ => match (ephemeral(c.lport), ephemeral(c.rport)) {
                (false, true) => true,
                (true, false) => false,
                _ => c.lport <= c.rport,
            },
        };
        let (port, role) = if server { (c.lport, "server") } else { (c.rport, "client") };
        [c.comm.text().into_owned(), c.laddr.to_string(), c.raddr.to_string(), port.to_string(), role.to_string()]
    }
}

fn add(total: &mut (u64, u64), bytes: (u64, u64)) {
    total.0 += bytes.0;
    total.1 += bytes.1;
}

/// The local ports of the TCP sockets listening in this network namespace.
fn listening_ports() -> HashSet<u16> {
    let mut ports = HashSet::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        ports.extend(text.lines().skip(1).filter_map(listening_port));
    }
    ports
}

/// The port of one line of /proc/net/tcp if its socket listens (`sl local_address rem_address st ...`, `st` 0A).
fn listening_port(line: &str) -> Option<u16> {
    let mut fields = line.split_whitespace();
    let local = fields.nth(1)?;
    if fields.nth(1)? != "0A" {
        return None;
    }
    u16::from_str_radix(local.rsplit(':').next()?, 16).ok()
}

/// The range of ports the kernel gives clients (`net.ipv4.ip_local_port_range`, which IPv6 shares).
fn ephemeral_ports() -> (u16, u16) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut range = text.split_whitespace().filter_map(|p| p.parse().ok());
    match (range.next(), range.next()) {
        (Some(low), Some(high)) => (low, high),
        _ => (32768, 60999),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_lines() {
        let listen = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 0 1 1";
        let open = "   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0 0 2 1";
        assert_eq!(listening_port(listen), Some(8080));
        assert_eq!(listening_port(open), None);
    }
}
