// SPDX-License-Identifier: Apache-2.0 OR MIT
//! bindsnoop: trace bind() on IPv4 and IPv6 sockets, with the result, protocol, options and bound interface
//! (BCC's tool, CO-RE).
//!
//! The BPF side follows each bind from its start to its result (fexit or kprobe/kretprobe of `inet_bind` and
//! `inet6_bind` where the kernel allows it, else the bind system call's tracepoints and the socket behind its
//! descriptor), filters on PID, UID, cgroup, containers, port and result, and sends one record through a ring
//! buffer, or counts binds per address and port with `--count`. This front end prints BCC's columns or JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, autoload_by_section, load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::cli::{parse_port_list, parse_uid};
use common::domain::containers::{ContainerArgs, ContainerMaps};
use common::host::Host;
use common::output::sockevents;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::consts::MAX_PORTS;
use bpf::types::{count_key, event};
use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Bind, Printer, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// A port list; an alias so that clap takes it as one value, not as repeated occurrences.
type Ports = Vec<u16>;

/// One line per bind() on an IPv4 or IPv6 socket: process, protocol, address, port, options and interface
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the seconds since the first bind shown
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Wider columns, room for a whole IPv6 address (and the error's text with -E)
    #[arg(short = 'w', long)]
    wide: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only binds to these ports (separated by commas; the port the socket got, or asked for when it failed)
    #[arg(short = 'P', long = "port", alias = "ports", value_name = "PORTS", value_parser = parse_port_list)]
    port: Option<Ports>,
    /// Show failed binds too, with an RC column holding each call's result (also -x, as in libbpf-tools)
    #[arg(short = 'E', long, short_alias = 'x', alias = "failed")]
    errors: bool,
    /// Add a UID column
    #[arg(short = 'U', long = "print-uid")]
    print_uid: bool,
    /// Only binds made by this user (a UID or a user name)
    #[arg(short = 'u', long, value_parser = parse_uid)]
    uid: Option<u32>,
    /// Count binds per local address and port instead, printed once at the end
    #[arg(long)]
    count: bool,
    /// Only tasks of this cgroup or below it (a cgroup v2 directory; libbpf-tools' -c)
    #[arg(short = 'c', long = "cgroup", value_name = "CGROUP_PATH")]
    cgroup: Option<PathBuf>,
    #[command(flatten)]
    containers: ContainerArgs,
    /// Print JSON lines: an object per bind (per address and port with --count)
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// fexit sees the bind's socket, address and result at once; the kprobe pair is BCC's path; the system call's
/// tracepoints serve where kernel functions cannot be traced.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| bindsnoop(args, signals))
}

fn bindsnoop(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    sockevents::check_port_count("-P", args.port.as_ref(), MAX_PORTS)?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let containers = args.containers.open()?;
    let ((skel, _links), _mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        load_and_attach(&args, cgroup.as_ref(), &containers, mech)
    })?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let mut out = Output::new();
    let style =
        Style { json: args.json, timestamp: args.timestamp, wide: args.wide, errors: args.errors, uid: args.print_uid };
    if !args.json {
        report::write_banner(&mut out)?;
    }

    if args.count {
        return sockevents::count_at_exit(&signals, &skel.maps.counts, &bss.counts_full, "binds", |entries| {
            Ok(report::write_counts(&mut out, entries, args.json)?)
        });
    }
    let mut printer = Printer::new(style);
    printer.write_header(&mut out)?;
    let stream = EventStream::new(&skel.maps.events, &bss.lost, "binds").also_dropped(
        &bss.inflight_full,
        "binds",
        "too many in progress",
    );
    sockevents::poll_events(&signals, &stream, &mut out, args.json, |out, e: &event| match Bind::from_event(e) {
        Some(b) => Ok(printer.write(out, &b)?),
        None => Ok(()),
    })
}

// SAFETY: #[repr(C)] structs of integers and integer arrays, with explicit padding fields.
unsafe impl plain::Plain for count_key {}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(
    args: &Args,
    cgroup: Option<&std::fs::File>,
    containers: &ContainerMaps,
    mech: Attach,
) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.filter_uid = args.uid.is_some();
    ro.target_uid = args.uid.unwrap_or(0);
    ro.filter_port = args.port.is_some();
    ro.ignore_errors = !args.errors;
    ro.count_mode = args.count;
    ro.filter_cgroup = cgroup.is_some();
    (ro.filter_cgroupmap, ro.filter_mntnsmap) = containers.flags();
    containers.before_load(&mut open.maps.cgroupset, &mut open.maps.mount_ns_set)?;

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // Filters are in place before anything is attached.
    sockevents::fill_port_filter(&skel.maps.ports, args.port.as_ref())?;
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }
    containers.after_load(&skel.maps.cgroupset, &skel.maps.mount_ns_set)?;
    let p = &skel.progs;
    let links = match mech {
        Attach::Fentry => vec![
            p.inet_bind_fexit.attach().context("attaching to inet_bind (fexit)")?,
            p.inet6_bind_fexit.attach().context("attaching to inet6_bind (fexit)")?,
        ],
        Attach::Kprobe => vec![
            // Returns before entries, as for the tracepoints below.
            p.inet_bind_kretprobe.attach_kprobe(true, "inet_bind").context("kretprobe inet_bind")?,
            p.inet6_bind_kretprobe.attach_kprobe(true, "inet6_bind").context("kretprobe inet6_bind")?,
            p.inet_bind_kprobe.attach_kprobe(false, "inet_bind").context("kprobe inet_bind")?,
            p.inet6_bind_kprobe.attach_kprobe(false, "inet6_bind").context("kprobe inet6_bind")?,
        ],
        _ => vec![
            // The exit first, so that no bind is kept at its start with nobody to take it.
            attach_tracepoint(&p.bind_exit, "syscalls", "sys_exit_bind", Attach::Tracepoint)?,
            attach_tracepoint(&p.bind_enter, "syscalls", "sys_enter_bind", Attach::Tracepoint)?,
        ],
    };
    Ok((skel, links.into()))
}
