//! The scheduler side of the off-CPU tools (offcputime, offwaketime, wakeuptime), the user-space half of
//! `bpf/include/offcpu.bpf.h`.
//!
//! Every one of them stamps a thread when `sched_switch` takes it off a CPU, if it passes the filters of the flags
//! (`-p`, `-t`, `-u`, `-k`, `--state`: [`ThreadFilters`]; `-m`, `-M`: [`BlockTimeArgs`], the flags themselves):
//! [`BlockFilters`] holds them, checks them ([`usage_error`],
//! [`require_processes`]), writes them into the skeleton's `.rodata` ([`set_block_filters!`](crate::set_block_filters),
//! a macro because each skeleton has its own `.rodata` type) and its `pids`/`tids` maps ([`size_maps`] before load,
//! [`fill_maps`] before attaching). [`has_prev_state_arg`] decides `sched_switch`'s prototype from BTF,
//! [`wakeup_tracepoint`] which wakeup tracepoint to trace, and [`attach_programs`] attaches a tool's pair of
//! `_btf`/`_raw` programs with the mechanism chosen.
//!
//! [`usage_error`]: BlockFilters::usage_error
//! [`require_processes`]: BlockFilters::require_processes
//! [`size_maps`]: BlockFilters::size_maps
//! [`fill_maps`]: BlockFilters::fill_maps

use anyhow::{bail, Context, Result};
use libbpf_rs::{Link, MapCore, MapFlags, OpenMapMut, ProgramMut};

use crate::attach::features::{Attach, KernelBtf};

/// `-m` and `-M`, as BCC's off-CPU tools word them (`#[command(flatten)]` in a tool's arguments).
#[derive(Debug, Clone, clap::Args)]
pub struct BlockTimeArgs {
    /// The amount of time in microseconds over which we store traces (default 1)
    #[arg(short = 'm', long, value_name = "MIN_BLOCK_TIME", default_value_t = 1,
          value_parser = crate::cli::parse_positive_u64, hide_default_value = true)]
    pub min_block_time: u64,
    /// The amount of time in microseconds under which we store traces (default U64_MAX)
    #[arg(short = 'M', long, value_name = "MAX_BLOCK_TIME", value_parser = crate::cli::parse_positive_u64)]
    pub max_block_time: Option<u64>,
}

impl BlockTimeArgs {
    /// The filters of these times and the thread flags.
    pub fn filters(&self, threads: ThreadFilters) -> BlockFilters {
        BlockFilters { threads, min_block_us: self.min_block_time, max_block_us: self.max_block_time }
    }
}

/// Which threads to trace.
#[derive(Debug, Clone, Default)]
pub struct ThreadFilters {
    /// `-p`: these processes only.
    pub pids: Option<Vec<u32>>,
    /// `-t`: these threads only.
    pub tids: Option<Vec<u32>>,
    pub user_threads_only: bool,
    pub kernel_threads_only: bool,
    /// `--state`: a thread-state bitmask (0: preempted, still running).
    pub state: Option<u32>,
}

/// What a thread must be, and how long blocked, for its off-CPU time to count.
#[derive(Debug, Clone, Default)]
pub struct BlockFilters {
    pub threads: ThreadFilters,
    /// `-m`, microseconds.
    pub min_block_us: u64,
    /// `-M`, microseconds.
    pub max_block_us: Option<u64>,
}

impl BlockFilters {
    /// The usage error of these flags together, if any: `-M` below `-m`, or user stacks (`-U`) of kernel threads
    /// (`-k`). Said on stderr, after the tool's name.
    pub fn usage_error(&self, user_stacks_only: bool) -> Option<String> {
        if let Some(max) = self.max_block_us.filter(|&max| max < self.min_block_us) {
            return Some(format!("-M {max} is below -m {} (see --help)", self.min_block_us));
        }
        (self.threads.kernel_threads_only && user_stacks_only)
            .then(|| "displaying user stacks for kernel threads doesn't make sense (see --help)".to_string())
    }

    /// Fails if a `-p` or `-t` id is not a live process or thread.
    pub fn require_processes(&self) -> Result<()> {
        self.threads.pids.iter().chain(&self.threads.tids).flatten().try_for_each(|&id| crate::cli::require_process(id))
    }

    /// Sizes the `pids` and `tids` maps to the lists (before load).
    pub fn size_maps(&self, pids: &mut OpenMapMut<'_>, tids: &mut OpenMapMut<'_>) -> Result<()> {
        pids.set_max_entries(self.threads.pids.as_ref().map_or(1, |p| p.len().max(1) as u32))?;
        tids.set_max_entries(self.threads.tids.as_ref().map_or(1, |t| t.len().max(1) as u32))?;
        Ok(())
    }

    /// Puts the lists in the `pids` and `tids` maps (after load, before attaching).
    pub fn fill_maps(&self, pids: &dyn MapCore, tids: &dyn MapCore) -> Result<()> {
        for (map, ids) in [(pids, &self.threads.pids), (tids, &self.threads.tids)] {
            for id in ids.iter().flatten() {
                map.update(&id.to_ne_bytes(), &[1], MapFlags::ANY).context("setting the PID filter")?;
            }
        }
        Ok(())
    }
}

/// Writes a [`BlockFilters`] into a skeleton's `.rodata` (the globals of `offcpu.bpf.h`), with `sched_switch`'s
/// prototype from `btf`: `common::set_block_filters!(ro, filters, &btf);` in a function returning
/// `anyhow::Result`.
#[macro_export]
macro_rules! set_block_filters {
    ($ro:expr, $filters:expr, $btf:expr) => {{
        let ro = $ro;
        let filters: &$crate::attach::sched::BlockFilters = $filters;
        ro.user_threads_only = filters.threads.user_threads_only;
        ro.kernel_threads_only = filters.threads.kernel_threads_only;
        ro.filter_by_pid = filters.threads.pids.is_some();
        ro.filter_by_tid = filters.threads.tids.is_some();
        ro.filter_state = filters.threads.state.is_some();
        ro.state = filters.threads.state.unwrap_or(0);
        ro.min_block_us = filters.min_block_us;
        ro.max_block_us = filters.max_block_us.unwrap_or(u64::MAX);
        ro.has_prev_state_arg = $crate::attach::sched::has_prev_state_arg($btf)?;
    }};
}

/// True if `sched_switch` passes `prev_state` (a 4th argument since 5.18); before, it is read from the task.
pub fn has_prev_state_arg(btf: &KernelBtf) -> Result<bool> {
    match btf.tracepoint_arity("sched_switch") {
        Some(4) => Ok(true),
        Some(3) => Ok(false),
        other => bail!("sched_switch has {other:?} arguments in this kernel's BTF, expected 3 or 4"),
    }
}

/// The wakeup tracepoint to trace: `sched_waking`, which fires in the waker's context (since 4.3), else
/// `sched_wakeup`.
pub fn wakeup_tracepoint(btf: &KernelBtf) -> Result<&'static str> {
    match ["sched_waking", "sched_wakeup"].into_iter().find(|tp| btf.tracepoint_arity(tp) == Some(1)) {
        Some(tp) => Ok(tp),
        None => bail!("this kernel has neither sched_waking nor sched_wakeup(struct task_struct *) in its BTF"),
    }
}

/// Attaches the program of the pair (`_btf`, `_raw`) that `mech` loaded to `sched:<tracepoint>`.
pub fn attach_programs(btf: &ProgramMut<'_>, raw: &ProgramMut<'_>, tracepoint: &str, mech: Attach) -> Result<Link> {
    let prog = if mech == Attach::TpBtf { btf } else { raw };
    crate::attach::loader::attach_tracepoint(prog, "sched", tracepoint, mech)
}
