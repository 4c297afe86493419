// SPDX-License-Identifier: Apache-2.0 OR MIT
//! pidpersec: new processes per second (BCC's tool, CO-RE).
//!
//! The BPF side counts every new task at sched:sched_process_fork into one cumulative counter; this side reads it
//! once a second and prints the difference, `HH:MM:SS: PIDs/sec: N` as BCC does, or a JSON line.

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{attach_loaded_tracepoint, autoload_by_section, load_first_working, open_skeleton};
use common::host::Host;
use common::output::stdout::{clock_hms, clock_rfc3339, monotonic_ns, Output};
use common::run::{self, Signals, Tick};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;
use serde::Serialize;

use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Print how many new tasks (forks and clones) were created in each second.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Print JSON lines: an object per second, with the exact count
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| pidpersec(args, &host, signals))
}

/// One second, as JSON.
#[derive(Serialize)]
struct Second {
    /// The wall clock at the end of the second (the text line's time).
    time: String,
    /// Seconds since tracing started, just after the count was read.
    ts: f64,
    /// New tasks (forks and clones) since the line before.
    count: u64,
}

fn pidpersec(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let endpoint = args.export.endpoint(host, false)?;
    let ((skel, _link), mech) = load_first_working(TOOL.attach, args.verbose.on(), load_and_attach)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            let help = "New tasks (forks and clones) since the tool started";
            s.counter("new_tasks", help, &[], Vec::new(), common::output::metrics::read_counter(&bss.forks));
            Ok(())
        });
    }
    // SAFETY: the .bss is mapped memory the BPF program updates; a volatile read sees its current value.
    let forks = || unsafe { std::ptr::read_volatile(&bss.forks) };
    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Tracing... Ctrl-C to end.")?;
        out.flush()?;
    }
    let start_ns = monotonic_ns();
    let mut last = forks();
    let interval = Duration::from_secs(bpf::consts::INTERVAL_SECS as u64);
    run::run_intervals(&signals, Some(interval), None, |tick| {
        // Ctrl-C ends the run without a line for the part-second, as BCC's tool.
        if matches!(tick, Tick::Last) {
            return Ok(());
        }
        let now = forks();
        let count = now.wrapping_sub(last);
        last = now;
        if args.json {
            let ts = monotonic_ns().saturating_sub(start_ns) as f64 / 1e9;
            out.json_line(&Second { time: clock_rfc3339(), ts, count })?;
        } else {
            writeln!(out, "{}: PIDs/sec: {count}", clock_hms())?;
            out.flush()?;
        }
        Ok(())
    })
}

fn load_and_attach(mech: Attach) -> Result<(BpfSkel<'static>, Link)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    autoload_by_section(open.open_object_mut(), mech);
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let link = attach_loaded_tracepoint(skel.object(), "sched", "sched_process_fork")?;
    Ok((skel, link))
}
