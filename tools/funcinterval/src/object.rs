// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funcinterval's BPF object as the function-target family loads it (`common::functions::attach`): one program
//! per mechanism, all recording the gap since the previous hit, the options of the command line, and reading
//! the histogram.
//!
//! fentry loads one object per function (up to MAX_FENTRY_FUNCS), all sharing the first one's `last` and
//! `hists`, so that the gap is measured across every function as with the other mechanisms. No program reads a
//! cookie: the histogram is one for all matches.

use anyhow::{Context, Result};
use common::attach::features::Attach;
use common::attach::loader::{open_skeleton, rodata};
use common::attach::maps::from_bytes;
use common::functions::attach::{Attached, Load, Objects, Programs};
use common::functions::targets::Kind;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::consts::MAX_FENTRY_FUNCS;
use crate::bpf::types::hist;
use crate::bpf::{BpfSkel, BpfSkelBuilder};

// SAFETY: a plain C struct of integers, generated from funcinterval.h.
unsafe impl plain::Plain for hist {}

/// What the BPF side filters and how it buckets.
pub struct Options {
    pub pid: Option<u32>,
    pub ns_per_unit: u64,
}

impl Objects for Options {
    type Skel = BpfSkel<'static>;

    fn programs(&self, mech: Attach, kind: &Kind) -> Option<Programs> {
        let entry = match (mech, kind) {
            (Attach::Fentry, Kind::Kernel) => "fi_fentry",
            (Attach::KprobeMulti, Kind::Kernel) => "fi_kprobe_multi",
            (Attach::Kprobe, Kind::Kernel) => "fi_kprobe",
            (Attach::Tracepoint, Kind::Tracepoint) => "fi_tracepoint",
            (Attach::UprobeMulti, Kind::User { .. }) => "fi_uprobe_multi",
            (Attach::Uprobe, Kind::User { .. }) => "fi_uprobe",
            _ => return None,
        };
        Some(Programs::entry(entry))
    }

    fn load(&self, load: Load<'_, Self::Skel>) -> Result<Self::Skel> {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.target_tgid = self.pid.unwrap_or(0);
        rodata.ns_per_unit = self.ns_per_unit;
        load.share_maps(&mut open, &["last", "hists"])?;
        load.finish(open)
    }

    const FENTRY_LIMIT: Option<usize> = Some(MAX_FENTRY_FUNCS);
}

/// The cumulative histogram of gaps.
pub fn histogram(attached: &Attached<BpfSkel<'static>>) -> Result<hist> {
    let map = &attached.maps().maps.hists;
    let value = map.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).context("reading the histogram")?;
    Ok(value.map(|v| from_bytes(&v[..])).unwrap_or_default())
}
