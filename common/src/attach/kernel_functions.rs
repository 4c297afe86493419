// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Kernel functions that a tracing tool may attach to (fentry, kprobe), found as BCC finds them.
//!
//! [`traceable_functions`] reads the text symbols of `/proc/kallsyms` and keeps those ftrace lists in
//! `available_filter_functions` (the functions it can patch), minus BCC's exclusions: the kprobe blacklist,
//! anything between `__init_begin`/`__init_end` and `__irqentry_text_start`/`_end`, `NOKPROBE_SYMBOL`s
//! (`_kbl_addr_*`), perf's own functions (`__perf*`, `perf_*`), static-call trampolines (`__SCT__*`) and gcc's
//! `.cold` parts. Where `available_filter_functions` cannot be read (tracefs missing, or access denied as on
//! kernels that forbid ftrace function tracing) the kallsyms text symbols are used alone and
//! [`KernelFunctions::filtered_by_ftrace`] says so; attaching will then tell whether the kernel allows it.

use std::collections::{BTreeSet, HashSet};
use std::fs;

use anyhow::{Context, Result};

use crate::process::pattern::Pattern;

/// The traceable kernel functions, by name.
#[derive(Debug, Clone, Default)]
pub struct KernelFunctions {
    names: BTreeSet<String>,
    /// True if the list was intersected with ftrace's `available_filter_functions`.
    pub filtered_by_ftrace: bool,
}

impl KernelFunctions {
    /// The names that `pattern` matches, sorted.
    pub fn matching(&self, pattern: &Pattern) -> Vec<String> {
        if let Some(name) = pattern.literal() {
            return self.names.get(name).into_iter().cloned().collect();
        }
        self.names.iter().filter(|n| pattern.is_full_match(n)).cloned().collect()
    }

    /// True if `name` is traceable.
    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// How many functions are traceable.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if none is.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Reads the traceable kernel functions (see the module documentation).
pub fn traceable_functions() -> Result<KernelFunctions> {
    let kallsyms = fs::read_to_string("/proc/kallsyms").context("cannot read /proc/kallsyms")?;
    let tracefs = crate::attach::features::tracefs().ok();
    let available = tracefs.as_ref().and_then(|dir| fs::read_to_string(dir.join("available_filter_functions")).ok());
    let blacklist = read_blacklist(tracefs.as_deref());
    let available: Option<HashSet<&str>> =
        available.as_deref().map(|text| text.lines().filter_map(|l| l.split_whitespace().next()).collect());
    let names = kallsyms_functions(&kallsyms)
        .filter(|name| !blacklist.contains(*name))
        .filter(|name| available.as_ref().is_none_or(|set| set.contains(name)))
        .map(str::to_string)
        .collect();
    Ok(KernelFunctions { names, filtered_by_ftrace: available.is_some() })
}

/// The kprobe blacklist (`ADDR-ADDR\tname` lines), from debugfs or next to tracefs; empty if unreadable.
fn read_blacklist(tracefs: Option<&std::path::Path>) -> HashSet<String> {
    let mut places = vec![std::path::PathBuf::from("/sys/kernel/debug/kprobes/blacklist")];
    if let Some(dir) = tracefs {
        places.push(dir.join("../debug/kprobes/blacklist"));
    }
    places
        .iter()
        .find_map(|p| fs::read_to_string(p).ok())
        .map(|text| text.lines().filter_map(|l| l.split_whitespace().nth(1)).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The text symbols of kallsyms text (`ADDR TYPE NAME [MODULE]`) outside the init and irqentry sections, minus
/// the names BCC never attaches to.
fn kallsyms_functions(kallsyms: &str) -> impl Iterator<Item = &str> {
    #[derive(PartialEq)]
    enum Section {
        Before,
        Inside,
        After,
    }
    let mut init = Section::Before;
    let mut irq = Section::Before;
    kallsyms.lines().filter_map(move |line| {
        let mut fields = line.split_whitespace();
        let (_addr, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
        match (&init, name) {
            (Section::Before, "__init_begin") => {
                init = Section::Inside;
                return None;
            }
            (Section::Inside, "__init_end") => {
                init = Section::After;
                return None;
            }
            (Section::Inside, _) => return None,
            _ => {}
        }
        match (&irq, name) {
            (Section::Before, "__irqentry_text_start") => {
                irq = Section::Inside;
                return None;
            }
            (Section::Before | Section::Inside, "__irqentry_text_end") => {
                irq = Section::After;
                return None;
            }
            (Section::Inside, _) => return None,
            _ => {}
        }
        if !matches!(kind, "t" | "T" | "w" | "W") || excluded(name) {
            return None;
        }
        Some(name)
    })
}

/// BCC's name-based exclusions: NOKPROBE_SYMBOLs, perf itself, static-call trampolines, gcc's `.cold` parts;
/// and the `__pfx_` padding before each function (6.2+), which is no function.
fn excluded(name: &str) -> bool {
    name.starts_with("__pfx_")
        || name.starts_with("_kbl_addr_")
        || name.starts_with("__perf")
        || name.starts_with("perf_")
        || name.starts_with("__SCT__")
        || is_cold_part(name)
}

/// `foo.cold` or `foo.cold.12`.
fn is_cold_part(name: &str) -> bool {
    let Some(at) = name.find(".cold") else {
        return false;
    };
    let rest = &name[at + ".cold".len()..];
    rest.is_empty() || rest.strip_prefix('.').is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_sections_and_exclusions() {
        let text = "\
0 T _stext
0 T __pfx_vfs_read
1 T vfs_read
2 t __init_begin
3 T in_init
4 t __init_end
5 T __irqentry_text_start
6 T in_irq
7 T __irqentry_text_end
8 T perf_event_open
9 t helper.cold
10 t helper.cold.3
11 D some_data
12 t kept.isra.0
13 W weak_fn
14 t mod_fn\t[ext4]
";
        let names: Vec<&str> = kallsyms_functions(text).collect();
        assert_eq!(names, ["_stext", "vfs_read", "kept.isra.0", "weak_fn", "mod_fn"]);
    }

    #[test]
    fn cold_parts() {
        assert!(is_cold_part("a.cold"));
        assert!(is_cold_part("a.cold.1"));
        assert!(!is_cold_part("a.colder"));
        assert!(!is_cold_part("cold_fn"));
    }

    #[test]
    fn literal_patterns_are_looked_up() {
        let funcs =
            KernelFunctions { names: ["vfs_read", "vfs_write"].map(String::from).into(), filtered_by_ftrace: true };
        assert_eq!(funcs.matching(&Pattern::glob("vfs_read").unwrap()), ["vfs_read"]);
        assert_eq!(funcs.matching(&Pattern::glob("vfs_*").unwrap()).len(), 2);
        assert!(funcs.matching(&Pattern::glob("nope").unwrap()).is_empty());
        // Kernel functions match as whole names (BCC's re.fullmatch), regexes too.
        assert_eq!(funcs.matching(&Pattern::regex("vfs_(read|write)").unwrap()).len(), 2);
        assert!(funcs.matching(&Pattern::regex("vfs_re").unwrap()).is_empty());
    }
}
