//! Processes, ELF files and symbols: what runs, where its code is mapped, and the names of its addresses.
//!
//! [`procmaps`] reads a process's (or the system's) libraries, also across mount namespaces; [`elf`] lists an
//! ELF file's functions and USDT notes; [`pattern`] matches names by BCC's glob or regex rules; [`targets`]
//! resolves a probe pattern (`vfs_*`, `c:malloc`, `t:sched:*`, `u:lib:probe`) to the places to attach;
//! [`symbols`] names kernel and user addresses with blazesym.

pub mod elf;
pub mod pattern;
pub mod procmaps;
pub mod symbols;
pub mod targets;
