// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpsubnet: TCP bytes sent over IPv4, added up per destination subnet (BCC's tool, CO-RE).
//!
//! The BPF side shares tcptop's send hooks (bpf/include/tcpsend.bpf.h) and adds each send's bytes to the first
//! subnet of the list that holds the destination, cumulatively; this front end reads the counts every interval,
//! takes the differences and prints BCC's report: a `[date time]` line, then one line per subnet that was sent
//! to, largest first, in the unit of -f (or BCC's JSON object with -J).

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata,
};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// BCC's list: loopback, the three private ranges, then everything else.
const DEFAULT_SUBNETS: &str = "127.0.0.1/32,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,0.0.0.0/0";

/// One subnet of the list: as written on the command line, and its network and mask (host byte order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    pub name: String,
    pub net: u32,
    pub mask: u32,
}

/// TCP bytes sent over IPv4 per destination subnet, every interval
#[derive(Debug, Parser)]
#[command(name = "tcpsubnet", version, after_help = EXAMPLES)]
struct Args {
    /// Subnets to add the bytes up by, as ADDRESS/BITS separated by commas; a send goes to the first that holds
    /// its destination, and sends none holds are not shown
    #[arg(value_name = "subnets", default_value = DEFAULT_SUBNETS, value_parser = parse_subnets)]
    subnets: Subnets,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Print a JSON object per interval (date, time and the entries per subnet) instead of lines
    #[arg(short = 'J', long)]
    json: bool,
    /// Unit of the figures: b bits, k kilobits, m megabits, B bytes, K kilobytes, M megabytes (1024 based)
    #[arg(short = 'f', long, default_value = "B", value_parser = ["b", "k", "m", "B", "K", "M"])]
    format: String,
    /// Seconds between reports (1 if not given)
    #[arg(short = 'i', long, value_parser = common::cli::parse_interval_secs)]
    interval: Option<u64>,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
}

/// The parsed list (a newtype, so that clap takes the whole list as one value).
#[derive(Debug, Clone)]
pub struct Subnets(pub Vec<Subnet>);

pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Fentry, Attach::Kprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcpsubnet(args, &host, signals))
}

/// `ADDRESS/BITS[,ADDRESS/BITS...]`, IPv4 only, at most MAX_SUBNETS of them.
pub fn parse_subnets(s: &str) -> Result<Subnets, String> {
    let max = bpf::consts::MAX_SUBNETS;
    let list = s
        .split(',')
        .map(|item| {
            let (addr, bits) = item.split_once('/').ok_or_else(|| format!("'{item}' is not ADDRESS/BITS"))?;
            let addr: Ipv4Addr = addr.parse().map_err(|_| format!("'{item}': '{addr}' is not an IPv4 address"))?;
            let bits: u32 = match bits.parse() {
                Ok(n @ 0..=32) => n,
                _ => return Err(format!("'{item}': the mask must be a number of bits from 0 to 32")),
            };
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            Ok(Subnet { name: item.to_string(), net: u32::from(addr) & mask, mask })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if list.len() > max {
        return Err(format!("at most {max} subnets can be given"));
    }
    Ok(Subnets(list))
}

/// Bytes in the unit of -f: a whole number for the text lines (BCC truncates), and BCC's JSON number (bytes and
/// bits stay whole, the other units are fractions).
fn scaled(bytes: u64, format: &str) -> (u64, serde_json::Value) {
    let (bits, div) = match format {
        "b" => (true, 1),
        "k" => (true, 1024),
        "m" => (true, 1024 * 1024),
        "K" => (false, 1024),
        "M" => (false, 1024 * 1024),
        _ => (false, 1),
    };
    let n = if bits { bytes.saturating_mul(8) } else { bytes };
    let json = if div == 1 { n.into() } else { serde_json::json!(n as f64 / div as f64) };
    (n / div, json)
}

/// One report: the subnets sent to in the interval, largest first (list order among equals).
fn report(out: &mut Output, subnets: &[Subnet], delta: &[u64], format: &str, json: bool) -> Result<()> {
    let mut rows: Vec<(usize, u64)> = delta.iter().copied().enumerate().filter(|&(_, b)| b > 0).collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let now = chrono::Local::now();
    let (date, time) = (now.format("%m/%d/%y").to_string(), now.format("%H:%M:%S").to_string());
    if json {
        // Python's json.dumps layout, as BCC prints it: ", " and ": " separators, keys in insertion order.
        let entries: Vec<String> = rows
            .iter()
            .map(|&(i, b)| format!("{}: {}", serde_json::Value::from(subnets[i].name.as_str()), scaled(b, format).1))
            .collect();
        writeln!(out, "{{\"date\": \"{date}\", \"time\": \"{time}\", \"entries\": {{{}}}}}", entries.join(", "))?;
    } else {
        writeln!(out, "[{date} {time}]")?;
        for &(i, b) in &rows {
            writeln!(out, "{:<21} {:>6}", subnets[i].name, scaled(b, format).0)?;
        }
    }
    out.flush()?;
    Ok(())
}

fn tcpsubnet(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let subnets = &args.subnets.0;
    if args.verbose.on() {
        for (i, s) in subnets.iter().enumerate() {
            eprintln!("subnet {i}: {} (network {}, mask {})", s.name, Ipv4Addr::from(s.net), Ipv4Addr::from(s.mask));
        }
    }
    let endpoint = args.export.endpoint(host, args.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(subnets, mech))?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    // SAFETY: an aligned u64 of the mapped .bss, which the BPF side only adds to atomically.
    let sent = |i: usize| unsafe { std::ptr::read_volatile(&bss.sent[i]) };
    if let Some(mut endpoint) = endpoint {
        // `--prometheus`: each subnet's cumulative bytes, as a counter labelled with the subnet as written.
        const HELP: &str =
            "TCP payload bytes sent over IPv4 to each subnet (the first of the list that holds the destination)";
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            s.declare_counter("sent_bytes", HELP, &["subnet"]);
            for (i, subnet) in subnets.iter().enumerate() {
                s.counter("sent_bytes", HELP, &["subnet"], vec![subnet.name.clone()], sent(i));
            }
            Ok(())
        });
    }
    let interval = args.interval.unwrap_or(1);
    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Tracing... Output every {interval} secs. Hit Ctrl-C to end")?;
        out.flush()?;
    }
    let mut before = vec![0u64; subnets.len()];
    run_intervals(&signals, Some(Duration::from_secs(interval)), None, |_| {
        let mut delta = Vec::with_capacity(subnets.len());
        for (i, prev) in before.iter_mut().enumerate() {
            let now = sent(i);
            delta.push(now.saturating_sub(*prev));
            *prev = now;
        }
        report(&mut out, subnets, &delta, &args.format, args.json)
    })
}

/// Opens the BPF object, writes the subnets, keeps the send programs of one mechanism, loads and attaches them.
fn load_and_attach(subnets: &[Subnet], mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.nr_subnets = subnets.len() as u32;
    for (slot, s) in rodata.subnets.iter_mut().zip(subnets) {
        slot.net = s.net.to_be();
        slot.mask = s.mask.to_be();
    }
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let p = &skel.progs;
    let links = match mech {
        Attach::Fentry => vec![p.sendmsg_fexit.attach().context("attaching to tcp_sendmsg (fexit)")?],
        Attach::Kprobe => vec![
            p.sendmsg_entry.attach_kprobe(false, "tcp_sendmsg").context("kprobe tcp_sendmsg")?,
            p.sendmsg_ret.attach_kprobe(true, "tcp_sendmsg").context("kretprobe tcp_sendmsg")?,
        ],
        _ => vec![attach_loaded_tracepoint(skel.object(), "sock", "sock_send_length")?],
    };
    Ok((skel, links))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_parse_like_bcc() {
        let s = parse_subnets("192.30.253.110/27,0.0.0.0/0,10.1.2.3/32").unwrap().0;
        assert_eq!(s[0], Subnet { name: "192.30.253.110/27".into(), net: 0xc01efd60, mask: 0xffff_ffe0 });
        assert_eq!((s[1].net, s[1].mask), (0, 0));
        assert_eq!((s[2].net, s[2].mask), (0x0a01_0203, u32::MAX));
        for bad in ["", "10.0.0.0", "10.0.0.0/33", "10.0.0/8", "300.0.0.1/8", "10.0.0.0/x", "::1/128", "1.2.3.4/8,"] {
            assert!(parse_subnets(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn units_scale_as_bcc() {
        assert_eq!(scaled(5000, "B"), (5000, 5000.into()));
        assert_eq!(scaled(5000, "b"), (40000, 40000.into()));
        assert_eq!(scaled(5000, "K").0, 4);
        assert_eq!(scaled(5000, "K").1.to_string(), "4.8828125");
        assert_eq!(scaled(5000, "k").0, 39);
        assert_eq!(scaled(2048, "K").1.to_string(), "2.0");
        assert_eq!(scaled(5000, "M").0, 0);
        assert_eq!(scaled(5000, "m").0, 0);
    }
}
