// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Linux capabilities: their names by number (`include/uapi/linux/capability.h`), and the kernel functions whose
//! presence in a call chain tells how a capability check was asked for (audited or not, from set*id()).
//!
//! `cap_capable()` receives the check's options (`CAP_OPT_NOAUDIT`, `CAP_OPT_INSETID`), but the
//! `capability:cap_capable` tracepoint (6.14+) does not carry them. The capability API functions are what set
//! them (`ns_capable_noaudit()` passes `CAP_OPT_NOAUDIT`, `ns_capable_setid()` passes `CAP_OPT_INSETID`, and so
//! on), so the innermost of them in the kernel stack at the tracepoint gives the options: [`CALLERS`] lists
//! them, and [`function_ranges`] finds their addresses in /proc/kallsyms.

use std::collections::HashMap;

use anyhow::{Context, Result};

/// Capability names by number, as the kernel's header defines them.
pub const NAMES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The name of capability `cap`, or `?` for a number this table does not know (as BCC prints it).
pub fn name(cap: i32) -> &'static str {
    usize::try_from(cap).ok().and_then(|i| NAMES.get(i)).copied().unwrap_or("?")
}

/// `CAP_OPT_NOAUDIT` of `include/linux/security.h`: the check is not audited.
pub const CAP_OPT_NOAUDIT: u32 = 1 << 1;
/// `CAP_OPT_INSETID`: the check comes from a set*id() system call.
pub const CAP_OPT_INSETID: u32 = 1 << 2;

/// Kernel functions that ask for capability checks, with the options each passes to `cap_capable()`. The ones
/// with no options are listed too, so that the innermost API function of a stack decides, not one further out.
pub const CALLERS: [(&str, u32); 14] = [
    ("ns_capable_noaudit", CAP_OPT_NOAUDIT),
    ("has_ns_capability_noaudit", CAP_OPT_NOAUDIT),
    ("has_capability_noaudit", CAP_OPT_NOAUDIT),
    ("cap_vm_enough_memory", CAP_OPT_NOAUDIT),
    // Calls cap_vm_enough_memory(), which the compiler may fold into it (6.18 does).
    ("security_vm_enough_memory_mm", CAP_OPT_NOAUDIT),
    ("ns_capable_setid", CAP_OPT_INSETID),
    ("ns_capable", 0),
    ("capable", 0),
    ("file_ns_capable", 0),
    ("has_ns_capability", 0),
    ("has_capability", 0),
    ("capable_wrt_inode_uidgid", 0),
    ("privileged_wrt_inode_uidgid", 0),
    ("bpf_token_capable", 0),
];

/// The address ranges `[start, end)` of the kernel text functions `names` found in /proc/kallsyms (each ends where
/// the next symbol starts), in the order of `names`; a function the kernel does not have (or inlined everywhere)
/// is left out.
pub fn function_ranges(names: &[&str]) -> Result<Vec<(String, u64, u64)>> {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").context("cannot read /proc/kallsyms")?;
    Ok(ranges_in(&kallsyms, names))
}

fn ranges_in(kallsyms: &str, names: &[&str]) -> Vec<(String, u64, u64)> {
    let mut addrs: Vec<u64> = Vec::new();
    let mut found: HashMap<&str, u64> = HashMap::new();
    for line in kallsyms.lines() {
        let mut fields = line.split_whitespace();
        let (Some(addr), Some(kind), Some(sym)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
        if addr == 0 {
            continue;
        }
        addrs.push(addr);
        // Only the kernel's own text (no module suffix): the first definition of a name wins.
        if matches!(kind, "T" | "t") && fields.next().is_none() {
            if let Some(&n) = names.iter().find(|&&n| n == sym) {
                found.entry(n).or_insert(addr);
            }
        }
    }
    addrs.sort_unstable();
    addrs.dedup();
    names
        .iter()
        .filter_map(|&n| {
            let start = *found.get(n)?;
            let next = addrs.partition_point(|&a| a <= start);
            let end = addrs.get(next).copied().unwrap_or(start + 1);
            Some((n.to_string(), start, end))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_unknown_numbers() {
        assert_eq!(name(0), "CAP_CHOWN");
        assert_eq!(name(21), "CAP_SYS_ADMIN");
        assert_eq!(name(40), "CAP_CHECKPOINT_RESTORE");
        assert_eq!(name(41), "?");
        assert_eq!(name(-1), "?");
    }

    #[test]
    fn ranges_end_at_the_next_symbol() {
        let text = "ffffffff81000010 T capable\nffffffff81000000 T ns_capable\nffffffff81000040 t other\n\
                    ffffffff81000050 T capable [some_module]\n";
        let got = ranges_in(text, &["capable", "ns_capable", "absent"]);
        assert_eq!(
            got,
            vec![
                ("capable".to_string(), 0xffffffff81000010, 0xffffffff81000040),
                ("ns_capable".to_string(), 0xffffffff81000000, 0xffffffff81000010),
            ]
        );
    }
}
