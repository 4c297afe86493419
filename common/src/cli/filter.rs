// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The task filter: which process or thread a tool traces, from the command line to the kernel.
//!
//! A tool flattens the argument groups it has, as BCC's tool of its name has them: [`PidArg`] (`-p PID`),
//! [`RequiredPidArg`], [`TidArg`] (`-t TID`), or [`TargetPid`] (a positional PID, the runtime tools'). Each
//! gives its part of one [`TaskFilter`], which checks itself ([`TaskFilter::check`]: the process exists, and
//! the tool sees the host's PIDs) and writes itself into the BPF object ([`TaskFilter::apply`], or
//! [`open_filtered`] as the skeleton is opened): the settings of `bpf/include/filter.bpf.h` (`target_tgid`,
//! `target_tid`), found by name in the object's `.rodata` before it is loaded. They are read-only settings, so a
//! filter left off is a constant the verifier prunes: it costs nothing per event. What `-p` means is decided
//! here, once for every tool.

use anyhow::{bail, Result};
use clap::Args;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;

use super::{parse_pid, require_process, require_thread};
use crate::attach::loader::{open_skeleton, set_rodata};

/// `-p PID`: only this process.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct PidArg {
    /// Only this process (PID)
    #[arg(short = 'p', long, value_name = "PID", value_parser = parse_pid)]
    pub pid: Option<u32>,
}

/// `-p PID`, required: the process a tool reads (javagc).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct RequiredPidArg {
    /// The process to trace (PID)
    #[arg(short = 'p', long, value_name = "PID", value_parser = parse_pid, required = true)]
    pub pid: Option<u32>,
}

/// `-t TID`: only this thread.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct TidArg {
    /// Only this thread (TID)
    #[arg(short = 't', long, value_name = "TID", value_parser = parse_pid)]
    pub tid: Option<u32>,
}

/// A required positional PID: the process a runtime tool (ucalls, uflow, ugc, ...) reads.
#[derive(Debug, Clone, Copy, Args)]
pub struct TargetPid {
    /// The process to trace (PID)
    #[arg(value_name = "PID", value_parser = parse_pid)]
    pub pid: u32,
}

/// The tasks a tool traces. `None` is no filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskFilter {
    /// A process (thread group ID).
    pub pid: Option<u32>,
    /// A thread.
    pub tid: Option<u32>,
}

impl PidArg {
    /// The filter of `-p` alone.
    pub fn filter(self) -> TaskFilter {
        TaskFilter { pid: self.pid, tid: None }
    }
}

impl TargetPid {
    /// The filter of the positional PID.
    pub fn filter(self) -> TaskFilter {
        TaskFilter { pid: Some(self.pid), tid: None }
    }
}

impl TaskFilter {
    /// With `-t` too.
    pub fn tid(mut self, a: TidArg) -> Self {
        self.tid = a.tid;
        self
    }

    /// A usage error (exit status 2) if both a process and a thread are given, for the tools where `-p` and `-t`
    /// exclude each other.
    pub fn exclusive(self) -> Self {
        if self.pid.is_some() && self.tid.is_some() {
            super::usage_error("the argument '--pid <PID>' cannot be used with '--tid <TID>'");
        }
        self
    }

    /// Fails, with one line, unless every process or thread named exists and this tool sees the host's PIDs
    /// ([`require_process`]). Call it before loading anything.
    pub fn check(&self) -> Result<()> {
        self.pid.map(require_process).transpose()?;
        self.tid.map(require_thread).transpose()?;
        Ok(())
    }

    /// Writes the filter into the BPF object's `.rodata` (filter.bpf.h's settings) before it is loaded. A filter
    /// that is set but has no setting in the object is an error: the tool's BPF side would not apply it.
    pub fn apply(&self, object: &mut OpenObject) -> Result<()> {
        for (name, value) in [("target_tgid", self.pid), ("target_tid", self.tid)] {
            if !set_rodata(object, name, &value.unwrap_or(0).to_ne_bytes()) && value.is_some() {
                bail!("the BPF object has no {name} setting (filter.bpf.h)");
            }
        }
        Ok(())
    }
}

/// Opens a tool's skeleton with its task filter already written in ([`TaskFilter::apply`]): the `-p` and `-t`
/// of the command line, as the tool's BPF side reads them through filter.bpf.h.
pub fn open_filtered<B>(filter: TaskFilter) -> Result<B::Output>
where
    B: SkelBuilder<'static> + Default,
    B::Output: OpenSkel<'static>,
{
    let mut open = open_skeleton::<B>()?;
    filter.apply(open.open_object_mut())?;
    Ok(open)
}

/// `-p` and `-t` given as lists (profile, offcputime, offwaketime): the `ID_SETS_FILTER` of
/// `bpf/include/filter.bpf.h`, a hash set of PIDs and one of TIDs with a `.rodata` flag each, found in the object
/// by name. [`IdSets::prepare`] sets the flags and sizes the sets to the lists before load; [`IdSets::fill`] puts
/// the IDs in after load, before attaching. A list not given leaves its flag off: no lookup per event.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdSets<'a> {
    pub pids: Option<&'a [u32]>,
    pub tids: Option<&'a [u32]>,
}

impl IdSets<'_> {
    fn sets(&self) -> [(&'static str, &'static str, Option<&[u32]>); 2] {
        [("pids", "filter_by_pid", self.pids), ("tids", "filter_by_tid", self.tids)]
    }

    /// Before load: each set's flag, and its size (one slot when off).
    pub fn prepare(&self, object: &mut OpenObject) -> Result<()> {
        use anyhow::Context;
        for (map, flag, ids) in self.sets() {
            if !crate::attach::loader::set_rodata_flag(object, flag, ids.is_some()) {
                bail!("the BPF object has no {flag} (ID_SETS_FILTER)");
            }
            let mut set = object.maps_mut().find(|m| m.name() == map).with_context(|| format!("no map {map}"))?;
            set.set_max_entries(ids.map_or(1, |ids| ids.len().max(1) as u32))?;
        }
        Ok(())
    }

    /// After load: the IDs into their sets.
    pub fn fill(&self, object: &libbpf_rs::Object) -> Result<()> {
        use anyhow::Context;
        use libbpf_rs::{MapCore, MapFlags};
        for (map, _, ids) in self.sets() {
            let set = object.maps().find(|m| m.name() == map).with_context(|| format!("no map {map}"))?;
            for id in ids.into_iter().flatten() {
                set.update(&id.to_ne_bytes(), &[1], MapFlags::ANY).context("setting the PID filter")?;
            }
        }
        Ok(())
    }
}
