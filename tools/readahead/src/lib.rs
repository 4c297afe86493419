// SPDX-License-Identifier: Apache-2.0 OR MIT
//! readahead: how many pages the kernel read ahead into the page cache were never used, and how old the used
//! ones were at their first use (BCC's tool, CO-RE).
//!
//! The BPF side (`readahead.bpf.c`) marks the folios a read-ahead adds to the page cache and sees their first use,
//! through one of three paths: BCC's kernel functions with fentry/fexit, the same with kprobes, or the readahead
//! and filemap tracepoints where kernel functions cannot be traced. It keeps cumulative counts and a log2
//! histogram of ages in milliseconds; this front end prints them once, at Ctrl-C or after `-d` seconds, in BCC's
//! layout or as a JSON line.

mod bpf;
mod report;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use common::attach::features::{Attach, KernelBtf};
use common::attach::loader::{attach_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata};
use common::host::Host;
use common::output::stdout::Output;
use common::run::{run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Pages read ahead into the page cache but never used, and the age of the used ones at their first use
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Trace for this many seconds, print the report and exit (default: until Ctrl-C)
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = common::cli::parse_positive_u64)]
    duration: Option<u64>,
    /// Print the report as one JSON object
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

/// fentry/fexit and kprobes follow BCC's kernel functions; the readahead and filemap tracepoints (recent kernels) serve where neither works.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| readahead(args, &host, signals))
}

fn readahead(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let btf = KernelBtf::load()?;
    // -d with --prometheus is a usage error, as an interval is for the other tools.
    let endpoint = args.export.endpoint(host, args.duration.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&btf, mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |s| {
            let bss = skel.maps.bss_data.as_ref().context("BPF object has no .bss")?;
            report::metrics(s, &report::Totals::read(bss));
            Ok(())
        });
    }
    let mut out = Output::new();
    if !args.json {
        report::write_banner(&mut out)?;
    }
    run_intervals(&signals, args.duration.map(Duration::from_secs), Some(1), |_| {
        let bss = skel.maps.bss_data.as_ref().context("BPF object has no .bss")?;
        let totals = report::Totals::read(bss);
        if args.json {
            report::write_json(&mut out, &totals, mech)
        } else {
            report::write_text(&mut out, &totals)
        }
    })
}

/// The kernel functions of the fentry and kprobe paths, by their names in this kernel's BTF.
struct Functions {
    /// The read-ahead function every read-ahead runs (page_cache_ra_unbounded, or its older names).
    ra: &'static str,
    /// page_cache_ra_order (5.18+), which fills a read-ahead with large folios without the function above.
    ra_order: Option<&'static str>,
    /// The page cache's allocation function, and whether it takes the folio order.
    alloc: &'static str,
    alloc_has_order: bool,
    /// The first use of a page.
    accessed: &'static str,
}

impl Functions {
    fn find(btf: &KernelBtf) -> Result<Self> {
        let ra = btf.first_function(
            &[
                "page_cache_ra_unbounded",
                "page_cache_readahead_unbounded",
                "do_page_cache_ra",
                "__do_page_cache_readahead",
            ],
            "read-ahead",
        )?;
        let ra_order = btf.has_function("page_cache_ra_order").then_some("page_cache_ra_order");
        let alloc = btf.first_function(
            &["filemap_alloc_folio_noprof", "filemap_alloc_folio", "__page_cache_alloc"],
            "page cache allocation",
        )?;
        let accessed = btf.first_function(&["folio_mark_accessed", "mark_page_accessed"], "page access")?;
        Ok(Functions { ra, ra_order, alloc, alloc_has_order: alloc != "__page_cache_alloc", accessed })
    }
}

/// Opens the BPF object, keeps the programs of one attach mechanism (pointed at this kernel's functions), loads
/// and attaches them.
fn load_and_attach(btf: &KernelBtf, mech: Attach) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let functions = match mech {
        Attach::Fentry | Attach::Kprobe => Some(Functions::find(btf)?),
        _ => {
            for tp in ["page_cache_ra_unbounded", "page_cache_ra_order", "mm_filemap_add_to_page_cache"] {
                if !btf.has_tracepoint(tp) {
                    return Err(anyhow!(
                        "the kernel has no {tp} tracepoint (the readahead tracepoints are recent: 6.18 has them)"
                    ));
                }
            }
            None
        }
    };
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.alloc_has_order = functions.as_ref().is_none_or(|f| f.alloc_has_order);
    autoload_by_section(open.open_object_mut(), mech);
    if let Some(f) = &functions {
        if f.ra_order.is_none() {
            open.progs.ra_order_fentry.set_autoload(false);
            open.progs.ra_order_fexit.set_autoload(false);
        }
        if mech == Attach::Fentry {
            let p = &mut open.progs;
            p.ra_fentry.set_attach_target(0, Some(f.ra.to_string()))?;
            p.ra_fexit.set_attach_target(0, Some(f.ra.to_string()))?;
            p.alloc_fexit.set_attach_target(0, Some(f.alloc.to_string()))?;
            p.accessed_fentry.set_attach_target(0, Some(f.accessed.to_string()))?;
        }
    }
    let skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let p = &skel.progs;
    let links = match (mech, &functions) {
        (Attach::Fentry, Some(f)) => {
            // Uses first, then births, then the read-ahead marks: nothing is born that could not be seen used.
            let mut links = vec![
                p.accessed_fentry.attach().context("fentry on the page access function")?,
                p.alloc_fexit.attach().context("fexit on the page cache allocation function")?,
                p.ra_fexit.attach().context("fexit on the read-ahead function")?,
                p.ra_fentry.attach().context("fentry on the read-ahead function")?,
            ];
            if f.ra_order.is_some() {
                links.push(p.ra_order_fexit.attach().context("fexit on page_cache_ra_order")?);
                links.push(p.ra_order_fentry.attach().context("fentry on page_cache_ra_order")?);
            }
            links
        }
        (_, Some(f)) => {
            let mut links = vec![
                p.accessed_kprobe.attach_kprobe(false, f.accessed).with_context(|| format!("kprobe {}", f.accessed))?,
                p.alloc_kretprobe.attach_kprobe(true, f.alloc).with_context(|| format!("kretprobe {}", f.alloc))?,
                p.alloc_kprobe.attach_kprobe(false, f.alloc).with_context(|| format!("kprobe {}", f.alloc))?,
                p.ra_kretprobe.attach_kprobe(true, f.ra).with_context(|| format!("kretprobe {}", f.ra))?,
                p.ra_kprobe.attach_kprobe(false, f.ra).with_context(|| format!("kprobe {}", f.ra))?,
            ];
            if let Some(order) = f.ra_order {
                links.push(p.ra_kretprobe.attach_kprobe(true, order).with_context(|| format!("kretprobe {order}"))?);
                links.push(p.ra_kprobe.attach_kprobe(false, order).with_context(|| format!("kprobe {order}"))?);
            }
            links
        }
        _ => vec![
            attach_tracepoint(&p.get_pages_tp, "filemap", "mm_filemap_get_pages", mech)?,
            attach_tracepoint(&p.map_pages_tp, "filemap", "mm_filemap_map_pages", mech)?,
            attach_tracepoint(&p.fault_tp, "filemap", "mm_filemap_fault", mech)?,
            attach_tracepoint(&p.add_tp, "filemap", "mm_filemap_add_to_page_cache", mech)?,
            attach_tracepoint(&p.ra_unbounded_tp, "readahead", "page_cache_ra_unbounded", mech)?,
            attach_tracepoint(&p.ra_order_tp, "readahead", "page_cache_ra_order", mech)?,
        ],
    };
    Ok((skel, links))
}
