// SPDX-License-Identifier: Apache-2.0 OR MIT
//! What a probe pattern names (funccount's, funclatency's, stackcount's): BCC's pattern forms, resolved to the
//! list of places to attach.
//!
//! `func` and `p::func` are kernel functions; `t:category:event` tracepoints; `lib:func`, `p:lib:func` and
//! `/path:func` user functions (`c` is libc); `u:lib:probe` USDT probes. The last part is a glob (or, with `-r`,
//! a regular expression) matched against kernel functions (see [`crate::attach::kernel_functions`]), tracefs events
//! (`category:event`), the ELF symbols of the library ([`crate::process::elf`]) or its USDT notes (probe names).

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use crate::attach::kernel_functions::traceable_functions;
use crate::process::elf::{find_binary, usdt_probes, ElfSymbols};
use crate::process::pattern::Pattern;
use anyhow::{bail, Context, Result};

/// BCC's limit on the number of probes one pattern may attach.
pub const MAX_MATCHES: usize = 1000;

/// The family of probe a pattern names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Kernel,
    Tracepoint,
    User { binary: PathBuf },
    Usdt { binary: PathBuf },
}

impl Kind {
    /// What the matches are called in messages.
    pub fn noun(&self) -> &'static str {
        match self {
            Kind::Kernel => "kernel functions",
            Kind::Tracepoint => "tracepoints",
            Kind::User { .. } => "functions",
            Kind::Usdt { .. } => "USDT probes",
        }
    }
}

/// Where one match is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// A kernel function, by name.
    Kernel(String),
    /// A tracepoint `category:event`.
    Tracepoint { category: String, event: String },
    /// A uprobe at this file offset of the binary.
    Uprobe { offset: u64 },
    /// Every site of USDT probe `provider:name` in the binary.
    Usdt { provider: String, name: String, sites: usize },
}

/// One thing to count, with the name printed in the FUNC column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    pub name: String,
    pub site: Site,
}

impl Match {
    /// The kernel function to probe (kprobes, fentry): the site's name, else the printed one.
    pub fn kernel_name(&self) -> &str {
        match &self.site {
            Site::Kernel(name) => name,
            _ => &self.name,
        }
    }

    /// The file offset of a user function's uprobe; an error for any other site.
    pub fn user_offset(&self) -> Result<usize> {
        match self.site {
            Site::Uprobe { offset } => Ok(offset as usize),
            _ => bail!("{} is not a user function", self.name),
        }
    }
}

/// A resolved pattern.
#[derive(Debug, Clone)]
pub struct Target {
    pub kind: Kind,
    pub matches: Vec<Match>,
    /// How the pattern was read, where it is not as written (BCC's `sys_NAME` as this architecture's system
    /// call wrapper): said under `-v`.
    pub note: Option<String>,
}

/// The prefix of this architecture's system call wrappers in the kernel (`__x64_sys_read`), where it has one.
const SYSCALL_WRAPPER_PREFIX: Option<&str> = if cfg!(target_arch = "x86_64") {
    Some("__x64_sys_")
} else if cfg!(target_arch = "aarch64") {
    Some("__arm64_sys_")
} else {
    None
};

/// BCC's `sys_NAME` or `SyS_NAME` (the names of system call entries before kernels wrapped them per
/// architecture) as this architecture's wrapper, `__x64_sys_NAME`, as BCC reads them; `None` for any other name.
pub fn syscall_wrapper_name(name: &str) -> Option<String> {
    let rest = name.strip_prefix("sys_").or_else(|| name.strip_prefix("SyS_"))?;
    Some(format!("{}{rest}", SYSCALL_WRAPPER_PREFIX?))
}

/// Parses `pattern` in BCC's forms and finds what it matches; fails on a malformed pattern, an unknown library,
/// no match, or more than [`MAX_MATCHES`] matches.
pub fn resolve(pattern: &str, regex: bool, pid: Option<u32>) -> Result<Target> {
    let (kind_char, library, name) = split(pattern)?;
    let compile = |text: &str| if regex { Pattern::regex(text) } else { Pattern::glob(text) };
    let mut note = None;
    let (kind, matches) = match (kind_char, library.as_str()) {
        ('p', "") => {
            let mut matches = kernel_functions(&compile(&name)?)?;
            // A kernel that wraps its system calls has no sys_read: BCC's examples mean __x64_sys_read.
            if let Some(wrapper) = syscall_wrapper_name(&name).filter(|_| matches.is_empty() && !regex) {
                matches = kernel_functions(&compile(&wrapper)?)?;
                if !matches.is_empty() {
                    note = Some(format!("\"{name}\" is read as \"{wrapper}\", this kernel's system call wrapper"));
                }
            }
            (Kind::Kernel, matches)
        }
        ('t', _) => (Kind::Tracepoint, tracepoints(&compile(&name)?)?),
        ('p', lib) => {
            let binary = binary(lib, pid)?;
            let matches = user_functions(&binary, &compile(&name)?)?;
            (Kind::User { binary }, matches)
        }
        ('u', lib) => {
            let binary = if lib.is_empty() {
                let Some(pid) = pid else { bail!("a USDT pattern needs a library or program: u:LIB:PROBE") };
                PathBuf::from(format!("/proc/{pid}/exe"))
            } else {
                binary(lib, pid)?
            };
            let matches = usdt(&binary, &compile(&name)?)?;
            (Kind::Usdt { binary }, matches)
        }
        _ => unreachable!("split() returns p, t or u"),
    };
    if matches.is_empty() {
        bail!("no {} matched by pattern \"{name}\"", kind.noun());
    }
    if matches.len() > MAX_MATCHES {
        bail!(
            "pattern \"{pattern}\" matches {} {}; at most {MAX_MATCHES} can be counted at once: narrow it",
            matches.len(),
            kind.noun()
        );
    }
    Ok(Target { kind, matches, note })
}

/// BCC's split of a pattern into (type, library, name pattern): `func`, `lib:func`, `p:lib:func`, `p::func`,
/// `t:cat:event` (name `cat:event`), `u:lib:probe`.
fn split(pattern: &str) -> Result<(char, String, String)> {
    let parts: Vec<&str> = pattern.split(':').collect();
    let (kind, library, name) = match parts.as_slice() {
        [name] => ('p', "", name.to_string()),
        [lib, name] => ('p', *lib, name.to_string()),
        ["t", category, event] => {
            if category.is_empty() || event.is_empty() {
                bail!("a tracepoint pattern is t:CATEGORY:EVENT, got \"{pattern}\"");
            }
            ('t', "", format!("{category}:{event}"))
        }
        ["p", lib, name] => ('p', *lib, name.to_string()),
        ["u", lib, name] => ('u', *lib, name.to_string()),
        [other, _, _] => bail!("type must be 'p', 't', or 'u', but got '{other}' in \"{pattern}\""),
        _ => bail!("too many ':'-separated components in pattern \"{pattern}\""),
    };
    if name.is_empty() {
        bail!("pattern \"{pattern}\" names no function");
    }
    Ok((kind, library.to_string(), name))
}

fn binary(lib: &str, pid: Option<u32>) -> Result<PathBuf> {
    find_binary(lib, pid)
}

fn kernel_functions(pattern: &Pattern) -> Result<Vec<Match>> {
    let functions = traceable_functions()?;
    Ok(functions.matching(pattern).into_iter().map(|name| Match { site: Site::Kernel(name.clone()), name }).collect())
}

fn tracepoints(pattern: &Pattern) -> Result<Vec<Match>> {
    let events = crate::attach::features::tracefs()?.join("events");
    let mut matches = Vec::new();
    for category in read_dir_names(&events)? {
        let Ok(names) = read_dir_names(&events.join(&category)) else { continue };
        for event in names {
            let full = format!("{category}:{event}");
            if events.join(&category).join(&event).join("id").exists() && pattern.is_match(&full) {
                matches.push(Match { name: full, site: Site::Tracepoint { category: category.clone(), event } });
            }
        }
    }
    matches.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(matches)
}

fn read_dir_names(dir: &std::path::Path) -> Result<Vec<String>> {
    let entries = fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    Ok(entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect())
}

fn user_functions(binary: &std::path::Path, pattern: &Pattern) -> Result<Vec<Match>> {
    let symbols = ElfSymbols::read(binary)?;
    Ok(symbols
        .matching(pattern)
        .into_iter()
        .map(|f| Match { name: f.name.clone(), site: Site::Uprobe { offset: f.file_offset } })
        .collect())
}

fn usdt(binary: &std::path::Path, pattern: &Pattern) -> Result<Vec<Match>> {
    let mut probes: BTreeMap<(String, String), usize> = BTreeMap::new();
    for probe in usdt_probes(binary)? {
        if pattern.is_match(&probe.name) {
            *probes.entry((probe.provider, probe.name)).or_default() += 1;
        }
    }
    let ambiguous = |name: &str| probes.keys().filter(|(_, n)| n == name).count() > 1;
    let mut matches: Vec<Match> = probes
        .iter()
        .map(|((provider, name), &sites)| Match {
            name: if ambiguous(name) { format!("{provider}:{name}") } else { name.clone() },
            site: Site::Usdt { provider: provider.clone(), name: name.clone(), sites },
        })
        .collect();
    matches.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcc_pattern_forms() {
        let s = |p: &str| split(p).unwrap();
        assert_eq!(s("vfs_*"), ('p', "".into(), "vfs_*".into()));
        assert_eq!(s("p::vfs_read"), ('p', "".into(), "vfs_read".into()));
        assert_eq!(s("c:malloc"), ('p', "c".into(), "malloc".into()));
        assert_eq!(s("p:c:malloc"), ('p', "c".into(), "malloc".into()));
        assert_eq!(s("/bin/bash:readline"), ('p', "/bin/bash".into(), "readline".into()));
        assert_eq!(s("t:sched:sched_fork"), ('t', "".into(), "sched:sched_fork".into()));
        assert_eq!(s("u:node:gc*"), ('u', "node".into(), "gc*".into()));
        assert!(split("x:a:b").is_err());
        assert!(split("a:b:c:d").is_err());
        assert!(split("t:sched:").is_err());
        assert!(split("c:").is_err());
    }
}
