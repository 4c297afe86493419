// SPDX-License-Identifier: Apache-2.0 OR MIT
//! cpufreq: how fast the CPUs run when they are sampled, system-wide and per process (libbpf-tools' tool, CO-RE).
//!
//! Each CPU's current frequency lives in a BPF array: filled here from the cpufreq driver's `scaling_cur_freq`,
//! then kept current by the `power:cpu_frequency` tracepoint. A cpu-clock perf event per CPU samples at `-f` Hz
//! and adds the sampled CPU's frequency to linear histograms (200 MHz steps) in the kernel: one for the whole
//! system and one per process name. When the run ends they are printed in libbpf-tools' layout, or as JSON, or
//! served as Prometheus histograms.
//!
//! Without a cpufreq driver (virtual machines, this project's build machines and QEMU guests among them) the
//! frequency cannot be observed: the tool says so in one line and exits 1, rather than sampling a constant.
//! `COREBPF_CPUFREQ_KHZ` (doc.md, ENVIRONMENT) gives declared starting frequencies instead, for tests.

mod bpf;

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{autoload_by_section, load_first_working, open_skeleton, rodata};
use common::attach::maps::{hash_entries, DropCounter};
use common::attach::perf::{open_event, Rate};
use common::cli::MetricsArgs;
use common::host::Host;
use common::output::hist::Bucket;
use common::output::metrics::{HistogramValue, Snapshot};
use common::output::name::Name;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;
use serde::Serialize;

use bpf::consts::{HIST_STEP_SIZE, MAX_CPU_NR, MAX_SLOTS};
use bpf::types::{hist, hkey};
use bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: plain C structs of integers and chars, generated from cpufreq.h.
unsafe impl plain::Plain for hist {}
unsafe impl plain::Plain for hkey {}

/// The `--help` examples, from doc.md's `## --help` part (the build helper writes them).
const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The test-only starting frequencies (doc.md, ENVIRONMENT).
const KHZ_ENV: &str = "COREBPF_CPUFREQ_KHZ";
const SYSFS_CPUS: &str = "/sys/devices/system/cpu";

/// Sample the frequency the CPUs run at, system-wide and per process name, as linear histograms in MHz.
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Stop after this many seconds (by default, at Ctrl-C)
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
    /// Samples per second on each CPU
    #[arg(short = 'f', long, value_name = "FREQUENCY", default_value_t = 99,
          value_parser = common::cli::parse_positive_u64)]
    frequency: u64,
    /// Only tasks in this cgroup v2 directory or below it
    #[arg(short = 'c', long, value_name = "CG")]
    cgroup: Option<PathBuf>,
    /// JSON output: one object per process name, then one for the whole system
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    metrics: MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::TpBtf, Attach::RawTp]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| cpufreq(args, &host, signals))
}

fn cpufreq(args: Args, host: &Host, signals: Signals) -> Result<()> {
    let endpoint = args.metrics.endpoint(host, args.duration.is_some())?;
    let rate = Rate::Frequency(args.frequency);
    common::attach::perf::check_rate(rate)?;
    let cpus = common::attach::perf::sampling_cpus(None)?;
    if let Some(&cpu) = cpus.iter().find(|&&c| c as usize >= MAX_CPU_NR) {
        bail!("CPU {cpu} is beyond the {MAX_CPU_NR} CPUs this tool keeps a frequency for");
    }
    // Without a frequency to start from there is nothing to sample: say so before loading anything.
    let start = starting_frequencies(&cpus)?;
    let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
    let ((skel, links), mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        load_and_attach(mech, cgroup.as_ref(), &cpus, &start, rate)
    })?;
    if args.verbose.on() {
        eprintln!(
            "sampling cpu-clock at {} Hz on CPUs {}",
            args.frequency,
            common::attach::perf::format_cpu_list(&cpus)
        );
    }

    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        return endpoint.serve(&signals, |snapshot| collect(&skel, snapshot));
    }

    let mut out = Output::new();
    if !args.json {
        writeln!(out, "Sampling CPU freq system-wide & by process. Ctrl-C to end.")?;
        out.flush()?;
    }
    let deadline = args.duration.and_then(|secs| Instant::now().checked_add(Duration::from_secs(secs)));
    signals.sleep_until(deadline);
    drop(links); // stop sampling, so that the histograms are one consistent read
    if signals.stdout_gone() {
        return Ok(());
    }
    let (per_comm, system) = read_hists(&skel)?;
    if args.json {
        for (comm, h) in &per_comm {
            out.json_line(&JsonHist::new("process", Some(&*comm.text()), h))?;
        }
        out.json_line(&JsonHist::new("system", None, &system))?;
    } else {
        writeln!(out)?;
        for (comm, h) in &per_comm {
            write_linear_hist(&mut out, &h.slots, &comm.shown())?;
            writeln!(out)?;
        }
        writeln!(out)?;
        write_linear_hist(&mut out, &system.slots, "syswide")?;
    }
    out.flush()?;
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        DropCounter::new("samples", "too many process names").check(&bss.hists_full);
    }
    Ok(())
}

/// Each CPU's frequency in MHz to start from: the cpufreq driver's `scaling_cur_freq` (kHz), or the declared
/// values of `COREBPF_CPUFREQ_KHZ`. Without a driver, one error that says the frequency cannot be observed.
fn starting_frequencies(cpus: &[u32]) -> Result<Vec<(u32, u32)>> {
    if let Ok(declared) = std::env::var(KHZ_ENV) {
        let khz: Vec<u32> = declared
            .split(',')
            .map(|s| s.trim().parse::<u32>().ok().filter(|&k| k > 0))
            .collect::<Option<_>>()
            .with_context(|| format!("{KHZ_ENV}={declared} is not a list of frequencies in kHz"))?;
        let last = *khz.last().context("empty")?;
        return Ok(cpus.iter().map(|&cpu| (cpu, khz.get(cpu as usize).copied().unwrap_or(last) / 1000)).collect());
    }
    let mut freqs = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        let path = format!("{SYSFS_CPUS}/cpu{cpu}/cpufreq/scaling_cur_freq");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => bail!(
                "no cpufreq driver on this machine ({path} does not exist): the CPU frequency cannot be observed \
                 here (virtual machines usually have none)"
            ),
            Err(err) => return Err(err).with_context(|| format!("reading {path}")),
        };
        let khz: u32 = text.trim().parse().with_context(|| format!("{path} holds '{}', not kHz", text.trim()))?;
        freqs.push((cpu, khz / 1000));
    }
    Ok(freqs)
}

/// Opens the BPF object, fills the starting frequencies and the cgroup filter, then attaches the tracepoint and
/// a cpu-clock sampling event on each CPU.
fn load_and_attach(
    mech: Attach,
    cgroup: Option<&File>,
    cpus: &[u32],
    start: &[(u32, u32)],
    rate: Rate,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    rodata(&mut open.maps.rodata_data)?.filter_cgroup = cgroup.is_some();
    autoload_by_section(open.open_object_mut(), mech);
    // The perf_event program is loaded with either mechanism.
    if let Some(mut prog) = open.open_object_mut().progs_mut().find(|p| p.name() == "do_sample") {
        prog.set_autoload(true);
    }
    let mut skel = open.load().with_context(|| format!("loading the BPF programs ({mech})"))?;
    if let Some(cgroup) = cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }
    let bss = skel.maps.bss_data.as_deref_mut().context("BPF object has no .bss")?;
    for &(cpu, mhz) in start {
        bss.freqs_mhz[cpu as usize] = mhz;
    }
    let mut links = common::attach::loader::attach_loaded_tracepoints(skel.object(), "power")?;
    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
    for &cpu in cpus {
        let fd = match open_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, rate, cpu) {
            Ok(fd) => fd,
            // A CPU that went offline since the list was read.
            Err(err) if err.raw_os_error() == Some(libc::ENODEV) => continue,
            Err(err) => return Err(err).context(format!("opening a cpu-clock perf event on CPU {cpu}")),
        };
        let link = skel
            .progs
            .do_sample
            .attach_perf_event(fd.as_raw_fd())
            .with_context(|| format!("attaching to the perf event of CPU {cpu}"))?;
        // The link owns the descriptor now and closes it on detach.
        let _ = fd.into_raw_fd();
        links.push(link);
    }
    Ok((skel, links))
}

/// The per-name histograms (by name) and the system-wide one.
fn read_hists(skel: &BpfSkel<'_>) -> Result<(Vec<(Name, hist)>, hist)> {
    let entries: Vec<(hkey, hist)> = hash_entries(&skel.maps.hists)?;
    let mut per_comm: Vec<(Name, hist)> = entries.into_iter().map(|(k, h)| (Name::from_c(&k.comm), h)).collect();
    per_comm.sort_by(|a, b| a.0.cmp(&b.0));
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    // SAFETY: an aligned struct of u64 in the live, mapped .bss: read as volatile, the kernel may write it.
    let system = unsafe { std::ptr::read_volatile(&bss.syswide) };
    Ok((per_comm, system))
}

/// libbpf-tools' linear histogram: the header, then one row per non-empty slot between the first and the last
/// non-empty one, labelled by the slot's low frequency in MHz.
fn write_linear_hist(out: &mut impl Write, slots: &[u64], val_type: &str) -> std::io::Result<()> {
    let (Some(first), Some(last)) = (slots.iter().position(|&n| n > 0), slots.iter().rposition(|&n| n > 0)) else {
        return Ok(());
    };
    let max = slots.iter().copied().max().unwrap_or(0);
    writeln!(out, "     {val_type:<13} : count     distribution")?;
    for (i, &n) in slots.iter().enumerate().take(last + 1).skip(first) {
        if n == 0 {
            continue;
        }
        let stars = "*".repeat((n * 40 / max) as usize);
        writeln!(out, "        {:<10} : {n:<8} |{stars:<40}|", i as u64 * HIST_STEP_SIZE as u64)?;
    }
    Ok(())
}

/// One histogram as JSON: the shared buckets in MHz (docs/json.md), 200 MHz each up to the last slot that holds a
/// sample (the last slot of all holds every frequency above it), the number of samples and their sum.
#[derive(Serialize)]
struct JsonHist<'a> {
    scope: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    comm: Option<&'a str>,
    samples: u64,
    sum_mhz: u64,
    buckets: Vec<Bucket>,
}

impl<'a> JsonHist<'a> {
    fn new(scope: &'static str, comm: Option<&'a str>, h: &hist) -> Self {
        let step = HIST_STEP_SIZE as u64;
        let used = h.slots.iter().rposition(|&count| count > 0).map_or(0, |last| last + 1);
        let buckets: Vec<Bucket> = h.slots[..used]
            .iter()
            .enumerate()
            .map(|(i, &count)| {
                let low = i as u64 * step;
                let high = if i + 1 == h.slots.len() { u64::MAX } else { low + step - 1 };
                Bucket { low, high, count }
            })
            .collect();
        JsonHist { scope, comm, samples: h.slots.iter().sum(), sum_mhz: h.sum_mhz, buckets }
    }
}

/// A histogram in hertz for Prometheus: slot i holds frequencies below (i+1) steps; the last one is `+Inf`.
fn hertz_histogram(h: &hist) -> HistogramValue {
    let last = MAX_SLOTS - 1;
    let buckets = h
        .slots
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let le = if i == last { f64::INFINITY } else { (i as f64 + 1.0) * HIST_STEP_SIZE as f64 * 1e6 };
            (le, n)
        })
        .collect();
    HistogramValue { sum: h.sum_mhz as f64 * 1e6, count: h.slots.iter().sum(), buckets }
}

/// `--prometheus`: the cumulative histograms, per process name and for the whole system.
fn collect(skel: &BpfSkel<'_>, snapshot: &mut Snapshot) -> Result<()> {
    let per_help = "Frequency of the CPU a process was running on when sampled, in hertz";
    let sys_help = "Frequency of each sampled CPU, whatever ran on it, in hertz";
    snapshot.declare_histogram("sampled_frequency_hertz", per_help, &["comm"]);
    let (per_comm, system) = read_hists(skel)?;
    for (comm, h) in &per_comm {
        snapshot.histogram(
            "sampled_frequency_hertz",
            per_help,
            &["comm"],
            vec![comm.text().into_owned()],
            hertz_histogram(h),
        );
    }
    snapshot.histogram("system_sampled_frequency_hertz", sys_help, &[], Vec::new(), hertz_histogram(&system));
    if let Some(bss) = skel.maps.bss_data.as_ref() {
        snapshot.map_full("hists", &bss.hists_full);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_rows_are_libbpf_tools() {
        let mut slots = [0u64; MAX_SLOTS];
        slots[5] = 10;
        slots[12] = 5;
        let mut out = Vec::new();
        write_linear_hist(&mut out, &slots, "syswide").unwrap();
        let text = String::from_utf8(out).unwrap();
        let want = "     syswide       : count     distribution\n\
                    \x20       1000       : 10       |****************************************|\n\
                    \x20       2400       : 5        |********************                    |\n";
        assert_eq!(text, want);
    }

    #[test]
    fn hertz_buckets_end_in_inf() {
        let mut h = hist::default();
        h.slots[0] = 1;
        h.slots[MAX_SLOTS - 1] = 2;
        h.sum_mhz = 100 + 2 * 6000;
        let v = hertz_histogram(&h);
        assert_eq!(v.buckets[0], (200e6, 1));
        assert_eq!(v.buckets.last().copied(), Some((f64::INFINITY, 2)));
        assert_eq!(v.count, 3);
    }
}
