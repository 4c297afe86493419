// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Addresses to function names with blazesym, for the stack tools (profile, offcputime, stackcount, ...).
//!
//! One [`Symbolizer`] serves a whole run. Kernel addresses resolve through `/proc/kallsyms`; user addresses through
//! the process's memory maps, the ELF symbol tables and DWARF where present, with Rust and C++ names demangled.
//! A process may exit before the tool prints its stacks, so [`Symbolizer::remember_process`] captures its memory
//! maps while it lives (call it on first sight of a PID); at the end, processes that are gone are resolved through
//! those saved maps and the files' paths. Lookups are batched: a tool adds every address it will print to a
//! [`Batch`], resolves it once (one call per process plus one for the kernel) and reads names from the
//! [`Resolved`] table; addresses that resolve to nothing print as `[unknown]`, as in BCC.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use anyhow::Result;
use blazesym::symbolize::cache::{self, Cache};
use blazesym::symbolize::source::{Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized};
use blazesym::MaybeDefault;
use libbpf_rs::MapCore;

use crate::attach::events::{EventStream, Lost};
use crate::run::Signals;

/// What an unresolvable frame prints as.
pub const UNKNOWN: &str = "[unknown]";

/// A resolved address: the function's name and the address's offset into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub offset: u64,
    /// The file (or `[vdso]`) the function is in, for user addresses.
    pub module: Option<String>,
    /// Found in DWARF without a start address (blazesym places functions whose address is in `DW_AT_ranges`, as
    /// in Debian's libc6-dbg, at 0): the offset is then the address in the file, not in the function.
    unplaced: bool,
}

/// The file offset of function `name` of the ELF file at `path` as its debug information names it (a stripped
/// library's local functions, such as glibc's `__strlen_evex`, are named only in the detached debug file a
/// `-dbg` package installs under /usr/lib/debug), for a uprobe.
pub fn debug_function_offset(path: &std::path::Path, name: &str) -> Option<u64> {
    let mut elf = blazesym::inspect::source::Elf::new(path);
    elf.debug_syms = true;
    let inspector = blazesym::inspect::Inspector::new();
    let found = inspector.lookup(&blazesym::inspect::source::Source::Elf(elf), &[name]).ok()?;
    found.into_iter().flatten().find(|s| s.sym_type == blazesym::SymType::Function).and_then(|s| s.file_offset)
}

/// How many exited processes keep their saved maps: older ones are forgotten, oldest first, so a long run over
/// many short-lived processes holds bounded memory (their stacks then show `[unknown]` user frames).
pub const KEEP_EXITED: usize = 64;

/// How often (in newly remembered processes) exited ones beyond [`KEEP_EXITED`] are forgotten.
const SWEEP_EVERY: usize = 32;

/// The event stream of new processes a stack tool's BPF side reports (`new_pids`, with its `lost_notices`), for
/// [`Symbolizer::remember_noticed`].
pub fn process_notices<'a>(new_pids: &'a dyn MapCore, lost_notices: &'a u64) -> EventStream<'a> {
    EventStream::new(new_pids, lost_notices, "new processes")
        .because("ring buffer full; if they exited, their frames may show as [unknown]")
}

/// The symbolizer of one tool run, with the processes it has captured.
pub struct Symbolizer {
    inner: blazesym::symbolize::Symbolizer,
    remembered: HashSet<u32>,
    /// The remembered processes, oldest first.
    order: std::collections::VecDeque<u32>,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbolizer {
    pub fn new() -> Self {
        let inner =
            blazesym::symbolize::Symbolizer::builder().enable_demangling(false).enable_inlined_fns(false).build();
        Symbolizer { inner, remembered: HashSet::new(), order: std::collections::VecDeque::new() }
    }

    /// Polls `notices` (the `new_pids` ring buffer of `notice_process`, `bpf/include/stacks.bpf.h`; see
    /// [`process_notices`]) until a stop signal or `until`, saving the memory maps of each process it reports, so
    /// that the process can be named even after it exits. Returns the notices that found no room.
    pub fn remember_noticed(
        &mut self,
        signals: &Signals,
        notices: &EventStream<'_>,
        until: impl FnMut() -> bool,
    ) -> Result<Lost> {
        notices
            .poll(signals, until, |data| {
                if let Some(pid) = data.get(..4).and_then(|b| b.try_into().ok()).map(u32::from_ne_bytes) {
                    self.remember_process(pid);
                }
                Ok(())
            })
            // A notice still queued after the stop's grace time names a process whose frames then show unresolved,
            // which the output says itself.
            .map(|[no_room, _not_drained]| no_room)
    }

    /// Saves process `pid`'s memory maps so that its addresses can be resolved after it exits. Returns false if the
    /// process is already gone (or is PID 0, which has no user space). Calling it again for a PID refreshes nothing:
    /// the maps seen first are kept until [`Symbolizer::refresh_live`].
    pub fn remember_process(&mut self, pid: u32) -> bool {
        if pid == 0 {
            return false;
        }
        if self.remembered.contains(&pid) {
            return true;
        }
        if self.cache_maps(pid) {
            self.remembered.insert(pid);
            self.order.push_back(pid);
            if self.order.len().is_multiple_of(SWEEP_EVERY) {
                self.forget_exited(KEEP_EXITED);
            }
            true
        } else {
            false
        }
    }

    /// Forgets the saved maps of the oldest exited processes beyond the `keep` most recent ones.
    fn forget_exited(&mut self, keep: usize) {
        let exited: Vec<u32> = self.order.iter().copied().filter(|&pid| !is_alive(pid)).collect();
        let excess = exited.len().saturating_sub(keep);
        for &pid in &exited[..excess] {
            let _ = self.inner.evict(&blazesym::symbolize::evict::Evict::Process(
                blazesym::symbolize::evict::Process::new(pid.into()),
            ));
            self.remembered.remove(&pid);
        }
        if excess > 0 {
            let remembered = &self.remembered;
            self.order.retain(|pid| remembered.contains(pid));
        }
    }

    /// Loads the kernel's symbols now (blazesym reads /proc/kallsyms on first use), so that a tool naming kernel
    /// frames as events come pays that once at start-up, not at its first event, and its memory is flat after.
    /// Call it after the tool's BPF programs are loaded: the symbols read here are kept, and a program loaded
    /// later is not among them, so its frames (the innermost of a stack taken in it) would take the name of the
    /// last kernel symbol before it instead of `bpf_prog_*`, and stay in the stack.
    pub fn preload_kernel(&self) {
        let _ = self.kernel_each(&[0xffff_ffff_8100_0000]);
    }

    /// How many processes have their maps saved now.
    pub fn remembered(&self) -> usize {
        self.remembered.len()
    }

    /// Re-reads the memory maps of the remembered processes that are still alive, so that libraries they loaded
    /// since they were first seen resolve too. Call once, just before resolving.
    pub fn refresh_live(&mut self) {
        for &pid in &self.remembered {
            if is_alive(pid) {
                self.cache_maps(pid);
            }
        }
    }

    fn cache_maps(&self, pid: u32) -> bool {
        let mut process = cache::Process::new(pid.into());
        process.cache_perf_map = false;
        self.inner.cache(&Cache::Process(process)).is_ok()
    }

    /// Resolves kernel addresses, in order.
    pub fn kernel(&self, addrs: &[u64]) -> Vec<Option<Symbol>> {
        self.kernel_each(addrs).into_iter().map(Result::ok).collect()
    }

    /// Resolves user addresses of process `pid`, in order. A live process is read through `/proc/PID/map_files`
    /// (which works across mount namespaces); one that has exited through the maps saved by
    /// [`Symbolizer::remember_process`] and the files' paths.
    pub fn user(&self, pid: u32, addrs: &[u64]) -> Vec<Option<Symbol>> {
        self.user_each(pid, addrs).into_iter().map(Result::ok).collect()
    }

    /// Resolves `addrs` in one call; if that call fails as a whole (one address the symbolizer cannot handle,
    /// a file it cannot read), each address on its own, so that one bad address costs only its own name.
    /// Each address's result says why it has no name.
    fn resolve_each(&self, source: &Source<'_>, addrs: &[u64]) -> Vec<Result<Symbol, String>> {
        match self.inner.symbolize(source, Input::AbsAddr(addrs)) {
            Ok(results) => results.into_iter().map(|r| symbol_of(r).ok_or_else(|| "no symbol".into())).collect(),
            Err(_) if addrs.len() > 1 => {
                addrs.iter().flat_map(|a| self.resolve_each(source, std::slice::from_ref(a))).collect()
            }
            Err(err) => vec![Err(format!("{err:#}")); addrs.len()],
        }
    }

    /// Like [`Symbolizer::user`], with the reason for each address that has no name.
    pub fn user_each(&self, pid: u32, addrs: &[u64]) -> Vec<Result<Symbol, String>> {
        if pid == 0 {
            return vec![Err("PID 0 has no user space".into()); addrs.len()];
        }
        let alive = is_alive(pid);
        if !(alive || self.remembered.contains(&pid)) {
            return vec![Err("the process exited before its memory maps were saved".into()); addrs.len()];
        }
        let process = |debug_syms: bool, map_files: bool| {
            let mut process = Process::new(pid.into());
            process.perf_map = false;
            process.map_files = map_files;
            process.debug_syms = debug_syms;
            Source::Process(process)
        };
        let resolve = |addrs: &[u64], map_files: bool| {
            let found = self.resolve_each(&process(true, map_files), addrs);
            place_unplaced(found, addrs, |again| self.resolve_each(&process(false, map_files), again))
        };
        let mut found = resolve(addrs, alive);
        // A process that exits while it is being read (a zombie has no maps left): its saved maps name what
        // /proc no longer can.
        if alive && self.remembered.contains(&pid) && found.iter().any(Result::is_err) {
            let failed: Vec<usize> = (0..addrs.len()).filter(|&i| found[i].is_err()).collect();
            let again: Vec<u64> = failed.iter().map(|&i| addrs[i]).collect();
            for (i, result) in failed.into_iter().zip(resolve(&again, false)) {
                if result.is_ok() {
                    found[i] = result;
                }
            }
        }
        found
    }

    /// Resolves file offsets of the ELF file at `path` (what a BPF program can record of a code address of a
    /// process that may exit before it is named: the mapped file and the offset into it), in order.
    pub fn file_offsets_each(&self, path: &std::path::Path, offsets: &[u64]) -> Vec<Result<Symbol, String>> {
        let resolve = |offsets: &[u64], debug_syms: bool| {
            let mut elf = blazesym::symbolize::source::Elf::new(path);
            elf.debug_syms = debug_syms;
            match self.inner.symbolize(&Source::Elf(elf), Input::FileOffset(offsets)) {
                Ok(results) => results.into_iter().map(|r| symbol_of(r).ok_or_else(|| "no symbol".into())).collect(),
                Err(err) => vec![Err(format!("{err:#}")); offsets.len()],
            }
        };
        place_unplaced(resolve(offsets, true), offsets, |again| resolve(again, false))
    }

    /// Like [`Symbolizer::kernel`], with the reason for each address that has no name.
    /// The first call says on stderr why kernel frames cannot be named if /proc/kallsyms hides the kernel's
    /// addresses ([`super::kptr::warn_if_hidden`]).
    pub fn kernel_each(&self, addrs: &[u64]) -> Vec<Result<Symbol, String>> {
        super::kptr::warn_if_hidden();
        let kernel = Kernel { vmlinux: MaybeDefault::None, debug_syms: false, ..Kernel::default() };
        self.resolve_each(&Source::Kernel(kernel), addrs)
    }
}

/// Names the addresses whose DWARF function has no start address (see [`Symbol`]) from the ELF symbol
/// tables instead (`resolve_elf`), as BCC names every frame, so that their offsets are from the function's
/// start; an address the tables do not name keeps its DWARF name, with the offset unknown (0).
fn place_unplaced(
    mut found: Vec<Result<Symbol, String>>,
    addrs: &[u64],
    resolve_elf: impl FnOnce(&[u64]) -> Vec<Result<Symbol, String>>,
) -> Vec<Result<Symbol, String>> {
    let unplaced: Vec<usize> =
        found.iter().enumerate().filter(|(_, r)| r.as_ref().is_ok_and(|s| s.unplaced)).map(|(i, _)| i).collect();
    if unplaced.is_empty() {
        return found;
    }
    let again: Vec<u64> = unplaced.iter().map(|&i| addrs[i]).collect();
    for (i, elf) in unplaced.into_iter().zip(resolve_elf(&again)) {
        match (elf, &mut found[i]) {
            (Ok(elf), slot) if !elf.unplaced => *slot = Ok(elf),
            (_, Ok(dwarf)) => dwarf.offset = 0,
            _ => {}
        }
    }
    found
}

fn symbol_of(result: Symbolized<'_>) -> Option<Symbol> {
    match result {
        Symbolized::Sym(sym) => Some(Symbol {
            name: demangle(&sym.name).unwrap_or_else(|| sym.name.into_owned()),
            offset: sym.offset as u64,
            module: sym.module.map(|m| m.to_string_lossy().into_owned()),
            unplaced: sym.addr == 0,
        }),
        Symbolized::Unknown(_) => None,
    }
}

/// The readable form of `name` if it is in a mangling scheme: Rust's v0 (`_R...`), Rust's legacy one (`_ZN...E`
/// with a hash, shown without it) or C++'s Itanium ABI (`_Z...`); None for any other name. A plain C name is never
/// demangled: taken as an Itanium encoding, `f` would read as the type code "float" and `d` as "double".
pub fn demangle(name: &str) -> Option<String> {
    if name.starts_with("_R") || name.starts_with("_ZN") {
        if let Ok(rust) = rustc_demangle::try_demangle(name) {
            return Some(format!("{rust:#}"));
        }
    }
    if !name.starts_with("_Z") {
        return None;
    }
    let symbol = cpp_demangle::Symbol::new(name).ok()?;
    symbol.demangle().ok()
}

/// True if process `pid` runs and has its memory mapped: a zombie (exited, not yet reaped by its parent) still has
/// `/proc/PID/maps`, but empty, and must be named through the maps saved while it lived.
fn is_alive(pid: u32) -> bool {
    std::fs::File::open(format!("/proc/{pid}/maps"))
        .and_then(|mut f| std::io::Read::read(&mut f, &mut [0u8; 1]))
        .is_ok_and(|n| n > 0)
}

/// Addresses to resolve together: kernel ones, and user ones per process.
#[derive(Debug, Default)]
pub struct Batch {
    kernel: BTreeSet<u64>,
    user: BTreeMap<u32, BTreeSet<u64>>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_kernel(&mut self, addrs: impl IntoIterator<Item = u64>) {
        self.kernel.extend(addrs);
    }

    pub fn add_user(&mut self, pid: u32, addrs: impl IntoIterator<Item = u64>) {
        self.user.entry(pid).or_default().extend(addrs);
    }

    /// Resolves everything: one symbolizer call for the kernel and one per process (per address where a call fails
    /// as a whole).
    pub fn resolve(self, symbolizer: &Symbolizer) -> Resolved {
        let mut resolved = Resolved::default();
        let kernel: Vec<u64> = self.kernel.into_iter().collect();
        if !kernel.is_empty() {
            for (addr, sym) in kernel.iter().zip(symbolizer.kernel_each(&kernel)) {
                match sym {
                    Ok(sym) => drop(resolved.kernel.insert(*addr, sym)),
                    Err(why) => resolved.unresolved.push((None, *addr, why)),
                }
            }
        }
        for (pid, addrs) in self.user {
            let addrs: Vec<u64> = addrs.into_iter().collect();
            for (addr, sym) in addrs.iter().zip(symbolizer.user_each(pid, &addrs)) {
                match sym {
                    Ok(sym) => drop(resolved.user.insert((pid, *addr), sym)),
                    Err(why) => resolved.unresolved.push((Some(pid), *addr, why)),
                }
            }
        }
        resolved
    }
}

/// The names found for a [`Batch`].
#[derive(Debug, Default)]
pub struct Resolved {
    kernel: HashMap<u64, Symbol>,
    user: HashMap<(u32, u64), Symbol>,
    /// Addresses without a name: process (None for the kernel), address, why.
    unresolved: Vec<(Option<u32>, u64, String)>,
}

impl Resolved {
    /// The kernel symbol at `addr`, if found.
    pub fn kernel(&self, addr: u64) -> Option<&Symbol> {
        self.kernel.get(&addr)
    }

    /// The symbol at `addr` in process `pid`, if found.
    pub fn user(&self, pid: u32, addr: u64) -> Option<&Symbol> {
        self.user.get(&(pid, addr))
    }

    /// Says on stderr which addresses have no name and why (for `-v`).
    pub fn report_unresolved(&self) {
        for (pid, addr, why) in &self.unresolved {
            match pid {
                Some(pid) => eprintln!("cannot name address {addr:#x} of process {pid}: {why}"),
                None => eprintln!("cannot name kernel address {addr:#x}: {why}"),
            }
        }
    }

    /// The kernel function's name at `addr`, or `[unknown]`.
    pub fn kernel_name(&self, addr: u64) -> &str {
        self.kernel(addr).map_or(UNKNOWN, |s| s.name.as_str())
    }

    /// The function's name at `addr` in process `pid`, or `[unknown]`.
    pub fn user_name(&self, pid: u32, addr: u64) -> &str {
        self.user(pid, addr).map_or(UNKNOWN, |s| s.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_dwarf_cannot_place_are_named_from_the_elf_tables() {
        let sym = |name: &str, offset, unplaced| Symbol { name: name.into(), offset, module: None, unplaced };
        let found = vec![Ok(sym("main", 0x20, false)), Ok(sym("__GI__IO_puts", 0x77980, true)), Err("x".into())];
        let asked = std::cell::RefCell::new(Vec::new());
        let placed = place_unplaced(found.clone(), &[0x1139, 0x77980, 9], |again| {
            asked.borrow_mut().extend_from_slice(again);
            vec![Ok(sym("_IO_puts", 0, false))]
        });
        assert_eq!(asked.into_inner(), [0x77980]);
        assert_eq!(placed, vec![Ok(sym("main", 0x20, false)), Ok(sym("_IO_puts", 0, false)), Err("x".into())]);
        // Not in the ELF tables either: the DWARF name stays, without its meaningless offset.
        let kept = place_unplaced(found, &[0x1139, 0x77980, 9], |_| vec![Err("no symbol".into())]);
        assert_eq!(kept[1], Ok(sym("__GI__IO_puts", 0, true)));
    }

    #[test]
    fn only_mangled_names_are_demangled() {
        // One-letter C names are Itanium type codes when read as an encoding: they must stay as they are.
        for c_name in ["f", "d", "i", "v", "main", "Z", "_start", "__libc_start_main", "R", "_Rust_is_not_mangled"] {
            assert_eq!(demangle(c_name), None, "{c_name}");
        }
        assert_eq!(demangle("_ZN3foo3barEv").as_deref(), Some("foo::bar()"));
        assert_eq!(demangle("_Z3addii").as_deref(), Some("add(int, int)"));
        // Rust, legacy (the hash is left out) and v0.
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE").as_deref(),
            Some("core::ptr::drop_in_place")
        );
        assert_eq!(demangle("_RNvCs15kBYyAo9fc_7mycrate7example").as_deref(), Some("mycrate::example"));
    }

    #[test]
    fn a_one_letter_c_function_keeps_its_name() {
        // An ELF file with a function named `f`, as a C compiler leaves it: resolved through the symbolizer, it
        // must not read as "float".
        let dir = std::env::temp_dir().join(format!("symbols-c-name-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, obj) = (dir.join("f.c"), dir.join("f.so"));
        std::fs::write(&src, "int f(int x) { return x * 3 + 1; }\nint d(int x) { return x - 7; }\n").unwrap();
        let built =
            std::process::Command::new("cc").args(["-shared", "-fPIC", "-O1", "-o"]).arg(&obj).arg(&src).status();
        if !built.is_ok_and(|s| s.success()) {
            let _ = std::fs::remove_dir_all(&dir);
            return; // no C compiler
        }
        let offsets: Vec<u64> = ["f", "d"]
            .iter()
            .map(|name| {
                let mut elf = blazesym::inspect::source::Elf::new(&obj);
                elf.debug_syms = false;
                let inspector = blazesym::inspect::Inspector::new();
                let found = inspector.lookup(&blazesym::inspect::source::Source::Elf(elf), &[name]).unwrap();
                found[0][0].file_offset.unwrap()
            })
            .collect();
        let names: Vec<String> = Symbolizer::new()
            .file_offsets_each(&obj, &offsets)
            .into_iter()
            .map(|s| s.map(|s| s.name).unwrap_or_else(|e| e))
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(names, ["f", "d"]);
    }

    #[test]
    fn exited_processes_beyond_the_limit_are_forgotten() {
        let mut symbolizer = Symbolizer::new();
        let mut live = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        assert!(symbolizer.remember_process(live.id()));
        for _ in 0..KEEP_EXITED + 3 * SWEEP_EVERY {
            let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
            assert!(symbolizer.remember_process(child.id()));
            child.kill().unwrap();
            child.wait().unwrap();
        }
        assert!(symbolizer.remembered() <= KEEP_EXITED + SWEEP_EVERY + 1, "{} remembered", symbolizer.remembered());
        // A live process is never forgotten, however old.
        assert!(symbolizer.remembered.contains(&live.id()));
        live.kill().unwrap();
        live.wait().unwrap();
    }

    #[inline(never)]
    fn a_known_function() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn resolves_a_function_of_this_process() {
        // A function of the C library (whose dynamic symbols survive stripping), called through its address.
        let getpid: unsafe extern "C" fn() -> libc::pid_t = libc::getpid;
        let addr = getpid as *const () as u64;
        let pid = std::process::id();
        let mut symbolizer = Symbolizer::new();
        assert!(symbolizer.remember_process(pid));
        let mut batch = Batch::new();
        batch.add_user(pid, [addr, 8]);
        let resolved = batch.resolve(&symbolizer);
        let name = resolved.user_name(pid, addr);
        assert!(name.contains("getpid"), "{name}");
        assert_eq!(resolved.user_name(pid, 8), UNKNOWN);
    }

    #[test]
    fn resolves_kernel_addresses_from_kallsyms() {
        let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
        let Some(addr) = kallsyms.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"vfs_read")).then(|| u64::from_str_radix(f[0], 16).unwrap())
        }) else {
            return;
        };
        if addr == 0 {
            return; // addresses hidden (not root, kptr_restrict)
        }
        let symbolizer = Symbolizer::new();
        let syms = symbolizer.kernel(&[addr + 4]);
        assert_eq!(syms[0].as_ref().map(|s| s.name.as_str()), Some("vfs_read"));
    }

    #[test]
    fn pid_zero_is_never_this_process() {
        let symbolizer = Symbolizer::new();
        let addr = a_known_function as *const () as u64;
        assert_eq!(symbolizer.user(0, &[addr]), vec![None]);
    }

    #[test]
    fn an_address_in_a_non_elf_file_costs_only_its_own_name() {
        // A stack may hold a junk return address inside a mapped data file (locale-archive, say): blazesym fails
        // the whole call for it. The other addresses of the batch must still be named.
        let path = std::env::temp_dir().join(format!("symbols-not-elf-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh private read-only mapping of a file we own, never dereferenced.
        let map =
            unsafe { libc::mmap(std::ptr::null_mut(), 8192, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        assert_ne!(map, libc::MAP_FAILED);
        let getpid: unsafe extern "C" fn() -> libc::pid_t = libc::getpid;
        let good = getpid as *const () as u64;
        let pid = std::process::id();
        let mut symbolizer = Symbolizer::new();
        assert!(symbolizer.remember_process(pid));
        let mut batch = Batch::new();
        batch.add_user(pid, [good, map as u64 + 0x100]);
        let resolved = batch.resolve(&symbolizer);
        // SAFETY: unmapping what was mapped above.
        unsafe { libc::munmap(map, 8192) };
        let _ = std::fs::remove_file(&path);
        assert!(resolved.user_name(pid, good).contains("getpid"), "{}", resolved.user_name(pid, good));
        assert_eq!(resolved.user_name(pid, map as u64 + 0x100), UNKNOWN);
    }
}
