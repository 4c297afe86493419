// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpconnect: trace TCP connects (BCC's tool, CO-RE).
//!
//! The BPF side sees each active open (fexit or kretprobe of `tcp_v4_connect`/`tcp_v6_connect` where the kernel
//! allows it, else `sock:inet_sock_set_state` CLOSE -> SYN_SENT completed at connect()'s return), filters on PID,
//! UID, cgroup, family and destination port, and sends one record per connect through a ring buffer, or counts
//! connects per flow with `-c`. With `-d`, uprobes on the C library's getaddrinfo() report the names looked
//! up, so that each connect shows the name its destination came from ([`dns`]). This front end prints BCC's
//! columns or JSON lines.

mod bpf;
mod dns;
mod report;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{
    attach_loaded_tracepoint, attach_tracepoint, autoload_by_section, load_first_working, rodata,
};
use common::cli::filter::open_filtered;
use common::cli::parse_port_list;
use common::host::Host;
use common::output::sockevents::{self, FamilyArgs};
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::consts::MAX_PORTS;
use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Connect, Printer, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// A port list; an alias so that clap takes it as one value, not as repeated occurrences.
type Ports = Vec<u16>;

/// One line per outgoing TCP connection attempt (connect()): process, addresses and port.
#[derive(Debug, Parser)]
#[command(name = "tcpconnect", version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the seconds since tracing began
    #[arg(short = 't', long)]
    timestamp: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only connections to these remote ports (separated by commas)
    #[arg(short = 'P', long = "port", value_name = "PORT", value_parser = parse_port_list)]
    port: Option<Ports>,
    #[command(flatten)]
    family: FamilyArgs,
    /// Add a column with the local port
    #[arg(short = 'L', long = "lport")]
    lport: bool,
    /// Add a UID column
    #[arg(short = 'U', long = "print-uid")]
    print_uid: bool,
    /// Only connections made by this user (UID)
    #[arg(short = 'u', long, value_parser = clap::value_parser!(u32))]
    uid: Option<u32>,
    /// Count attempts per source address, destination address and port, and print the counts at the end
    #[arg(short = 'c', long)]
    count: bool,
    /// Add a QUERY column: the host name the destination address was looked up by (getaddrinfo() in the C
    /// library: the traced process's with -p, else the system's)
    #[arg(short = 'd', long = "dns", conflicts_with = "count")]
    dns: bool,
    /// Only connections made by tasks of this cgroup (a cgroup v2 directory)
    #[arg(long = "cgroup", value_name = "PATH")]
    cgroup: Option<PathBuf>,
    /// Print JSON lines: an object per attempt (per source, destination and port with -c)
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcpconnect(args, signals))
}

fn tcpconnect(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    sockevents::check_port_count("-P", args.port.as_ref(), MAX_PORTS)?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    // -d: the C library and its getaddrinfo(), found before anything is loaded.
    let resolver = if args.dns {
        let libc = dns::libc(args.pid.pid)?;
        let offset = dns::getaddrinfo_offset(&libc)?;
        Some((libc, offset))
    } else {
        None
    };
    let ((skel, _links), _mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        load_and_attach(&args, cgroup.as_ref(), resolver.as_ref(), mech)
    })?;

    let mut printer = Printer::new(Style {
        json: args.json,
        timestamp: args.timestamp,
        lport: args.lport,
        uid: args.print_uid,
        dns: args.dns,
    });
    let mut out = Output::new();
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    if !args.json {
        println!("Tracing connect ... Hit Ctrl-C to end");
    }
    if args.count {
        return sockevents::count_at_exit(&signals, &skel.maps.flows, &bss.flows_full, "flows", |flows| {
            Ok(report::write_counts(&mut out, args.json, flows)?)
        });
    }

    printer.write_header(&mut out)?;
    let stream = EventStream::new(&skel.maps.events, &bss.lost, "connects").also_dropped(
        &bss.lost_lookups,
        "lookups",
        "ring buffer full; their connects may show No DNS Query",
    );
    let mut names = dns::Names::default();
    stream.print(&signals, &mut out, args.json, |out, data| {
        // Every record starts with its kind.
        match data.get(..4).and_then(|k| k.try_into().ok()).map(u32::from_ne_bytes) {
            Some(kind) if kind as usize == bpf::consts::RECORD_LOOKUP => names.learn(data),
            _ => {
                let event: bpf::types::event = common::attach::maps::from_bytes(data);
                if let Some(c) = Connect::from_event(&event) {
                    let query = args.dns.then(|| names.query(c.conn.raddr, c.ts_ns));
                    printer.write(out, &c, query.as_deref())?;
                }
            }
        }
        Ok(())
    })
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them;
/// with -d, also the getaddrinfo() probes of `resolver` (the C library and the function's offset in it).
fn load_and_attach(
    args: &Args,
    cgroup: Option<&std::fs::File>,
    resolver: Option<&(PathBuf, u64)>,
    mech: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.target_uid = args.uid.unwrap_or(0);
    rodata.filter_uid = args.uid.is_some();
    rodata.target_family = args.family.af();
    rodata.filter_port = args.port.is_some();
    rodata.filter_cgroup = cgroup.is_some();
    rodata.count = args.count;

    autoload_by_section(open.open_object_mut(), mech);
    // connect()'s return is a classic tracepoint under every tracepoint mechanism.
    let tracepoints = matches!(mech, Attach::TpBtf | Attach::RawTp | Attach::Tracepoint);
    open.progs.connect_exit.set_autoload(tracepoints);
    open.progs.getaddrinfo_entry.set_autoload(resolver.is_some());
    open.progs.getaddrinfo_return.set_autoload(resolver.is_some());
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // Filters are in place before anything is attached, so no connect slips past an empty filter.
    sockevents::fill_port_filter(&skel.maps.ports, args.port.as_ref())?;
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }

    // The lookups first, so that a name is known before the connects made with it are seen.
    let mut links = match resolver {
        Some((libc, offset)) => dns::attach(&skel, libc, *offset)?,
        None => Vec::new(),
    };
    let p = &skel.progs;
    match mech {
        Attach::Fentry => {
            links.push(p.v4_connect_fexit.attach().context("attaching to tcp_v4_connect (fexit)")?);
            links.push(p.v6_connect_fexit.attach().context("attaching to tcp_v6_connect (fexit)")?);
        }
        Attach::Kprobe => {
            for func in ["tcp_v4_connect", "tcp_v6_connect"] {
                links.push(p.connect_entry.attach_kprobe(false, func).with_context(|| format!("kprobe {func}"))?);
                links.push(p.connect_ret.attach_kprobe(true, func).with_context(|| format!("kretprobe {func}"))?);
            }
        }
        _ => {
            // connect()'s return first, so that no connect is left waiting for it.
            links.push(attach_tracepoint(&p.connect_exit, "syscalls", "sys_exit_connect", Attach::Tracepoint)?);
            links.push(attach_loaded_tracepoint(skel.object(), "sock", "inet_sock_set_state")?);
        }
    }
    Ok((skel, links))
}
