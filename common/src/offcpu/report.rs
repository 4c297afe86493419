// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The run and the report of the off-CPU tools (offcputime, offwaketime, wakeuptime), over [`crate::stacks`]: BCC's
//! header line ([`header`]), tracing until Ctrl-C or the duration while saving the memory maps of each process as
//! its first stack is taken ([`collect`]), then naming the stacks and writing them in the form the flags chose
//! with the flame graph ([`report`]), and saying what the BPF side lost ([`warn_lost`]). [`run`] is all of it for
//! a tool whose skeleton is a [`StackSkel`].

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{Link, MapCore};

use crate::attach::events::{EventStream, Lost};
use crate::attach::features::{Attach, KernelBtf};
use crate::attach::loader::load_first_working;
use crate::attach::maps::DropCounter;
use crate::host::endpoint::Endpoint;
use crate::offcpu::sched::{self, BlockFilters, BlockTimeArgs, ThreadArgs};
use crate::output::metrics::Snapshot;
use crate::output::stackseries::StackNames;
use crate::output::stdout::Output;
use crate::process::symbols::Symbolizer;
use crate::run::Signals;
use crate::stacks::{self, Collected, FlameGraph, Frame, Palette, Sample, StackTraces, Style, Task};

/// How the stacks are written on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// BCC's default multi-line stacks.
    Multiline,
    /// `-f`: folded lines.
    Folded,
    /// `--json`: one object per unique stack.
    Json,
}

impl Form {
    pub fn from_flags(folded: bool, json: bool) -> Form {
        if json {
            Form::Json
        } else if folded {
            Form::Folded
        } else {
            Form::Multiline
        }
    }
}

/// BCC's first line, `<what> for N secs.` or `<what>... Hit Ctrl-C to end.`, in the multi-line form only.
pub fn header(out: &mut Output, form: Form, what: &str, duration: Option<u64>) -> Result<()> {
    if form == Form::Multiline {
        match duration {
            Some(secs) => writeln!(out, "{what} for {secs} secs.")?,
            None => writeln!(out, "{what}... Hit Ctrl-C to end.")?,
        }
        out.flush()?;
    }
    Ok(())
}

/// The end of the run: `duration` seconds from now, if given.
pub fn deadline(duration: Option<u64>) -> Option<Instant> {
    duration.and_then(|secs| Instant::now().checked_add(Duration::from_secs(secs)))
}

/// Traces until a stop signal or the end of `duration`, saving the memory maps of each process the BPF side
/// notices (`notices`, see [`crate::process::symbols::process_notices`]), so that it can be named even if it exits. Returns the notices
/// lost.
pub fn collect(
    signals: &Signals,
    notices: &EventStream<'_>,
    duration: Option<u64>,
    symbolizer: &mut Symbolizer,
) -> Result<Lost> {
    let deadline = deadline(duration);
    symbolizer.remember_noticed(signals, notices, || deadline.is_some_and(|d| Instant::now() >= d))
}

/// What a tool's report looks like, and where its flame graph goes.
#[derive(Debug)]
pub struct Report {
    /// The tool's name, for its messages.
    pub tool: &'static str,
    /// BCC's header line, without its end (see [`header`]).
    pub header: String,
    /// Seconds to trace, or until a stop signal.
    pub duration: Option<u64>,
    /// `-v`: say on stderr which addresses could not be named.
    pub verbose: bool,
    pub form: Form,
    pub style: Style,
    /// The flame graph's title, unit and palette.
    pub graph: FlameGraph,
    /// JSON: each task's `tid` too.
    pub per_thread: bool,
    /// `--flamegraph FILE`: the file, created by [`flamegraph_file`] before tracing, and its path.
    pub flamegraph: Option<(File, PathBuf)>,
}

/// Creates the flame graph's file now, so that a bad path fails before tracing, not after.
pub fn flamegraph_file(path: Option<&Path>) -> Result<Option<(File, PathBuf)>> {
    Ok(stacks::create_flamegraph_file(path)?.zip(path.map(Path::to_path_buf)))
}

/// The flags of offcputime and offwaketime after their stack flags: `--stack-storage-size`, `-m`, `-M`, `--state`,
/// then [`ReportArgs`] (`#[command(flatten)]`).
#[derive(Debug, Clone, clap::Args)]
pub struct StackToolArgs {
    /// Size of the stack trace map (entries); stacks beyond it are shown as missed
    #[arg(long, value_name = "N", default_value_t = 16384, value_parser = sched::parse_stack_storage_size)]
    pub stack_storage_size: u32,
    #[command(flatten)]
    pub block_time: BlockTimeArgs,
    /// Only blocks that began in one of these task states, a bitmask of include/linux/sched.h's values (1:
    /// interruptible sleep, 2: uninterruptible); 0 selects preempted threads that were still runnable
    #[arg(long, value_name = "STATE", value_parser = clap::value_parser!(u32))]
    pub state: Option<u32>,
    #[command(flatten)]
    pub output: ReportArgs,
}

impl StackToolArgs {
    /// The filters of these flags and the thread flags.
    pub fn filters(&self, threads: &ThreadArgs) -> BlockFilters {
        self.block_time.filters(threads.filters(self.state))
    }
}

/// A tool's `main` after parsing: a usage error of the `filters` (with `-U`: `user_stacks_only`) ends it with
/// status 2, else `body` runs under [`crate::host::Host::bpf_main`].
pub fn start(
    host: &crate::host::Host,
    filters: BlockFilters,
    user_stacks_only: bool,
    verbose: crate::cli::Verbose,
    body: impl FnOnce(BlockFilters, Signals) -> Result<()>,
) -> std::process::ExitCode {
    match filters.check_usage(user_stacks_only) {
        Ok(()) => host.bpf_main(verbose, |signals| body(filters, signals)),
        Err(code) => code,
    }
}

/// `--json`, `--flamegraph FILE`, `-v` and the duration, last in the flags of offcputime and offwaketime
/// (`#[command(flatten)]`; `#[command(mut_arg("flamegraph", ...))]` rewords one for a tool).
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Print JSON lines: an object per distinct stack, with its total_us
    #[arg(short = 'j', long, conflicts_with = "folded")]
    pub json: bool,
    /// Also draw the stacks as an SVG flame graph in FILE
    #[arg(long, value_name = "FILE")]
    pub flamegraph: Option<PathBuf>,
    #[command(flatten)]
    pub verbose: crate::cli::Verbose,
    /// Stop after this many seconds (by default, at Ctrl-C)
    #[arg(value_parser = crate::cli::parse_interval_secs)]
    pub duration: Option<u64>,
}

impl ReportArgs {
    /// The report of `tool` with these flags: BCC's `header`, folded (`-f`) or not, the stacks' `style`, and a
    /// flame graph titled `title` in `palette` with values in microseconds (its file created now).
    pub fn report(
        &self,
        tool: &'static str,
        header: String,
        folded: bool,
        style: Style,
        (title, palette): (String, Palette),
    ) -> Result<Report> {
        Ok(Report {
            tool,
            header,
            duration: self.duration,
            verbose: self.verbose.on(),
            form: Form::from_flags(folded, self.json),
            style,
            graph: FlameGraph { title, count_name: "us".into(), palette },
            per_thread: true,
            flamegraph: flamegraph_file(self.flamegraph.as_deref())?,
        })
    }
}

/// A loaded stack tool (offcputime, offwaketime): what [`run`] needs of its skeleton.
pub trait StackSkel {
    /// The `new_pids` ring buffer of `PROCESS_NOTICE_MAPS` (`bpf/include/stacks.bpf.h`) with its `lost_notices`.
    fn notices(&self) -> Result<EventStream<'_>>;
    /// Every total, with its raw stacks.
    fn read_samples(&self, collected: Collected) -> Result<Vec<Sample<u64>>>;
    /// The `.bss` counters `lost_blocks`, `lost_starts`, `missed_switch_ins` and `recovered_switch_ins`.
    fn lost(&self) -> Option<[&u64; 4]>;
    /// The loaded object (for the self metrics of `--prometheus`).
    fn bpf_object(&self) -> &libbpf_rs::Object;
}

/// Every nonzero total of a `totals` map (keys `K`, microseconds) as a sample: `sample` makes the task, and the
/// waker if any, of a key with its stacks read from `stackmap` through `traces`.
pub fn read_totals<K, M>(
    totals: &impl MapCore,
    stackmap: &M,
    collected: Collected,
    mut sample: impl FnMut(&mut StackTraces<'_, M>, &K) -> (Task<u64>, Option<Task<u64>>),
) -> Result<Vec<Sample<u64>>>
where
    K: plain::Plain + Default,
    M: MapCore,
{
    let mut traces = StackTraces::new(stackmap, collected);
    let mut samples = Vec::new();
    for (key, total) in crate::attach::maps::hash_entries::<K, u64>(totals)? {
        if total > 0 {
            let (task, waker) = sample(&mut traces, &key);
            samples.push(Sample { task, waker, value: total });
        }
    }
    Ok(samples)
}

/// The [`StackSkel`] methods every stack tool's skeleton has alike (`new_pids`, `lost`), inside its
/// `impl StackSkel for BpfSkel<'_>`: `common::stack_skel_maps!();`.
#[macro_export]
macro_rules! stack_skel_maps {
    () => {
        fn notices(&self) -> anyhow::Result<$crate::attach::events::EventStream<'_>> {
            let bss = self.maps.bss_data.as_deref().ok_or_else(|| anyhow::anyhow!("BPF object has no .bss"))?;
            Ok($crate::process::symbols::process_notices(&self.maps.new_pids, &bss.lost_notices))
        }

        fn lost(&self) -> Option<[&u64; 4]> {
            self.maps
                .bss_data
                .as_ref()
                .map(|bss| [&bss.lost_blocks, &bss.lost_starts, &bss.missed_switch_ins, &bss.recovered_switch_ins])
        }

        fn bpf_object(&self) -> &libbpf_rs::Object {
            libbpf_rs::skel::Skel::object(self)
        }
    };
}

/// `--prometheus` for a stack tool: loads and attaches as [`run`] does, then serves until a stop signal the
/// metrics `write` reads from the skeleton (its stacks named once each through the [`StackNames`] it is given, the
/// tracing machinery's kernel frames dropped), with the `.bss` counters of [`StackSkel::lost`] as self metrics.
pub fn serve<S: StackSkel>(
    signals: &Signals,
    mut endpoint: Endpoint,
    collected: Collected,
    attach: &[Attach],
    verbose: bool,
    mut load: impl FnMut(Attach, &KernelBtf) -> Result<(S, Vec<Link>)>,
    mut write: impl FnMut(&mut Snapshot, &mut StackNames, &S) -> Result<()>,
) -> Result<()> {
    let btf = KernelBtf::load()?;
    let ((skel, _links), mech) = load_first_working(attach, verbose, |mech| load(mech, &btf))?;
    endpoint.attached(mech, skel.bpf_object());
    let mut names = StackNames::new(collected, true);
    endpoint.serve(signals, |s| {
        if let Some([blocks, starts, missed, _recovered]) = skel.lost() {
            s.map_full("totals", blocks);
            s.map_full("starts", starts);
            s.lost_events("switch-ins", missed);
        }
        write(s, &mut names, &skel)
    })
}

/// The run of a stack tool: loading and attaching over the `attach` ladder with `load` (given the mechanism and
/// the kernel's BTF), BCC's header, tracing until a stop signal or the duration while saving the memory maps of
/// the processes seen ([`collect`]), detaching, the [`report`] of the `collected` stacks, and what was lost.
pub fn run<S: StackSkel>(
    signals: &Signals,
    report: Report,
    collected: Collected,
    attach: &[Attach],
    mut load: impl FnMut(Attach, &KernelBtf) -> Result<(S, Vec<Link>)>,
) -> Result<()> {
    let btf = KernelBtf::load()?;
    let ((skel, links), _) = load_first_working(attach, report.verbose, |mech| load(mech, &btf))?;
    let mut out = Output::new();
    header(&mut out, report.form, &report.header, report.duration)?;
    let mut symbolizer = Symbolizer::new();
    let json = report.form == Form::Json;
    let lost_notices = collect(signals, &skel.notices()?, report.duration, &mut symbolizer)?;
    drop(links); // stop tracing before reading, so the snapshot is consistent
    let tool = report.tool;
    self::report(&mut out, skel.read_samples(collected)?, &mut symbolizer, report)?;
    if let Some([blocks, starts, missed, recovered]) = skel.lost() {
        warn_lost(blocks, starts);
        if let Some(line) = untraced_switch_ins(tool, *missed, *recovered) {
            eprintln!("{line}");
        }
    }
    lost_notices.report(&mut out, json)?;
    Ok(())
}

/// The line said (always) when sched_switch did not report some switch-ins, which end the blocks (issue 31 item 6:
/// on one host the kernel never emitted it when a thread of its supervisor, PID 1, was switched out, so the thread
/// switched in after one went unseen by every tracer). The BPF side found each such block when its thread next
/// went off CPU, with its stamp still there: `recovered` of them it could still time, from the scheduler's
/// run-time accounting, and `missed` not (a thread outside the fair class), which are missing from the totals.
pub fn untraced_switch_ins(tool: &str, missed: u64, recovered: u64) -> Option<String> {
    match (missed, recovered) {
        (0, 0) => None,
        (0, r) => Some(format!(
            "{tool}: {r} switch-ins were not reported by sched_switch: their blocks were timed from the scheduler's \
             run-time accounting"
        )),
        (m, _) => Some(format!(
            "{tool}: missed {m} switch-ins (not reported by sched_switch, threads outside the fair class): their \
             blocks are not counted ({recovered} more were timed from the scheduler's run-time accounting)"
        )),
    }
}

/// Names the stacks of `samples` (dropping the tracing machinery's frames), draws the flame graph if asked (see
/// [`write_flamegraph`]), writes the stacks in the report's form, and warns about stacks that could not be shown.
pub fn report(out: &mut Output, samples: Vec<Sample<u64>>, symbolizer: &mut Symbolizer, report: Report) -> Result<()> {
    if report.form == Form::Multiline {
        writeln!(out)?;
    }
    let named = stacks::drop_tracing_frames(stacks::symbolize(samples, symbolizer, report.verbose));
    let missing = stacks::missing(&named);
    write_flamegraph(&named, &report)?;
    match report.form {
        Form::Json => stacks::write_json(out, &named, "total_us", report.per_thread)?,
        Form::Folded => stacks::write_folded(out, &named, report.style)?,
        Form::Multiline => stacks::write_multiline(out, &named, report.style)?,
    }
    missing.warn();
    Ok(())
}

/// `--flamegraph FILE`: the SVG of `named` (without offsets), or, when nothing was traced, no file and a line
/// saying so.
pub fn write_flamegraph(named: &[Sample<Frame>], report: &Report) -> Result<()> {
    match &report.flamegraph {
        Some((_, path)) if named.is_empty() => {
            let _ = std::fs::remove_file(path);
            eprintln!("{}: no off-CPU time traced, so no flame graph written to {}", report.tool, path.display());
        }
        Some((file, path)) => {
            let style = Style { offsets: false, ..report.style };
            let file = file.try_clone().context("the flame graph's file")?;
            stacks::write_flamegraph(file, named, style, &report.graph)
                .with_context(|| format!("writing the flame graph to {}", path.display()))?
        }
        None => {}
    }
    Ok(())
}

/// Reports the `lost_*` counters of `offcpu.bpf.h`: blocks not counted because a map was full.
pub fn warn_lost(lost_blocks: &u64, lost_starts: &u64) {
    DropCounter::new("blocks", "the totals map was full").check(lost_blocks);
    DropCounter::new("blocks", "too many threads off CPU at once for the start map").check(lost_starts);
}

#[cfg(test)]
mod tests {
    use super::untraced_switch_ins;

    #[test]
    fn untraced_switch_ins_are_said_only_when_there_were_some() {
        assert_eq!(untraced_switch_ins("offcputime", 0, 0), None);
        let timed = untraced_switch_ins("offcputime", 0, 2).unwrap();
        assert!(timed.starts_with("offcputime: 2 switch-ins were not reported"), "{timed}");
        let lost = untraced_switch_ins("offwaketime", 3, 1).unwrap();
        assert!(lost.starts_with("offwaketime: missed 3 switch-ins (not reported by sched_switch"), "{lost}");
        assert!(lost.contains("(1 more were timed"), "{lost}");
    }
}
