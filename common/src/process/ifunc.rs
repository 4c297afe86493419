// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Why a uprobe cannot go on an IFUNC (`strlen`, `memcpy` in glibc), and where it can: the symbol's address is
//! its resolver, which runs once when the library is loaded and picks an implementation for this CPU
//! (`__strlen_avx2`, `__strlen_evex`, ...). The implementation a process really uses is found where the loader
//! stored it: the slot of the library's own IRELATIVE relocation for that resolver, read from a live process that
//! maps the library (the `-p` process, else any), then named from the library's symbols.

use std::path::Path;

use super::elf::{ifunc, ElfSymbols};

/// A one-line explanation for a user who named IFUNC `name` of `binary`, with the implementation to probe where
/// it can be found; None when `name` is no IFUNC there.
pub fn explain(binary: &Path, name: &str, pid: Option<u32>) -> Option<String> {
    let found = ifunc(binary, name).ok()??;
    let symbols = ElfSymbols::read(binary).ok()?;
    let prefix = format!("__{name}_");
    let mut candidates: Vec<&str> =
        symbols.functions().iter().filter(|f| f.name.starts_with(&prefix)).map(|f| f.name.as_str()).collect();
    candidates.sort_unstable();
    candidates.dedup();
    let chosen =
        chosen_address(binary, &found.slots, pid).map(|(addr, pid)| (implementation_name(binary, &symbols, addr), pid));
    let what = format!(
        "'{name}' in {} is an IFUNC: its address is a resolver that picks an implementation when the library loads",
        binary.display()
    );
    Some(match (chosen, candidates.is_empty()) {
        (Some((chosen, pid)), _) if !chosen.contains(' ') => {
            format!("{what}; process {pid} runs {chosen}: probe that instead")
        }
        (Some((chosen, pid)), _) => format!("{what}; process {pid} runs {chosen}"),
        (None, false) => format!("{what}; probe one of its implementations instead: {}", candidates.join(", ")),
        (None, true) => format!("{what}; probe the function it resolves to instead"),
    })
}

/// The name of the function at `addr` of `binary`: from its own symbols, else from its debug information (a
/// stripped libc names `__strlen_avx2` only in the detached file libc6-dbg installs), else `offset 0x...`.
fn implementation_name(binary: &Path, symbols: &ElfSymbols, addr: u64) -> String {
    if let Some(f) = symbols
        .functions()
        .iter()
        .filter(|f| f.address == addr)
        .min_by_key(|f| (!f.name.starts_with("__"), f.name.len()))
    {
        return f.name.clone();
    }
    let offset = super::elf::file_offset_of(binary, addr).unwrap_or(addr);
    match super::symbols::Symbolizer::new().file_offsets_each(binary, &[offset]).pop() {
        Some(Ok(sym)) if sym.offset == 0 => sym.name,
        _ => format!("the code at offset {offset:#x} (no symbol names it: its debug symbols are not installed)"),
    }
}

/// The implementation's address (relative to the file, as its symbols are) that a live process mapping `binary`
/// holds in one of `slots`, and that process.
fn chosen_address(binary: &Path, slots: &[u64], pid: Option<u32>) -> Option<(u64, u32)> {
    let slot = *slots.first()?;
    let canonical = std::fs::canonicalize(binary).ok()?;
    let mut pids: Vec<u32> = pid.into_iter().collect();
    if pid.is_none() {
        let own = std::process::id();
        pids.extend(
            std::fs::read_dir("/proc")
                .ok()?
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|p| *p != own)
                .take(4096),
        );
    }
    pids.into_iter().find_map(|pid| {
        let base = load_base(pid, &canonical)?;
        let mut buf = [0u8; 8];
        let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
        std::os::unix::fs::FileExt::read_exact_at(&mem, &mut buf, base + slot).ok()?;
        let addr = u64::from_ne_bytes(buf).checked_sub(base)?;
        Some((addr, pid))
    })
}

/// Where process `pid` loaded `file`: the start of its mapping at file offset 0 (a shared library's addresses are
/// relative to it).
fn load_base(pid: u32, file: &Path) -> Option<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let range = fields.next()?;
        let offset = fields.nth(1)?;
        let path = fields.nth(2)?;
        (Path::new(path) == file && u64::from_str_radix(offset, 16).ok()? == 0)
            .then(|| u64::from_str_radix(range.split('-').next()?, 16).ok())
            .flatten()
    })
}
