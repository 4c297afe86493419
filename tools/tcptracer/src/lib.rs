// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcptracer: trace TCP connects, accepts and closes (BCC's tool, CO-RE).
//!
//! The BPF side follows `sock:inet_sock_set_state` (tp_btf, raw_tp or the classic tracepoint) and the returns of
//! accept()/accept4(), names each connect, accept and close after the task that made it (or the socket's owner
//! for a close the kernel makes on its own), filters on PID, UID, cgroup, container maps, network namespace and
//! family, and sends one record per event through a ring buffer. This front end prints BCC's columns or JSON.

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
use common::attach::loader::{
    attach_loaded_tracepoint, attach_tracepoint, autoload_by_section, load_first_working, rodata,
};
use common::cli::filter::open_filtered;
use common::cli::parse_uid;
use common::domain::containers::{ContainerArgs, ContainerMaps};
use common::host::Host;
use common::output::sockevents::{self, FamilyArgs};
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};

use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Printer, Style, TcpEvent};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per TCP connection established by connect() (C), accepted (A) or closed (X): process, addresses
/// and ports.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
#[command(mut_arg("verbose", |a| a.help(VERBOSE_HELP)))]
struct Args {
    /// Start each line with the seconds since the first event shown (nanoseconds with -v)
    #[arg(short = 't', long)]
    timestamp: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only connections in this network namespace (its inode number, as `ls -Li /proc/PID/ns/net` shows)
    #[arg(short = 'N', long, value_name = "NETNS", value_parser = parse_netns)]
    netns: Option<u32>,
    #[command(flatten)]
    family: FamilyArgs,
    /// Add a UID column
    #[arg(short = 'U', long = "print-uid")]
    print_uid: bool,
    /// Only events of this user (a UID or a user name)
    #[arg(short = 'u', long, value_parser = parse_uid)]
    uid: Option<u32>,
    /// Only tasks of this cgroup or below it (a cgroup v2 directory; libbpf-tools' -c)
    #[arg(short = 'c', long = "cgroup", value_name = "CGROUP_PATH")]
    cgroup: Option<PathBuf>,
    #[command(flatten)]
    containers: ContainerArgs,
    /// Print JSON lines: an object per event
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// BCC's -v, which the shared flag also serves.
const VERBOSE_HELP: &str = "Spell out the event type, time in nanoseconds with -t, and a NETNS column; on stderr, \
                            which attach path was taken (twice: libbpf's debug messages too)";

/// A network namespace's inode number: a positive integer.
fn parse_netns(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("'{s}' is not a network namespace inode number")),
    }
}

/// Every path is a tracepoint: state changes on tp_btf, raw_tp or the classic tracepoint, accepts on the
/// accept()/accept4() returns (BCC's kprobes on tcp_v4/v6_connect, tcp_close and inet_csk_accept are not needed).
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcptracer(args, signals))
}

fn tcptracer(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let containers = args.containers.open()?;
    let ((skel, _links), _mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        load_and_attach(&args, cgroup.as_ref(), &containers, mech)
    })?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let mut out = Output::new();
    let mut printer = Printer::new(Style {
        json: args.json,
        timestamp: args.timestamp,
        verbose: args.verbose.on(),
        netns: args.netns.is_none(),
        uid: args.print_uid,
    });
    printer.write_header(&mut out)?;
    let stream = EventStream::new(&skel.maps.events, &bss.lost, "events").also_dropped(
        &bss.owners_full,
        "connections",
        "too many open at once: closes by the kernel unnamed",
    );
    sockevents::poll_events(&signals, &stream, &mut out, args.json, |out, e: &bpf::types::event| {
        match TcpEvent::from_event(e) {
            Some(ev) => Ok(printer.write(out, &ev)?),
            None => Ok(()),
        }
    })
}

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
    ro.target_family = args.family.af();
    ro.target_netns = args.netns.unwrap_or(0);
    ro.filter_cgroup = cgroup.is_some();
    (ro.filter_cgroupmap, ro.filter_mntnsmap) = containers.flags();
    containers.before_load(&mut open.maps.cgroupset, &mut open.maps.mount_ns_set)?;

    autoload_by_section(open.open_object_mut(), mech);
    // The accept returns are classic tracepoints under every mechanism.
    open.progs.accept_exit.set_autoload(true);
    open.progs.accept4_exit.set_autoload(true);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // Filters are in place before anything is attached.
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }
    containers.after_load(&skel.maps.cgroupset, &skel.maps.mount_ns_set)?;
    let p = &skel.progs;
    let links = vec![
        attach_tracepoint(&p.accept4_exit, "syscalls", "sys_exit_accept4", Attach::Tracepoint)?,
        attach_tracepoint(&p.accept_exit, "syscalls", "sys_exit_accept", Attach::Tracepoint)?,
        attach_loaded_tracepoint(skel.object(), "sock", "inet_sock_set_state")?,
    ];
    Ok((skel, links.into()))
}
