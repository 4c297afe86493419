// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcprtt: TCP's smoothed round-trip time as a log2 histogram (BCC's tool, CO-RE).
//!
//! The BPF side (`tcprtt.bpf.c`) reads the socket's srtt each time an established TCP socket handles a received
//! segment (the `tcp:tcp_probe` tracepoint, or `tcp_rcv_established()` itself where kernel functions can be
//! traced), filters by port, address and family, and counts it into a cumulative histogram: one, or one per local
//! (`-b`) or remote (`-B`) address. The shared report of named histograms (`common::output::namedhist`) prints
//! each interval's part in BCC's layout (`All Addresses = *******`), with `-e` the mean, or as JSON lines, and
//! with `--heatmap FILE.svg` draws the intervals, all addresses added up, as a heat map.

mod bpf;

use std::ffi::OsString;
use std::net::IpAddr;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{autoload_by_section, load_first_working, open_skeleton, rodata};
use common::attach::maps::{hash_entries, DropCounter};
use common::cli::IntervalCount;
use common::domain::net::{ip_addr, AF_INET, AF_INET6};
use common::host::Host;
use common::output::heatmap::HeatmapFile;
use common::output::hist::Log2Hist;
use common::output::namedhist::{self, Layout};
use common::output::sockevents::FamilyArgs;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::{hist, hist_key};
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: plain C structs of integers, generated from tcprtt.h.
unsafe impl plain::Plain for hist {}
unsafe impl plain::Plain for hist_key {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The name of the single histogram, as BCC prints it.
const ALL: &str = "*******";

/// The distribution of TCP's smoothed round-trip time, sampled on every segment an established socket receives.
#[derive(Debug, Parser)]
#[command(name = "tcprtt", version, after_help = EXAMPLES)]
struct Args {
    /// Seconds between reports (by default, one report at the end)
    #[arg(short = 'i', long, value_name = "INTERVAL", value_parser = common::cli::parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many seconds (by default, at Ctrl-C)
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
    /// Print the time of day (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Use milliseconds for the histogram buckets instead of microseconds
    #[arg(short = 'm', long)]
    milliseconds: bool,
    /// Only sockets with this local port
    #[arg(short = 'p', long, value_name = "LPORT", value_parser = parse_port)]
    lport: Option<u16>,
    /// Only sockets with this remote port
    #[arg(short = 'P', long, value_name = "RPORT", value_parser = parse_port)]
    rport: Option<u16>,
    /// Only sockets with this local IPv4 or IPv6 address
    #[arg(short = 'a', long, value_name = "LADDR", value_parser = parse_addr)]
    laddr: Option<IpAddr>,
    /// Only sockets with this remote IPv4 or IPv6 address
    #[arg(short = 'A', long, value_name = "RADDR", value_parser = parse_addr)]
    raddr: Option<IpAddr>,
    /// One histogram for each local address
    #[arg(short = 'b', long, conflicts_with = "byraddr")]
    byladdr: bool,
    /// One histogram for each remote address
    #[arg(short = 'B', long)]
    byraddr: bool,
    /// Show each histogram's mean after its name ([AVG n])
    #[arg(short = 'e', long)]
    extension: bool,
    /// Accepted for BCC's command lines; does nothing (the BPF program is compiled in)
    #[arg(short = 'D', long)]
    debug: bool,
    #[command(flatten)]
    family: FamilyArgs,
    /// Print JSON lines: an object per histogram per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::ExportArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

fn parse_port(s: &str) -> Result<u16, String> {
    s.trim().parse::<u16>().map_err(|_| format!("'{s}' is not a port number (0 to 65535)"))
}

fn parse_addr(s: &str) -> Result<IpAddr, String> {
    s.trim().parse::<IpAddr>().map_err(|_| format!("'{s}' is not an IPv4 or IPv6 address"))
}

/// The tracepoint first: tcp_probe is called at the start of tcp_rcv_established(), and needs no kernel function
/// tracing; fentry and kprobe on the function itself where that is all there is.
pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Fentry, Attach::Kprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    args.milliseconds = args.export.display(args.milliseconds);
    host.bpf_main(args.verbose, |signals| tcprtt(args, &host, signals))
}

/// BCC's -i/-d: a report every INTERVAL seconds (DURATION when only it is given) until DURATION has passed.
fn every(args: &Args) -> IntervalCount {
    let interval = args.interval.or(args.duration);
    let count = match (interval, args.duration) {
        (Some(i), Some(d)) => Some(d.div_ceil(i)),
        _ => None,
    };
    IntervalCount { interval, count }
}

fn layout(args: &Args) -> Layout {
    let header = if args.byladdr {
        "Local Address"
    } else if args.byraddr {
        "Remote Address"
    } else {
        "All Addresses"
    };
    let unit = if args.milliseconds { "msecs" } else { "usecs" };
    Layout { what: "TCP RTT", header, field: "addr", unit }
}

fn tcprtt(args: Args, host: &Host, signals: Signals) -> Result<()> {
    check_filters(&args)?;
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.duration.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let read = || -> Result<Vec<(String, Log2Hist)>> {
        let entries: Vec<(hist_key, hist)> = hash_entries(&skel.maps.hists)?;
        Ok(entries
            .into_iter()
            .map(|(k, h)| {
                let name = ip_addr(k.family, &k.addr).map_or(ALL.to_string(), |a| a.to_string());
                (name, Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: h.sum_ns })
            })
            .collect())
    };
    let bss = skel.maps.bss_data.as_ref().context("the BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return serve(endpoint, &signals, args.byladdr || args.byraddr, &bss.hists_full, read);
    }
    let layout = layout(&args);
    let heat = HeatmapFile::open(args.export.heatmap.as_deref(), "TCP smoothed round-trip time", layout.unit)?;
    let mut hists_full = DropCounter::new("segments", "too many addresses");
    let every = every(&args);
    namedhist::run_with_mean(&signals, &every, &layout, args.json, args.timestamp, args.extension, heat, || {
        hists_full.check(&bss.hists_full);
        read()
    })
}

/// `--prometheus`: the cumulative histograms as `corebpf_tcprtt_smoothed_rtt_seconds` (microsecond slots, whatever
/// `-m` says), labelled `addr` with -b or -B, and the map-full counter, until a stop signal.
fn serve(
    endpoint: common::host::endpoint::Endpoint,
    signals: &Signals,
    by_addr: bool,
    full: &u64,
    mut read: impl FnMut() -> Result<Vec<(String, Log2Hist)>>,
) -> Result<()> {
    use common::output::metrics::HistogramValue;
    const NAME: &str = "smoothed_rtt";
    const HELP: &str = "TCP smoothed round-trip time at each segment received (BCC log2 buckets)";
    let labels: &[&'static str] = if by_addr { &["addr"] } else { &[] };
    endpoint.serve(signals, |s| {
        s.map_full("hists", full);
        s.declare_histogram_seconds(NAME, HELP, labels);
        for (name, h) in read()? {
            let values = if by_addr { vec![name] } else { Vec::new() };
            s.histogram_seconds(NAME, HELP, labels, values, HistogramValue::from_log2_slots(&h.slots, h.sum, 1000));
        }
        Ok(())
    })
}

/// Address filters that can never match together, refused as libbpf-tools does.
fn check_filters(args: &Args) -> Result<()> {
    let families: Vec<bool> = [args.laddr, args.raddr].iter().flatten().map(IpAddr::is_ipv4).collect();
    if families.len() == 2 && families[0] != families[1] {
        bail!("-a and -A must be addresses of the same family (both IPv4 or both IPv6)");
    }
    let af = args.family.af();
    if let Some(v4) = families.first() {
        if (af == AF_INET && !v4) || (af == AF_INET6 && *v4) {
            bail!("the address filter and {} select different families", if af == AF_INET { "-4" } else { "-6" });
        }
    }
    Ok(())
}

/// An address filter as the BPF side compares it: its family and 16 bytes (IPv4 in the first 4).
fn addr_filter(addr: Option<IpAddr>) -> (u16, [u8; 16]) {
    let mut raw = [0u8; 16];
    match addr {
        None => (0, raw),
        Some(IpAddr::V4(a)) => {
            raw[..4].copy_from_slice(&a.octets());
            (AF_INET, raw)
        }
        Some(IpAddr::V6(a)) => (AF_INET6, a.octets()),
    }
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.target_lport = args.lport.unwrap_or(0);
    ro.target_rport = args.rport.unwrap_or(0);
    (ro.laddr_family, ro.target_laddr) = addr_filter(args.laddr);
    (ro.raddr_family, ro.target_raddr) = addr_filter(args.raddr);
    ro.target_family = args.family.af();
    ro.millis = args.milliseconds;
    ro.by = if args.byladdr {
        bpf::consts::BY_LADDR
    } else if args.byraddr {
        bpf::consts::BY_RADDR
    } else {
        bpf::consts::BY_NONE
    } as u32;
    if args.byladdr || args.byraddr {
        open.maps.hists.set_max_entries(bpf::consts::MAX_HISTS as u32)?;
    }

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let link = match mech {
        Attach::Fentry => skel.progs.tcp_rcv_fentry.attach().context("attaching to tcp_rcv_established (fentry)")?,
        Attach::Kprobe => skel
            .progs
            .tcp_rcv_kprobe
            .attach_kprobe(false, "tcp_rcv_established")
            .context("kprobe tcp_rcv_established")?,
        _ => common::attach::loader::attach_loaded_tracepoint(skel.object(), "tcp", "tcp_probe")?,
    };
    Ok((skel, vec![link]))
}
