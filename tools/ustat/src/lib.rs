// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ustat: a top-like summary of language runtimes (BCC's tool, CO-RE): for every Java, Node, Perl, PHP, Python,
//! Ruby or Tcl process that carries its runtime's USDT probes, the rates of method calls, garbage collections,
//! object allocations, class loads, exceptions and thread starts, every interval.
//!
//! [`targets`] finds the processes (scanning /proc at start and again after every report, so that processes started
//! later are traced from the next interval on) and attaches the one BPF program (`ustat.bpf.c`) to each of their
//! probes, the column in the probe's USDT cookie. The BPF side keeps cumulative counts per process; this side reads
//! them every interval, takes differences, and prints BCC's screen ([`report`]) or JSON lines. A process that ends
//! has its last counts reported in the interval it ended in; then its probes are detached and its counts dropped.
//! With `--prometheus` the counts are served as counters per language and process name ([`metrics`]).

mod bpf;
mod metrics;
mod report;
mod targets;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, open_skeleton};
use common::attach::maps::{hash_entries, DropCounter};
use common::host::Host;
use common::output::stdout::Output;
use common::output::topscreen::Screen;
use common::run::{self, run_intervals, IntervalClock, Signals};
use common::runtime::Language;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::MapCore;

use bpf::types::counts;
use bpf::BpfSkelBuilder;
use report::Row;
use targets::Targets;

// SAFETY: a #[repr(C)] struct of integers, generated from ustat.h.
unsafe impl plain::Plain for counts {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The languages ustat knows, as `-l` takes them.
const LANGUAGES: [Language; 7] =
    [Language::Java, Language::Node, Language::Perl, Language::Php, Language::Python, Language::Ruby, Language::Tcl];

/// The column `-S` sorts by (largest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortKey {
    Cload,
    Excp,
    Gc,
    Method,
    Objnew,
    Thread,
}

/// Summarize language-runtime activity per process: method calls, collections, allocations, class loads, exceptions
/// and thread starts per second
#[derive(Debug, Parser)]
#[command(name = "ustat", version, after_help = EXAMPLES)]
struct Args {
    /// Trace only processes of this language (default: all of them)
    #[arg(short = 'l', long, value_name = "LANGUAGE",
          value_parser = ["java", "node", "perl", "php", "python", "ruby", "tcl"])]
    language: Option<String>,
    /// Print each report below the previous one instead of clearing the screen
    #[arg(short = 'C', long)]
    noclear: bool,
    /// Order rows by this column, largest first (default: by PID)
    #[arg(short = 'S', long, value_enum, value_name = "SORT")]
    sort: Option<SortKey>,
    /// Print at most this many rows per report
    #[arg(short = 'r', long, value_name = "MAXROWS", default_value = "20",
          value_parser = common::cli::parse_positive_u64)]
    maxrows: u64,
    /// Say on stderr which processes and probes are traced, as they are found
    #[arg(short = 'd', long)]
    debug: bool,
    /// Print JSON lines: an object per process per report, with the exact counts of the interval
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds between reports (1 if not given)
    #[arg(value_parser = common::cli::parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many reports
    #[arg(value_parser = common::cli::parse_positive_u64)]
    count: Option<u64>,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Uprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| ustat(args, &host, signals))
}

fn ustat(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let languages: Vec<Language> = match &args.language {
        Some(name) => vec![name.parse::<Language>().map_err(|e| anyhow::anyhow!(e))?],
        None => LANGUAGES.to_vec(),
    };
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.count.is_some())?;
    let (skel, mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        open_skeleton::<BpfSkelBuilder>()?.load().with_context(|| format!("loading the BPF program ({mech})"))
    })?;
    let mut targets = Targets::new(languages, args.debug);
    targets.scan(&skel.progs.ustat_event);
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let mut totals = metrics::Totals::default();
        return endpoint.serve(&signals, |s| {
            let ended = targets.ended();
            s.map_full("counts", &skel.maps.bss_data.as_deref().context("BPF object has no .bss")?.procs_full);
            totals.write(s, &skel.maps.counts, &targets, &ended)?;
            for pid in ended {
                targets.remove(pid);
            }
            targets.scan(&skel.progs.ustat_event);
            Ok(())
        });
    }
    let interval = args.interval.unwrap_or(1);

    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Tracing... Output every {interval} secs. Hit Ctrl-C to end")?;
        out.flush()?;
    }
    let screen = Screen::from_flags(args.noclear, args.sort, args.maxrows);
    let mut full = DropCounter::new("events", "too many processes");
    let mut before: HashMap<u32, [u64; report::COLUMNS]> = HashMap::new();
    let interval = Duration::from_secs(interval);
    let mut clock = IntervalClock::start(interval);
    run_intervals(&signals, Some(interval), args.count, |tick| {
        // Which processes ended is decided before the counts are read: whatever they did is in this read.
        let ended = targets.ended();
        let now: HashMap<u32, counts> = hash_entries::<u32, counts>(&skel.maps.counts)?.into_iter().collect();
        let length = clock.next_length();
        let rows: Vec<Row> = targets
            .iter()
            .map(|t| {
                let total = now.get(&t.pid).map(|c| c.n).unwrap_or_default();
                let earlier = before.insert(t.pid, total).unwrap_or_default();
                let delta = std::array::from_fn(|i| total[i].saturating_sub(earlier[i]));
                Row::new(t, delta, length, ended.contains(&t.pid))
            })
            .collect();
        screen.report(&mut out, rows, args.json, tick == run::Tick::Last)?;
        out.flush()?;
        full.check(&skel.maps.bss_data.as_deref().context("BPF object has no .bss")?.procs_full);
        for pid in ended {
            targets.remove(pid);
            before.remove(&pid);
            let _ = skel.maps.counts.delete(&pid.to_ne_bytes());
        }
        if tick == run::Tick::Interval {
            targets.scan(&skel.progs.ustat_event);
        }
        Ok(())
    })
}
