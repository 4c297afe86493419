// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funclatency's BPF object as the function-target family loads it (`common::functions::attach`): an entry and a
//! return program per mechanism, the options of the command line, and reading its histograms.
//!
//! fentry/fexit loads one object per function (up to MAX_FENTRY_FUNCS), told the function's index (`func_index`),
//! all counting into the first one's maps; the other mechanisms pass the index as the BPF cookie of the return
//! probe's link, with -F only (kernels before 5.15 refuse any cookie but 0).

use anyhow::{Context, Result};
use common::attach::features::Attach;
use common::attach::loader::{open_skeleton, rodata};
use common::attach::maps::from_bytes;
use common::functions::attach::{Attached, Cookies, Load, Objects, Programs};
use common::functions::targets::Kind;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::consts::MAX_FENTRY_FUNCS;
use crate::bpf::types::hist;
use crate::bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a plain C struct of integers, generated from funclatency.h.
unsafe impl plain::Plain for hist {}

/// What the BPF side filters and how it buckets.
pub struct Options {
    pub pid: Option<u32>,
    /// -l: nesting levels kept apart (0: BCC's default, the innermost call).
    pub level: u32,
    pub per_function: bool,
    pub ns_per_unit: u64,
    /// Histograms kept: one, or one per function with -F.
    pub histograms: u32,
}

impl Options {
    /// The cookies of the links: the function's index with -F, else none.
    pub fn cookies(&self) -> Cookies {
        if self.per_function {
            Cookies::Index
        } else {
            Cookies::Zero
        }
    }
}

impl Objects for Options {
    type Skel = BpfSkel<'static>;

    fn programs(&self, mech: Attach, kind: &Kind) -> Option<Programs> {
        let (entry, ret) = match (mech, kind) {
            (Attach::Fentry, Kind::Kernel) => ("fl_fentry", "fl_fexit"),
            (Attach::KprobeMulti, Kind::Kernel) => ("fl_kprobe_multi", "fl_kretprobe_multi"),
            (Attach::Kprobe, Kind::Kernel) => ("fl_kprobe", "fl_kretprobe"),
            (Attach::UprobeMulti, Kind::User { .. }) => ("fl_uprobe_multi", "fl_uretprobe_multi"),
            (Attach::Uprobe, Kind::User { .. }) => ("fl_uprobe", "fl_uretprobe"),
            _ => return None,
        };
        Some(Programs::timed(entry, ret))
    }

    fn load(&self, load: Load<'_, Self::Skel>) -> Result<Self::Skel> {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.target_tgid = self.pid.unwrap_or(0);
        rodata.max_depth = self.level;
        rodata.per_function = self.per_function;
        rodata.ns_per_unit = self.ns_per_unit;
        rodata.func_index = load.first_index as u32;
        open.maps.hists.set_max_entries(self.histograms)?;
        load.share_maps(&mut open, &["hists", "starts", "depths"])?;
        load.finish(open)
    }

    const FENTRY_LIMIT: Option<usize> = Some(MAX_FENTRY_FUNCS);
}

/// The cumulative histograms: one, or one per function (in match order) with -F.
pub fn histograms(attached: &Attached<BpfSkel<'static>>, options: &Options) -> Result<Vec<hist>> {
    let map = &attached.maps().maps.hists;
    (0..options.histograms)
        .map(|i| {
            let value = map.lookup(&i.to_ne_bytes(), MapFlags::ANY).context("reading the histograms")?;
            Ok(value.map(|v| from_bytes(&v[..])).unwrap_or_default())
        })
        .collect()
}

/// The counters of calls not timed (the start map was full), one per object.
pub fn untimed<'a>(attached: &'a Attached<BpfSkel<'static>>) -> impl Iterator<Item = &'a u64> {
    attached.objects().iter().filter_map(|s| s.maps.bss_data.as_ref()).map(|b| &b.untimed)
}
