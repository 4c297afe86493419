// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpsynbl: the accept-queue length of listening TCP sockets each time a handshake completes, as log2
//! histograms per backlog limit (BCC's tool, with libbpf-tools' interval, count and -T; CO-RE).
//!
//! The BPF side counts at the entry of tcp_v4_syn_recv_sock / tcp_v6_syn_recv_sock (fentry, else kprobes): no
//! tracepoint fires there before the kernel refuses a handshake for a full queue (see tcpsynbl.bpf.c), so on a
//! kernel without kprobes or BPF trampolines the tool says so and stops. This side prints, every interval or at
//! Ctrl-C, what each backlog limit's cumulative histogram gained, in BCC's layout or as JSON lines; with
//! `--prometheus` it serves the cumulative histograms instead.

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{autoload_by_section, load_first_working, open_skeleton};
use common::attach::maps::{hash_entries, DropCounter};
use common::cli::IntervalCount;
use common::host::Host;
use common::output::hist::{log2_buckets, write_log2_hist, Bucket, IntervalDiff, Log2Hist};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::hist;
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a plain C struct of integers, generated from tcpsynbl.h.
unsafe impl plain::Plain for hist {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Accept-queue length of listening TCP sockets at each completed handshake, per backlog limit
#[derive(Debug, Parser)]
#[command(name = "tcpsynbl", version, after_help = EXAMPLES)]
struct Args {
    /// Only listeners of the IPv4 family (tcp_v4_syn_recv_sock)
    #[arg(short = '4', long, conflicts_with = "ipv6")]
    ipv4: bool,
    /// Only listeners of the IPv6 family (tcp_v6_syn_recv_sock)
    #[arg(short = '6', long)]
    ipv6: bool,
    /// Print the time (HH:MM:SS) above each report
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Print JSON lines: one object per backlog limit per report
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    #[command(flatten)]
    every: IntervalCount,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcpsynbl(args, &host, signals))
}

/// `--prometheus`: each backlog limit's cumulative histogram as `corebpf_tcpsynbl_accept_queue_length`, labelled
/// `backlog_max`; log2 buckets with `le` 2^(i+1) (slot 0 holds queues of 0 and 1), the last slot `+Inf`.
fn metrics(s: &mut common::output::metrics::Snapshot, hists: Vec<(u64, hist)>) {
    use common::output::metrics::HistogramValue;
    const HELP: &str = "Connections waiting in a listener's accept queue as a handshake completes, per backlog limit";
    s.declare_histogram("accept_queue_length", HELP, &["backlog_max"]);
    for (limit, h) in hists {
        // Unitless log2 buckets: what from_log2_slots_bytes makes with one "byte" a unit.
        let value = HistogramValue::from_log2_slots_bytes(&h.slots, h.sum_ns, 1);
        s.histogram("accept_queue_length", HELP, &["backlog_max"], vec![limit.to_string()], value);
    }
}

/// One backlog limit's histogram of one report, as a JSON line.
#[derive(serde::Serialize)]
struct JsonHist<'a> {
    time: &'a str,
    backlog_max: u64,
    unit: &'static str,
    buckets: Vec<Bucket>,
    count: u64,
}

fn tcpsynbl(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let endpoint = args.export.endpoint(host, args.every.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))
            .context("needs fentry or kprobes on tcp_v4_syn_recv_sock and tcp_v6_syn_recv_sock")?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            s.map_full("hists", &bss.hists_full);
            metrics(s, hash_entries(&skel.maps.hists)?);
            Ok(())
        });
    }
    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Tracing SYN backlog size. Ctrl-C to end.")?;
        out.flush()?;
    }
    let mut full = DropCounter::new("handshakes", "too many distinct backlog limits");
    let mut diff: IntervalDiff<u64> = IntervalDiff::new();
    run_intervals(&signals, args.every.interval(), args.every.count, |_| {
        let now: Vec<(u64, hist)> = hash_entries(&skel.maps.hists)?;
        let sections = diff.update(
            now.into_iter().map(|(limit, h)| (limit, Log2Hist { slots: h.slots.to_vec(), count: h.count, sum: 0 })),
        );
        if args.json {
            let timestamp = clock_rfc3339();
            for (limit, h) in &sections {
                let line = JsonHist {
                    time: &timestamp,
                    backlog_max: *limit,
                    unit: "backlog",
                    buckets: log2_buckets(&h.slots),
                    count: h.count,
                };
                writeln!(out, "{}", serde_json::to_string(&line)?)?;
            }
        } else {
            writeln!(out)?;
            if args.timestamp {
                writeln!(out, "{:<8}", clock_hms())?;
            }
            for (limit, h) in &sections {
                writeln!(out, "\nbacklog_max = {limit}")?;
                write_log2_hist(&mut out, &h.slots, "backlog")?;
            }
        }
        out.flush()?;
        full.check(&bss.hists_full);
        Ok(())
    })
}

/// Opens the BPF object, keeps the programs of one mechanism (and of the families asked for), loads and
/// attaches them.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    if mech == Attach::Kprobe && !common::probe::attach::kprobes_available() {
        bail!("no kprobes (CONFIG_KPROBES is not set)");
    }
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    autoload_by_section(open.open_object_mut(), mech);
    let (v4, v6) = (!args.ipv6, !args.ipv4);
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_string_lossy();
        if (name.starts_with("v4_") && !v4) || (name.starts_with("v6_") && !v6) {
            prog.set_autoload(false);
        }
    }
    let skel = match open.load() {
        Ok(skel) => skel,
        Err(err) if mech == Attach::Fentry => bail!("refused by the kernel: {err}"),
        Err(err) => return Err(err).with_context(|| format!("loading the BPF program ({mech})")),
    };
    let p = &skel.progs;
    let mut links = Vec::new();
    for (want, func, fentry, kprobe) in [
        (v4, "tcp_v4_syn_recv_sock", &p.v4_fentry, &p.v4_kprobe),
        (v6, "tcp_v6_syn_recv_sock", &p.v6_fentry, &p.v6_kprobe),
    ] {
        if !want {
            continue;
        }
        let link = match mech {
            // Debian's 6.1 refuses this attach with ENOTSUPP (524), which has no message of its own.
            Attach::Fentry => {
                fentry.attach().map_err(|e| anyhow!("the kernel cannot attach fentry to {func} ({e})"))?
            }
            _ => kprobe.attach_kprobe(false, func).with_context(|| format!("kprobe {func}"))?,
        };
        links.push(link);
    }
    Ok((skel, links))
}
