// SPDX-License-Identifier: Apache-2.0 OR MIT
//! llcstat: last-level cache references and misses per process (or thread) and CPU (BCC's tool, CO-RE).
//!
//! Two sampling perf events per CPU, the hardware `cache-references` and `cache-misses` counters, fire a BPF
//! program every N events (`-c N`); it adds N to the running task's record in a kernel map. When the duration
//! ends (or at Ctrl-C) this front end prints each record and the total hit rate in BCC's layout, or JSON lines,
//! or serves the counts as Prometheus counters. Machines without a PMU (most virtual machines) cannot count
//! these events: the tool then says which counter is missing and why, in one line.
//!
//! For tests on such machines, `COREBPF_LLCSTAT_EVENTS=page-faults` counts software events in their place:
//! every page fault as a "reference" and every major page fault as a "miss" (doc.md, ENVIRONMENT).

mod bpf;

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, open_skeleton, rodata};
use common::attach::maps::{hash_entries, DropCounter};
use common::attach::perf::{open_event, Rate};
use common::cli::MetricsArgs;
use common::host::Host;
use common::output::metrics::Snapshot;
use common::output::name::Name;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;
use serde::Serialize;

use bpf::types::{llc_key, llc_value};
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: plain C structs of integers and chars, generated from llcstat.h.
unsafe impl plain::Plain for llc_key {}
unsafe impl plain::Plain for llc_value {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The test-only switch to software events (doc.md, ENVIRONMENT).
const EVENTS_ENV: &str = "COREBPF_LLCSTAT_EVENTS";

/// Count last-level cache references and misses per process and CPU, sampled from hardware counters.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Take one sample every this many reference or miss events; each sample counts as that many events
    #[arg(short = 'c', long = "sample_period", alias = "sample-period", value_name = "SAMPLE_PERIOD",
          default_value_t = 100, value_parser = common::cli::parse_positive_u64)]
    sample_period: u64,
    /// One row per thread (PID and TID) rather than per process
    #[arg(short = 't', long)]
    tid: bool,
    /// JSON output: one object per row, then one with the totals
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    metrics: MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// How many seconds to count for
    #[arg(value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::PerfEvent]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| llcstat(args, &host, signals))
}

/// The two events counted, as `perf_event_open(2)` types and configs, with their names for messages.
#[derive(Debug, Clone, Copy)]
struct Counter {
    type_: u32,
    config: u64,
    name: &'static str,
    kind: &'static str,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;

/// (references, misses): the hardware cache counters, or the software substitute of `COREBPF_LLCSTAT_EVENTS`.
fn counters() -> Result<(Counter, Counter)> {
    match std::env::var(EVENTS_ENV).unwrap_or_default().as_str() {
        "" | "cache" => Ok((
            Counter { type_: PERF_TYPE_HARDWARE, config: 2, name: "cache-references", kind: "hardware" },
            Counter { type_: PERF_TYPE_HARDWARE, config: 3, name: "cache-misses", kind: "hardware" },
        )),
        "page-faults" => Ok((
            Counter { type_: PERF_TYPE_SOFTWARE, config: 2, name: "page-faults", kind: "software" },
            Counter { type_: PERF_TYPE_SOFTWARE, config: 6, name: "major-faults", kind: "software" },
        )),
        other => bail!("{EVENTS_ENV}={other} is not 'cache' or 'page-faults'"),
    }
}

fn llcstat(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let endpoint = args.metrics.endpoint(host, args.duration.is_some())?;
    let (refs, misses) = counters()?;
    let cpus = common::attach::perf::sampling_cpus(None)?;
    // The counters first: without them nothing else is worth loading, and the error names the one missing.
    let rate = Rate::Period(args.sample_period);
    let miss_fds = open_all(misses, rate, &cpus)?;
    let ref_fds = open_all(refs, rate, &cpus)?;
    if args.verbose.on() {
        eprintln!(
            "counting {} and {} every {} events on CPUs {}",
            refs.name,
            misses.name,
            args.sample_period,
            common::attach::perf::format_cpu_list(&cpus)
        );
    }
    let mut fds = Some((ref_fds, miss_fds));
    let ((skel, links), mech) = load_first_working(TOOL.attach, args.verbose.on(), |_| {
        let (r, m) = fds.take().context("the perf events were already used")?;
        load_and_attach(&args, r, m)
    })?;

    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |snapshot| collect(&skel, args.tid, snapshot));
    }

    let secs = args.duration.unwrap_or(10);
    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Running for {secs} seconds or hit Ctrl-C to end.")?;
        out.flush()?;
    }
    let deadline = Instant::now().checked_add(Duration::from_secs(secs));
    signals.sleep_until(deadline);
    drop(links); // stop counting, so the rows and the totals are one consistent read
    if signals.stdout_gone() {
        return Ok(());
    }
    let rows = read_rows(&skel)?;
    if args.json {
        write_json(&mut out, &rows, args.tid)?;
    } else {
        write_table(&mut out, &rows, args.tid)?;
    }
    out.flush()?;
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        DropCounter::new("samples", "too many (CPU, PID, TID) records").check(&bss.infos_full);
    }
    Ok(())
}

/// Opens `counter` on every CPU, sampling every `rate` events; a counter this machine lacks is one clear error.
fn open_all(counter: Counter, rate: Rate, cpus: &[u32]) -> Result<Vec<(u32, OwnedFd)>> {
    let mut fds = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        match open_event(counter.type_, counter.config, rate, cpu) {
            Ok(fd) => fds.push((cpu, fd)),
            // A CPU that went offline since the list was read.
            Err(err) if err.raw_os_error() == Some(libc::ENODEV) => continue,
            Err(err) => {
                let errno = nix::errno::Errno::from_raw(err.raw_os_error().unwrap_or(0));
                let hint = match (counter.kind, errno) {
                    ("hardware", nix::errno::Errno::ENOENT | nix::errno::Errno::EOPNOTSUPP) => {
                        " (this machine has no hardware PMU that counts it, as in most virtual machines)"
                    }
                    _ => "",
                };
                bail!(
                    "cannot count {} {} events on CPU {cpu}: perf_event_open failed with {errno:?} ({}){hint}",
                    counter.kind,
                    counter.name,
                    errno.desc()
                );
            }
        }
    }
    if fds.is_empty() {
        bail!("none of the CPUs could be counted on (all offline?)");
    }
    Ok(fds)
}

/// Loads the BPF object and attaches its two programs to the events of every CPU.
fn load_and_attach(
    args: &Args,
    ref_fds: Vec<(u32, OwnedFd)>,
    miss_fds: Vec<(u32, OwnedFd)>,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    rodata(&mut open.maps.rodata_data)?.per_thread = args.tid;
    let skel = open.load().context("loading the BPF programs")?;
    let mut links = Vec::with_capacity(ref_fds.len() + miss_fds.len());
    for (prog, fds) in [(&skel.progs.on_miss, miss_fds), (&skel.progs.on_ref, ref_fds)] {
        for (cpu, fd) in fds {
            let link = prog
                .attach_perf_event(fd.as_raw_fd())
                .with_context(|| format!("attaching to the perf event of CPU {cpu}"))?;
            // The link owns the descriptor now and closes it on detach.
            let _ = fd.into_raw_fd();
            links.push(link);
        }
    }
    Ok((skel, links))
}

/// One (process or thread, CPU) record.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    pid: u32,
    tid: u32,
    comm: Name,
    cpu: u32,
    refs: u64,
    misses: u64,
}

/// Every record, by PID, TID and CPU.
fn read_rows(skel: &BpfSkel<'_>) -> Result<Vec<Row>> {
    let entries: Vec<(llc_key, llc_value)> = hash_entries(&skel.maps.infos)?;
    let mut rows: Vec<Row> = entries
        .into_iter()
        .map(|(k, v)| Row {
            pid: k.pid,
            tid: k.tid,
            comm: Name::from_c(&v.comm),
            cpu: k.cpu,
            refs: v.refs,
            misses: v.misses,
        })
        .collect();
    rows.sort_by_key(|r| (r.pid, r.tid, r.cpu));
    Ok(rows)
}

/// The hit rate in percent: hits (references not missed, never below zero: sampling can tally more misses than
/// references for a small count) over references, 0 with no references.
fn hit_percent(refs: u64, misses: u64) -> f64 {
    if refs == 0 {
        return 0.0;
    }
    refs.saturating_sub(misses) as f64 * 100.0 / refs as f64
}

fn totals(rows: &[Row]) -> (u64, u64) {
    rows.iter().fold((0, 0), |(r, m), row| (r + row.refs, m + row.misses))
}

/// BCC's table: `PID [TID] NAME CPU REFERENCE MISS HIT%`, then the totals line.
fn write_table(out: &mut impl Write, rows: &[Row], per_thread: bool) -> std::io::Result<()> {
    write!(out, "{:<8} ", "PID")?;
    if per_thread {
        write!(out, "{:<8} ", "TID")?;
    }
    writeln!(out, "{:<16} {:<4} {:>12} {:>12} {:>7}", "NAME", "CPU", "REFERENCE", "MISS", "HIT%")?;
    for r in rows {
        write!(out, "{:<8} ", r.pid)?;
        if per_thread {
            write!(out, "{:<8} ", r.tid)?;
        }
        writeln!(
            out,
            "{:<16} {:<4} {:>12} {:>12} {:>6.2}%",
            r.comm,
            r.cpu,
            r.refs,
            r.misses,
            hit_percent(r.refs, r.misses)
        )?;
    }
    let (refs, misses) = totals(rows);
    writeln!(out, "Total References: {refs} Total Misses: {misses} Hit Rate: {:.2}%", hit_percent(refs, misses))
}

#[derive(Serialize)]
struct JsonRow<'a> {
    pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    comm: &'a Name,
    cpu: u32,
    references: u64,
    misses: u64,
    hit_percent: f64,
}

#[derive(Serialize)]
struct JsonTotal {
    total_references: u64,
    total_misses: u64,
    hit_percent: f64,
}

/// One JSON line per row (`tid` with -t), then one with the totals.
fn write_json(out: &mut Output, rows: &[Row], per_thread: bool) -> std::io::Result<()> {
    for r in rows {
        out.json_line(&JsonRow {
            pid: r.pid,
            tid: per_thread.then_some(r.tid),
            comm: &r.comm,
            cpu: r.cpu,
            references: r.refs,
            misses: r.misses,
            hit_percent: round2(hit_percent(r.refs, r.misses)),
        })?;
    }
    let (refs, misses) = totals(rows);
    out.json_line(&JsonTotal {
        total_references: refs,
        total_misses: misses,
        hit_percent: round2(hit_percent(refs, misses)),
    })
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `--prometheus`: the cumulative counts per process (or thread), name and CPU.
fn collect(skel: &BpfSkel<'_>, per_thread: bool, snapshot: &mut Snapshot) -> Result<()> {
    const LABELS: &[&str] = &["pid", "comm", "cpu"];
    const LABELS_TID: &[&str] = &["pid", "tid", "comm", "cpu"];
    let labels = if per_thread { LABELS_TID } else { LABELS };
    let refs_help = "Last-level cache references counted (sampled: each sample adds the sample period)";
    let miss_help = "Last-level cache misses counted (sampled: each sample adds the sample period)";
    snapshot.declare_counter("cache_references", refs_help, labels);
    snapshot.declare_counter("cache_misses", miss_help, labels);
    for r in read_rows(skel)? {
        let mut values = vec![r.pid.to_string()];
        if per_thread {
            values.push(r.tid.to_string());
        }
        values.extend([r.comm.text().into_owned(), r.cpu.to_string()]);
        snapshot.counter("cache_references", refs_help, labels, values.clone(), r.refs);
        snapshot.counter("cache_misses", miss_help, labels, values, r.misses);
    }
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        snapshot.map_full("infos", &bss.infos_full);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: u32, refs: u64, misses: u64) -> Row {
        Row { pid, tid: pid, comm: "x".into(), cpu: 1, refs, misses }
    }

    #[test]
    fn hit_rate_never_goes_below_zero() {
        assert_eq!(hit_percent(0, 0), 0.0);
        assert_eq!(hit_percent(100, 200), 0.0);
        assert_eq!(hit_percent(400, 100), 75.0);
    }

    #[test]
    fn table_has_bcc_columns() {
        let mut out = Vec::new();
        write_table(&mut out, &[row(42, 3500, 600)], false).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "PID      NAME             CPU     REFERENCE         MISS    HIT%");
        assert_eq!(lines[1], "42       x                1            3500          600  82.86%");
        assert_eq!(lines[2], "Total References: 3500 Total Misses: 600 Hit Rate: 82.86%");
    }

    #[test]
    fn table_with_threads_has_a_tid_column() {
        let mut out = Vec::new();
        write_table(&mut out, &[Row { tid: 43, ..row(42, 100, 0) }], true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("PID      TID      NAME             CPU     REFERENCE"), "{text}");
        assert!(
            text.contains("\n42       43       x                1             100            0 100.00%\n"),
            "{text}"
        );
    }
}
