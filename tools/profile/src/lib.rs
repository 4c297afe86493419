// SPDX-License-Identifier: Apache-2.0 OR MIT
//! profile: sample stack traces on every CPU at a timed interval (BCC's tool, CO-RE).
//!
//! A perf event per CPU fires the BPF program, which counts (process, user stack, kernel stack) in the kernel;
//! at the end this front end reads the unique stacks once, names them with blazesym (saving each process's memory
//! maps when it is first sampled, so processes that exit are still named) and prints them in BCC's layout, as
//! folded lines, as JSON, and/or as an SVG flame graph; or, with `--prometheus`, serves the counts as a counter
//! per process name and folded stack ([`metrics`]).

mod bpf;
mod metrics;

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, open_skeleton, rodata};
use common::attach::perf::{Rate, SamplingEvents};
use common::cli::filter::IdSets;
use common::domain::containers::{ContainerArgs, ContainerMaps};
use common::host::Host;
use common::output::name::Name;
use common::output::stdout::Output;
use common::process::symbols::{process_notices, Symbolizer};
use common::run::Signals;
use common::stacks::{self, Collected, FlameGraph, FrameFormat, MergeBy, Palette, Sample, StackTraces, Style};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use bpf::{BpfSkel, BpfSkelBuilder};

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Sample the stacks of running threads on every CPU at a fixed rate, and count each distinct stack.
#[derive(Debug, Parser)]
#[command(name = "profile", version, after_help = EXAMPLES)]
struct Args {
    /// Only these processes: PIDs separated by commas
    #[arg(short = 'p', long = "pid", value_name = "PIDS", value_delimiter = ',', value_parser = common::cli::parse_pid,
          conflicts_with = "tids")]
    pids: Option<Vec<u32>>,
    /// Only these threads: TIDs separated by commas
    #[arg(short = 'L', long = "tid", value_name = "TIDS", value_delimiter = ',', value_parser = common::cli::parse_pid)]
    tids: Option<Vec<u32>>,
    /// Record only the user-space part of each stack
    #[arg(short = 'U', long = "user-stacks-only", conflicts_with = "kernel_stacks_only")]
    user_stacks_only: bool,
    /// Record only the kernel part of each stack
    #[arg(short = 'K', long = "kernel-stacks-only")]
    kernel_stacks_only: bool,
    /// Samples per second on each CPU (default 49)
    #[arg(short = 'F', long, value_name = "HZ", value_parser = common::cli::parse_positive_u64, conflicts_with = "count")]
    frequency: Option<u64>,
    /// Instead of a rate, take one sample every this many CPU clock events
    #[arg(short = 'c', long, value_name = "COUNT", value_parser = common::cli::parse_positive_u64)]
    count: Option<u64>,
    /// Mark where the kernel part of a stack ends and the user part begins ("-" folded, "--" otherwise)
    #[arg(short = 'd', long)]
    delimited: bool,
    /// Mark kernel frames with the suffix _[k] (folded output)
    #[arg(short = 'a', long)]
    annotations: bool,
    /// Also sample CPUs while they are idle (the idle task's stacks)
    #[arg(short = 'I', long = "include-idle")]
    include_idle: bool,
    /// Print one line per stack, frames joined by ";" and the count last (the input of flame graph tools)
    #[arg(short = 'f', long)]
    folded: bool,
    /// Size of the map of distinct stacks and tasks (entries); samples beyond it are lost and counted
    #[arg(long, value_name = "N", default_value_t = 40960, value_parser = parse_map_size)]
    hash_storage_size: u32,
    /// Size of the stack trace map (entries); stacks beyond it are shown as missed
    #[arg(long, value_name = "N", default_value_t = 16384, value_parser = parse_map_size)]
    stack_storage_size: u32,
    /// Sample this CPU only (-1, the default, samples all)
    #[arg(short = 'C', long, value_name = "CPU", allow_negative_numbers = true, value_parser = parse_cpu)]
    cpu: Option<i32>,
    #[command(flatten)]
    containers: ContainerArgs,
    /// Only tasks in this cgroup v2 directory or below it
    #[arg(long, value_name = "PATH")]
    cgroup: Option<PathBuf>,
    /// Print each frame's address beside its symbol
    #[arg(short = 'A', long)]
    address: bool,
    /// Print JSON lines: an object per distinct stack
    #[arg(short = 'j', long, conflicts_with = "folded")]
    json: bool,
    /// Also draw the stacks as an SVG flame graph in FILE
    #[arg(long, value_name = "FILE", conflicts_with = "prometheus")]
    flamegraph: Option<PathBuf>,
    #[command(flatten)]
    export: common::cli::MetricsArgs,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// Stop after this many seconds (by default, at Ctrl-C)
    #[arg(value_parser = common::cli::parse_interval_secs)]
    duration: Option<u64>,
}

/// `-C`: a CPU number, or -1 (BCC's default) for all CPUs.
fn parse_cpu(s: &str) -> Result<i32, String> {
    match s.trim().parse::<i32>() {
        Ok(cpu) if cpu >= -1 => Ok(cpu),
        _ => Err(format!("'{s}' is not a CPU number (0 or more, or -1 for all CPUs)")),
    }
}

fn parse_map_size(s: &str) -> Result<u32, String> {
    let n = common::cli::parse_positive_u64(s)?;
    u32::try_from(n).map_err(|_| format!("{n} is too large"))
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::PerfEvent]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| profile(args, &host, signals))
}

fn profile(args: Args, host: &Host, signals: Signals) -> Result<()> {
    args.pids.iter().chain(&args.tids).flatten().try_for_each(|&id| common::cli::require_process(id))?;
    let cpus = common::attach::perf::sampling_cpus(only_cpu(&args))?;
    // Every filter is opened now, so that a bad path is a one-line error before anything is loaded.
    let filters = Filters::open(&args)?;
    let rate = match args.count {
        Some(n) => Rate::Period(n),
        None => Rate::Frequency(args.frequency.unwrap_or(49)),
    };
    // Fail now, not after the profile, if the flame graph cannot be written.
    let flamegraph = stacks::create_flamegraph_file(args.flamegraph.as_deref())?.zip(args.flamegraph.as_ref());
    let collected = Collected { user: !args.kernel_stacks_only, kernel: !args.user_stacks_only };
    let endpoint = args.export.endpoint(host, args.duration.is_some())?;

    let ((skel, links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |_| load_and_attach(&args, &filters, &cpus, rate))?;
    if let Some(mut endpoint) = endpoint {
        endpoint.attached(mech, skel.object());
        let mut names = common::output::stackseries::StackNames::new(collected, false);
        let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
        endpoint.serve(&signals, |s| {
            s.map_full("counts", &bss.lost_samples);
            metrics::write(s, &mut names, &skel.maps.counts, &skel.maps.stackmap)
        })?;
        drop(links);
        return Ok(());
    }

    let mut out = Output::new();
    let context = sampling_context(&args, rate);
    if !args.folded && !args.json {
        let until = match args.duration {
            Some(secs) => format!(" for {secs} secs."),
            None => "... Hit Ctrl-C to end.".into(),
        };
        writeln!(out, "Sampling at {context}{until}")?;
        out.flush()?;
    }

    // Save each process's memory maps when it is first sampled, so it can be named even if it exits.
    let mut symbolizer = Symbolizer::new();
    // A duration too large for the clock is as good as none (it is range-checked at parsing, too).
    let deadline = args.duration.and_then(|secs| Instant::now().checked_add(Duration::from_secs(secs)));
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let notices = process_notices(&skel.maps.new_pids, &bss.lost_notices);
    let lost_notices =
        symbolizer.remember_noticed(&signals, &notices, || deadline.is_some_and(|d| Instant::now() >= d))?;
    drop(links); // stop sampling before reading, so the snapshot is consistent

    if !args.folded && !args.json {
        writeln!(out)?;
    }
    let samples = read_samples(&skel, collected)?;
    // Multi-line and JSON output show each frame's offset, so only samples at the same offsets are added up;
    // folded lines and the flame graph show names only, and add up all samples that print the same.
    let mut exact = stacks::symbolize_by(samples, &mut symbolizer, args.verbose.on(), MergeBy::Frames);
    if !args.folded {
        // Modules are printed in multi-line output and JSON only.
        stacks::add_modules(&mut exact);
    }
    let named = if args.folded || flamegraph.is_some() { stacks::merge_same_names(exact.clone()) } else { Vec::new() };
    let missing = stacks::missing(if args.folded { &named } else { &exact });

    // BCC's `_[k]` (-a) is in folded output only; its multi-line frames are `name+0x1f [module]`, with -A the
    // address first.
    let style = Style {
        delimited: args.delimited && collected.user && collected.kernel,
        annotate_kernel: args.annotations,
        ..Style::default()
    };
    let frames = FrameFormat { module_and_offset: true, addresses: args.address };
    match flamegraph {
        Some((_, path)) if exact.is_empty() => {
            let _ = std::fs::remove_file(path);
            eprintln!("profile: no samples, so no flame graph written to {}", path.display())
        }
        Some((file, path)) => {
            let graph = FlameGraph {
                title: format!("CPU stacks sampled at {context}"),
                count_name: "samples".into(),
                palette: Palette::Hot,
            };
            stacks::write_flamegraph(file, &named, style, &graph)
                .with_context(|| format!("writing the flame graph to {}", path.display()))?
        }
        None => {}
    }
    if args.json {
        stacks::write_json(&mut out, &exact, "count", false)?;
    } else if args.folded {
        stacks::write_folded(&mut out, &named, style)?;
    } else {
        stacks::write_multiline_as(&mut out, &exact, Style { annotate_kernel: false, ..style }, frames)?;
    }

    warn_about_losses(&skel, missing);
    lost_notices.report(&mut out, args.json)?;
    Ok(())
}

/// BCC's header phrase: `49 Hertz of PID [185] by user + kernel stack on CPU#1`.
fn sampling_context(args: &Args, rate: Rate) -> String {
    let rate = match rate {
        Rate::Frequency(hz) => format!("{hz} Hertz"),
        Rate::Period(n) => format!("every {n} events"),
    };
    let list = |ids: &[u32]| ids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let whom = match (&args.pids, &args.tids) {
        (Some(pids), _) => format!("PID [{}]", list(pids)),
        (None, Some(tids)) => format!("TID [{}]", list(tids)),
        (None, None) => "all threads".into(),
    };
    let stacks = if args.user_stacks_only {
        "user"
    } else if args.kernel_stacks_only {
        "kernel"
    } else {
        "user + kernel"
    };
    let cpu = only_cpu(args).map(|c| format!(" on CPU#{c}")).unwrap_or_default();
    format!("{rate} of {whom} by {stacks} stack{cpu}")
}

/// The one CPU to sample (`-C N`), or none for all (`-C -1` or no `-C`).
fn only_cpu(args: &Args) -> Option<u32> {
    args.cpu.and_then(|cpu| u32::try_from(cpu).ok())
}

/// The cgroup and container filters, opened before loading: `--cgroup`'s directory and BCC's pinned maps.
struct Filters {
    cgroup: Option<std::fs::File>,
    containers: ContainerMaps,
}

impl Filters {
    fn open(args: &Args) -> Result<Filters> {
        let cgroup = args.cgroup.as_deref().map(common::domain::cgroup::open).transpose()?;
        let containers = args.containers.open()?;
        Ok(Filters { cgroup, containers })
    }
}

/// Warnings on stderr, as BCC prints them, for stacks and samples that could not be kept.
fn warn_about_losses(skel: &BpfSkel<'_>, missing: stacks::Missing) {
    missing.warn();
    let Some(bss) = skel.maps.bss_data.as_ref() else { return };
    if bss.lost_samples > 0 {
        eprintln!(
            "WARNING: hash table full. Consider increasing --hash-storage-size. ({} samples not counted)",
            bss.lost_samples
        );
    }
}

unsafe impl plain::Plain for bpf::types::stack_key {}

/// Reads every counted sample with its raw stack addresses.
fn read_samples(skel: &BpfSkel<'_>, collected: Collected) -> Result<Vec<Sample<u64>>> {
    let mut traces = StackTraces::new(&skel.maps.stackmap, collected);
    let mut samples = Vec::new();
    for (key, count) in common::attach::maps::hash_entries::<bpf::types::stack_key, u64>(&skel.maps.counts)? {
        if count > 0 {
            let comm = Name::from_c(&key.comm);
            let task = traces.task(key.pid, key.pid, comm, key.user_stack_id, key.kern_stack_id);
            samples.push(Sample { task, waker: None, value: count });
        }
    }
    Ok(samples)
}

/// Opens and loads the BPF object sized by the flags, fills the PID/TID filters, and attaches the sampling program
/// to a perf event on each CPU.
fn load_and_attach(args: &Args, filters: &Filters, cpus: &[u32], rate: Rate) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.user_stacks_only = args.user_stacks_only;
    rodata.kernel_stacks_only = args.kernel_stacks_only;
    rodata.include_idle = args.include_idle;
    rodata.filter_cgroup = filters.cgroup.is_some();
    (rodata.filter_cgroupmap, rodata.filter_mntnsmap) = filters.containers.flags();
    let maps = &mut open.maps;
    // BCC's pinned maps are used as they are, so that entries changed while profile runs count at once.
    filters.containers.before_load(&mut maps.cgroupset, &mut maps.mount_ns_set)?;
    maps.stackmap.set_max_entries(args.stack_storage_size)?;
    maps.counts.set_max_entries(args.hash_storage_size)?;
    let ids = IdSets { pids: args.pids.as_deref(), tids: args.tids.as_deref() };
    ids.prepare(open.open_object_mut())?;
    let skel = open.load().context("loading the BPF program")?;
    ids.fill(skel.object())?;
    filters.containers.after_load(&skel.maps.cgroupset, &skel.maps.mount_ns_set)?;
    if let Some(cgroup) = &filters.cgroup {
        common::domain::cgroup::set_filter(&skel.maps.cgroup_map, cgroup)?;
    }

    let events = SamplingEvents::open(cpus, rate)?;
    if args.verbose.on() {
        eprintln!("sampling {} on CPUs {}", events.clock, common::attach::perf::format_cpu_list(cpus));
    }
    let mut links = Vec::with_capacity(events.fds.len());
    for (cpu, fd) in events.fds {
        let link = skel
            .progs
            .do_perf_event
            .attach_perf_event(fd.as_raw_fd())
            .with_context(|| format!("attaching to the perf event of CPU {cpu}"))?;
        // The link owns the descriptor now and closes it on detach.
        let _ = fd.into_raw_fd();
        links.push(link);
    }
    Ok((skel, links))
}
