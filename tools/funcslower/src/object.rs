// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funcslower's BPF object as the function-target family loads it (`common::functions::attach`): an entry and a
//! return program per mechanism, and the options of the command line.
//!
//! Each pattern of the command line is a target of its own, attached by its own [`Attacher`]
//! (`common::functions::attach`) with its own objects; `func_base` numbers its functions after the previous
//! patterns' so that an event names its function in one list. fentry/fexit loads one object per function (up to
//! MAX_FENTRY_FUNCS), told the function's index and arity, all sending into the first one's maps; the other
//! mechanisms pass the index as the BPF cookie of the entry probe's link where the kernel has cookies.

use anyhow::Result;
use common::attach::features::Attach;
use common::attach::loader::{open_skeleton, rodata};
use common::functions::attach::{Load, Objects, Programs};
use common::functions::targets::{Kind, Target};

use crate::arity::FunctionArity;
use crate::bpf::consts::MAX_FENTRY_FUNCS;
use crate::bpf::{BpfSkel, BpfSkelBuilder};

/// The stack-trace map's entries with -U or -K (BCC's funcslower keeps 2048), else one.
const STACK_ENTRIES: u32 = 2048;

/// What the BPF side filters, keeps and sends, for one pattern.
pub struct Options<'a> {
    pub pid: Option<u32>,
    pub min_ns: u64,
    pub args: u32,
    pub user_stacks: bool,
    pub kernel_stacks: bool,
    /// Report each process at its first traced call (on the events ring buffer), for user frames without -p.
    pub notice_processes: bool,
    /// The number of this pattern's first function in the list of all functions.
    pub func_base: u32,
    /// Entry links carry the match's index as cookie.
    pub cookies: bool,
    pub target: &'a Target,
    /// The kernel's function prototypes, for fentry/fexit (None: fentry is not tried).
    pub arity: Option<&'a FunctionArity>,
}

impl Objects for Options<'_> {
    type Skel = BpfSkel<'static>;

    fn programs(&self, mech: Attach, kind: &Kind) -> Option<Programs> {
        let (entry, ret) = match (mech, kind) {
            (Attach::Fentry, Kind::Kernel) if self.arity.is_some() => ("fs_fentry", "fs_fexit"),
            (Attach::KprobeMulti, Kind::Kernel) => ("fs_kprobe_multi", "fs_kretprobe_multi"),
            (Attach::Kprobe, Kind::Kernel) => ("fs_kprobe", "fs_kretprobe"),
            (Attach::UprobeMulti, Kind::User { .. }) => ("fs_uprobe_multi", "fs_uretprobe_multi"),
            (Attach::Uprobe, Kind::User { .. }) => ("fs_uprobe", "fs_uretprobe"),
            _ => return None,
        };
        Some(Programs::timed(entry, ret))
    }

    fn load(&self, load: Load<'_, Self::Skel>) -> Result<Self::Skel> {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let fentry = load.enables("fs_fentry");
        let nr_args = match (fentry, self.arity, self.target.matches.get(load.first_index)) {
            (true, Some(arity), Some(m)) => {
                let name = m.kernel_name();
                let n = arity.arity(name).ok_or_else(|| anyhow::anyhow!("{name} has no prototype in the BTF"))?;
                anyhow::ensure!(n <= 11, "{name} takes {n} arguments: fexit cannot read its return value");
                n as u32
            }
            _ => 0,
        };
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.target_tgid = self.pid.unwrap_or(0);
        rodata.min_ns = self.min_ns;
        rodata.func_base = self.func_base;
        rodata.func_index = load.first_index as u32;
        rodata.use_cookie = self.cookies;
        rodata.nr_args = nr_args;
        rodata.want_args = self.args;
        rodata.user_stacks = self.user_stacks;
        rodata.kernel_stacks = self.kernel_stacks;
        let stacks = if self.user_stacks || self.kernel_stacks { STACK_ENTRIES } else { 1 };
        open.maps.stackmap.set_max_entries(stacks)?;
        rodata.notice_processes = self.notice_processes;
        if !self.notice_processes {
            open.maps.seen_pids.set_max_entries(1)?;
        }
        load.share_maps(&mut open, &["entries", "events", "stackmap", "seen_pids"])?;
        load.finish(open)
    }

    const FENTRY_LIMIT: Option<usize> = Some(MAX_FENTRY_FUNCS);
}
