// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The scheduler side of the off-CPU tools (offcputime, offwaketime, wakeuptime), the user-space half of
//! `bpf/include/offcpu.bpf.h`.
//!
//! Every one of them stamps a thread when `sched_switch` takes it off a CPU, if it passes the filters of the flags
//! (`-p`, `-t`, `-u`, `-k`: [`ThreadArgs`]; `-m`, `-M`: [`BlockTimeArgs`]; with `--state`, a [`BlockFilters`]).
//! [`BlockFilters`] checks them ([`usage_error`], [`require_processes`]); before load,
//! [`prepare_offcpu_skeleton!`](crate::prepare_offcpu_skeleton) (a macro: each skeleton has its own types) writes
//! them into the skeleton's `.rodata`, sizes its `pids`/`tids` maps and picks the `sched_switch` program; before
//! attaching, [`fill_maps`] fills those maps. [`has_prev_state_arg`] decides `sched_switch`'s prototype from BTF,
//! [`wakeup_tracepoint`] which wakeup tracepoint to trace (the tools attach what was loaded with
//! `attach_loaded_tracepoint`). [`StackArgs`] are the stack flags of offcputime and
//! offwaketime (`-U`, `-K`, `-d`, `-f`).
//!
//! [`usage_error`]: BlockFilters::usage_error
//! [`require_processes`]: BlockFilters::require_processes
//! [`fill_maps`]: BlockFilters::fill_maps

use anyhow::{bail, Result};

use crate::attach::features::KernelBtf;

/// `-p`, `-t`, `-u` and `-k`, as BCC's offcputime words them (`#[command(flatten)]` in a tool's arguments;
/// `#[command(mut_arg("pids", ...))]` rewords one for another tool).
#[derive(Debug, Clone, clap::Args)]
pub struct ThreadArgs {
    /// Only threads of these processes: PIDs separated by commas
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',', value_parser = crate::cli::parse_pid,
          group = "threads")]
    pub pids: Option<Vec<u32>>,
    /// Only these threads: TIDs separated by commas
    #[arg(short = 't', long = "tid", value_name = "TID", value_delimiter = ',', value_parser = crate::cli::parse_pid,
          group = "threads")]
    pub tids: Option<Vec<u32>>,
    /// Leave out kernel threads
    #[arg(short = 'u', long = "user-threads-only", group = "threads")]
    pub user_threads_only: bool,
    /// Only kernel threads
    #[arg(short = 'k', long = "kernel-threads-only", group = "threads")]
    pub kernel_threads_only: bool,
}

impl ThreadArgs {
    /// These threads, in the given `--state`.
    pub fn filters(&self, state: Option<u32>) -> ThreadFilters {
        ThreadFilters {
            pids: self.pids.clone(),
            tids: self.tids.clone(),
            user_threads_only: self.user_threads_only,
            kernel_threads_only: self.kernel_threads_only,
            state,
        }
    }

    /// BCC's phrase for them in offcputime's header: `PIDs 185,175`, `user threads`, `all threads`.
    pub fn phrase(&self) -> String {
        let list = |ids: &[u32]| ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        match (&self.pids, &self.tids) {
            (Some(pids), _) => format!("PIDs {}", list(pids)),
            (None, Some(tids)) => format!("TIDs {}", list(tids)),
            _ if self.user_threads_only => "user threads".into(),
            _ if self.kernel_threads_only => "kernel threads".into(),
            _ => "all threads".into(),
        }
    }
}

/// `-U`, `-K`, `-d` and `-f`, as BCC's offcputime and offwaketime word them.
#[derive(Debug, Clone, clap::Args)]
pub struct StackArgs {
    /// Record only the user-space part of each stack
    #[arg(short = 'U', long = "user-stacks-only", conflicts_with = "kernel_stacks_only")]
    pub user_stacks_only: bool,
    /// Record only the kernel part of each stack
    #[arg(short = 'K', long = "kernel-stacks-only")]
    pub kernel_stacks_only: bool,
    /// Mark where the kernel part of a stack ends and the user part begins ("-" folded, "--" otherwise)
    #[arg(short = 'd', long)]
    pub delimited: bool,
    /// Print one line per stack, frames joined by ";" and the time last (the input of flame graph tools)
    #[arg(short = 'f', long)]
    pub folded: bool,
}

impl StackArgs {
    /// The stacks collected.
    pub fn collected(&self) -> crate::stacks::Collected {
        crate::stacks::Collected { user: !self.kernel_stacks_only, kernel: !self.user_stacks_only }
    }

    /// BCC's phrase for them in the header: `user + kernel`, `user`, `kernel`.
    pub fn phrase(&self) -> &'static str {
        if self.user_stacks_only {
            "user"
        } else if self.kernel_stacks_only {
            "kernel"
        } else {
            "user + kernel"
        }
    }

    /// The style of the stacks: `-d` where both kinds are shown.
    pub fn style(&self) -> crate::stacks::Style {
        let collected = self.collected();
        crate::stacks::Style { delimited: self.delimited && collected.user && collected.kernel, ..Default::default() }
    }
}

/// `--stack-storage-size N`: a map size, from 1 to `u32::MAX`.
pub fn parse_stack_storage_size(s: &str) -> Result<u32, String> {
    let n = crate::cli::parse_positive_u64(s)?;
    u32::try_from(n).map_err(|_| format!("{n} is too large"))
}

/// `-m` and `-M`, as BCC's off-CPU tools word them (`#[command(flatten)]` in a tool's arguments).
#[derive(Debug, Clone, clap::Args)]
pub struct BlockTimeArgs {
    /// Leave out blocks shorter than this many microseconds (default 1)
    #[arg(short = 'm', long, value_name = "MIN_BLOCK_TIME", default_value_t = 1,
          value_parser = crate::cli::parse_positive_u64, hide_default_value = true)]
    pub min_block_time: u64,
    /// Leave out blocks longer than this many microseconds (default: no limit)
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
    /// (`-k`).
    pub fn usage_error(&self, user_stacks_only: bool) -> Option<String> {
        if let Some(max) = self.max_block_us.filter(|&max| max < self.min_block_us) {
            return Some(format!("-M {max} is below -m {} (see --help)", self.min_block_us));
        }
        (self.threads.kernel_threads_only && user_stacks_only)
            .then(|| "displaying user stacks for kernel threads doesn't make sense (see --help)".to_string())
    }

    /// [`usage_error`](Self::usage_error) said on stderr after the tool's name, as exit status 2.
    pub fn check_usage(&self, user_stacks_only: bool) -> Result<(), std::process::ExitCode> {
        match self.usage_error(user_stacks_only) {
            Some(error) => {
                eprintln!("{}: {error}", crate::identity::invoked_name());
                Err(std::process::ExitCode::from(2))
            }
            None => Ok(()),
        }
    }

    /// Fails if a `-p` or `-t` id is not a live process or thread.
    pub fn require_processes(&self) -> Result<()> {
        self.threads.pids.iter().chain(&self.threads.tids).flatten().try_for_each(|&id| crate::cli::require_process(id))
    }

    /// The `-p` and `-t` lists as the BPF side's ID sets.
    pub fn id_sets(&self) -> crate::cli::filter::IdSets<'_> {
        crate::cli::filter::IdSets { pids: self.threads.pids.as_deref(), tids: self.threads.tids.as_deref() }
    }

    /// Puts the lists in the `pids` and `tids` sets (after load, before attaching).
    pub fn fill_maps(&self, object: &libbpf_rs::Object) -> Result<()> {
        self.id_sets().fill(object)
    }
}

/// Prepares an open skeleton of `offcpu.bpf.h` before load: the [`BlockFilters`] into its `.rodata` (with
/// `sched_switch`'s prototype from `btf`), its `pids`/`tids` sets sized to them, and the programs of attach
/// mechanism `mech` to load, by section ([`autoload_by_section`](crate::attach::loader::autoload_by_section)): `common::prepare_offcpu_skeleton!(open, &filters, &btf, mech);` in a function
/// returning `anyhow::Result` (a macro because each skeleton has its own types).
#[macro_export]
macro_rules! prepare_offcpu_skeleton {
    ($open:expr, $filters:expr, $btf:expr, $mech:expr) => {{
        let open = &mut $open;
        let filters: &$crate::offcpu::sched::BlockFilters = $filters;
        let ro = $crate::attach::loader::rodata(&mut open.maps.rodata_data)?;
        ro.user_threads_only = filters.threads.user_threads_only;
        ro.kernel_threads_only = filters.threads.kernel_threads_only;
        ro.filter_state = filters.threads.state.is_some();
        ro.state = filters.threads.state.unwrap_or(0);
        ro.min_block_us = filters.min_block_us;
        ro.max_block_us = filters.max_block_us.unwrap_or(u64::MAX);
        ro.has_prev_state_arg = $crate::offcpu::sched::has_prev_state_arg($btf)?;
        filters.id_sets().prepare(::libbpf_rs::skel::OpenSkel::open_object_mut(open))?;
        $crate::attach::loader::autoload_by_section(::libbpf_rs::skel::OpenSkel::open_object_mut(open), $mech);
    }};
}

/// [`prepare_offcpu_skeleton!`](crate::prepare_offcpu_skeleton) for a stack tool (offcputime, offwaketime),
/// with its [`StackArgs`] (`-U`, `-K`) into `.rodata` and its `stackmap` sized to `--stack-storage-size`.
#[macro_export]
macro_rules! prepare_stack_skeleton {
    ($open:expr, $filters:expr, $btf:expr, $mech:expr, $stacks:expr, $stack_storage_size:expr) => {{
        let open = &mut $open;
        $crate::prepare_offcpu_skeleton!(*open, $filters, $btf, $mech);
        let stacks: &$crate::offcpu::sched::StackArgs = $stacks;
        let ro = $crate::attach::loader::rodata(&mut open.maps.rodata_data)?;
        (ro.user_stacks_only, ro.kernel_stacks_only) = (stacks.user_stacks_only, stacks.kernel_stacks_only);
        open.maps.stackmap.set_max_entries($stack_storage_size)?;
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
