// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Processes, ELF files and symbols: what runs, where its code is mapped, and the names of its addresses.
//!
//! [`procmaps`] reads a process's (or the system's) libraries, also across mount namespaces; [`elf`] lists an
//! ELF file's functions and USDT notes; [`ifunc`] says which implementation an IFUNC resolved to; [`pattern`] matches names by BCC's glob or regex rules; [`symbols`]
//! names kernel and user addresses with blazesym; [`kptr`] says once why kernel frames have no names when
//! /proc/kallsyms hides the kernel's addresses. (Probe patterns such as `vfs_*` or `c:malloc` are resolved by
//! the function-target family, [`crate::functions`].)

pub mod elf;
pub mod ifunc;
pub mod kptr;
pub mod pattern;
pub mod procmaps;
pub mod symbols;

/// True once process `pid` has ended: /proc has no such process, or only its zombie (exited, not yet reaped by its
/// parent) or dead entry. For the tools that trace one process and stop when it exits.
pub fn has_exited(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return true };
    // The state follows the command name, which is in parentheses and may hold any byte.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    state.is_none_or(|s| matches!(s, 'Z' | 'X' | 'x'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn exited_processes_and_zombies() {
        assert!(!super::has_exited(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // A zombie until reaped, then gone.
        while !super::has_exited(pid) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.wait().unwrap();
        assert!(super::has_exited(pid));
    }
}
