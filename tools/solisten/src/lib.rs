// SPDX-License-Identifier: Apache-2.0 OR MIT
//! solisten: trace listen() on TCP sockets, with the backlog, address, port and network namespace (BCC's tool,
//! CO-RE).
//!
//! The BPF side follows each listen from its start to its result (fexit or kprobe/kretprobe of `inet_listen`
//! where the kernel allows it, else the listen system call's tracepoints and the socket behind its descriptor),
//! filters on PID and network namespace, and sends one record through a ring buffer. This front end prints BCC's
//! columns or JSON lines.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, autoload_by_section, load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::sockevents;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::types::event;
use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Listen, Printer, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// One line per listen() on a TCP socket: process, protocol, backlog, port and address
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Add a NETNS column: the socket's network namespace (its inode number)
    #[arg(long = "show-netns")]
    show_netns: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only sockets of this network namespace (the inode number of /proc/PID/ns/net)
    #[arg(short = 'n', long, value_name = "NETNS", value_parser = parse_netns)]
    netns: Option<u64>,
    /// Start each line with the time of day (HH:MM:SS; libbpf-tools' -t)
    #[arg(short = 't', long)]
    timestamp: bool,
    /// Print JSON lines: an object per listen, with its result
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// fexit sees the socket, backlog and result at once; the kprobe pair is BCC's path; the system call's
/// tracepoints serve where kernel functions cannot be traced.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| solisten(args, signals))
}

/// A network namespace: the inode number of a /proc/PID/ns/net link (a positive integer).
fn parse_netns(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("'{s}' is not a network namespace (the inode number of /proc/PID/ns/net)")),
    }
}

fn solisten(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let mut out = Output::new();
    let mut printer = Printer::new(Style { json: args.json, netns: args.show_netns, timestamp: args.timestamp });
    printer.write_header(&mut out)?;
    let stream = EventStream::new(&skel.maps.events, &bss.lost, "listens").also_dropped(
        &bss.inflight_full,
        "listens",
        "too many in progress",
    );
    sockevents::poll_events(&signals, &stream, &mut out, args.json, |out, e: &event| match Listen::from_event(e) {
        Some(l) => Ok(printer.write(out, &l)?),
        None => Ok(()),
    })
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.target_netns = args.netns.unwrap_or(0);

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let p = &skel.progs;
    let links = match mech {
        Attach::Fentry => vec![p.inet_listen_fexit.attach().context("attaching to inet_listen (fexit)")?],
        // The return before the entry, so that no listen is kept at its start with nobody to take it.
        Attach::Kprobe => vec![
            p.inet_listen_kretprobe.attach_kprobe(true, "inet_listen").context("kretprobe inet_listen")?,
            p.inet_listen_kprobe.attach_kprobe(false, "inet_listen").context("kprobe inet_listen")?,
        ],
        _ => vec![
            attach_tracepoint(&p.listen_exit, "syscalls", "sys_exit_listen", Attach::Tracepoint)?,
            attach_tracepoint(&p.listen_enter, "syscalls", "sys_enter_listen", Attach::Tracepoint)?,
        ],
    };
    Ok((skel, links.into()))
}
