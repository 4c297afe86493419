// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The processes ustat traces and the probes it counts in each.
//!
//! [`probes`] is BCC's table: for each language, its USDT probes and the column each adds to. [`Targets::scan`]
//! walks /proc; a process not seen before (a PID with a new start time or a new executable) whose language is one
//! of `-l`'s ([`runtime::detect`]) and whose executable or libraries carry the runtime's probes
//! ([`runtime::find_probes`]) is attached: the program goes on every probe of the table the file has. What was
//! decided about a process is remembered, so a scan reads only new processes' memory maps; a runtime whose probes
//! are not found at its first look (its library not mapped yet) is looked at once more at the next scan.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use common::process::elf::usdt_probes;
use common::runtime::{self, Language, RuntimeProbes};
use libbpf_rs::{Link, ProgramMut, UsdtOpts};

use crate::bpf::consts::{CAT_CLOAD, CAT_EXCP, CAT_GC, CAT_METHOD, CAT_OBJNEW, CAT_THREAD};

/// One probe ustat counts: its provider (None: the language's own), its name and its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub provider: Option<&'static str>,
    pub name: &'static str,
    pub column: usize,
}

const fn own(name: &'static str, column: usize) -> Probe {
    Probe { provider: None, name, column }
}

/// The probes counted for `language`, as BCC's ustat lists them, but one begin per collection: HotSpot's
/// `mem__pool__gc__begin` (one per memory pool a collection visits) and Ruby's `gc__sweep__begin` (a phase of the
/// collection `gc__mark__begin` starts) are left out, so GC is collections. Java's exceptions are JNI's
/// `ExceptionOccurred` (provider `hotspot_jni`), as in BCC: HotSpot has no probe for a throw.
pub fn probes(language: Language) -> &'static [Probe] {
    const JAVA: &[Probe] = &[
        own("method__entry", CAT_METHOD),
        own("gc__begin", CAT_GC),
        own("object__alloc", CAT_OBJNEW),
        own("class__loaded", CAT_CLOAD),
        Probe { provider: Some("hotspot_jni"), name: "ExceptionOccurred__entry", column: CAT_EXCP },
        own("thread__start", CAT_THREAD),
    ];
    const NODE: &[Probe] = &[own("gc__start", CAT_GC)];
    const PERL: &[Probe] = &[own("sub__entry", CAT_METHOD)];
    const PHP: &[Probe] = &[
        own("function__entry", CAT_METHOD),
        own("compile__file__entry", CAT_CLOAD),
        own("exception__thrown", CAT_EXCP),
    ];
    const PYTHON: &[Probe] = &[own("function__entry", CAT_METHOD), own("gc__start", CAT_GC)];
    const RUBY: &[Probe] = &[
        own("method__entry", CAT_METHOD),
        own("cmethod__entry", CAT_METHOD),
        own("gc__mark__begin", CAT_GC),
        own("object__create", CAT_OBJNEW),
        own("hash__create", CAT_OBJNEW),
        own("string__create", CAT_OBJNEW),
        own("array__create", CAT_OBJNEW),
        own("require__entry", CAT_CLOAD),
        own("load__entry", CAT_CLOAD),
        own("raise", CAT_EXCP),
    ];
    const TCL: &[Probe] = &[own("proc__entry", CAT_METHOD), own("obj__create", CAT_OBJNEW)];
    match language {
        Language::Java => JAVA,
        Language::Node => NODE,
        Language::Perl => PERL,
        Language::Php => PHP,
        Language::Python => PYTHON,
        Language::Ruby => RUBY,
        Language::Tcl => TCL,
        Language::C => &[],
    }
}

/// A traced process.
pub struct Target {
    pub pid: u32,
    pub language: Language,
    /// Its command line, arguments joined by spaces (as BCC shows it, without the trailing space).
    pub cmdline: String,
    /// Its process name (/proc/PID/comm), read when it is first traced.
    pub comm: String,
    /// Its start time (clock ticks after boot), which tells it from a later process given the same PID.
    start: u64,
    _links: Vec<Link>,
}

/// What a scan decided about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Traced,
    Ignored,
    /// A runtime whose probes were not found: looked at again at the next scan, once.
    Retry,
}

/// The traced processes and what is known of the others.
pub struct Targets {
    languages: Vec<Language>,
    debug: bool,
    traced: HashMap<u32, Target>,
    /// Every process looked at: its start time and executable, and the verdict.
    seen: HashMap<u32, (u64, Option<PathBuf>, Verdict)>,
}

impl Targets {
    pub fn new(languages: Vec<Language>, debug: bool) -> Self {
        Targets { languages, debug, traced: HashMap::new(), seen: HashMap::new() }
    }

    /// The traced processes, by PID.
    pub fn iter(&self) -> impl Iterator<Item = &Target> {
        let mut all: Vec<&Target> = self.traced.values().collect();
        all.sort_by_key(|t| t.pid);
        all.into_iter()
    }

    /// The traced processes that have ended (or whose PID now belongs to another process).
    pub fn ended(&self) -> HashSet<u32> {
        self.traced.values().filter(|t| start_time(t.pid) != Some(t.start)).map(|t| t.pid).collect()
    }

    /// Stops tracing process `pid` (its probes detached).
    pub fn remove(&mut self, pid: u32) {
        self.traced.remove(&pid);
    }

    /// Looks at every process not seen before and attaches `prog` to those that are runtimes of `-l`'s languages.
    pub fn scan(&mut self, prog: &ProgramMut<'_>) {
        let Ok(dir) = std::fs::read_dir("/proc") else { return };
        let mut alive = HashSet::new();
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Some(start) = start_time(pid) else { continue };
            alive.insert(pid);
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
            let verdict = match self.seen.get(&pid) {
                Some((s, e, v)) if *s == start && *e == exe => match v {
                    Verdict::Retry => Some(Verdict::Retry),
                    _ => continue,
                },
                _ => None,
            };
            if self.traced.get(&pid).is_some_and(|t| t.start != start) {
                continue; // Ended since this interval began: reported, then removed, at the next report.
            }
            let now = self.look_at(pid, start, exe.is_some(), prog);
            let now = if now == Verdict::Retry && verdict == Some(Verdict::Retry) { Verdict::Ignored } else { now };
            self.seen.insert(pid, (start, exe, now));
        }
        self.seen.retain(|pid, _| alive.contains(pid));
    }

    /// Decides about one process and, if it is a runtime with probes, traces it.
    fn look_at(&mut self, pid: u32, start: u64, has_exe: bool, prog: &ProgramMut<'_>) -> Verdict {
        if !has_exe || pid == std::process::id() {
            return Verdict::Ignored;
        }
        let Some(language) = runtime::detect(pid, &self.languages) else { return Verdict::Ignored };
        let found = match runtime::find_probes(pid, language) {
            Ok(found) => found,
            Err(err) => {
                if self.debug {
                    eprintln!("ustat: {err:#}");
                }
                return Verdict::Retry;
            }
        };
        let Some(cmdline) = cmdline(pid) else { return Verdict::Ignored };
        let (links, names) = attach(prog, &found);
        if links.is_empty() {
            return Verdict::Ignored;
        }
        if self.debug {
            eprintln!("ustat: tracing {language} process {pid} ({}): {}", found.file.display(), names.join(", "));
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim_end().to_string();
        self.traced.insert(pid, Target { pid, language, cmdline, comm, start, _links: links });
        Verdict::Traced
    }
}

/// Attaches `prog` to every probe of the table that the process's file has, with its column as the cookie;
/// returns the links and the probes' names. A probe that cannot be attached while the process lives is said on
/// stderr; the others are still counted.
fn attach(prog: &ProgramMut<'_>, found: &RuntimeProbes) -> (Vec<Link>, Vec<&'static str>) {
    let table = probes(found.language);
    let others: Vec<_> = if table.iter().any(|p| p.provider.is_some()) {
        usdt_probes(&found.file).unwrap_or_default()
    } else {
        Vec::new()
    };
    let (mut links, mut names) = (Vec::new(), Vec::new());
    for probe in table {
        let result = match probe.provider {
            None if found.has(probe.name) => found.attach(prog, probe.name, probe.column as u64),
            Some(provider) if others.iter().any(|p| p.provider == provider && p.name == probe.name) => {
                let opts = UsdtOpts { cookie: probe.column as u64, ..Default::default() };
                prog.attach_usdt_with_opts(found.pid as i32, &found.file, provider, probe.name, opts)
                    .map_err(anyhow::Error::from)
            }
            _ => continue,
        };
        match result {
            Ok(link) => {
                links.push(link);
                names.push(probe.name);
            }
            Err(err) if start_time(found.pid).is_some() => {
                eprintln!("ustat: process {}: cannot attach to {}: {err:#}", found.pid, probe.name);
            }
            Err(_) => break,
        }
    }
    (links, names)
}

/// The start time of process `pid` (field 22 of its stat file), or None if it does not exist.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold anything.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The command line of process `pid`, its arguments joined by spaces.
fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> =
        raw.split(|&b| b == 0).filter(|w| !w.is_empty()).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
    Some(words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_has_probes_and_columns_are_known() {
        for language in crate::LANGUAGES {
            assert!(!probes(language).is_empty(), "{language}");
            assert!(probes(language).iter().all(|p| p.column < crate::bpf::consts::NCATS));
        }
        let java_gc: Vec<&str> = probes(Language::Java).iter().filter(|p| p.column == CAT_GC).map(|p| p.name).collect();
        assert_eq!(java_gc, ["gc__begin"]);
    }

    #[test]
    fn this_process_has_a_start_time_and_a_command_line() {
        let me = std::process::id();
        assert!(start_time(me).is_some());
        assert!(cmdline(me).is_some_and(|c| !c.is_empty()));
        assert_eq!(start_time(u32::MAX), None);
    }
}
