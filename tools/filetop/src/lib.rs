// SPDX-License-Identifier: Apache-2.0 OR MIT
//! filetop: reads and writes by thread and file, refreshed every interval like top (BCC's tool, CO-RE, with
//! libbpf-tools' -s).
//!
//! The BPF side counts every read and write of a named file (regular files only, unless -a) into a cumulative row
//! keyed by thread, command and file, at vfs_read/vfs_write (fentry, kprobe) or, where kernel functions cannot be
//! traced, at the read and write system calls' tracepoints; this front end reads the rows every interval, takes
//! the difference from the previous read, forgets the rows of threads that are gone, and prints BCC's screen (a
//! loadavg line and `TID COMM READS WRITES R_Kb W_Kb T FILE`, sorted) or JSON lines; or, with
//! `--prometheus`, serves them as counters per process name and file ([`metrics`]).

mod bpf;
mod metrics;
mod report;

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, autoload_by_section, load_first_working, rodata};
use common::attach::maps::{from_bytes, DropCounter};
use common::cli::filter::open_filtered;
use common::cli::{parse_interval_secs, parse_positive_u64};
use common::domain::blockdev::kernel_dev;
use common::host::Host;
use common::output::stdout::Output;
use common::run::{self, run_intervals, Signals};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{MapCore, MapFlags};

use bpf::types::{file_key, file_stat};
use bpf::{BpfSkel, BpfSkelBuilder};
use common::output::topscreen::Screen;
use report::Row;

// SAFETY: plain C structs of integers and chars, generated from filetop.h.
unsafe impl plain::Plain for file_key {}
unsafe impl plain::Plain for file_stat {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// What the rows are sorted by (largest first): reads, writes and both byte counts added up (all, the default of
/// BCC and libbpf-tools), or one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Sort {
    All,
    Reads,
    Writes,
    Rbytes,
    Wbytes,
}

/// File reads and writes by thread, refreshed like top: calls and Kbytes per thread and file.
#[derive(Debug, Parser)]
#[command(name = "filetop", version, after_help = EXAMPLES)]
struct Args {
    /// Count files of every type (sockets, character devices, FIFOs with a name...), not only regular files
    #[arg(short = 'a', long = "all-files", alias = "all")]
    all_files: bool,
    /// Print each report below the previous one instead of clearing the screen
    #[arg(short = 'C', long)]
    noclear: bool,
    /// Print at most this many rows per report
    #[arg(short = 'r', long, alias = "rows", value_name = "MAXROWS", default_value = "20", value_parser = parse_positive_u64)]
    maxrows: u64,
    /// Order rows by reads, writes, Kbytes read (rbytes), Kbytes written (wbytes), or all four added up (all)
    #[arg(short = 's', long, value_enum, default_value = "all")]
    sort: Sort,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only files directly inside this directory
    #[arg(short = 'd', long, value_name = "DIRECTORY")]
    directory: Option<PathBuf>,
    /// Count reads only
    #[arg(long, conflicts_with = "write_only")]
    read_only: bool,
    /// Count writes only
    #[arg(long)]
    write_only: bool,
    /// Print JSON lines: an object per row per report, bytes exact
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Seconds between reports (1 if not given)
    #[arg(value_parser = parse_interval_secs)]
    interval: Option<u64>,
    /// Stop after this many reports
    #[arg(value_parser = parse_positive_u64)]
    count: Option<u64>,
}

/// vfs_read and vfs_write (fentry, else BCC's kprobes); else the read and write system calls' tracepoints.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| filetop(args, &host, signals))
}

/// The system calls whose tracepoints count reads (first) and writes, where kernel functions cannot be traced.
const READ_CALLS: [&str; 5] = ["read", "pread64", "readv", "preadv", "preadv2"];
const WRITE_CALLS: [&str; 5] = ["write", "pwrite64", "writev", "pwritev", "pwritev2"];

fn filetop(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pid.filter().check()?;
    // -d: the directory's inode and file system (its device number in the kernel's encoding).
    let dir = match &args.directory {
        Some(dir) => {
            let meta = std::fs::metadata(dir).with_context(|| format!("{}", dir.display()))?;
            anyhow::ensure!(meta.is_dir(), "{}: not a directory", dir.display());
            let dev = kernel_dev(libc::major(meta.dev()), libc::minor(meta.dev()));
            Some((meta.ino(), dev))
        }
        None => None,
    };
    let endpoint = args.export.endpoint(host, args.interval.is_some() || args.count.is_some())?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, dir, mech))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let mut totals = metrics::Totals::default();
        return endpoint.serve(&signals, |s| {
            let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
            s.map_full("rows", &bss.rows_full);
            s.map_full("inflight", &bss.inflight_full);
            totals.write(s, &skel.maps.rows)
        });
    }
    let interval = args.interval.unwrap_or(1);

    let mut out = Output::new();
    if !args.json {
        use std::io::Write;
        if let (Some(dir), Some((ino, _))) = (&args.directory, dir) {
            writeln!(out, "Tracing directory: {} (Inode: {ino})", dir.display())?;
        }
        writeln!(out, "Tracing... Output every {interval} secs. Hit Ctrl-C to end")?;
        out.flush()?;
    }
    let screen = Screen::from_flags(args.noclear, args.sort, args.maxrows);
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let mut full = DropCounter::new("reads and writes", "too many rows (threads and files) or calls in progress");
    let mut before: HashMap<Vec<u8>, file_stat> = HashMap::new();
    run_intervals(&signals, Some(Duration::from_secs(interval)), args.count, |tick| {
        // The raw keys too: a row is deleted by its bytes.
        let mut now = Vec::new();
        for id in skel.maps.rows.keys() {
            if let Some(value) = skel.maps.rows.lookup(&id, MapFlags::ANY).context("reading the rows map")? {
                now.push((from_bytes::<file_key>(&id), from_bytes::<file_stat>(&value), id));
            }
        }
        let mut rows = Vec::new();
        for (key, stat, id) in now {
            let earlier = before.insert(id.clone(), stat).unwrap_or_default();
            if stat.reads > earlier.reads || stat.writes > earlier.writes {
                rows.push(Row::new(&key, &stat, &earlier));
            } else {
                // Unchanged over a whole interval: forget the row (BCC clears its map every interval), so that a
                // long run keeps only rows that move; a thread that lives on while it touches many files would
                // otherwise keep a row per file, here and in the kernel (the soak saw filetop's memory grow so).
                // Read once more just before deleting: a call counted since the first read keeps the row.
                let again = skel.maps.rows.lookup(&id, MapFlags::ANY).context("reading the rows map")?;
                let same = again.map(|v| from_bytes::<file_stat>(&v)).is_some_and(|s| {
                    (s.reads, s.writes, s.read_bytes, s.write_bytes)
                        == (stat.reads, stat.writes, stat.read_bytes, stat.write_bytes)
                });
                if same {
                    let _ = skel.maps.rows.delete(&id);
                    before.remove(&id);
                }
            }
        }
        screen.report(&mut out, rows, args.json, tick == run::Tick::Last)?;
        full.check_all([&bss.rows_full, &bss.inflight_full]);
        Ok(())
    })
}

/// Opens the BPF object, sets its filters, keeps the programs of one attach mechanism, loads and attaches them.
fn load_and_attach(args: &Args, dir: Option<(u64, u32)>, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.all_files = args.all_files;
    (ro.dir_inode, ro.dir_dev) = dir.unwrap_or((0, 0));
    autoload_by_section(open.open_object_mut(), mech);
    let skel: BpfSkel<'static> = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    let (reads, writes) = (!args.write_only, !args.read_only);
    let p = &skel.progs;
    let mut links = Links::default();
    match mech {
        Attach::Fentry => {
            if reads {
                links.push(p.vfs_read_fentry.attach().context("attaching to vfs_read (fentry)")?);
            }
            if writes {
                links.push(p.vfs_write_fentry.attach().context("attaching to vfs_write (fentry)")?);
            }
        }
        Attach::Kprobe => {
            if reads {
                links.push(p.vfs_read_kprobe.attach_kprobe(false, "vfs_read").context("kprobe vfs_read")?);
            }
            if writes {
                links.push(p.vfs_write_kprobe.attach_kprobe(false, "vfs_write").context("kprobe vfs_write")?);
            }
        }
        _ => {
            let calls: Vec<(&str, bool)> = READ_CALLS
                .iter()
                .map(|&c| (c, false))
                .filter(|_| reads)
                .chain(WRITE_CALLS.iter().map(|&c| (c, true)).filter(|_| writes))
                .collect();
            // The exits first, so that no call is kept at its start with nobody to take it.
            for (call, _) in &calls {
                links.push(attach_tracepoint(&p.call_exit, "syscalls", &format!("sys_exit_{call}"), mech)?);
            }
            for (call, write) in calls {
                let prog = if write { &p.write_enter } else { &p.read_enter };
                links.push(attach_tracepoint(prog, "syscalls", &format!("sys_enter_{call}"), mech)?);
            }
        }
    }
    Ok((skel, links))
}
