//! Loading funccount's BPF object and attaching it to every match, by the cheapest mechanism the kernel takes.
//!
//! Kernel functions: fentry (slot programs, one trampoline per function) where it loads and every match has BTF,
//! else kprobe_multi (one link for all), else one kprobe each. Tracepoints: a classic tracepoint link each, except
//! syscall tracepoints, which share one raw tracepoint on sys_enter and one on sys_exit (the syscall number looked
//! up in a BPF map filled before attaching), so that `t:syscalls:*` attaches and detaches two links, not 700.
//! User functions: one uprobe_multi link, else one uprobe each. USDT probes: libbpf's USDT attach (uprobes).
//! The index of a match reaches the BPF side as the link's BPF cookie; on kernels without cookies, and for
//! fentry, slot programs (FUNCCOUNT_SLOTS per object, each counting `slot_base + N`) are loaded in as many objects
//! as needed, all sharing one counts map. `COREBPF_ATTACH` restricts the mechanisms, as for every tool, and
//! `COREBPF_NO_COOKIES=1` uses the slot programs even where cookies work, so that fallback is tested everywhere.

use std::os::fd::AsFd;

use anyhow::{anyhow, bail, Context, Result};
use common::attach::features::{Attach, KernelBtf};
use common::attach::links::Links;
use common::attach::loader::{allowed, load_first_working, object_storage};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{
    KprobeMultiOpts, KprobeOpts, Link, MapCore, MapFlags, ProgramMut, TracepointCategory, TracepointOpts,
    UprobeMultiOpts, UprobeOpts, UsdtOpts,
};

use crate::bpf::{BpfSkel, BpfSkelBuilder};
use crate::targets::{Kind, Match, Site, Target};

/// Slot programs of each kind in one object (FUNCCOUNT_SLOTS in funccount.h).
const SLOTS: usize = 16;
/// Give up on one-link-per-match attaching when this many first attempts all failed.
const FIRST_FAILURES: usize = 8;

/// What the BPF side filters on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filters {
    pub pid: Option<u32>,
    pub cpu: Option<u32>,
}

/// The loaded objects and their links; dropping this detaches everything.
pub struct Attached {
    // Links first: fields drop in order, so links detach (in parallel) before their objects close.
    _links: Links,
    skels: Vec<BpfSkel<'static>>,
    /// Matches that could not be attached (their counts stay zero), with the reason.
    pub failed: Vec<(String, String)>,
}

impl Attached {
    /// The total count of every match so far, summed over CPUs, in match order.
    pub fn totals(&self, matches: usize) -> Result<Vec<u64>> {
        let map = &self.skels[0].maps.counts;
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
}

/// The mechanisms for a kind of target, cheapest first.
pub fn mechanisms(kind: &Kind) -> &'static [Attach] {
    match kind {
        Kind::Kernel => &[Attach::Fentry, Attach::KprobeMulti, Attach::Kprobe],
        Kind::Tracepoint => &[Attach::RawTp, Attach::Tracepoint],
        Kind::User { .. } => &[Attach::UprobeMulti, Attach::Uprobe],
        Kind::Usdt { .. } => &[Attach::Uprobe],
    }
}

/// Set to 1 to use the slot programs of kernels without BPF cookies on any kernel (to test that fallback).
pub const NO_COOKIES_ENV: &str = "COREBPF_NO_COOKIES";

/// True if this kernel passes BPF cookies to kprobe, tracepoint and uprobe programs (5.15+), from its BTF.
pub fn kernel_has_cookies(btf: &KernelBtf) -> bool {
    std::env::var(NO_COOKIES_ENV).map_or(true, |v| v != "1") && btf.enum_value("BPF_FUNC_get_attach_cookie").is_some()
}

/// Loads and attaches for every match of `target`, trying its mechanisms in turn.
pub fn attach(target: &Target, filters: Filters, btf: &KernelBtf, verbose: bool) -> Result<(Attached, Attach)> {
    let cookies = kernel_has_cookies(btf);
    if verbose && !cookies {
        eprintln!("this kernel has no BPF cookies: one program per match, {SLOTS} per object");
    }
    let mechs = allowed(mechanisms(&target.kind))?;
    let mut refused = Vec::new();
    let result = load_first_working(&mechs, verbose, |mech| {
        let plan = Plan { target, filters, cookies };
        let attempt = match mech {
            Attach::Fentry => plan.fentry(btf),
            Attach::KprobeMulti => plan.kprobe_multi(),
            Attach::Kprobe => plan.one_each(mech, "fc_kprobe", "fc_kslot", attach_kprobe),
            Attach::RawTp => plan.raw_syscalls(),
            Attach::Tracepoint => plan.one_each(mech, "fc_tracepoint", "fc_tpslot", attach_tracepoint),
            Attach::UprobeMulti => plan.uprobe_multi(),
            Attach::Uprobe if matches!(target.kind, Kind::Usdt { .. }) => plan.usdt(),
            Attach::Uprobe => plan.one_each(mech, "fc_uprobe", "fc_uslot", attach_uprobe),
            other => Err(anyhow!("{other} is not a funccount mechanism")),
        };
        if let Err(err) = &attempt {
            refused.push(format!("{mech} ({})", err.root_cause()));
        }
        attempt
    });
    if result.is_err() && target.kind == Kind::Kernel {
        bail!(
            "this kernel does not let BPF trace kernel functions: it refused {}; tracepoints (t:CATEGORY:EVENT), \
             user functions (LIB:FUNC) and USDT probes (u:LIB:PROBE) can still be counted",
            join_and(&refused)
        );
    }
    result
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// How one program is attached to one match: with a cookie (`Some(index)`), or as a slot program (`None`).
type AttachOne = fn(&ProgramMut<'_>, &Match, &Target, Filters, Option<u64>) -> Result<Link>;

struct Plan<'a> {
    target: &'a Target,
    filters: Filters,
    cookies: bool,
}

impl Plan<'_> {
    /// Opens one object with the filters set, the counts map sized (or shared with `shared`), only the programs
    /// named in `enable` loaded (with their fentry targets), and loads it.
    fn load(
        &self,
        slot_base: usize,
        shared: Option<&BpfSkel<'static>>,
        enable: &[(String, Option<String>)],
    ) -> Result<BpfSkel<'static>> {
        let mut open = BpfSkelBuilder::default().open(object_storage()).context("opening the BPF object")?;
        let rodata = open.maps.rodata_data.as_deref_mut().context("BPF object has no read-only data")?;
        rodata.target_tgid = self.filters.pid.unwrap_or(0);
        rodata.filter_cpu = self.filters.cpu.is_some();
        rodata.target_cpu = self.filters.cpu.unwrap_or(0);
        rodata.slot_base = slot_base as u32;
        open.maps.counts.set_max_entries(self.target.matches.len() as u32)?;
        if let Some(first) = shared {
            open.maps.counts.reuse_fd(first.maps.counts.as_fd()).context("sharing the counts map")?;
        }
        // Maps only some programs use are cut to one entry when those programs stay unloaded: libbpf's USDT
        // maps (a 1024-entry hash and a 256-entry spec array) and the syscall indexes.
        let enabled = |prog: &str| enable.iter().any(|(n, _)| n == prog);
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
        for mut prog in open.open_object_mut().progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            match enable.iter().find(|(n, _)| *n == name) {
                Some((_, fentry_target)) => {
                    prog.set_autoload(true);
                    if let Some(func) = fentry_target {
                        prog.set_attach_target(0, Some(func.clone()))
                            .with_context(|| format!("setting the fentry target {func}"))?;
                    }
                }
                None => prog.set_autoload(false),
            }
        }
        open.load().context("loading the BPF program")
    }

    /// fentry: slot programs, one per function, SLOTS per object.
    fn fentry(&self, btf: &KernelBtf) -> Result<Attached> {
        let names: Vec<&str> = self.target.matches.iter().map(kernel_name).collect();
        let missing: Vec<&&str> = names.iter().filter(|n| !btf.has_function(n)).collect();
        if let Some(first) = missing.first() {
            bail!("{} of the functions have no BTF (e.g. {first}), which fentry needs", missing.len());
        }
        let mut skels: Vec<BpfSkel<'static>> = Vec::new();
        let mut links = Vec::new();
        for (chunk_no, chunk) in names.chunks(SLOTS).enumerate() {
            let enable: Vec<_> =
                chunk.iter().enumerate().map(|(i, f)| (format!("fc_fentry_{i}"), Some(f.to_string()))).collect();
            let skel = self.load(chunk_no * SLOTS, skels.first(), &enable)?;
            for (prog_name, func) in &enable {
                let prog = program(&skel, prog_name)?;
                links.push(
                    prog.attach_trace()
                        .with_context(|| format!("attaching fentry to {}", func.as_deref().unwrap_or("")))?,
                );
            }
            skels.push(skel);
        }
        Ok(Attached { skels, _links: links.into(), failed: Vec::new() })
    }

    /// kprobe_multi: one link for every function, the index as each one's cookie.
    fn kprobe_multi(&self) -> Result<Attached> {
        let skel = self.load(0, None, &[("fc_kprobe_multi".into(), None)])?;
        let opts = KprobeMultiOpts {
            symbols: self.target.matches.iter().map(|m| kernel_name(m).to_string()).collect(),
            cookies: (0..self.target.matches.len() as u64).collect(),
            ..Default::default()
        };
        let link = skel.progs.fc_kprobe_multi.attach_kprobe_multi_with_opts(opts).context("attaching kprobe_multi")?;
        Ok(Attached { skels: vec![skel], _links: vec![link].into(), failed: Vec::new() })
    }

    /// uprobe_multi: one link for every function of the binary, the index as each one's cookie.
    fn uprobe_multi(&self) -> Result<Attached> {
        let Kind::User { binary } = &self.target.kind else { bail!("uprobe_multi is for user functions") };
        let skel = self.load(0, None, &[("fc_uprobe_multi".into(), None)])?;
        let offsets = self
            .target
            .matches
            .iter()
            .map(|m| match m.site {
                Site::Uprobe { offset } => Ok(offset as usize),
                _ => Err(anyhow!("{} is not a user function", m.name)),
            })
            .collect::<Result<Vec<_>>>()?;
        let opts = UprobeMultiOpts { cookies: (0..offsets.len() as u64).collect(), offsets, ..Default::default() };
        let pid = self.filters.pid.map_or(-1, |p| p as i32);
        let link = skel
            .progs
            .fc_uprobe_multi
            .attach_uprobe_multi_with_opts(pid, binary, "", opts)
            .with_context(|| format!("attaching uprobe_multi to {}", binary.display()))?;
        Ok(Attached { skels: vec![skel], _links: vec![link].into(), failed: Vec::new() })
    }

    /// Syscall tracepoints: one raw tracepoint on sys_enter and one on sys_exit, the syscall number mapped to the
    /// match's index in BPF; the other matches (tracepoints of other categories, syscalls this table does not
    /// know) get a classic tracepoint link each, with the index as cookie. Fails (for the classic fallback) when
    /// no match is a known syscall tracepoint or the kernel has no cookies for the rest.
    fn raw_syscalls(&self) -> Result<Attached> {
        let mut enter = Vec::new();
        let mut exit = Vec::new();
        let mut rest = Vec::new();
        for (index, m) in self.target.matches.iter().enumerate() {
            let syscall = match &m.site {
                Site::Tracepoint { category, event } if category == "syscalls" => event
                    .strip_prefix("sys_enter_")
                    .map(|name| (&mut enter, name))
                    .or_else(|| event.strip_prefix("sys_exit_").map(|name| (&mut exit, name)))
                    .and_then(|(list, name)| Some((list, common::domain::syscalls::tracepoint_number(name)?))),
                _ => None,
            };
            match syscall {
                Some((list, nr)) if (nr as usize) < crate::bpf::consts::SYSCALL_SLOTS => list.push((nr, index)),
                _ => rest.push(index),
            }
        }
        if enter.is_empty() && exit.is_empty() {
            bail!("no syscall tracepoint to count with raw tracepoints");
        }
        if !rest.is_empty() && !self.cookies {
            bail!("tracepoints besides syscalls need BPF cookies here");
        }
        let mut enable = Vec::new();
        for (list, prog) in [(&enter, "fc_sys_enter"), (&exit, "fc_sys_exit")] {
            if !list.is_empty() {
                enable.push((prog.to_string(), None));
            }
        }
        if !rest.is_empty() {
            enable.push(("fc_tracepoint".to_string(), None));
        }
        let skel = self.load(0, None, &enable)?;
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
                let m = &self.target.matches[index];
                match attach_tracepoint(&prog, m, self.target, self.filters, Some(index as u64)) {
                    Ok(link) => links.push(link),
                    Err(err) => failed.push((m.name.clone(), format!("{:#}", err.root_cause()))),
                }
            }
        }
        Ok(Attached { skels: vec![skel], _links: links.into(), failed })
    }

    /// USDT: libbpf's attach (every site of each probe, semaphores included), the index as the USDT cookie.
    fn usdt(&self) -> Result<Attached> {
        let Kind::Usdt { binary } = &self.target.kind else { bail!("not a USDT target") };
        let skel = self.load(0, None, &[("fc_usdt".into(), None)])?;
        let pid = self.filters.pid.map_or(-1, |p| p as i32);
        let mut links = Vec::new();
        for (index, m) in self.target.matches.iter().enumerate() {
            let Site::Usdt { provider, name, .. } = &m.site else { bail!("{} is not a USDT probe", m.name) };
            let opts = UsdtOpts { cookie: index as u64, ..Default::default() };
            links.push(
                skel.progs
                    .fc_usdt
                    .attach_usdt_with_opts(pid, binary, provider, name, opts)
                    .with_context(|| format!("attaching to USDT probe {provider}:{name} in {}", binary.display()))?,
            );
        }
        Ok(Attached { skels: vec![skel], _links: links.into(), failed: Vec::new() })
    }

    /// One link per match: program `cookie_prog` with the index as cookie, or (without cookies) slot programs
    /// `<slot_prefix>_N`. Matches that fail are reported, unless all do.
    fn one_each(&self, mech: Attach, cookie_prog: &str, slot_prefix: &str, attach_one: AttachOne) -> Result<Attached> {
        let matches = &self.target.matches;
        let mut skels: Vec<BpfSkel<'static>> = Vec::new();
        let mut links = Vec::new();
        let mut failed = Vec::new();
        let mut first_error = None;
        let chunk_size = if self.cookies { matches.len() } else { SLOTS };
        for (chunk_no, chunk) in matches.chunks(chunk_size).enumerate() {
            let enable: Vec<(String, Option<String>)> = if self.cookies {
                vec![(cookie_prog.to_string(), None)]
            } else {
                (0..chunk.len()).map(|i| (format!("{slot_prefix}_{i}"), None)).collect()
            };
            let skel = self.load(chunk_no * chunk_size, skels.first(), &enable)?;
            for (i, m) in chunk.iter().enumerate() {
                let index = chunk_no * chunk_size + i;
                let result = if self.cookies {
                    attach_one(&program(&skel, cookie_prog)?, m, self.target, self.filters, Some(index as u64))
                } else {
                    attach_one(&program(&skel, &enable[i].0)?, m, self.target, self.filters, None)
                };
                match result {
                    Ok(link) => links.push(link),
                    Err(err) => {
                        failed.push((m.name.clone(), format!("{:#}", err.root_cause())));
                        first_error.get_or_insert(err);
                        if links.is_empty() && failed.len() >= FIRST_FAILURES.min(matches.len()) {
                            break;
                        }
                    }
                }
            }
            skels.push(skel);
            if links.is_empty() && failed.len() >= FIRST_FAILURES.min(matches.len()) {
                break;
            }
        }
        if links.is_empty() {
            let err = first_error.unwrap_or_else(|| anyhow!("nothing to attach"));
            return Err(err.context(format!("{mech} attached to none of the matches")));
        }
        Ok(Attached { skels, _links: links.into(), failed })
    }
}

fn program<'a>(skel: &'a BpfSkel<'static>, name: &str) -> Result<ProgramMut<'a>> {
    skel.object()
        .progs_mut()
        .find(|p| p.name().to_str() == Some(name))
        .with_context(|| format!("the BPF object has no program {name}"))
}

fn kernel_name(m: &Match) -> &str {
    match &m.site {
        Site::Kernel(name) => name,
        _ => &m.name,
    }
}

fn attach_kprobe(prog: &ProgramMut<'_>, m: &Match, _: &Target, _: Filters, cookie: Option<u64>) -> Result<Link> {
    let func = kernel_name(m);
    let link = match cookie {
        Some(cookie) => prog.attach_kprobe_with_opts(false, func, KprobeOpts { cookie, ..Default::default() }),
        None => prog.attach_kprobe(false, func),
    };
    link.with_context(|| format!("attaching a kprobe to {func}"))
}

fn attach_tracepoint(prog: &ProgramMut<'_>, m: &Match, _: &Target, _: Filters, cookie: Option<u64>) -> Result<Link> {
    let Site::Tracepoint { category, event } = &m.site else { bail!("{} is not a tracepoint", m.name) };
    let cat = || TracepointCategory::Custom(category.clone());
    let link = match cookie {
        Some(cookie) => prog.attach_tracepoint_with_opts(cat(), event, TracepointOpts { cookie, ..Default::default() }),
        None => prog.attach_tracepoint(cat(), event),
    };
    link.with_context(|| format!("attaching to tracepoint {category}:{event}"))
}

fn attach_uprobe(prog: &ProgramMut<'_>, m: &Match, target: &Target, f: Filters, cookie: Option<u64>) -> Result<Link> {
    let (Kind::User { binary }, Site::Uprobe { offset }) = (&target.kind, &m.site) else {
        bail!("{} is not a user function", m.name)
    };
    let pid = f.pid.map_or(-1, |p| p as i32);
    let opts = UprobeOpts { cookie: cookie.unwrap_or(0), ..Default::default() };
    prog.attach_uprobe_with_opts(pid, binary, *offset as usize, opts)
        .with_context(|| format!("attaching a uprobe to {} in {}", m.name, binary.display()))
}
