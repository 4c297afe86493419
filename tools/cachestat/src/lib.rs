// SPDX-License-Identifier: Apache-2.0 OR MIT
//! cachestat: page cache hits, misses and dirtied pages per interval (BCC's tool, CO-RE).
//!
//! The BPF side (`cachestat.bpf.c`) keeps four cumulative per-CPU counters: additions to the page cache,
//! accesses, pages dirtied and (kernel functions only) mark_buffer_dirty calls, through BCC's kernel functions
//! (fentry, else kprobes) or, where the kernel traces no function, the filemap and writeback tracepoints. This
//! front end sums the CPUs every interval, differences the counters, derives BCC's hits and misses from them
//! (`report::Stats`), adds Buffers and Cached from /proc/meminfo, and prints BCC's row or a JSON line.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_tracepoint, autoload_by_section, load_first_working, open_skeleton};
use common::attach::maps::{percpu_counters, CounterDeltas};
use common::cli::{parse_interval_secs, parse_positive_u64};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::consts::C_MAX;
use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Page cache hits, misses and dirtied pages per interval, with the hit ratio and the buffer and cache sizes
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Start each row with the time of day (a TIME column)
    #[arg(short = 'T', long)]
    timestamp: bool,
    /// Print JSON lines: an object per interval, with the raw counters behind the columns
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds between rows (1 if not given)
    #[arg(value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many rows
    #[arg(value_parser = parse_positive_u64, requires = "interval")]
    count: Option<u64>,
}

/// fentry and kprobes count BCC's kernel functions; the filemap and writeback tracepoints (tp_btf, raw_tp; the
/// access tracepoints need Linux 6.11 or later) serve where no kernel function can be traced.
pub const TOOL: common::tool::Tool =
    common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| cachestat(args, &host, signals))
}

fn cachestat(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let btf = KernelBtf::load()?;
    let endpoint = args.export.endpoint(host, args.interval.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&btf, mech, args.verbose.on()))?;
    let functions = matches!(mech, Attach::Fentry | Attach::Kprobe);
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            report::metrics(s, &totals(&skel)?, functions);
            Ok(())
        });
    }
    let mut out = Output::new();
    if !args.json {
        report::write_header(&mut out, args.timestamp)?;
    }
    let interval_s = args.interval.unwrap_or(1);
    let mut deltas = CounterDeltas::<C_MAX>::default();
    run_intervals(&signals, Some(Duration::from_secs(interval_s)), args.count, |_| {
        let delta = deltas.next(totals(&skel)?);
        let stats = report::Stats::new(&delta, functions);
        let mem = report::Meminfo::read()?;
        if args.json {
            report::write_json(&mut out, &stats, &delta, &mem, interval_s, mech)
        } else {
            report::write_row(&mut out, &stats, &mem, args.timestamp)
        }
    })
}

/// Every counter so far, summed over the CPUs.
fn totals(skel: &BpfSkel<'static>) -> Result<[u64; C_MAX]> {
    percpu_counters(&skel.maps.counts)
}

/// BCC's kernel functions, by their names in this kernel's BTF (BCC's choices, newest first).
struct Functions {
    added: &'static str,
    accessed: &'static str,
    dirtied: &'static str,
}

impl Functions {
    fn find(btf: &KernelBtf) -> Result<Self> {
        Ok(Functions {
            added: btf.first_function(&["filemap_add_folio", "add_to_page_cache_lru"], "page cache addition")?,
            accessed: btf.first_function(&["folio_mark_accessed", "mark_page_accessed"], "page access")?,
            // folio_account_dirtied and account_page_dirtied are static and often inlined (absent from BTF);
            // __folio_mark_dirty calls the former once for each folio that turns dirty.
            dirtied: btf.first_function(
                &["folio_account_dirtied", "account_page_dirtied", "__folio_mark_dirty"],
                "dirty accounting",
            )?,
        })
    }
}

/// The tracepoints of the tracepoint path, with what each counts.
const TRACEPOINTS: [(&str, &str); 5] = [
    ("filemap", "mm_filemap_add_to_page_cache"),
    ("writeback", "writeback_dirty_folio"),
    ("filemap", "mm_filemap_get_pages"),
    ("filemap", "mm_filemap_map_pages"),
    ("filemap", "mm_filemap_fault"),
];

/// Opens the BPF object, keeps the programs of one attach mechanism (pointed at this kernel's functions), loads
/// and attaches them.
fn load_and_attach(btf: &KernelBtf, mech: Attach, verbose: bool) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let functions = match mech {
        Attach::Fentry | Attach::Kprobe => Some(Functions::find(btf)?),
        _ => {
            for (_, tp) in TRACEPOINTS {
                if !btf.has_tracepoint(tp) {
                    return Err(anyhow!(
                        "the kernel has no {tp} tracepoint (page cache accesses have tracepoints since Linux 6.11)"
                    ));
                }
            }
            None
        }
    };
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    autoload_by_section(open.open_object_mut(), mech);
    if let (Attach::Fentry, Some(f)) = (mech, &functions) {
        let p = &mut open.progs;
        p.add_fentry.set_attach_target(0, Some(f.added.to_string()))?;
        p.access_fentry.set_attach_target(0, Some(f.accessed.to_string()))?;
        p.dirtied_fentry.set_attach_target(0, Some(f.dirtied.to_string()))?;
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let p = &skel.progs;
    let links = match (mech, &functions) {
        (Attach::Fentry, Some(f)) => vec![
            p.add_fentry.attach().with_context(|| format!("fentry {}", f.added))?,
            p.access_fentry.attach().with_context(|| format!("fentry {}", f.accessed))?,
            p.dirtied_fentry.attach().with_context(|| format!("fentry {}", f.dirtied))?,
            p.bufdirty_fentry.attach().context("fentry mark_buffer_dirty")?,
        ],
        (_, Some(f)) => vec![
            p.add_kprobe.attach_kprobe(false, f.added).with_context(|| format!("kprobe {}", f.added))?,
            p.access_kprobe.attach_kprobe(false, f.accessed).with_context(|| format!("kprobe {}", f.accessed))?,
            p.dirtied_kprobe.attach_kprobe(false, f.dirtied).with_context(|| format!("kprobe {}", f.dirtied))?,
            p.bufdirty_kprobe.attach_kprobe(false, "mark_buffer_dirty").context("kprobe mark_buffer_dirty")?,
        ],
        _ => {
            let (added, dirtied, get, map, fault) = if mech == Attach::TpBtf {
                (&p.added_btf, &p.dirtied_btf, &p.get_pages_btf, &p.map_pages_btf, &p.fault_btf)
            } else {
                (&p.added_raw, &p.dirtied_raw, &p.get_pages_raw, &p.map_pages_raw, &p.fault_raw)
            };
            [added, dirtied, get, map, fault]
                .into_iter()
                .zip(TRACEPOINTS)
                .map(|(prog, (category, name))| attach_tracepoint(prog, category, name, mech))
                .collect::<Result<Vec<_>>>()?
        }
    };
    if let (true, Some(f)) = (verbose, &functions) {
        eprintln!("{mech}: counting calls of {}, {}, {} and mark_buffer_dirty", f.added, f.accessed, f.dirtied);
    }
    Ok((skel, links))
}
