// SPDX-License-Identifier: Apache-2.0 OR MIT
//! One user function, probed: what a tool that hooks a fixed function of a known file needs (threadsnoop's
//! `pthread_create`, bashreadline's `readline`).
//!
//! [`function_offset`] finds the function in an ELF file (the default version of a versioned symbol first,
//! as the dynamic linker binds new callers) and returns the file offset a uprobe is attached at; [`attach`]
//! attaches a loaded program there with the mechanism the tool's attach ladder chose: a uprobe_multi link of one
//! offset (6.6+) or a classic uprobe, on entry or on return, system-wide or in one process.

use std::path::Path;

use anyhow::{Context, Result};
use libbpf_rs::{Link, ProgramMut, UprobeMultiOpts, UprobeOpts};

use crate::attach::features::Attach;
use crate::process::elf::ElfSymbols;

/// The file offset of function `name` in the ELF file `binary` (its default version if the symbol is
/// versioned), or None if the file defines no such function.
pub fn function_offset(binary: &Path, name: &str) -> Result<Option<u64>> {
    let symbols = ElfSymbols::read_named(binary, &[name])?;
    let mut named = symbols.functions().iter().filter(|f| f.name == name);
    Ok(named.clone().find(|f| !f.hidden_version).or_else(|| named.next()).map(|f| f.file_offset))
}

/// Attaches `prog` (a `uprobe.multi`/`uretprobe.multi` program for [`Attach::UprobeMulti`], else a
/// `uprobe`/`uretprobe` one) at file offset `offset` of `binary`, on return if `retprobe`, in process `pid` only
/// if given.
pub fn attach(
    prog: &ProgramMut<'_>,
    mech: Attach,
    pid: Option<u32>,
    binary: &Path,
    offset: u64,
    retprobe: bool,
) -> Result<Link> {
    let pid = pid.map_or(-1, |p| p as i32);
    let kind = if retprobe { "uretprobe" } else { "uprobe" };
    let link = if mech == Attach::UprobeMulti {
        let opts = UprobeMultiOpts { offsets: vec![offset as usize], retprobe, ..Default::default() };
        prog.attach_uprobe_multi_with_opts(pid, binary, "", opts)
    } else {
        let opts = UprobeOpts { retprobe, ..Default::default() };
        prog.attach_uprobe_with_opts(pid, binary, offset as usize, opts)
    };
    link.with_context(|| format!("attaching a {kind} ({mech}) at offset {offset:#x} of {}", binary.display()))
}
