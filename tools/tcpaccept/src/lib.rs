// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpaccept: trace TCP accepts (BCC's tool, CO-RE).
//!
//! The BPF side sees each connection a process accepts (fexit or kretprobe of `inet_csk_accept` where the kernel
//! allows it, else the return of the accept/accept4 system calls and the socket behind the returned descriptor),
//! filters on PID, family and local port, and sends one record through a ring buffer. This front end prints BCC's
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
use common::cli::parse_port_list;
use common::host::Host;
use common::output::sockevents::{self, FamilyArgs};
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::consts::MAX_PORTS;
use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Accept, Printer, Style};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// A port list; an alias so that clap takes it as one value, not as repeated occurrences.
type Ports = Vec<u16>;

/// One line per TCP connection accepted by a local listener: process, addresses and ports.
#[derive(Debug, Parser)]
#[command(name = "tcpaccept", version, after_help = EXAMPLES)]
struct Args {
    /// Start each line with the time of day (HH:MM:SS)
    #[arg(short = 'T', long = "time")]
    time: bool,
    /// Start each line with the seconds since tracing began
    #[arg(short = 't', long)]
    timestamp: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only connections accepted on these local ports (separated by commas)
    #[arg(short = 'P', long = "port", value_name = "PORT", value_parser = parse_port_list)]
    port: Option<Ports>,
    #[command(flatten)]
    family: FamilyArgs,
    /// Print JSON lines: an object per accepted connection
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| tcpaccept(args, signals))
}

fn tcpaccept(args: Args, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    sockevents::check_port_count("-P", args.port.as_ref(), MAX_PORTS)?;
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, mech))?;

    let mut printer = Printer::new(Style { json: args.json, time: args.time, timestamp: args.timestamp });
    let mut out = Output::new();
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    printer.write_header(&mut out)?;
    let stream = EventStream::new(&skel.maps.events, &bss.lost, "accepts");
    sockevents::poll_events(&signals, &stream, &mut out, args.json, |out, event: &bpf::types::event| {
        match Accept::from_event(event) {
            Some(a) => Ok(printer.write(out, &a)?),
            None => Ok(()),
        }
    })
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.target_family = args.family.af();
    rodata.filter_port = args.port.is_some();

    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;

    // Filters are in place before anything is attached.
    sockevents::fill_port_filter(&skel.maps.ports, args.port.as_ref())?;
    let p = &skel.progs;
    let links = match mech {
        Attach::Fentry => vec![p.accept_fexit.attach().context("attaching to inet_csk_accept (fexit)")?],
        Attach::Kprobe => {
            vec![p.accept_kretprobe.attach_kprobe(true, "inet_csk_accept").context("kretprobe inet_csk_accept")?]
        }
        _ => vec![
            attach_tracepoint(&p.accept4_exit, "syscalls", "sys_exit_accept4", Attach::Tracepoint)?,
            attach_tracepoint(&p.accept_exit, "syscalls", "sys_exit_accept", Attach::Tracepoint)?,
        ],
    };
    Ok((skel, links.into()))
}
