// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpdrop's output: BCC's line per drop (`TIME PID IP SADDR:SPORT > DADDR:DPORT STATE (FLAGS) REASON (CODE)`)
//! followed by the kernel stack, one `\tfunction+0xoffset` a line, and a blank line; `-s` a table of drops per
//! reason and kernel location; or JSON lines. Drop-reason names are read from the kernel's BTF.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::IpAddr;

use anyhow::{bail, Result};
use common::attach::features::KernelBtf;
use common::domain::net::{ip_addr, AF_INET, AF_INET6};
use common::domain::tcp::{flags_str, state_name};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use common::process::symbols::{Symbol, Symbolizer};
use common::stacks::tracing_frames::is_tracing_frame;
use serde::Serialize;

// SAFETY: #[repr(C)] structs of integers and integer arrays, with no padding the BPF side leaves unset.
unsafe impl plain::Plain for crate::bpf::types::event {}
unsafe impl plain::Plain for crate::bpf::types::summary_key {}

const PREFIX: &str = "SKB_DROP_REASON_";

/// The kernel's drop reasons (`enum skb_drop_reason`), named as BCC prints them (without `SKB_DROP_REASON_`).
pub struct Reasons {
    names: HashMap<u32, String>,
}

impl Reasons {
    pub fn from_btf(btf: &KernelBtf) -> Reasons {
        let names = btf
            .enum_members("skb_drop_reason")
            .into_iter()
            .filter_map(|(name, value)| {
                let short = name.strip_prefix(PREFIX).unwrap_or(&name).to_string();
                Some((u32::try_from(value).ok()?, short))
            })
            .collect();
        Reasons { names }
    }

    /// The name of reason `code`, `UNKNOWN` if this kernel has none (as BCC).
    pub fn name(&self, code: u32) -> &str {
        self.names.get(&code).map_or("UNKNOWN", String::as_str)
    }

    /// `NO_SOCKET,tcp_csum,SKB_DROP_REASON_NETFILTER_DROP` to codes; an unknown name is an error naming it.
    pub fn parse_list(&self, list: &str) -> Result<Vec<u32>> {
        let mut codes = Vec::new();
        for item in list.split(',').map(str::trim) {
            let want = item.to_ascii_uppercase();
            let want = want.strip_prefix(PREFIX).unwrap_or(&want);
            match self.names.iter().find(|(_, n)| n.as_str() == want) {
                Some((code, _)) => codes.push(*code),
                None if self.names.is_empty() => bail!("this kernel has no drop reasons (no enum skb_drop_reason)"),
                None => bail!("'{item}' is not a drop reason of this kernel (its enum skb_drop_reason)"),
            }
        }
        Ok(codes)
    }
}

#[derive(Serialize)]
struct JsonDrop<'a> {
    time: String,
    pid: u32,
    family: &'static str,
    protocol: String,
    saddr: String,
    sport: u16,
    daddr: String,
    dport: u16,
    state: Option<String>,
    tcpflags: String,
    reason: &'a str,
    reason_code: u32,
    location: String,
    stack: Vec<String>,
}

#[derive(Serialize)]
struct JsonCount<'a> {
    reason: &'a str,
    reason_code: u32,
    location: String,
    count: u64,
}

/// Prints drops as they come, or the summary at the end.
pub struct Printer {
    json: bool,
    reasons: Reasons,
    symbolizer: Symbolizer,
}

fn frame(sym: &Result<Symbol, String>) -> String {
    match sym {
        Ok(s) => format!("{}+{:#x}", s.name, s.offset),
        Err(_) => common::process::symbols::UNKNOWN.to_string(),
    }
}

fn protocol_name(p: u8) -> String {
    match p {
        6 => "tcp".into(),
        17 => "udp".into(),
        1 => "icmp".into(),
        58 => "icmpv6".into(),
        132 => "sctp".into(),
        other => other.to_string(),
    }
}

impl Printer {
    pub fn new(json: bool, reasons: Reasons) -> Self {
        let symbolizer = Symbolizer::new();
        symbolizer.preload_kernel();
        Printer { json, reasons, symbolizer }
    }

    pub fn write_header(&self, out: &mut Output) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        writeln!(
            out,
            "{:<8} {:<7} {:<2} {:<20} > {:<20} {:<20} REASON (CODE)",
            "TIME", "PID", "IP", "SADDR:SPORT", "DADDR:DPORT", "STATE (FLAGS)"
        )?;
        out.flush()
    }

    /// One drop: BCC's line, its kernel stack and a blank line; or one JSON object.
    pub fn write_drop(&mut self, out: &mut Output, e: &crate::bpf::types::event, stack: &[u64]) -> io::Result<()> {
        let af = if e.ipver == 4 { AF_INET } else { AF_INET6 };
        let addr = |raw: &[u8; 16]| ip_addr(af, raw).unwrap_or(IpAddr::from([0u8; 4]));
        let (saddr, daddr) = (addr(&e.saddr), addr(&e.daddr));
        let tcp = e.protocol == 6;
        let state = (e.state != 0).then(|| state_name(e.state));
        let flags = if tcp { flags_str(e.tcpflags) } else { String::new() };
        let mut addrs = stack.to_vec();
        addrs.push(e.location);
        let mut symbols = self.symbolizer.kernel_each(&addrs);
        let location = symbols.pop().map(|s| frame(&s)).unwrap_or_default();
        // The stack starts in the tracing machinery (the BPF program, the tracepoint's calls): BCC skips it too.
        let tracing = symbols.iter().take_while(|s| s.as_ref().is_ok_and(|s| is_tracing_frame(&s.name))).count();
        let names: Vec<String> = symbols[tracing..].iter().map(frame).collect();
        let reason = self.reasons.name(e.reason);
        if self.json {
            return out.json_line(&JsonDrop {
                time: clock_rfc3339(),
                pid: e.pid,
                family: if e.ipver == 4 { "ipv4" } else { "ipv6" },
                protocol: protocol_name(e.protocol),
                saddr: saddr.to_string(),
                sport: e.sport,
                daddr: daddr.to_string(),
                dport: e.dport,
                state,
                tcpflags: flags,
                reason,
                reason_code: e.reason,
                location,
                stack: names,
            });
        }
        let state_flags = if tcp {
            format!("{} ({flags})", state.as_deref().unwrap_or("-"))
        } else {
            format!("{} ({})", state.as_deref().unwrap_or("-"), protocol_name(e.protocol).to_uppercase())
        };
        writeln!(
            out,
            "{:<8} {:<7} {:<2} {:<20} > {:<20} {:<20} {} ({})",
            clock_hms(),
            e.pid,
            e.ipver,
            format!("{saddr}:{}", e.sport),
            format!("{daddr}:{}", e.dport),
            state_flags,
            reason,
            e.reason
        )?;
        for name in &names {
            writeln!(out, "\t{name}")?;
        }
        writeln!(out)?;
        out.flush()
    }

    /// `-s`: drops per reason and kernel location, most first.
    /// `--prometheus`: the cumulative counts as `corebpf_tcpdrop_drops_total`, labelled `reason` (the kernel's
    /// name, as in the summary) and `location` (the kernel function that dropped the packet, without the offset,
    /// so that a few series cover a kernel).
    pub fn metrics(&mut self, s: &mut common::output::metrics::Snapshot, counts: HashMap<(u32, u64), u64>) {
        const HELP: &str = "Packets the kernel dropped, per drop reason and the kernel function that dropped them";
        const LABELS: &[&str] = &["reason", "location"];
        s.declare_counter("drops", HELP, LABELS);
        let rows: Vec<((u32, u64), u64)> = counts.into_iter().collect();
        let locs: Vec<u64> = rows.iter().map(|((_, l), _)| *l).collect();
        let funcs = self.symbolizer.kernel_each(&locs);
        let mut series: HashMap<(String, String), u64> = HashMap::new();
        for (((reason, _), count), func) in rows.into_iter().zip(funcs) {
            let func = func.map_or_else(|_| common::process::symbols::UNKNOWN.to_string(), |f| f.name.to_string());
            *series.entry((self.reasons.name(reason).to_string(), func)).or_default() += count;
        }
        for ((reason, func), count) in series {
            s.counter("drops", HELP, LABELS, vec![reason, func], count);
        }
    }

    pub fn write_summary(&mut self, out: &mut Output, counts: HashMap<(u32, u64), u64>) -> io::Result<()> {
        let mut rows: Vec<((u32, u64), u64)> = counts.into_iter().collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let locs: Vec<u64> = rows.iter().map(|((_, l), _)| *l).collect();
        let names: Vec<String> = self.symbolizer.kernel_each(&locs).iter().map(frame).collect();
        if !self.json {
            writeln!(out, "{:<30} {:<40} {:>10}", "REASON (CODE)", "LOCATION", "COUNT")?;
        }
        for (((reason, _), count), location) in rows.into_iter().zip(names) {
            let name = self.reasons.name(reason);
            if self.json {
                out.json_line(&JsonCount { reason: name, reason_code: reason, location, count })?;
            } else {
                writeln!(out, "{:<30} {:<40} {:>10}", format!("{name} ({reason})"), location, count)?;
            }
        }
        out.flush()
    }
}
