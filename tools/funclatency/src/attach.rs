//! Loading and attaching funclatency's entry and return programs to every matched function.
//!
//! Kernel functions: fentry/fexit (one small object per function, their maps shared, up to MAX_FENTRY_FUNCS
//! functions), else kprobe_multi with kretprobe_multi (two links for all), else a kprobe and a kretprobe each.
//! User functions: uprobe_multi with uretprobe_multi (two links), else a uprobe and a uretprobe each. The index
//! of a function reaches the return program as the link's BPF cookie (fexit: the object's `func_index`);
//! `COREBPF_ATTACH` restricts the mechanisms, as for every tool.

use std::os::fd::AsFd;

use anyhow::{bail, Context, Result};
use common::attach::features::{Attach, KernelBtf};
use common::attach::links::Links;
use common::attach::loader::{load_first_working, open_skeleton, rodata};
use common::attach::maps::from_bytes;
use common::process::targets::{Kind, Match, Site, Target};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{KprobeMultiOpts, KprobeOpts, MapCore, MapFlags, UprobeMultiOpts, UprobeOpts};

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
}

/// The loaded objects (the first holds the shared maps) and their links.
pub struct Attached {
    skels: Vec<BpfSkel<'static>>,
    _links: Links,
    histograms: u32,
}

impl Attached {
    /// The cumulative histograms: one, or one per function (in match order) with -F.
    pub fn histograms(&self) -> Result<Vec<hist>> {
        let map = &self.skels[0].maps.hists;
        (0..self.histograms)
            .map(|i| {
                let value = map.lookup(&i.to_ne_bytes(), MapFlags::ANY).context("reading the histograms")?;
                Ok(value.map(|v| from_bytes(&v[..])).unwrap_or_default())
            })
            .collect()
    }

    /// The counters of calls not timed (the start map was full), one per object.
    pub fn untimed(&self) -> impl Iterator<Item = &u64> {
        self.skels.iter().filter_map(|s| s.maps.bss_data.as_ref()).map(|b| &b.untimed)
    }
}

/// The mechanisms for the target, cheapest first.
fn mechanisms(target: &Target) -> Result<Vec<Attach>> {
    Ok(match target.kind {
        Kind::Kernel if target.matches.len() <= MAX_FENTRY_FUNCS => {
            vec![Attach::Fentry, Attach::KprobeMulti, Attach::Kprobe]
        }
        Kind::Kernel => vec![Attach::KprobeMulti, Attach::Kprobe],
        Kind::User { .. } => vec![Attach::UprobeMulti, Attach::Uprobe],
        _ => bail!("funclatency times functions only"),
    })
}

/// Attaches to every match with the first mechanism the kernel accepts.
pub fn attach(target: &Target, options: &Options, btf: &KernelBtf, verbose: bool) -> Result<Attached> {
    let _ = btf;
    let histograms = if options.per_function { target.matches.len() as u32 } else { 1 };
    let plan = Plan { target, options, histograms };
    let (attached, _mech) = load_first_working(&mechanisms(target)?, verbose, |mech| plan.attach(mech))?;
    Ok(attached)
}

struct Plan<'a> {
    target: &'a Target,
    options: &'a Options,
    histograms: u32,
}

impl Plan<'_> {
    fn attach(&self, mech: Attach) -> Result<Attached> {
        match mech {
            Attach::Fentry => self.fentry(),
            Attach::KprobeMulti => self.kprobe_multi(),
            Attach::Kprobe => self.one_each(mech),
            Attach::UprobeMulti => self.uprobe_multi(),
            Attach::Uprobe => self.one_each(mech),
            other => bail!("{other} is not a funclatency mechanism"),
        }
    }

    /// Opens an object with only the programs `enabled`, sets its options (`func_index` for fexit), shares
    /// the first object's maps, and loads it. `fentry` names the kernel function of an fentry/fexit pair.
    fn load(
        &self,
        enabled: [&str; 2],
        func_index: u32,
        fentry: Option<&str>,
        first: Option<&BpfSkel<'static>>,
    ) -> Result<BpfSkel<'static>> {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.target_tgid = self.options.pid.unwrap_or(0);
        rodata.max_depth = self.options.level;
        rodata.per_function = self.options.per_function;
        rodata.ns_per_unit = self.options.ns_per_unit;
        rodata.func_index = func_index;
        open.maps.hists.set_max_entries(self.histograms)?;
        if let Some(first) = first {
            open.maps.hists.reuse_fd(first.maps.hists.as_fd())?;
            open.maps.starts.reuse_fd(first.maps.starts.as_fd())?;
            open.maps.depths.reuse_fd(first.maps.depths.as_fd())?;
        }
        for mut prog in open.open_object_mut().progs_mut() {
            let wanted = prog.name().to_str().is_some_and(|n| enabled.contains(&n));
            prog.set_autoload(wanted);
        }
        if let Some(func) = fentry {
            open.progs.fl_fentry.set_attach_target(0, Some(func.to_owned()))?;
            open.progs.fl_fexit.set_attach_target(0, Some(func.to_owned()))?;
        }
        open.load().context("loading the BPF programs")
    }

    /// fentry/fexit: an object per function, all counting into the first one's maps.
    fn fentry(&self) -> Result<Attached> {
        let mut skels: Vec<BpfSkel<'static>> = Vec::new();
        let mut links = Vec::new();
        for (i, m) in self.target.matches.iter().enumerate() {
            let skel = self.load(["fl_fentry", "fl_fexit"], i as u32, Some(kernel_name(m)), skels.first())?;
            links.push(skel.progs.fl_fentry.attach().with_context(|| format!("attaching fentry to {}", m.name))?);
            links.push(skel.progs.fl_fexit.attach().with_context(|| format!("attaching fexit to {}", m.name))?);
            skels.push(skel);
        }
        Ok(Attached { skels, _links: links.into(), histograms: self.histograms })
    }

    /// The function indexes as BPF cookies, with -F; without it, none (all 0: read by nobody).
    fn cookies(&self) -> Vec<u64> {
        let n = self.target.matches.len() as u64;
        if self.options.per_function {
            (0..n).collect()
        } else {
            vec![0; n as usize]
        }
    }

    fn kprobe_multi(&self) -> Result<Attached> {
        let skel = self.load(["fl_kprobe_multi", "fl_kretprobe_multi"], 0, None, None)?;
        let symbols: Vec<String> = self.target.matches.iter().map(|m| kernel_name(m).to_owned()).collect();
        let mut links = Vec::new();
        for (prog, retprobe) in [(&skel.progs.fl_kprobe_multi, false), (&skel.progs.fl_kretprobe_multi, true)] {
            let opts =
                KprobeMultiOpts { symbols: symbols.clone(), cookies: self.cookies(), retprobe, ..Default::default() };
            links.push(prog.attach_kprobe_multi_with_opts(opts).context("attaching kprobe_multi")?);
        }
        Ok(Attached { skels: vec![skel], _links: links.into(), histograms: self.histograms })
    }

    fn uprobe_multi(&self) -> Result<Attached> {
        let Kind::User { binary } = &self.target.kind else { bail!("uprobe_multi is for user functions") };
        let skel = self.load(["fl_uprobe_multi", "fl_uretprobe_multi"], 0, None, None)?;
        let offsets = self.target.matches.iter().map(user_offset).collect::<Result<Vec<_>>>()?;
        let pid = self.options.pid.map_or(-1, |p| p as i32);
        let mut links = Vec::new();
        for (prog, retprobe) in [(&skel.progs.fl_uprobe_multi, false), (&skel.progs.fl_uretprobe_multi, true)] {
            let opts =
                UprobeMultiOpts { offsets: offsets.clone(), cookies: self.cookies(), retprobe, ..Default::default() };
            let link = prog
                .attach_uprobe_multi_with_opts(pid, binary, "", opts)
                .with_context(|| format!("attaching uprobe_multi to {}", binary.display()))?;
            links.push(link);
        }
        Ok(Attached { skels: vec![skel], _links: links.into(), histograms: self.histograms })
    }

    /// A probe and a return probe on each function.
    fn one_each(&self, mech: Attach) -> Result<Attached> {
        let user = mech == Attach::Uprobe;
        let names = if user { ["fl_uprobe", "fl_uretprobe"] } else { ["fl_kprobe", "fl_kretprobe"] };
        let skel = self.load(names, 0, None, None)?;
        let mut links = Vec::new();
        for (i, m) in self.target.matches.iter().enumerate() {
            // Cookies only with -F: kernels before 5.15 refuse any but 0 on these links.
            let cookie = if self.options.per_function { i as u64 } else { 0 };
            for retprobe in [false, true] {
                let prog = match (user, retprobe) {
                    (true, false) => &skel.progs.fl_uprobe,
                    (true, true) => &skel.progs.fl_uretprobe,
                    (false, false) => &skel.progs.fl_kprobe,
                    (false, true) => &skel.progs.fl_kretprobe,
                };
                let link = if let Kind::User { binary } = &self.target.kind {
                    let opts = UprobeOpts { cookie, retprobe, ..Default::default() };
                    let pid = self.options.pid.map_or(-1, |p| p as i32);
                    prog.attach_uprobe_with_opts(pid, binary, user_offset(m)?, opts)
                } else {
                    prog.attach_kprobe_with_opts(retprobe, kernel_name(m), KprobeOpts { cookie, ..Default::default() })
                };
                links.push(link.with_context(|| format!("attaching {mech} to {}", m.name))?);
            }
        }
        Ok(Attached { skels: vec![skel], _links: links.into(), histograms: self.histograms })
    }
}

fn kernel_name(m: &Match) -> &str {
    match &m.site {
        Site::Kernel(name) => name,
        _ => &m.name,
    }
}

fn user_offset(m: &Match) -> Result<usize> {
    match m.site {
        Site::Uprobe { offset } => Ok(offset as usize),
        _ => bail!("{} is not a user function", m.name),
    }
}
