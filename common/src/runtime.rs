// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Language runtimes and their USDT probes, for the tools that trace a runtime's own events (ugc, javagc,
//! uthreads, ucalls, uflow, uobjnew): which provider each language's probes are published under and which probes
//! mark its garbage collections, thread starts and method calls, how to guess a process's language, and where in
//! a process the probes are.
//!
//! [`Language`] is the table: for each language BCC's language tools know, the USDT provider of its runtime
//! (`hotspot` for Java, `python`, `ruby`, `node`), the names of the files that usually carry those probes (the
//! program itself, or a library such as `libjvm.so`), and the begin/end probe pairs of its collections
//! ([`Language::gc_probes`]). [`detect`] guesses the language of a process as BCC does: a language's name in the
//! path of its executable, else a `lib<language>` library in its memory maps, else C if it maps a C library.
//! [`find_probes`] looks for the provider's notes in the process's executable and mapped libraries (the hinted
//! names first) and returns the file, reached the way [`crate::process::procmaps::mapped_library`] reaches it
//! (a container's own copy), with its probes, or an error that names the process and the provider;
//! [`RuntimeProbes::attach`] attaches a USDT program to one of them. Which runtime builds really fire these probes
//! is a fact of each build: the README says which were checked.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use libbpf_rs::{Link, ProgramMut, UsdtOpts};

use crate::process::elf::{usdt_probes, UsdtProbe};
use crate::process::procmaps::{is_libc_file, mapped_library};

/// A language whose runtime publishes USDT probes (C: a plain native program, traced through its C library).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Language {
    C,
    Java,
    Node,
    Perl,
    Php,
    Python,
    Ruby,
    Tcl,
}

/// Every language, in BCC's order of detection (C last: it is what remains).
const ALL: [Language; 8] = [
    Language::Java,
    Language::Node,
    Language::Perl,
    Language::Php,
    Language::Python,
    Language::Ruby,
    Language::Tcl,
    Language::C,
];

impl Language {
    /// The name on the command line (`-l java`).
    pub fn name(self) -> &'static str {
        match self {
            Language::C => "c",
            Language::Java => "java",
            Language::Node => "node",
            Language::Perl => "perl",
            Language::Php => "php",
            Language::Python => "python",
            Language::Ruby => "ruby",
            Language::Tcl => "tcl",
        }
    }

    /// The USDT provider of the runtime's probes.
    pub fn provider(self) -> &'static str {
        match self {
            Language::C => "libc",
            Language::Java => "hotspot",
            other => other.name(),
        }
    }

    /// True if `file_name` (no directory) is a file that usually carries the runtime's probes: the interpreter
    /// (`python3.11`, `node`, `ruby`) or its library (`libjvm.so`, `libpython3.11.so.1.0`, `libruby.so.3.1`).
    pub fn hinted_file(self, file_name: &str) -> bool {
        let stem = match self {
            Language::C => return is_libc_file(file_name),
            Language::Java => return file_name == "libjvm.so",
            other => other.name(),
        };
        file_name.starts_with(stem) || file_name.strip_prefix("lib").is_some_and(|rest| rest.starts_with(stem))
    }

    /// The begin/end probe pairs that bracket the runtime's garbage collections, and what each pair is: HotSpot
    /// has one pair per collection and one per memory pool a collection visits; Ruby one per phase.
    pub fn gc_probes(self) -> &'static [GcProbe] {
        match self {
            Language::Java => &[
                GcProbe { begin: "mem__pool__gc__begin", end: "mem__pool__gc__end", kind: GcKind::JavaPool },
                GcProbe { begin: "gc__begin", end: "gc__end", kind: GcKind::Plain },
            ],
            Language::Node => &[GcProbe { begin: "gc__start", end: "gc__done", kind: GcKind::NodeType }],
            Language::Python => &[GcProbe { begin: "gc__start", end: "gc__done", kind: GcKind::PythonGen }],
            Language::Ruby => &[
                GcProbe { begin: "gc__mark__begin", end: "gc__mark__end", kind: GcKind::RubyMark },
                GcProbe { begin: "gc__sweep__begin", end: "gc__sweep__end", kind: GcKind::RubySweep },
            ],
            _ => &[],
        }
    }

    /// The probes that fire in a new thread as it starts and as it ends, with what each is: HotSpot's
    /// `thread__start/stop` (the Java thread's name, its Java ID and its native ID); for C, glibc's
    /// `pthread_start` (the thread's start routine), present only in a C library built with SystemTap's probes.
    pub fn thread_probes(self) -> &'static [ThreadProbe] {
        match self {
            Language::Java => &[
                ThreadProbe { name: "thread__start", kind: ThreadKind::JavaStart },
                ThreadProbe { name: "thread__stop", kind: ThreadKind::JavaStop },
            ],
            Language::C => &[ThreadProbe { name: "pthread_start", kind: ThreadKind::Pthread }],
            _ => &[],
        }
    }

    /// The probes that fire as a method (function, sub, proc) is entered and as it returns, and where they
    /// pass its class (or file) and name; `None` for a language without them.
    pub fn call_probes(self) -> Option<CallProbes> {
        let (entry, ret, args) = match self {
            Language::Java => ("method__entry", "method__return", CallArgs::Java),
            Language::Perl => ("sub__entry", "sub__return", CallArgs::Strings { class: Some(1), method: 0 }),
            Language::Php => ("function__entry", "function__return", CallArgs::Strings { class: Some(3), method: 0 }),
            Language::Python => {
                ("function__entry", "function__return", CallArgs::Strings { class: Some(0), method: 1 })
            }
            Language::Ruby => ("method__entry", "method__return", CallArgs::Strings { class: Some(0), method: 1 }),
            Language::Tcl => ("proc__entry", "proc__return", CallArgs::Strings { class: None, method: 0 }),
            Language::C | Language::Node => return None,
        };
        Some(CallProbes { entry, ret, args })
    }
}

/// A runtime's method entry and return probes (both pass the same arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallProbes {
    pub entry: &'static str,
    pub ret: &'static str,
    pub args: CallArgs,
}

/// Where the call probes pass the class and method names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallArgs {
    /// HotSpot: (thread ID, class, class length, method, method length, signature, signature length), the
    /// names counted, not NUL-terminated.
    Java,
    /// NUL-terminated strings in these arguments (from 0); Tcl passes no class.
    Strings { class: Option<u8>, method: u8 },
}

impl CallArgs {
    /// The arguments packed as a USDT cookie for the BPF side's readers (`usdt_args.bpf.h`): bit 16 set for
    /// HotSpot's counted strings; else the class argument in bits 0-7 (0xff: none) and the method's in 8-15.
    pub fn cookie(self) -> u64 {
        match self {
            CallArgs::Java => 1 << 16 | 1 | 3 << 8,
            CallArgs::Strings { class, method } => u64::from(class.unwrap_or(0xff)) | u64::from(method) << 8,
        }
    }
}

/// One USDT probe of a thread's start or end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadProbe {
    pub name: &'static str,
    pub kind: ThreadKind,
}

/// What a thread probe marks, which decides what is read from its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadKind {
    /// glibc's `pthread_start(thread, start_routine, arg)`, in the new thread.
    Pthread,
    /// HotSpot's `thread__start(name, name_len, java_id, native_id, is_daemon)`.
    JavaStart,
    /// HotSpot's `thread__stop`, with the same arguments.
    JavaStop,
}

impl ThreadKind {
    /// BCC's TYPE column: `pthread`, `start`, `stop`.
    pub fn name(self) -> &'static str {
        match self {
            ThreadKind::Pthread => "pthread",
            ThreadKind::JavaStart => "start",
            ThreadKind::JavaStop => "stop",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Language {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ALL.into_iter().find(|l| l.name() == s).ok_or_else(|| format!("unknown language '{s}'"))
    }
}

/// One begin/end pair of USDT probes around a garbage collection (or a phase of one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcProbe {
    pub begin: &'static str,
    pub end: &'static str,
    pub kind: GcKind,
}

/// What a pair's probes carry beyond the time, which decides what is read from their arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcKind {
    /// Nothing (HotSpot's `gc__begin/end`).
    Plain,
    /// HotSpot's memory pools: manager and pool names, used and max bytes before and after.
    JavaPool,
    /// CPython: the generation collected (begin) and the objects collected (end).
    PythonGen,
    /// Node: the collection's type flags (end).
    NodeType,
    /// Ruby's mark phase.
    RubyMark,
    /// Ruby's sweep phase.
    RubySweep,
}

/// The language of process `pid` among `candidates`, guessed as BCC guesses it: a candidate's name in the real
/// path of the executable, else `/lib<name>` in a mapped file's path, else C (if a candidate) when a C library is
/// mapped. `None` if nothing fits or the process cannot be read.
pub fn detect(pid: u32, candidates: &[Language]) -> Option<Language> {
    let ordered: Vec<Language> = ALL.into_iter().filter(|l| candidates.contains(l)).collect();
    if let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) {
        let exe = exe.to_string_lossy();
        if let Some(&l) = ordered.iter().find(|l| **l != Language::C && exe.contains(l.name())) {
            return Some(l);
        }
    }
    let files = mapped_files(pid).ok()?;
    if let Some(&l) =
        ordered.iter().find(|l| **l != Language::C && files.iter().any(|f| f.contains(&format!("/lib{}", l.name()))))
    {
        return Some(l);
    }
    let libc = files.iter().any(|f| Path::new(f).file_name().and_then(|n| n.to_str()).is_some_and(is_libc_file));
    (libc && ordered.contains(&Language::C)).then_some(Language::C)
}

/// The file of a process that carries a language's USDT probes, and those probes.
#[derive(Debug, Clone)]
pub struct RuntimeProbes {
    pub language: Language,
    pub pid: u32,
    /// The file to attach to, as this process reaches the mapped file (see [`mapped_library`]).
    pub file: PathBuf,
    /// The provider's probe sites in `file`.
    pub probes: Vec<UsdtProbe>,
}

impl RuntimeProbes {
    /// True if the file has at least one site of probe `name`.
    pub fn has(&self, name: &str) -> bool {
        self.probes.iter().any(|p| p.name == name)
    }

    /// Fails naming the first of `names` the file lacks.
    pub fn require(&self, names: &[&str]) -> Result<()> {
        if let Some(missing) = names.iter().find(|n| !self.has(n)) {
            bail!(
                "{} has no {}:{missing} probe (process {}, {})",
                self.file.display(),
                self.language.provider(),
                self.pid,
                self.language
            );
        }
        Ok(())
    }

    /// Attaches `prog` (a `SEC("usdt")` program) to every site of the provider's probe `name` in this process's
    /// file, with `cookie` as its USDT cookie (what the program reads with `bpf_usdt_cookie`).
    pub fn attach(&self, prog: &ProgramMut<'_>, name: &str, cookie: u64) -> Result<Link> {
        let provider = self.language.provider();
        let opts = UsdtOpts { cookie, ..Default::default() };
        prog.attach_usdt_with_opts(self.pid as i32, &self.file, provider, name, opts)
            .with_context(|| format!("attaching to {provider}:{name} in {}", self.file.display()))
    }
}

/// Fails with one sentence when the runtime is known not to fire its method probes (`call_probes`) in this
/// process: CPython 3.11 and later skip `function__entry/return` for ordinary calls; HotSpot fires
/// `method__entry/return` only with `-XX:+ExtendedDTraceProbes` (or `-XX:+DTraceMethodProbes`), PHP only with
/// `USE_ZEND_DTRACE=1` in its environment. `what` names the probes in the message ("method calls").
pub fn require_call_probes_fire(found: &RuntimeProbes, what: &str) -> Result<()> {
    let pid = found.pid;
    match found.language {
        Language::Python => {
            if let Some((major, minor)) = python_version(&found.file) {
                if (major, minor) >= (3, 11) {
                    bail!(
                        "CPython {major}.{minor} ({}) does not fire its function__entry/return probes for ordinary \
                         calls (its inlined calls skip them): the {what} of process {pid} cannot be traced",
                        found.file.display()
                    );
                }
            }
        }
        Language::Java => require_java_flag(pid, "DTraceMethodProbes", what)?,
        Language::Php if environ(pid).is_some_and(|env| !env.iter().any(|v| v == "USE_ZEND_DTRACE=1")) => {
            bail!("process {pid} runs PHP without USE_ZEND_DTRACE=1 in its environment: its {what} fire no probes")
        }
        _ => {}
    }
    Ok(())
}

/// Fails when process `pid` is known to run HotSpot without `flag` (`DTraceMethodProbes`, `DTraceAllocProbes`)
/// and without `ExtendedDTraceProbes`, which turns both on: neither is on its command line nor in the options of
/// its environment (JAVA_TOOL_OPTIONS, _JAVA_OPTIONS, JDK_JAVA_OPTIONS), and no options file or argument file is
/// named (those are not read: then the flag may be on, and nothing is said).
pub fn require_java_flag(pid: u32, flag: &str, what: &str) -> Result<()> {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return Ok(()) };
    let mut words: Vec<String> = cmdline.split(|&b| b == 0).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
    let Some(env) = environ(pid) else { return Ok(()) };
    for var in ["JAVA_TOOL_OPTIONS=", "_JAVA_OPTIONS=", "JDK_JAVA_OPTIONS="] {
        if let Some(value) = env.iter().find_map(|v| v.strip_prefix(var)) {
            words.extend(value.split_whitespace().map(str::to_string));
        }
    }
    let unknown =
        words.iter().any(|w| w.starts_with('@') || w.starts_with("-XX:Flags=") || w.starts_with("-XX:VMOptionsFile="));
    let mut on = false;
    for word in &words {
        for name in [flag, "ExtendedDTraceProbes"] {
            if word == &format!("-XX:+{name}") {
                on = true;
            } else if word == &format!("-XX:-{name}") {
                on = false;
            }
        }
    }
    if !on && !unknown {
        bail!(
            "process {pid} runs Java without -XX:+ExtendedDTraceProbes: HotSpot fires no probes for its {what} \
             (start it with that flag)"
        );
    }
    Ok(())
}

/// The `(major, minor)` version of CPython in a file's name: `python3.11`, `libpython3.11.so.1.0`.
pub fn python_version(file: &Path) -> Option<(u32, u32)> {
    let name = file.file_name()?.to_str()?;
    let rest = name.strip_prefix("lib").unwrap_or(name).strip_prefix("python")?;
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The environment of process `pid` (`NAME=value` strings), if it can be read.
fn environ(pid: u32) -> Option<Vec<String>> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(env.split(|&b| b == 0).map(|v| String::from_utf8_lossy(v).into_owned()).collect())
}

/// Finds the executable or mapped library of process `pid` that carries `language`'s USDT probes (its provider's
/// notes): the files [`Language::hinted_file`] names first, then the executable, then every other mapped file.
/// Fails with one sentence naming the process and the provider when none has them.
pub fn find_probes(pid: u32, language: Language) -> Result<RuntimeProbes> {
    let provider = language.provider();
    let files = mapped_files(pid)?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let exe_name = exe.as_deref().and_then(|e| e.file_name()).and_then(|n| n.to_str()).map(str::to_string);
    let mut names: Vec<String> = Vec::new();
    let file_names = files.iter().filter_map(|f| Path::new(f).file_name().and_then(|n| n.to_str()));
    let file_names: Vec<&str> = file_names.collect();
    names.extend(file_names.iter().filter(|n| language.hinted_file(n)).map(|n| n.to_string()));
    names.extend(exe_name.clone());
    names.extend(file_names.iter().map(|n| n.to_string()));
    let mut seen = BTreeSet::new();
    for name in names {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(path) = mapped_library(pid, |n| n == name)? else { continue };
        let Ok(all) = usdt_probes(&path) else { continue };
        let probes: Vec<UsdtProbe> = all.into_iter().filter(|p| p.provider == provider).collect();
        if !probes.is_empty() {
            return Ok(RuntimeProbes { language, pid, file: path, probes });
        }
    }
    let exe = exe.map(|e| e.display().to_string()).unwrap_or_else(|| "?".into());
    bail!("process {pid} ({exe}) has no {provider} USDT probes: it is not a {language} runtime built with them")
}

/// The distinct paths of the files process `pid` maps, in the order of its maps.
fn mapped_files(pid: u32) -> Result<Vec<String>> {
    let maps_path = format!("/proc/{pid}/maps");
    let maps = std::fs::read_to_string(&maps_path).with_context(|| format!("cannot read {maps_path}"))?;
    let mut seen = BTreeSet::new();
    Ok(maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5).map(|_| line))
        .filter_map(|line| line.find(" /").map(|i| line[i + 1..].trim_end_matches(" (deleted)").to_string()))
        .filter(|path| seen.insert(path.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_providers_follow_the_runtimes() {
        for l in ALL {
            assert_eq!(l.name().parse::<Language>(), Ok(l));
        }
        assert_eq!(Language::Java.provider(), "hotspot");
        assert_eq!(Language::Python.provider(), "python");
        assert!("cobol".parse::<Language>().is_err());
    }

    #[test]
    fn hinted_files_are_the_interpreters_and_their_libraries() {
        assert!(Language::Java.hinted_file("libjvm.so"));
        assert!(!Language::Java.hinted_file("libjava.so"));
        assert!(Language::Python.hinted_file("python3.11"));
        assert!(Language::Python.hinted_file("libpython3.11.so.1.0"));
        assert!(Language::Ruby.hinted_file("libruby.so.3.1"));
        assert!(!Language::Ruby.hinted_file("libc.so.6"));
        assert!(Language::C.hinted_file("libc.so.6"));
    }

    #[test]
    fn python_versions_come_from_file_names() {
        assert_eq!(python_version(Path::new("/usr/bin/python3.11")), Some((3, 11)));
        assert_eq!(python_version(Path::new("/lib/libpython3.9.so.1.0")), Some((3, 9)));
        assert_eq!(python_version(Path::new("/usr/bin/python3")), None);
        assert_eq!(python_version(Path::new("/usr/bin/java")), None);
    }

    #[test]
    fn call_argument_cookies() {
        assert_eq!(Language::Python.call_probes().unwrap().args.cookie(), 0x100);
        assert_eq!(Language::Tcl.call_probes().unwrap().args.cookie(), 0xff);
        assert_eq!(Language::Java.call_probes().unwrap().args.cookie(), 0x10301);
        assert!(Language::C.call_probes().is_none());
    }

    #[test]
    fn this_test_process_is_c() {
        let me = std::process::id();
        assert_eq!(detect(me, &[Language::Java, Language::Python]), None);
        assert_eq!(detect(me, &[Language::C, Language::Java]), Some(Language::C));
        let err = find_probes(me, Language::Java).unwrap_err().to_string();
        assert!(err.contains("no hotspot USDT probes"), "{err}");
    }
}
