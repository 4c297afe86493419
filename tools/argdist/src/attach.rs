// SPDX-License-Identifier: Apache-2.0 OR MIT
//! One object per spec: its rodata filled from the spec's plan (common::probe), loaded, and attached to a
//! tracepoint (classic, through tracefs: fields are read at the format file's offsets), a user function
//! (uprobe or uretprobe, with a uprobe at entry for `$latency`) or a kernel function (fentry or fexit where the
//! kernel loads them, else kprobe or kretprobe: the first of the ladder `crate::TOOL.attach` that works).

use anyhow::{Context, Result};
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{open_skeleton, rodata};
use common::probe::attach::{attach as probe_attach, load_first, select_programs, Site};
use common::probe::plan::Plan;
use common::probe::spec::Spec;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::Link;

use crate::bpf::consts::*;
use crate::bpf::{BpfSkel, BpfSkelBuilder};

/// What the object is asked to keep.
pub struct Options {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub string_size: u32,
    pub hist: bool,
    /// -v: say which mechanisms the kernel refused.
    pub verbose: bool,
}

/// A loaded, attached spec.
pub struct Attached {
    pub skel: BpfSkel<'static>,
    _links: Links,
    /// How it attached (for -v).
    pub how: Attach,
}

/// Bytes of a count key: the integers, then as many strings as the spec keeps.
pub fn key_size(strings: usize) -> usize {
    8 * MAX_KEYS + STR_MAX * strings
}

/// Loads and attaches the object of one spec, with the first mechanism the kernel accepts.
pub fn attach(spec: &Spec, plan: &Plan, site: &Site, options: &Options) -> Result<Attached> {
    let ((skel, links), how) =
        load_first(crate::TOOL.attach, site, options.verbose, |how| load(spec, plan, site, options, how))?;
    Ok(Attached { skel, _links: links.into(), how })
}

fn load(
    spec: &Spec,
    plan: &Plan,
    site: &Site,
    options: &Options,
    how: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let strings = plan.exprs.iter().filter(|e| e.ctype.string).count();
    {
        let ro = rodata(&mut open.maps.rodata_data)?;
        common::probe_rodata!(&mut *ro, plan, site, options.pid, options.tid);
        ro.mode = if options.hist { MODE_HIST } else { MODE_COUNT } as u32;
        ro.n_keys = plan.exprs.len() as u32;
        ro.str_size = options.string_size;
        let mut next_str = 0u8;
        for (slot, e) in ro.keys.iter_mut().zip(&plan.exprs) {
            slot.fetch = e.string_fetch.map_or(NONE as u8, |f| f as u8);
            slot.str = if e.ctype.string {
                next_str += 1;
                next_str - 1
            } else {
                NONE as u8
            };
        }
    }
    open.maps.counts.set_key_size(key_size(strings) as u32)?;
    if options.hist {
        open.maps.counts.set_max_entries(1)?;
    }
    let latency = plan.needs_entry();
    select_programs(open.open_object_mut(), site, spec.probe, latency, how)?;
    let skel = open.load().context("loading the BPF program")?;
    let links = probe_attach(skel.object(), site, spec, latency, options.pid, how)?;
    Ok((skel, links))
}
