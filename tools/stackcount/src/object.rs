// SPDX-License-Identifier: Apache-2.0 OR MIT
//! stackcount's BPF object as the function-target family loads it (`common::functions::attach`): one counting
//! program per mechanism, the filters and map sizes of the options, and the maps every object shares.

use anyhow::Result;
use common::attach::features::Attach;
use common::attach::loader::{open_skeleton, rodata};
use common::functions::attach::{Load, Objects, Programs};
use common::functions::targets::Kind;

use crate::bpf::consts::MAX_FENTRY_FUNCS;
use crate::bpf::{BpfSkel, BpfSkelBuilder};

/// What the BPF side filters, collects and how big its maps are.
pub struct Options {
    pub pid: Option<u32>,
    pub cpu: Option<u32>,
    pub user_stacks: bool,
    pub kernel_stacks: bool,
    pub stack_storage_size: u32,
    pub hash_storage_size: u32,
}

impl Objects for Options {
    type Skel = BpfSkel<'static>;

    fn programs(&self, mech: Attach, kind: &Kind) -> Option<Programs> {
        Some(Programs::entry(match (mech, kind) {
            (Attach::Fentry, _) => "sc_fentry",
            (Attach::KprobeMulti, _) => "sc_kprobe_multi",
            (Attach::Kprobe, _) => "sc_kprobe",
            (Attach::Tracepoint, _) => "sc_tracepoint",
            (Attach::UprobeMulti, _) => "sc_uprobe_multi",
            (Attach::Uprobe, Kind::Usdt { .. }) => "sc_usdt",
            (Attach::Uprobe, _) => "sc_uprobe",
            _ => return None,
        }))
    }

    fn load(&self, load: Load<'_, Self::Skel>) -> Result<Self::Skel> {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.target_tgid = self.pid.unwrap_or(0);
        rodata.target_cpu = self.cpu.map_or(-1, |c| c as i32);
        rodata.user_stacks = self.user_stacks;
        rodata.kernel_stacks = self.kernel_stacks;
        open.maps.stackmap.set_max_entries(self.stack_storage_size)?;
        open.maps.counts.set_max_entries(self.hash_storage_size)?;
        load.share_maps(&mut open, &["stackmap", "counts", "seen", "new_pids"])?;
        load.finish(open)
    }

    const FENTRY_LIMIT: Option<usize> = Some(MAX_FENTRY_FUNCS);
}
