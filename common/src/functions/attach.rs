// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Attaching a tool's BPF programs to every match of a function-target pattern, by the cheapest mechanism.
//!
//! The ladder of each kind of target ([`family_ladder`]): kernel functions by fentry, else kprobe_multi (one
//! link for all), else a kprobe each; tracepoints by a raw tracepoint where the tool has its own way for it
//! (funccount's syscalls), else a classic tracepoint each; user functions by uprobe_multi, else a uprobe each;
//! USDT probes by libbpf's USDT attach (uprobes). Only the mechanisms the tool declares (`TOOL.attach`) are
//! tried ([`ladder`]), and `COREBPF_ATTACH` restricts them further.
//!
//! A tool names its programs per mechanism ([`Programs`]: an entry program, and a return program for tools that
//! time calls) and loads its own object ([`Objects::load`]); an [`Attacher`] does the rest. A match's index
//! reaches the BPF side as the link's BPF cookie ([`Cookies`]). fentry programs have no cookie, so fentry loads
//! one object per function, told the index of its match, or, for a tool with slot programs (copies `PROG_0` ..
//! `PROG_{N-1}` of a program, copy K counting the object's first index + K), one object per N functions; on
//! kernels without cookies (before 5.15) the slot programs serve every mechanism.

use std::os::fd::AsFd;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{
    KprobeMultiOpts, KprobeOpts, Link, MapCore, OpenObject, ProgramMut, TracepointCategory, TracepointOpts,
    UprobeMultiOpts, UprobeOpts, UsdtOpts,
};

use crate::attach::features::{Attach, KernelBtf};
use crate::attach::links::Links;
use crate::attach::loader::{allowed, load_first_working};
use crate::attach::maps::DropCounter;
use crate::functions::targets::{Kind, Match, Site, Target};

/// Give up on one-link-per-match attaching when this many first attempts all failed.
const FIRST_FAILURES: usize = 8;

/// Set to 1 to use slot programs, as on kernels without BPF cookies, on any kernel (to test that fallback).
pub const NO_COOKIES_ENV: &str = "COREBPF_NO_COOKIES";

/// The mechanisms that attach to targets of `kind`, cheapest first.
pub fn family_ladder(kind: &Kind) -> &'static [Attach] {
    match kind {
        Kind::Kernel => &[Attach::Fentry, Attach::KprobeMulti, Attach::Kprobe],
        Kind::Tracepoint => &[Attach::RawTp, Attach::Tracepoint],
        Kind::User { .. } => &[Attach::UprobeMulti, Attach::Uprobe],
        Kind::Usdt { .. } => &[Attach::Uprobe],
    }
}

/// The mechanisms to try for `target`: those of its kind that the tool declares (`declared`: its `TOOL.attach`),
/// fentry only up to `fentry_limit` matches, and only those `COREBPF_ATTACH` allows. Fails if none is left.
pub fn ladder(target: &Target, declared: &[Attach], fentry_limit: Option<usize>) -> Result<Vec<Attach>> {
    let mechs: Vec<Attach> = family_ladder(&target.kind)
        .iter()
        .copied()
        .filter(|m| declared.contains(m))
        .filter(|&m| m != Attach::Fentry || fentry_limit.is_none_or(|limit| target.matches.len() <= limit))
        .collect();
    if mechs.is_empty() {
        bail!("this tool has no way to attach to {}", target.kind.noun());
    }
    allowed(&mechs)
}

/// Writes the attach plan of `target` (funccount's `-D`, stackcount's `--debug`): a line with the number of
/// matches, the mechanisms that would be tried (as [`ladder`] picks them) and `how` they are attached, then one
/// line per match: its index, its name and where it would be attached.
pub fn write_plan(
    out: &mut impl std::io::Write,
    target: &Target,
    declared: &[Attach],
    fentry_limit: Option<usize>,
    btf: &KernelBtf,
    how: &str,
) -> Result<()> {
    let mechs: Vec<String> = ladder(target, declared, fentry_limit)?.iter().map(|m| m.to_string()).collect();
    writeln!(out, "{} matches, attached with {} ({how}):", target.matches.len(), mechs.join(", else "))?;
    for (index, m) in target.matches.iter().enumerate() {
        let site = match (&target.kind, &m.site) {
            (_, Site::Kernel(name)) => {
                format!("kernel function {name}{}", if btf.has_function(name) { "" } else { " (no BTF: not fentry)" })
            }
            (_, Site::Tracepoint { category, event }) => format!("tracepoint {category}:{event}"),
            (Kind::User { binary }, Site::Uprobe { offset }) => format!("{} offset {offset:#x}", binary.display()),
            (Kind::Usdt { binary }, Site::Usdt { provider, name, sites }) => {
                format!("USDT {provider}:{name} in {} ({sites} sites)", binary.display())
            }
            (_, other) => format!("{other:?}"),
        };
        writeln!(out, "{index:>5}  {:<36} {site}", m.name)?;
    }
    Ok(())
}

/// True if this kernel passes BPF cookies to kprobe, tracepoint and uprobe programs (5.15+), from its BTF, and
/// [`NO_COOKIES_ENV`] does not say otherwise.
pub fn kernel_has_cookies(btf: &KernelBtf) -> bool {
    std::env::var(NO_COOKIES_ENV).map_or(true, |v| v != "1") && btf.enum_value("BPF_FUNC_get_attach_cookie").is_some()
}

/// What a link's BPF cookie carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cookies {
    /// The index of the match: the programs read it with `bpf_get_attach_cookie` (or `bpf_usdt_cookie`).
    Index,
    /// Nothing the programs read (0), so that kernels without cookies attach too.
    Zero,
    /// The kernel has no cookies: slot programs count by their number where the tool has them (the index goes
    /// only to USDT probes, whose cookies libbpf keeps in a map).
    Slots,
}

/// A tool's programs for one mechanism, by name in its BPF object.
#[derive(Debug, Clone, Copy)]
pub struct Programs {
    /// Runs on each hit (function entry, tracepoint, probe).
    pub entry: &'static str,
    /// Runs on return, for tools that time calls; attached to every match as `entry` is.
    pub ret: Option<&'static str>,
    /// Slot copies of each program (`ENTRY_0` ...; see the module documentation); 0 if there are none.
    pub slots: usize,
}

impl Programs {
    /// An entry program alone, without slot copies.
    pub const fn entry(entry: &'static str) -> Self {
        Programs { entry, ret: None, slots: 0 }
    }

    /// An entry and a return program, without slot copies.
    pub const fn timed(entry: &'static str, ret: &'static str) -> Self {
        Programs { entry, ret: Some(ret), slots: 0 }
    }

    /// The program names with whether each is the return one: slot copy `slot`, or the programs themselves.
    fn names(&self, slot: Option<usize>) -> Vec<(String, bool)> {
        let name = |base: &str| slot.map_or_else(|| base.to_owned(), |n| format!("{base}_{n}"));
        std::iter::once((name(self.entry), false)).chain(self.ret.map(|r| (name(r), true))).collect()
    }
}

/// A program to load, and for fentry/fexit programs the kernel function it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enable {
    pub program: String,
    pub fentry: Option<String>,
}

/// Loads only the programs of `enable` from an opened object (setting the target of fentry/fexit programs) and
/// leaves every other program out.
pub fn enable_programs(object: &mut OpenObject, enable: &[Enable]) -> Result<()> {
    for mut prog in object.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let wanted = enable.iter().find(|e| e.program == name);
        prog.set_autoload(wanted.is_some());
        if let Some(func) = wanted.and_then(|e| e.fentry.as_ref()) {
            prog.set_attach_target(0, Some(func.clone()))
                .with_context(|| format!("setting the fentry target {func}"))?;
        }
    }
    Ok(())
}

/// One object to load: the programs it keeps, the index of the first match it serves (fentry and slot programs
/// count from it), and the first object loaded, whose maps it shares (None when it is the first).
pub struct Load<'a, S> {
    pub enable: &'a [Enable],
    pub first_index: usize,
    pub first: Option<&'a S>,
}

impl<S> Load<'_, S> {
    /// Loads the tool's opened object `open` (its options set, its maps sized and shared) with only the programs
    /// of this load.
    pub fn finish<O: OpenSkel<'static>>(&self, mut open: O) -> Result<O::Output> {
        enable_programs(open.open_object_mut(), self.enable)?;
        open.load().context("loading the BPF programs")
    }

    /// Makes the maps `names` of the opened skeleton `open` those of the first object (when this is not it), so
    /// that every object counts into one set.
    pub fn share_maps<O: OpenSkel<'static>>(&self, open: &mut O, names: &[&str]) -> Result<()>
    where
        S: Skel<'static>,
    {
        let Some(first) = self.first else { return Ok(()) };
        for mut map in open.open_object_mut().maps_mut().filter(|m| names.iter().any(|n| m.name() == *n)) {
            let name = map.name().to_string_lossy().into_owned();
            let shared = first.object().maps().find(|m| m.name() == map.name());
            let shared = shared.with_context(|| format!("the first object has no map {name}"))?;
            map.reuse_fd(shared.as_fd()).with_context(|| format!("sharing the map {name}"))?;
        }
        Ok(())
    }

    /// True if program `name` is loaded.
    pub fn enables(&self, name: &str) -> bool {
        self.enable.iter().any(|e| e.program == name)
    }
}

/// A tool's BPF object, as the family loads it.
pub trait Objects {
    /// The tool's skeleton.
    type Skel: Skel<'static>;

    /// The tool's programs for `mech` on targets of `kind`; None if it has none.
    fn programs(&self, mech: Attach, kind: &Kind) -> Option<Programs>;

    /// Opens the tool's object, sets its options and map sizes, shares the maps of `load.first`, and loads it
    /// with [`Load::finish`].
    fn load(&self, load: Load<'_, Self::Skel>) -> Result<Self::Skel>;

    /// Most functions attached by fentry, which loads one object per function (or per slot set): above this,
    /// kprobe_multi or kprobes. None: no limit.
    const FENTRY_LIMIT: Option<usize> = None;
}

/// The loaded objects and their links; dropping this detaches everything.
pub struct Attached<S> {
    // Links first: fields drop in order, so links detach (in parallel) before their objects close.
    links: Links,
    skels: Vec<S>,
    /// Matches that could not be attached (their counts stay zero), with the reason.
    pub failed: Vec<(String, String)>,
}

impl<S> Attached<S> {
    /// Objects (the first holds the maps the others share) and links; `failed` as [`Attached::failed`].
    pub fn new(skels: Vec<S>, links: impl Into<Links>, failed: Vec<(String, String)>) -> Self {
        Attached { links: links.into(), skels, failed }
    }

    /// The first object, whose maps every object shares.
    pub fn maps(&self) -> &S {
        &self.skels[0]
    }

    /// Every loaded object.
    pub fn objects(&self) -> &[S] {
        &self.skels
    }

    /// Detaches everything; the maps stay readable.
    pub fn detach(&mut self) {
        self.links = Links::default();
    }

    /// Hits the kernel's probes missed so far (see [`Links::missed`]); report them with [`missed_counter`].
    pub fn missed(&self) -> u64 {
        self.links.missed()
    }

    /// Says on stderr, in one line, which matches could not be attached, if any.
    pub fn warn_failures(&self) {
        let Some((first, why)) = self.failed.first() else { return };
        let more = self.failed.len() - 1;
        let others = if more > 0 { format!(" and {more} more") } else { String::new() };
        eprintln!("{}: could not attach to {first}{others}: {why}", crate::identity::invoked_name());
    }
}

/// The stderr line for [`Attached::missed`]: `tool: lost N calls (...)`, once per interval that missed some.
/// Before 6.14 a kretprobe_multi link has 2 return slots per CPU and function, which calls that block (reads of a
/// pipe or terminal) hold until they return: a busy function's returns then mostly go unseen, and are told here.
pub fn missed_counter() -> DropCounter {
    DropCounter::new("calls", "the kernel's probes missed them: return-probe slots all in use, or a probe in a probe")
}

/// Attaches a tool's programs ([`Objects`]) to every match of a target.
pub struct Attacher<'a, O: Objects> {
    pub objects: &'a O,
    pub target: &'a Target,
    /// Uprobes and USDT probes in this process only.
    pub pid: Option<u32>,
    pub cookies: Cookies,
    /// With the kernel's BTF, fentry is refused at once when a function has none.
    pub btf: Option<&'a KernelBtf>,
}

impl<O: Objects> Attacher<'_, O> {
    /// Tries the mechanisms of [`ladder`] in turn and returns the first that attaches, with its name.
    pub fn attach_first_working(&self, declared: &[Attach], verbose: bool) -> Result<(Attached<O::Skel>, Attach)> {
        self.attach_first_working_with(declared, verbose, |mech| self.attach(mech))
    }

    /// [`Attacher::attach_first_working`], with `attempt` (which may call [`Attacher::attach`]) for each
    /// mechanism, for a tool that has a way of its own for some. Refused kernel functions are told in one line.
    pub fn attach_first_working_with(
        &self,
        declared: &[Attach],
        verbose: bool,
        mut attempt: impl FnMut(Attach) -> Result<Attached<O::Skel>>,
    ) -> Result<(Attached<O::Skel>, Attach)> {
        let mechs = ladder(self.target, declared, O::FENTRY_LIMIT)?;
        let mut refused = Vec::new();
        let result = load_first_working(&mechs, verbose, |mech| {
            let attempt = attempt(mech);
            if let Err(err) = &attempt {
                refused.push(format!("{mech} ({})", err.root_cause()));
            }
            attempt
        });
        // Unless the error is the caller's missing privileges, which says so itself.
        let refused_by_kernel = result.as_ref().is_err_and(|err| !err.to_string().starts_with("permission denied"));
        if refused_by_kernel && self.target.kind == Kind::Kernel {
            let others = self.other_kinds(declared);
            let still =
                if others.is_empty() { String::new() } else { format!("; {} can still be traced", join_and(&others)) };
            bail!("this kernel does not let BPF trace kernel functions: it refused {}{still}", join_and(&refused));
        }
        result
    }

    /// The kinds of target besides kernel functions that the tool can attach to, for messages.
    fn other_kinds(&self, declared: &[Attach]) -> Vec<String> {
        let none = PathBuf::new;
        [
            (Kind::Tracepoint, "tracepoints (t:CATEGORY:EVENT)"),
            (Kind::User { binary: none() }, "user functions (LIB:FUNC)"),
            (Kind::Usdt { binary: none() }, "USDT probes (u:LIB:PROBE)"),
        ]
        .into_iter()
        .filter(|(kind, _)| {
            family_ladder(kind).iter().any(|&m| declared.contains(&m) && self.objects.programs(m, kind).is_some())
        })
        .map(|(_, text)| text.to_owned())
        .collect()
    }

    /// Loads and attaches with `mech` (any of [`family_ladder`] but raw tracepoints, which are a tool's own).
    pub fn attach(&self, mech: Attach) -> Result<Attached<O::Skel>> {
        let programs = self
            .objects
            .programs(mech, &self.target.kind)
            .with_context(|| format!("no program attaches to {} with {mech}", self.target.kind.noun()))?;
        match mech {
            Attach::Fentry => self.fentry(programs),
            Attach::KprobeMulti | Attach::UprobeMulti => self.multi(mech, programs),
            Attach::Kprobe | Attach::Tracepoint | Attach::Uprobe => self.one_each(mech, programs),
            other => bail!("{other} is not a way to attach to {}", self.target.kind.noun()),
        }
    }

    fn pid(&self) -> i32 {
        self.pid.map_or(-1, |p| p as i32)
    }

    /// fentry (and fexit): one object per function, or per slot set; all share the first one's maps.
    fn fentry(&self, programs: Programs) -> Result<Attached<O::Skel>> {
        let matches = &self.target.matches;
        if let Some(btf) = self.btf {
            let (with_btf, missing): (Vec<&Match>, Vec<&Match>) =
                matches.iter().partition(|m| btf.has_function(m.kernel_name()));
            if let Some(first) = missing.first() {
                // Functions without BTF rule fentry out; but where the kernel refuses fentry for any function (as
                // when ftrace access is denied), that is the failure to tell, so try one that has BTF first.
                if let Some(&one) = with_btf.first() {
                    self.fentry_on(programs, std::slice::from_ref(one))?;
                }
                bail!(
                    "{} of the functions have no BTF (e.g. {}), which fentry needs",
                    missing.len(),
                    first.kernel_name()
                );
            }
        }
        self.fentry_on(programs, matches)
    }

    /// fentry on `matches`, all of which have BTF.
    fn fentry_on(&self, programs: Programs, matches: &[Match]) -> Result<Attached<O::Skel>> {
        let per_object = programs.slots.max(1);
        let mut skels: Vec<O::Skel> = Vec::new();
        let mut links = Vec::new();
        for (chunk_no, chunk) in matches.chunks(per_object).enumerate() {
            let mut enable = Vec::new();
            for (i, m) in chunk.iter().enumerate() {
                let slot = (programs.slots > 0).then_some(i);
                enable.extend(
                    programs
                        .names(slot)
                        .into_iter()
                        .map(|(program, _)| Enable { program, fentry: Some(m.kernel_name().to_owned()) }),
                );
            }
            let skel = self.objects.load(Load {
                enable: &enable,
                first_index: chunk_no * per_object,
                first: skels.first(),
            })?;
            for e in &enable {
                let func = e.fentry.as_deref().unwrap_or_default();
                let link = program(&skel, &e.program)?.attach_trace();
                links.push(link.with_context(|| format!("attaching {} to {func}", e.program))?);
            }
            skels.push(skel);
        }
        Ok(Attached::new(skels, links, Vec::new()))
    }

    /// kprobe_multi or uprobe_multi: one link per program for every match, the index as each one's cookie
    /// (unless [`Cookies::Zero`]).
    fn multi(&self, mech: Attach, programs: Programs) -> Result<Attached<O::Skel>> {
        let matches = &self.target.matches;
        let enable: Vec<Enable> =
            programs.names(None).into_iter().map(|(program, _)| Enable { program, fentry: None }).collect();
        let skel = self.objects.load(Load { enable: &enable, first_index: 0, first: None })?;
        let cookies: Vec<u64> =
            if self.cookies == Cookies::Zero { Vec::new() } else { (0..matches.len() as u64).collect() };
        let mut links = Vec::new();
        for (name, retprobe) in programs.names(None) {
            let prog = program(&skel, &name)?;
            let link = match &self.target.kind {
                Kind::Kernel => {
                    let symbols = matches.iter().map(|m| m.kernel_name().to_owned()).collect();
                    let opts = KprobeMultiOpts { symbols, cookies: cookies.clone(), retprobe, ..Default::default() };
                    prog.attach_kprobe_multi_with_opts(opts).with_context(|| format!("attaching {mech}"))?
                }
                Kind::User { binary } => {
                    let offsets = matches.iter().map(Match::user_offset).collect::<Result<Vec<_>>>()?;
                    let opts = UprobeMultiOpts { offsets, cookies: cookies.clone(), retprobe, ..Default::default() };
                    prog.attach_uprobe_multi_with_opts(self.pid(), binary, "", opts)
                        .with_context(|| format!("attaching {mech} to {}", binary.display()))?
                }
                _ => bail!("{mech} does not attach to {}", self.target.kind.noun()),
            };
            links.push(link);
        }
        Ok(Attached::new(vec![skel], links, Vec::new()))
    }

    /// One link per match and program (kprobes, tracepoints, uprobes, USDT probes), in one object, or without
    /// cookies in slot objects. Matches that fail are kept in [`Attached::failed`], unless all do.
    fn one_each(&self, mech: Attach, programs: Programs) -> Result<Attached<O::Skel>> {
        if mech == Attach::Tracepoint {
            crate::attach::features::tracefs()?;
        }
        let matches = &self.target.matches;
        let slotted = self.cookies == Cookies::Slots && programs.slots > 0;
        let chunk_size = if slotted { programs.slots } else { matches.len().max(1) };
        let mut skels: Vec<O::Skel> = Vec::new();
        let mut links = Vec::new();
        let mut failed = Vec::new();
        let mut first_error = None;
        let give_up = |links: &Vec<Link>, failed: &Vec<(String, String)>| {
            links.is_empty() && failed.len() >= FIRST_FAILURES.min(matches.len())
        };
        for (chunk_no, chunk) in matches.chunks(chunk_size).enumerate() {
            let names = |i: usize| programs.names(slotted.then_some(i));
            let enable: Vec<Enable> = (0..if slotted { chunk.len() } else { 1 })
                .flat_map(names)
                .map(|(program, _)| Enable { program, fentry: None })
                .collect();
            let skel = self.objects.load(Load {
                enable: &enable,
                first_index: chunk_no * chunk_size,
                first: skels.first(),
            })?;
            for (i, m) in chunk.iter().enumerate() {
                let index = chunk_no * chunk_size + i;
                let cookie = match self.cookies {
                    Cookies::Zero => 0,
                    Cookies::Slots if slotted => 0,
                    _ => index as u64,
                };
                let attached: Result<Vec<Link>> = names(if slotted { i } else { 0 })
                    .into_iter()
                    .map(|(name, retprobe)| self.attach_one(&program(&skel, &name)?, mech, m, retprobe, cookie))
                    .collect();
                match attached {
                    Ok(new) => links.extend(new),
                    Err(err) => {
                        failed.push((m.name.clone(), format!("{:#}", err.root_cause())));
                        first_error.get_or_insert(err);
                        if give_up(&links, &failed) {
                            break;
                        }
                    }
                }
            }
            skels.push(skel);
            if give_up(&links, &failed) {
                break;
            }
        }
        if links.is_empty() {
            let err = first_error.unwrap_or_else(|| anyhow!("nothing to attach"));
            return Err(err.context(format!("{mech} attached to none of the matches")));
        }
        Ok(Attached::new(skels, links, failed))
    }

    /// Attaches `prog` to match `m` with `mech` (kprobe, tracepoint, uprobe, USDT), as a return probe if
    /// `retprobe`, with `cookie`.
    pub fn attach_one(
        &self,
        prog: &ProgramMut<'_>,
        mech: Attach,
        m: &Match,
        retprobe: bool,
        cookie: u64,
    ) -> Result<Link> {
        let link = match (&self.target.kind, &m.site) {
            (Kind::Kernel, _) => {
                prog.attach_kprobe_with_opts(retprobe, m.kernel_name(), KprobeOpts { cookie, ..Default::default() })
            }
            (_, Site::Tracepoint { category, event }) => {
                let opts = TracepointOpts { cookie, ..Default::default() };
                prog.attach_tracepoint_with_opts(TracepointCategory::Custom(category.clone()), event, opts)
            }
            (Kind::User { binary }, Site::Uprobe { offset }) => {
                let opts = UprobeOpts { cookie, retprobe, ..Default::default() };
                prog.attach_uprobe_with_opts(self.pid(), binary, *offset as usize, opts)
            }
            (Kind::Usdt { binary }, Site::Usdt { provider, name, .. }) => {
                let opts = UsdtOpts { cookie, ..Default::default() };
                prog.attach_usdt_with_opts(self.pid(), binary, provider, name, opts)
            }
            _ => bail!("{} cannot be attached with {mech}", m.name),
        };
        let what = if retprobe { format!("{mech} (return)") } else { mech.to_string() };
        link.with_context(|| format!("attaching {what} to {}", m.name))
    }
}

/// The program `name` of a loaded object.
pub fn program<'a, S: Skel<'static>>(skel: &'a S, name: &str) -> Result<ProgramMut<'a>> {
    skel.object()
        .progs_mut()
        .find(|p| p.name().to_str() == Some(name))
        .with_context(|| format!("the BPF object has no program {name}"))
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kind: Kind, n: usize) -> Target {
        let m = |i: usize| Match { name: format!("f{i}"), site: Site::Kernel(format!("f{i}")) };
        Target { kind, matches: (0..n).map(m).collect(), note: None }
    }

    #[test]
    fn the_ladder_is_the_kinds_within_the_tools_declared_ones() {
        let all = [Attach::Fentry, Attach::KprobeMulti, Attach::Kprobe, Attach::Tracepoint, Attach::Uprobe];
        // COREBPF_ATTACH would restrict these; the test process does not set it.
        if std::env::var(crate::attach::loader::FORCE_ATTACH_ENV).is_ok() {
            return;
        }
        assert_eq!(ladder(&target(Kind::Kernel, 3), &all, Some(8)).unwrap(), &all[..3]);
        assert_eq!(ladder(&target(Kind::Kernel, 9), &all, Some(8)).unwrap(), &all[1..3]);
        assert_eq!(ladder(&target(Kind::Kernel, 9), &all, None).unwrap(), &all[..3]);
        assert_eq!(ladder(&target(Kind::Tracepoint, 1), &all, None).unwrap(), [Attach::Tracepoint]);
        let usdt = Kind::Usdt { binary: "/bin/true".into() };
        assert_eq!(ladder(&target(usdt, 1), &all, None).unwrap(), [Attach::Uprobe]);
        assert!(ladder(&target(Kind::Tracepoint, 1), &all[..3], None).is_err());
    }

    #[test]
    fn slot_copies_are_named_after_their_program() {
        let p = Programs { entry: "x_entry", ret: Some("x_ret"), slots: 4 };
        assert_eq!(p.names(None), [("x_entry".to_owned(), false), ("x_ret".to_owned(), true)]);
        assert_eq!(p.names(Some(3)), [("x_entry_3".to_owned(), false), ("x_ret_3".to_owned(), true)]);
        assert_eq!(Programs::entry("y").names(None), [("y".to_owned(), false)]);
    }

    #[test]
    fn lists_read_as_prose() {
        let s = |v: &[&str]| join_and(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["a"]), "a");
        assert_eq!(s(&["a", "b"]), "a and b");
        assert_eq!(s(&["a", "b", "c"]), "a, b and c");
    }
}
