// SPDX-License-Identifier: Apache-2.0 OR MIT
//! slabratetop: kernel slab cache allocations, refreshed every interval like top (BCC's tool, CO-RE, on the
//! kmem:kmem_cache_alloc tracepoint instead of a kprobe, with libbpf-tools' -s and -p).
//!
//! The BPF side adds every allocation to a cumulative row keyed by the cache's name (on kernels before 6.1, whose
//! tracepoint does not pass the cache, by the allocating function's address); this front end reads the rows every
//! interval, takes the difference from the previous read and prints BCC's screen (a loadavg line and
//! `CACHE ALLOCS BYTES`, largest first) or JSON lines.

mod bpf;
mod report;

use std::collections::HashMap;
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{
    attach_loaded_tracepoint, autoload_by_section, load_first_working, rodata, skip_tracepoint,
};
use common::attach::maps::{c_string, hash_entries, DropCounter};
use common::cli::filter::open_filtered;
use common::cli::{parse_interval_secs, parse_positive_u64};
use common::host::Host;
use common::output::stdout::Output;
use common::process::symbols::Symbolizer;
use common::run::{self, run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::types::{cache_key, cache_stat};
use bpf::{BpfSkel, BpfSkelBuilder};
use common::output::topscreen::Screen;
use report::Row;

// SAFETY: plain C structs of integers and chars, generated from slabratetop.h.
unsafe impl plain::Plain for cache_key {}
unsafe impl plain::Plain for cache_stat {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// What the rows are ordered by: bytes (the default, BCC's only order) or allocations, largest first, or the
/// cache's name, alphabetically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Sort {
    Name,
    Count,
    Size,
}

/// Kernel slab cache allocations, refreshed like top: allocations and bytes per cache.
#[derive(Debug, Parser)]
#[command(name = "slabratetop", version, after_help = EXAMPLES)]
// The shared pid filter (common::cli::filter), with what it means for this tool.
#[command(mut_arg("pid", |a| a.help("Only allocations made while this process (PID) runs")))]
struct Args {
    /// Print each report below the previous one instead of clearing the screen
    #[arg(short = 'C', long)]
    noclear: bool,
    /// Print at most this many rows per report
    #[arg(short = 'r', long, alias = "rows", value_name = "ROWS", default_value = "20", value_parser = parse_positive_u64)]
    maxrows: u64,
    /// Order rows by bytes (size), by allocations (count) or by cache name (name)
    #[arg(short = 's', long, value_enum, default_value = "size")]
    sort: Sort,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Print JSON lines: an object per cache per report, counts and bytes exact
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds between reports
    #[arg(default_value = "1", value_parser = parse_interval_secs)]
    interval: u64,
    /// Stop after this many reports
    #[arg(value_parser = parse_positive_u64)]
    count: Option<u64>,
}

/// kmem:kmem_cache_alloc with its BTF types, else as a raw tracepoint, else as a classic one (tracefs).
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| slabratetop(args, &host, signals))
}

fn slabratetop(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    let btf = KernelBtf::load()?;
    // 6.1 made kmem_cache_alloc pass the cache and folded kmem_cache_alloc_node into it: the second tracepoint
    // exists exactly on the kernels whose first one does not name the cache.
    let has_cache = !btf.has_tracepoint("kmem_cache_alloc_node");
    if !has_cache && args.verbose.on() {
        eprintln!("this kernel's kmem_cache_alloc tracepoint does not pass the cache: rows are allocating functions");
    }
    let endpoint = args.export.endpoint(host, false)?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, has_cache, mech))?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let mut functions = Functions::default();
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            const ALLOCS: &str = "Allocations from each kernel slab cache since the tool started";
            const BYTES: &str = "Bytes allocated from each kernel slab cache since the tool started";
            s.declare_counter("allocations", ALLOCS, &["cache"]);
            s.declare_counter("allocated_bytes", BYTES, &["cache"]);
            for (key, stat) in hash_entries::<cache_key, cache_stat>(&skel.maps.rows)? {
                let cache = if key.call_site == 0 { c_string(&key.name) } else { functions.name(key.call_site) };
                s.counter("allocations", ALLOCS, &["cache"], vec![cache.clone()], stat.allocs);
                s.counter("allocated_bytes", BYTES, &["cache"], vec![cache], stat.bytes);
            }
            s.map_full("rows", &bss.rows_full);
            Ok(())
        });
    }

    let mut out = Output::new();
    if !args.json {
        use std::io::Write;
        writeln!(out, "Tracing... Output every {} secs. Hit Ctrl-C to end", args.interval)?;
        out.flush()?;
    }
    let screen = Screen::from_flags(args.noclear, args.sort, args.maxrows);
    let mut full = DropCounter::new("allocations", "too many caches or allocating functions");
    let mut before: HashMap<(String, u64), cache_stat> = HashMap::new();
    run_intervals(&signals, Some(Duration::from_secs(args.interval)), args.count, |tick| {
        let now: Vec<(cache_key, cache_stat)> = hash_entries(&skel.maps.rows)?;
        // By name: on kernels before 6.1, two call sites in one function make one row.
        let mut by_name: HashMap<String, Row> = HashMap::new();
        for (key, stat) in now {
            let id = (c_string(&key.name), key.call_site);
            let earlier = before.insert(id.clone(), stat).unwrap_or_default();
            if stat.allocs > earlier.allocs {
                let cache = if key.call_site == 0 { id.0 } else { functions.name(key.call_site) };
                let row = Row::new(cache.clone(), &stat, &earlier);
                let merged = by_name.entry(cache).or_insert(Row { allocs: 0, bytes: 0, ..row.clone() });
                merged.allocs += row.allocs;
                merged.bytes += row.bytes;
            }
        }
        let rows: Vec<Row> = by_name.into_values().collect();
        screen.report(&mut out, rows, args.json, tick == run::Tick::Last)?;
        full.check(&bss.rows_full);
        Ok(())
    })
}

/// The names of allocating functions (kernels before 6.1), resolved once per address.
#[derive(Default)]
struct Functions {
    symbolizer: Option<Symbolizer>,
    names: HashMap<u64, String>,
}

impl Functions {
    /// `function()` for a call site, or its address when it cannot be resolved.
    fn name(&mut self, addr: u64) -> String {
        let symbolizer = self.symbolizer.get_or_insert_with(Symbolizer::new);
        self.names
            .entry(addr)
            .or_insert_with(|| match symbolizer.kernel(&[addr]).pop().flatten() {
                Some(sym) => format!("{}()", sym.name),
                None => format!("{addr:#x}"),
            })
            .clone()
    }
}

/// Opens the BPF object, sets its filter and the tracepoint's form, keeps the programs of one attach mechanism,
/// loads and attaches them.
fn load_and_attach(args: &Args, has_cache: bool, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.has_cache = has_cache;
    autoload_by_section(open.open_object_mut(), mech);
    let mut tracepoints = vec!["kmem_cache_alloc"];
    if has_cache {
        skip_tracepoint(open.open_object_mut(), "kmem_cache_alloc_node");
    } else {
        tracepoints.push("kmem_cache_alloc_node");
    }
    let skel: BpfSkel<'static> = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let links = tracepoints
        .into_iter()
        .map(|name| attach_loaded_tracepoint(skel.object(), "kmem", name))
        .collect::<Result<_>>()?;
    Ok((skel, links))
}
