// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funccount's BPF object as the function-target family loads it (`common::functions::attach`): one counting
//! program per mechanism (the match's index as BPF cookie) with FUNCCOUNT_SLOTS slot copies for fentry and for
//! kernels without cookies, the filters, and the counts.
//!
//! Syscall tracepoints are funccount's own: they share one raw tracepoint on sys_enter and one on sys_exit (the
//! syscall number looked up in a BPF map filled before attaching), so that `t:syscalls:*` attaches and detaches
//! two links, not 700 ([`raw_syscalls`]). That pays only for patterns that match many system calls: the raw
//! tracepoint runs for every system call of every process, a syscall tracepoint link only for its own call (plus
//! a small toll the kernel takes on every call once any is enabled). A direction (enter or exit) is counted
//! through the raw tracepoint when the pattern matches at least half of that direction's calls
//! ([`RAW_SYSCALL_SHARE`]), otherwise with a link per call ([`raw_pays_off`]). `COREBPF_NO_COOKIES=1` uses the slot programs even where cookies work,
//! so that fallback is tested everywhere.

use anyhow::{bail, Context, Result};
use common::attach::features::Attach;
use common::attach::loader::{open_skeleton, rodata};
use common::functions::attach::{program, Attached, Attacher, Enable, Load, Objects, Programs};
use common::functions::targets::{Kind, Site};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::consts::{FUNCCOUNT_SLOTS, SYSCALL_SLOTS};
use crate::bpf::{BpfSkel, BpfSkelBuilder};

/// What the BPF side filters on, and how many matches it counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filters {
    pub pid: Option<u32>,
    pub cpu: Option<u32>,
    pub matches: usize,
}

impl Objects for Filters {
    type Skel = BpfSkel<'static>;

    fn programs(&self, mech: Attach, kind: &Kind) -> Option<Programs> {
        let slotted = |entry| Programs { entry, ret: None, slots: FUNCCOUNT_SLOTS };
        Some(match (mech, kind) {
            (Attach::Fentry, _) => slotted("fc_fentry"),
            (Attach::KprobeMulti, _) => Programs::entry("fc_kprobe_multi"),
            (Attach::Kprobe, _) => slotted("fc_kprobe"),
            (Attach::Tracepoint, _) => slotted("fc_tracepoint"),
            (Attach::UprobeMulti, _) => Programs::entry("fc_uprobe_multi"),
            (Attach::Uprobe, Kind::Usdt { .. }) => Programs::entry("fc_usdt"),
            (Attach::Uprobe, _) => slotted("fc_uprobe"),
            _ => return None,
        })
    }

    /// The filters set, the counts map sized (or shared), and the maps that only other programs use cut to one
    /// entry.
    fn load(&self, load: Load<'_, Self::Skel>) -> Result<Self::Skel> {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.target_tgid = self.pid.unwrap_or(0);
        rodata.filter_cpu = self.cpu.is_some();
        rodata.target_cpu = self.cpu.unwrap_or(0);
        rodata.slot_base = load.first_index as u32;
        open.maps.counts.set_max_entries(self.matches as u32)?;
        load.share_maps(&mut open, &["counts"])?;
        // libbpf's USDT maps (a 1024-entry hash and a 256-entry spec array) and the syscall indexes.
        let enabled = |prog: &str| load.enables(prog);
        let unused: &[&str] = &[
            if enabled("fc_usdt") { "" } else { "__bpf_usdt_specs" },
            if enabled("fc_usdt") { "" } else { "__bpf_usdt_ip_to_spec_id" },
            if enabled("fc_sys_enter") { "" } else { "sys_enter_index" },
            if enabled("fc_sys_exit") { "" } else { "sys_exit_index" },
        ];
        for mut map in open.open_object_mut().maps_mut() {
            if unused.iter().any(|name| !name.is_empty() && map.name() == *name) {
                map.set_max_entries(1).context("shrinking an unused map")?;
            }
        }
        load.finish(open)
    }
}

/// The total count of every match so far, summed over CPUs, in match order.
pub fn totals(attached: &Attached<BpfSkel<'static>>, matches: usize) -> Result<Vec<u64>> {
    let map = &attached.maps().maps.counts;
    (0..matches as u32)
        .map(|i| {
            let per_cpu = map.lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY).context("reading the counts map")?;
            Ok(per_cpu
                .unwrap_or_default()
                .iter()
                .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap_or_default()))
                .sum())
        })
        .collect()
}

/// The share of a direction's system calls a pattern must match for the raw tracepoint to be the cheaper way.
/// Measured with `make bench` (docs/benchmarks.md, "funccount on syscall tracepoints"): on a workload cycling
/// through eight system calls, a link per matched call cost 32 ns on every call plus 166 ns per counted one, the
/// raw tracepoint 75 ns on every call plus 72 ns per counted one; the two meet when about 45% of the calls made are
/// counted. Which calls a workload makes is unknown at attach time, so the rule counts the calls the pattern
/// names: half of the table is a wildcard (`sys_enter_*`, `sys_*`), where the raw path is also far quicker to
/// attach and detach (two links instead of hundreds), and a list of named calls gets a link each.
pub const RAW_SYSCALL_SHARE: f64 = 0.5;

/// Whether counting `matched` of a direction's `table` system calls through the raw tracepoint costs less than a
/// link each ([`RAW_SYSCALL_SHARE`]).
pub fn raw_pays_off(matched: usize, table: usize) -> bool {
    table > 0 && matched as f64 >= RAW_SYSCALL_SHARE * table as f64
}

/// Syscall tracepoints: one raw tracepoint on sys_enter and one on sys_exit, the syscall number mapped to the
/// match's index in BPF; the other matches (tracepoints of other categories, syscalls this table does not know)
/// get a classic tracepoint link each, with the index as cookie, and so do the calls of a direction the pattern
/// matches too few of for the raw tracepoint to pay ([`raw_pays_off`]). Fails (for the classic fallback) when no
/// direction is left for the raw tracepoints or the kernel has no cookies for the rest.
pub fn raw_syscalls(attacher: &Attacher<'_, Filters>) -> Result<Attached<BpfSkel<'static>>> {
    let matches = &attacher.target.matches;
    let mut enter = Vec::new();
    let mut exit = Vec::new();
    let mut rest = Vec::new();
    for (index, m) in matches.iter().enumerate() {
        let syscall = match &m.site {
            Site::Tracepoint { category, event } if category == "syscalls" => event
                .strip_prefix("sys_enter_")
                .map(|name| (&mut enter, name))
                .or_else(|| event.strip_prefix("sys_exit_").map(|name| (&mut exit, name)))
                .and_then(|(list, name)| Some((list, common::domain::syscalls::tracepoint_number(name)?))),
            _ => None,
        };
        match syscall {
            Some((list, nr)) if (nr as usize) < SYSCALL_SLOTS => list.push((nr, index)),
            _ => rest.push(index),
        }
    }
    if enter.is_empty() && exit.is_empty() {
        bail!("no syscall tracepoint to count with raw tracepoints");
    }
    // Unless COREBPF_ATTACH asks for raw tracepoints, a direction with few matches gets a link per call.
    if !common::attach::loader::forced(Attach::RawTp) {
        let table = common::domain::syscalls::all().len();
        for list in [&mut enter, &mut exit] {
            if !raw_pays_off(list.len(), table) {
                rest.extend(list.drain(..).map(|(_, index)| index));
            }
        }
        if enter.is_empty() && exit.is_empty() {
            bail!("a link per syscall tracepoint costs less for {} of them", rest.len());
        }
        rest.sort_unstable();
    }
    if !rest.is_empty() && attacher.cookies != common::functions::attach::Cookies::Index {
        bail!("tracepoints besides syscalls need BPF cookies here");
    }
    let mut enable = Vec::new();
    for (used, prog) in
        [(!enter.is_empty(), "fc_sys_enter"), (!exit.is_empty(), "fc_sys_exit"), (!rest.is_empty(), "fc_tracepoint")]
    {
        if used {
            enable.push(Enable { program: prog.to_string(), fentry: None });
        }
    }
    let skel = attacher.objects.load(Load { enable: &enable, first_index: 0, first: None })?;
    for (list, map) in [(&enter, &skel.maps.sys_enter_index), (&exit, &skel.maps.sys_exit_index)] {
        for &(nr, index) in list.iter() {
            let value = (index as u32 + 1).to_ne_bytes();
            map.update(&nr.to_ne_bytes(), &value, MapFlags::ANY).context("filling the syscall index")?;
        }
    }
    let mut links = Vec::new();
    for (list, prog, name) in [(&enter, "fc_sys_enter", "sys_enter"), (&exit, "fc_sys_exit", "sys_exit")] {
        if !list.is_empty() {
            let link = program(&skel, prog)?.attach_raw_tracepoint(name);
            links.push(link.with_context(|| format!("attaching a raw tracepoint to {name}"))?);
        }
    }
    let mut failed = Vec::new();
    if !rest.is_empty() {
        let prog = program(&skel, "fc_tracepoint")?;
        for index in rest {
            let m = &matches[index];
            match attacher.attach_one(&prog, Attach::Tracepoint, m, false, index as u64) {
                Ok(link) => links.push(link),
                Err(err) => failed.push((m.name.clone(), format!("{:#}", err.root_cause()))),
            }
        }
    }
    Ok(Attached::new(vec![skel], links, failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_tracepoint_pays_from_half_of_the_table() {
        assert!(!raw_pays_off(1, 360));
        assert!(!raw_pays_off(179, 360));
        assert!(raw_pays_off(180, 360));
        assert!(raw_pays_off(360, 360));
        assert!(!raw_pays_off(0, 0));
    }
}
