// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The socket event tools (tcpaccept, tcpconnect, tcpdrop, tcpretrans, tcplife, tcpstates, tcpconnlat): what
//! their front ends share.
//!
//! [`poll_events`] reads the BPF side's fixed-size records from its ring buffer until a stop signal, reporting
//! the records it could not reserve (its `lost` counter) at the end; [`count_at_exit`] is the `-c` mode that counts in a
//! BPF map and prints the map once at exit; [`family_filter`] turns `-4`/`-6` into the `AF_*` the BPF side
//! filters on; [`Conn`] decodes a record's address family, addresses and ports, and [`SinceFirst`] is BCC's
//! seconds-since-the-first-event column. The tools on `sock:inet_sock_set_state` (`bpf/include/sockstate.bpf.h`)
//! also share [`PortArgs`], the `-L`/`-D` port lists their kernel side filters on, and [`time_prefix`], BCC's
//! `TIME` and `TIME(s)` columns.

use std::net::IpAddr;

use anyhow::{Context, Result};
use libbpf_rs::MapCore;
use plain::Plain;

use crate::attach::events::EventStream;
use crate::attach::maps::{from_bytes, hash_entries, DropCounter};
use crate::domain::net::{ip_addr, Family, AF_INET, AF_INET6};
use crate::output::stdout::Output;
use crate::run::Signals;

/// Hands every record of `stream`, decoded as `E`, to `handle` with `out` until a stop signal; then reports the
/// records the BPF side could not reserve, on stderr and, with `json`, on `out` ([`EventStream::run`]).
pub fn poll_events<E: Plain + Default>(
    signals: &Signals,
    stream: &EventStream<'_>,
    out: &mut Output,
    json: bool,
    mut handle: impl FnMut(&mut Output, &E) -> Result<()>,
) -> Result<()> {
    stream.run(signals, out, json, || false, |out, data| handle(out, &from_bytes(data)))
}

/// `-c`: waits for a stop signal, then (unless stdout has gone) hands the entries of the counting map to
/// `write` and reports the `what` (`flows`) that did not fit in it (`full`, a `u64` in the BPF side's `.bss`).
pub fn count_at_exit<K: Plain + Default, V: Plain + Default>(
    signals: &Signals,
    counts: &impl MapCore,
    full: &u64,
    what: &'static str,
    write: impl FnOnce(&[(K, V)]) -> Result<()>,
) -> Result<()> {
    let mut dropped = DropCounter::new(what, "flow map full");
    signals.sleep_until(None);
    if signals.stdout_gone() {
        return Ok(());
    }
    let entries = hash_entries::<K, V>(counts).context("reading the flow counts")?;
    write(&entries)?;
    dropped.check(full);
    Ok(())
}

/// BCC's `-4`/`-6` flags (flattened into a tool's arguments).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct FamilyArgs {
    /// Only IPv4 connections and packets
    #[arg(short = '4', long, conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Only IPv6 connections and packets
    #[arg(short = '6', long)]
    pub ipv6: bool,
}

impl FamilyArgs {
    /// The address family the BPF side keeps: [`family_filter`].
    pub fn af(self) -> u16 {
        family_filter(self.ipv4, self.ipv6)
    }
}

/// The address family the BPF side keeps: `AF_INET` with `-4`, `AF_INET6` with `-6`, else 0 (both).
pub fn family_filter(ipv4: bool, ipv6: bool) -> u16 {
    match (ipv4, ipv6) {
        (true, _) => AF_INET,
        (_, true) => AF_INET6,
        _ => 0,
    }
}

/// A connection's two ends, decoded from a BPF record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn {
    pub family: Family,
    pub laddr: IpAddr,
    pub lport: u16,
    pub raddr: IpAddr,
    pub rport: u16,
}

impl Conn {
    /// `None` for a family other than IPv4/IPv6 (which the BPF side never sends).
    pub fn decode(af: u16, laddr: &[u8; 16], lport: u16, raddr: &[u8; 16], rport: u16) -> Option<Conn> {
        Some(Conn {
            family: Family::from_af(af)?,
            laddr: ip_addr(af, laddr)?,
            lport,
            raddr: ip_addr(af, raddr)?,
            rport,
        })
    }
}

/// BCC's `-t` column: seconds since the first event printed, from whole microseconds ((ts_us - first_ts_us) / 1e6).
#[derive(Debug, Default)]
pub struct SinceFirst {
    first_ts_ns: Option<u64>,
}

impl SinceFirst {
    /// The seconds from the first event to this one (at `ts_ns`), the first being now if none came before.
    pub fn secs(&mut self, ts_ns: u64) -> f64 {
        let first = *self.first_ts_ns.get_or_insert(ts_ns);
        (ts_ns / 1000).saturating_sub(first / 1000) as f64 / 1e6
    }
}

/// A connection's two ends in a JSON record (flattened into it: `"family", "laddr", "lport", "raddr", "rport"`,
/// the names tcplife's JSON set for every socket tool).
#[derive(Debug, serde::Serialize)]
pub struct JsonConn {
    family: &'static str,
    laddr: String,
    lport: u16,
    raddr: String,
    rport: u16,
}

impl Conn {
    /// The JSON fields of the two ends.
    pub fn json(&self) -> JsonConn {
        JsonConn {
            family: self.family.name(),
            laddr: self.laddr.to_string(),
            lport: self.lport,
            raddr: self.raddr.to_string(),
            rport: self.rport,
        }
    }
}

/// Refuses a port list (`-P`, `-L`, `-D`: `flag`) longer than the BPF side's filter map holds (`max`).
pub fn check_port_count(flag: &str, ports: Option<&Vec<u16>>, max: usize) -> Result<()> {
    if ports.is_some_and(|p| p.len() > max) {
        anyhow::bail!("{flag} lists more than {max} ports");
    }
    Ok(())
}

/// Fills a port filter map (`__u16` port → `__u8` 1) with `ports`, before anything is attached so that no event
/// slips past an empty filter.
pub fn fill_port_filter(map: &impl MapCore, ports: Option<&Vec<u16>>) -> Result<()> {
    for port in ports.into_iter().flatten() {
        map.update(&port.to_ne_bytes(), &[1], libbpf_rs::MapFlags::ANY).context("setting the port filter")?;
    }
    Ok(())
}

/// A port list; an alias so that clap takes it as one value, not as repeated occurrences.
pub type Ports = Vec<u16>;

/// BCC's `-L` and `-D` port lists (flattened into a tool's arguments), for the `PORT_FILTERS` of
/// `bpf/include/sockstate.bpf.h`: the `lports` and `rports` maps and their `filter_lport`/`filter_rport` switches.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PortArgs {
    /// Only sockets whose local port is one of these (separated by commas)
    #[arg(short = 'L', long = "localport", value_name = "PORTS", value_parser = crate::cli::parse_port_list)]
    pub localport: Option<Ports>,
    /// Only sockets whose remote port is one of these (separated by commas)
    #[arg(short = 'D', long = "remoteport", value_name = "PORTS", value_parser = crate::cli::parse_port_list)]
    pub remoteport: Option<Ports>,
}

impl PortArgs {
    /// Refuses a list longer than the BPF side's maps hold (`max`, its MAX_PORTS).
    pub fn check(&self, max: usize) -> Result<()> {
        check_port_count("-L", self.localport.as_ref(), max)?;
        check_port_count("-D", self.remoteport.as_ref(), max)
    }

    /// Whether the local and the remote list are on (the BPF side's `filter_lport`, `filter_rport`).
    pub fn switches(&self) -> (bool, bool) {
        (self.localport.is_some(), self.remoteport.is_some())
    }

    /// Fills the `lports` and `rports` maps, before anything is attached.
    pub fn fill(&self, lports: &impl MapCore, rports: &impl MapCore) -> Result<()> {
        fill_port_filter(lports, self.localport.as_ref())?;
        fill_port_filter(rports, self.remoteport.as_ref())
    }
}

/// Column layout of a connection tool's text output (tcplife, tcpstates): BCC's default, `-w` and `-s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Fits IPv4 addresses.
    Default,
    /// `-w`: wide enough for IPv6 addresses, with the IP version.
    Wide,
    /// `-s`: comma-separated values.
    Csv,
}

impl Layout {
    /// The layout `-s` (csv) and `-w` (wide) ask for; `-s` wins, as in BCC.
    pub fn from_flags(csv: bool, wide: bool) -> Layout {
        match (csv, wide) {
            (true, _) => Layout::Csv,
            (false, true) => Layout::Wide,
            _ => Layout::Default,
        }
    }
}

/// How a connection tool prints its records.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub layout: Layout,
    pub json: bool,
    /// `-T`: wall-clock HH:MM:SS column.
    pub clock: bool,
    /// `-t`: seconds since the first record printed.
    pub since_first: bool,
}

/// BCC's `-T` (`clock`, HH:MM:SS) and `-t` (`since`, seconds) columns, printed before the others: each value
/// padded as BCC's `%-8s ` and `%-9s `, or followed by a comma in CSV.
pub fn time_prefix(clock: Option<&str>, since: Option<&str>, csv: bool) -> String {
    let mut s = String::new();
    if let Some(clock) = clock {
        s += &if csv { format!("{clock},") } else { format!("{clock:<8} ") };
    }
    if let Some(since) = since {
        s += &if csv { format!("{since},") } else { format!("{since:<9} ") };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_columns_as_bcc() {
        assert_eq!(time_prefix(Some("TIME"), Some("TIME(s)"), false), "TIME     TIME(s)   ");
        assert_eq!(time_prefix(Some("12:00:00"), Some("0.000000"), true), "12:00:00,0.000000,");
        assert_eq!(time_prefix(None, Some("1.5"), true), "1.5,");
        assert_eq!(time_prefix(None, None, false), "");
    }
}
