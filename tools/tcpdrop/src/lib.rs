// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpdrop: trace TCP packets dropped by the kernel, with the drop reason and the kernel stack (BCC's tool, CO-RE).
//!
//! The BPF side watches `skb:kfree_skb` (with its `reason`, 5.17+; a kprobe on `tcp_drop` on older kernels),
//! reads addresses, ports and flags from the packet's headers and sends each drop with a kernel stack id through a
//! ring buffer, or with `-s` counts drops per reason and kernel location. Reason names come from the kernel's BTF
//! (`enum skb_drop_reason`), whose values differ between kernels. This front end prints BCC's lines, a summary or
//! JSON lines.

mod bpf;
mod report;

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata,
};
use common::attach::maps::DropCounter;
use common::host::Host;
use common::output::sockevents::{self, FamilyArgs};
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore, MapFlags};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Printer, Reasons};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per TCP packet the kernel drops, with the connection, its state, the reason and the kernel stack.
#[derive(Debug, Parser)]
#[command(name = "tcpdrop", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    family: FamilyArgs,
    /// Only drops in the network namespace with this inode number (as in /proc/PID/ns/net)
    #[arg(long = "netns-id", value_name = "NETNS_ID", conflicts_with = "pid_netns",
          value_parser = clap::value_parser!(u32).range(1..))]
    netns_id: Option<u32>,
    /// Only drops in the network namespace of this process (PID)
    #[arg(long = "pid-netns", value_name = "PID_NETNS", value_parser = common::cli::parse_pid)]
    pid_netns: Option<u32>,
    /// Show dropped packets of every IP protocol, not TCP alone
    #[arg(long = "all-protocols")]
    all_protocols: bool,
    /// Only these drop reasons, as the kernel names them, separated by commas (NO_SOCKET,NETFILTER_DROP)
    #[arg(long, value_name = "REASONS")]
    reasons: Option<String>,
    /// Instead of a line per drop, count drops per reason and kernel location and print the counts at the end
    #[arg(short = 's', long)]
    summary: bool,
    /// Print JSON lines: an object per drop (per reason and location with -s)
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint, Attach::Kprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcpdrop(args, &host, signals))
}

fn tcpdrop(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let netns = match (args.netns_id, args.pid_netns) {
        (Some(id), _) => id,
        (_, Some(pid)) => {
            common::cli::require_process(pid)?;
            let meta = std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .with_context(|| format!("reading the network namespace of PID {pid}"))?;
            meta.ino() as u32
        }
        _ => 0,
    };
    let btf = KernelBtf::load()?;
    let reasons = Reasons::from_btf(&btf);
    let with_reason = btf.tracepoint_arity("kfree_skb").is_some_and(|n| n >= 3);
    let wanted: Option<Vec<u32>> = args.reasons.as_deref().map(|list| reasons.parse_list(list)).transpose()?;
    if wanted.is_some() && !with_reason {
        bail!("this kernel gives no drop reasons (skb:kfree_skb has no reason), so --reasons cannot filter");
    }
    // Served metrics are the summary's counts: the BPF side counts instead of sending events.
    let endpoint = args.export.endpoint(host, false)?;
    let summary = args.summary || endpoint.is_some();
    let opts = Options { args: &args, netns, wanted: wanted.as_deref(), with_reason, summary };
    let ((skel, _link), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&opts, mech))?;
    if args.verbose.on() {
        match mech {
            Attach::Kprobe => eprintln!("tracing tcp_drop() (skb:kfree_skb has no drop reason on this kernel)"),
            _ => eprintln!("tracing skb:kfree_skb with its drop reason"),
        }
    }

    let mut out = Output::new();
    let mut printer = Printer::new(args.json, reasons);
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            s.map_full("counts", &bss.summary_full);
            let counts: Vec<(bpf::types::summary_key, u64)> =
                common::attach::maps::hash_entries(&skel.maps.counts).context("reading the drop counts")?;
            printer.metrics(s, counts.into_iter().map(|(k, v)| ((k.reason, k.location), v)).collect());
            Ok(())
        });
    }
    if args.summary {
        if !args.json {
            eprintln!("Tracing TCP drops... Hit Ctrl-C to end.");
        }
        signals.sleep_until(None);
        let counts: Vec<(bpf::types::summary_key, u64)> =
            common::attach::maps::hash_entries(&skel.maps.counts).context("reading the drop counts")?;
        let mut full = DropCounter::new("drops", "summary map full");
        full.check(&bss.summary_full);
        let counts: HashMap<(u32, u64), u64> = counts.into_iter().map(|(k, v)| ((k.reason, k.location), v)).collect();
        return Ok(printer.write_summary(&mut out, counts)?);
    }

    printer.write_header(&mut out)?;
    let stream = EventStream::new(&skel.maps.events, &bss.lost, "drops");
    sockevents::poll_events(&signals, &stream, &mut out, args.json, |out, event: &bpf::types::event| {
        let stack = read_stack(&skel, event.stack_id);
        Ok(printer.write_drop(out, event, &stack)?)
    })
}

/// The kernel stack `id` from the stack map, innermost first (empty if it was lost).
fn read_stack(skel: &BpfSkel<'_>, id: i32) -> Vec<u64> {
    if id < 0 {
        return Vec::new();
    }
    let Ok(Some(bytes)) = skel.maps.stacks.lookup(&id.to_ne_bytes(), MapFlags::ANY) else {
        return Vec::new();
    };
    bytes.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).take_while(|&a| a != 0).collect()
}

struct Options<'a> {
    args: &'a Args,
    netns: u32,
    wanted: Option<&'a [u32]>,
    with_reason: bool,
    summary: bool,
}

/// Opens the BPF object, sets its filters, keeps the program of one attach mechanism, loads and attaches it.
fn load_and_attach(o: &Options<'_>, mech: Attach) -> Result<(BpfSkel<'static>, Link)> {
    match mech {
        Attach::Kprobe if o.with_reason => bail!("skb:kfree_skb has a drop reason here; tcp_drop is not used"),
        Attach::Kprobe => {}
        _ if !o.with_reason => bail!("skb:kfree_skb has no drop reason on this kernel"),
        _ => {}
    }
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.all_protocols = o.args.all_protocols;
    ro.target_ipver = match (o.args.family.ipv4, o.args.family.ipv6) {
        (true, _) => 4,
        (_, true) => 6,
        _ => 0,
    };
    ro.filter_reasons = o.wanted.is_some();
    ro.summary = o.summary;
    ro.target_netns = o.netns;
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    // The reason filter is filled before attaching, so no drop slips past an empty filter.
    for reason in o.wanted.into_iter().flatten() {
        skel.maps.reasons.update(&reason.to_ne_bytes(), &[1], MapFlags::ANY).context("setting the reason filter")?;
    }
    let link = match mech {
        Attach::Kprobe => {
            skel.progs.tcp_drop_kprobe.attach_kprobe(false, "tcp_drop").context("attaching a kprobe to tcp_drop")?
        }
        _ => attach_loaded_tracepoint(skel.object(), "skb", "kfree_skb")?,
    };
    Ok((skel, link))
}
