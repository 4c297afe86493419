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
