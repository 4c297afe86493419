// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcptop: summarize TCP send/recv throughput by host (BCC's tool, CO-RE).
//!
//! The BPF side adds the payload bytes of every successful send and receive on a TCP socket to a hash map keyed
//! by (PID, comm, family, addresses, ports), cumulatively (the sock:sock_send_length/sock_recv_length tracepoints
//! from 6.3, else tcp_sendmsg/tcp_cleanup_rbuf with fentry/fexit or kprobes); this front end reads the map every interval, takes
//! the difference from the previous read and prints BCC's screen (or JSON lines with tcplife's field names); or,
//! with `--prometheus`, serves the bytes as counters per process name, addresses, server port and role
//! ([`metrics`]).

mod bpf;
mod metrics;
mod report;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata};
use common::attach::maps::DropCounter;
use common::cli::filter::open_filtered;
use common::cli::{parse_interval_secs, parse_positive_u64};
use common::domain::net::{AF_INET, AF_INET6};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Conn, Screen};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// What the rows are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Sort {
    All,
    Sent,
    Received,
}

/// TCP throughput per connection, refreshed every interval like top: kilobytes sent and received.
#[derive(Debug, Parser)]
#[command(name = "tcptop", version, after_help = EXAMPLES)]
struct Args {
    /// Print each report below the previous one instead of clearing the screen
    #[arg(short = 'C', long)]
    noclear: bool,
    /// Leave out the first line (the load averages)
    #[arg(short = 'S', long)]
    nosummary: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only connections of tasks in this cgroup (a cgroup v2 directory)
    #[arg(short = 'c', long = "cgroup", value_name = "CGROUP_PATH")]
    cgroup: Option<PathBuf>,
    /// Only IPv4 connections
    #[arg(short = '4', long, conflicts_with = "ipv6")]
    ipv4: bool,
    /// Only IPv6 connections
    #[arg(short = '6', long)]
    ipv6: bool,
    /// Order rows by bytes sent plus received (all), by bytes sent or by bytes received
    #[arg(short = 's', long, value_enum, default_value = "all")]
    sort: Sort,
    /// Print at most this many rows per report
    #[arg(short = 'r', long, default_value = "20", value_parser = parse_positive_u64)]
    rows: u64,
    /// How many connections can be counted at once (1 to 1048576): the kernel map reserves 16 bytes per slot (N
    /// rounded up to a power of two) at start, and about 120 more bytes for each connection it holds
    #[arg(long, value_name = "N", default_value_t = bpf::consts::DEFAULT_CONNECTIONS as u32,
          value_parser = parse_max_connections)]
    max_connections: u32,
    /// Print JSON lines: an object per connection per report, bytes exact
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds between reports (1 if not given)
    #[arg(value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many reports
    #[arg(value_parser = parse_positive_u64)]
    count: Option<u64>,
}

pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Fentry, Attach::Kprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcptop(args, &host, signals))
}

/// `--max-connections N`: from 1 to MAX_CONNECTIONS, checked before anything is loaded.
fn parse_max_connections(s: &str) -> Result<u32, String> {
    let max = bpf::consts::MAX_CONNECTIONS as u32;
    match s.parse::<u32>() {
        Ok(n @ 1..) if n <= max => Ok(n),
        _ => Err(format!("a number of connections from 1 to {max} is expected")),
    }
}

fn tcptop(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.count.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, cgroup.as_ref(), mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let mut totals = metrics::Totals::default();
        return endpoint.serve(&signals, |s| {
            let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
            s.map_full("conns", &bss.full);
            totals.write(s, &skel.maps.conns)
        });
    }
    let interval = args.interval.unwrap_or(1);

    let mut out = Output::new();
    if !args.json {
        use std::io::Write;
        writeln!(out, "Tracing... Output every {interval} secs. Hit Ctrl-C to end")?;
        out.flush()?;
    }
    let screen = Screen {
        clear: !args.noclear,
        summary: !args.nosummary,
        sort: args.sort,
        rows: usize::try_from(args.rows).unwrap_or(usize::MAX),
    };
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let mut full = DropCounter::new("sends and receives", "connection map full (see --max-connections)");
    let mut before: HashMap<report::Key, (u64, u64)> = HashMap::new();
    run_intervals(&signals, Some(Duration::from_secs(interval)), args.count, |_| {
        let now = common::attach::maps::hash_entries::<bpf::types::conn, bpf::types::traffic>(&skel.maps.conns)?;
        let mut conns = Vec::new();
        for (key, t) in now {
            let (sent0, recv0) = before.insert(report::key(&key), (t.sent, t.received)).unwrap_or((0, 0));
            let (sent, received) = (t.sent.saturating_sub(sent0), t.received.saturating_sub(recv0));
            if sent == 0 && received == 0 {
                continue;
            }
            if let Some(c) = Conn::from_key(&key, sent, received) {
                conns.push(c);
            }
        }
        if args.json {
            report::write_json(&mut out, &conns)?;
        } else {
            screen.write(&mut out, conns)?;
        }
        full.check(&bss.full);
        Ok(())
    })?;
    full.check(&bss.full);
    Ok(())
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, cgroup: Option<&std::fs::File>, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.target_family = match (args.ipv4, args.ipv6) {
        (true, _) => AF_INET,
        (_, true) => AF_INET6,
        _ => 0,
    };
    rodata.filter_cgroup = cgroup.is_some();
    open.maps.conns.set_max_entries(args.max_connections)?;
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    // The cgroup filter is in place before anything is attached.
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }
    let p = &skel.progs;
    let links = match mech {
        Attach::Fentry => vec![
            p.sendmsg_fexit.attach().context("attaching to tcp_sendmsg (fexit)")?,
            p.cleanup_rbuf_fentry.attach().context("attaching to tcp_cleanup_rbuf (fentry)")?,
        ],
        Attach::Kprobe => vec![
            p.sendmsg_entry.attach_kprobe(false, "tcp_sendmsg").context("kprobe tcp_sendmsg")?,
            p.sendmsg_ret.attach_kprobe(true, "tcp_sendmsg").context("kretprobe tcp_sendmsg")?,
            p.cleanup_rbuf_kprobe.attach_kprobe(false, "tcp_cleanup_rbuf").context("kprobe tcp_cleanup_rbuf")?,
        ],
        _ => vec![
            attach_loaded_tracepoint(skel.object(), "sock", "sock_send_length")?,
            attach_loaded_tracepoint(skel.object(), "sock", "sock_recv_length")?,
        ],
    };
    Ok((skel, links))
}
