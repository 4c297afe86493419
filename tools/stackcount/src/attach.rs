//! Loading stackcount's counting program and attaching it to every match of the pattern.
//!
//! Kernel functions: fentry (one small object per function, maps shared, up to MAX_FENTRY_FUNCS functions), else
//! one kprobe_multi link, else a kprobe each. Tracepoints: a classic tracepoint link each. User functions: one
//! uprobe_multi link, else a uprobe each. USDT probes: libbpf's USDT attach. `COREBPF_ATTACH` restricts the
//! mechanisms, as for every tool.

use std::os::fd::AsFd;

use anyhow::{bail, Context, Result};
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{load_first_working, open_skeleton, rodata};
use common::process::targets::{Kind, Match, Site, Target};
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{KprobeMultiOpts, TracepointCategory, UprobeMultiOpts, UprobeOpts, UsdtOpts};

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

/// The loaded objects (the first holds the shared maps) and their links.
pub struct Attached {
    pub skels: Vec<BpfSkel<'static>>,
    links: Links,
}

impl Attached {
    /// The object whose maps hold the counts and stacks.
    pub fn maps(&self) -> &BpfSkel<'static> {
        &self.skels[0]
    }

    /// Detaches everything (the maps stay readable).
    pub fn detach(&mut self) {
        self.links = Links::default();
    }
}

fn mechanisms(target: &Target) -> Vec<Attach> {
    match target.kind {
        Kind::Kernel if target.matches.len() <= MAX_FENTRY_FUNCS => {
            vec![Attach::Fentry, Attach::KprobeMulti, Attach::Kprobe]
        }
        Kind::Kernel => vec![Attach::KprobeMulti, Attach::Kprobe],
        Kind::Tracepoint => vec![Attach::Tracepoint],
        Kind::User { .. } => vec![Attach::UprobeMulti, Attach::Uprobe],
        Kind::Usdt { .. } => vec![Attach::Uprobe],
    }
}

/// Attaches to every match with the first mechanism the kernel accepts.
pub fn attach(target: &Target, options: &Options, verbose: bool) -> Result<Attached> {
    let plan = Plan { target, options };
    let (attached, _) = load_first_working(&mechanisms(target), verbose, |mech| plan.attach(mech))?;
    Ok(attached)
}

struct Plan<'a> {
    target: &'a Target,
    options: &'a Options,
}

impl Plan<'_> {
    fn attach(&self, mech: Attach) -> Result<Attached> {
        match (mech, &self.target.kind) {
            (Attach::Fentry, _) => self.fentry(),
            (Attach::KprobeMulti, _) => self.kprobe_multi(),
            (Attach::UprobeMulti, Kind::User { binary }) => {
                let skel = self.load("sc_uprobe_multi", None, None)?;
                let offsets = self.target.matches.iter().map(user_offset).collect::<Result<Vec<_>>>()?;
                let opts = UprobeMultiOpts { offsets, ..Default::default() };
                let link = skel
                    .progs
                    .sc_uprobe_multi
                    .attach_uprobe_multi_with_opts(self.pid(), binary, "", opts)
                    .with_context(|| format!("attaching uprobe_multi to {}", binary.display()))?;
                Ok(Attached { skels: vec![skel], links: vec![link].into() })
            }
            (Attach::Uprobe | Attach::Kprobe | Attach::Tracepoint, _) => self.one_each(mech),
            (other, _) => bail!("{other} does not apply to this pattern"),
        }
    }

    fn pid(&self) -> i32 {
        self.options.pid.map_or(-1, |p| p as i32)
    }

    /// Opens an object with only program `prog`, sets its options and map sizes, shares the first object's maps
    /// (`first`), sets an fentry target, and loads it.
    fn load(&self, prog: &str, fentry: Option<&str>, first: Option<&BpfSkel<'static>>) -> Result<BpfSkel<'static>> {
        let mut open = open_skeleton::<BpfSkelBuilder>()?;
        let rodata = rodata(&mut open.maps.rodata_data)?;
        rodata.target_tgid = self.options.pid.unwrap_or(0);
        rodata.target_cpu = self.options.cpu.map_or(-1, |c| c as i32);
        rodata.user_stacks = self.options.user_stacks;
        rodata.kernel_stacks = self.options.kernel_stacks;
        open.maps.stackmap.set_max_entries(self.options.stack_storage_size)?;
        open.maps.counts.set_max_entries(self.options.hash_storage_size)?;
        if let Some(first) = first {
            open.maps.stackmap.reuse_fd(first.maps.stackmap.as_fd())?;
            open.maps.counts.reuse_fd(first.maps.counts.as_fd())?;
            open.maps.seen.reuse_fd(first.maps.seen.as_fd())?;
            open.maps.new_pids.reuse_fd(first.maps.new_pids.as_fd())?;
        }
        for mut p in open.open_object_mut().progs_mut() {
            let wanted = p.name().to_str() == Some(prog);
            p.set_autoload(wanted);
        }
        if let Some(func) = fentry {
            open.progs.sc_fentry.set_attach_target(0, Some(func.to_owned()))?;
        }
        open.load().context("loading the BPF program")
    }

    fn fentry(&self) -> Result<Attached> {
        let mut skels: Vec<BpfSkel<'static>> = Vec::new();
        let mut links = Vec::new();
        for m in &self.target.matches {
            let skel = self.load("sc_fentry", Some(kernel_name(m)), skels.first())?;
            links.push(skel.progs.sc_fentry.attach().with_context(|| format!("attaching fentry to {}", m.name))?);
            skels.push(skel);
        }
        Ok(Attached { skels, links: links.into() })
    }

    fn kprobe_multi(&self) -> Result<Attached> {
        let skel = self.load("sc_kprobe_multi", None, None)?;
        let symbols = self.target.matches.iter().map(|m| kernel_name(m).to_owned()).collect();
        let opts = KprobeMultiOpts { symbols, ..Default::default() };
        let link = skel.progs.sc_kprobe_multi.attach_kprobe_multi_with_opts(opts).context("attaching kprobe_multi")?;
        Ok(Attached { skels: vec![skel], links: vec![link].into() })
    }

    /// One link per match (kprobes, tracepoints, uprobes, USDT probes).
    fn one_each(&self, mech: Attach) -> Result<Attached> {
        let prog_name = match (&self.target.kind, mech) {
            (Kind::Kernel, _) => "sc_kprobe",
            (Kind::Tracepoint, _) => "sc_tracepoint",
            (Kind::Usdt { .. }, _) => "sc_usdt",
            (Kind::User { .. }, _) => "sc_uprobe",
        };
        if mech == Attach::Tracepoint {
            common::attach::features::tracefs()?;
        }
        let skel = self.load(prog_name, None, None)?;
        let mut links = Vec::new();
        for m in &self.target.matches {
            let p = &skel.progs;
            let link = match (&self.target.kind, &m.site) {
                (Kind::Kernel, _) => p.sc_kprobe.attach_kprobe(false, kernel_name(m)),
                (_, Site::Tracepoint { category, event }) => {
                    p.sc_tracepoint.attach_tracepoint(TracepointCategory::Custom(category.clone()), event)
                }
                (Kind::Usdt { binary }, Site::Usdt { provider, name, .. }) => {
                    p.sc_usdt.attach_usdt_with_opts(self.pid(), binary, provider, name, UsdtOpts::default())
                }
                (Kind::User { binary }, _) => {
                    p.sc_uprobe.attach_uprobe_with_opts(self.pid(), binary, user_offset(m)?, UprobeOpts::default())
                }
                _ => bail!("cannot attach to {}", m.name),
            };
            links.push(link.with_context(|| format!("attaching {mech} to {}", m.name))?);
        }
        Ok(Attached { skels: vec![skel], links: links.into() })
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
