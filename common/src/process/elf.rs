// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Function symbols and USDT probes of an ELF executable or shared library, ready for uprobes.
//!
//! [`ElfSymbols::read`] collects the defined functions of a file from both `.symtab` and `.dynsym`, with symbol
//! versions split off the name (`getpid@@GLIBC_2.2.5` is `getpid`, version `GLIBC_2.2.5`, the default one) and
//! each symbol's file offset, which is what a uprobe is attached at ([`ElfSymbols::read_named`] keeps only the
//! functions a tool names, for a quick start). [`ElfSymbols::find`] looks one function up
//! by name; [`ElfSymbols::matching`] returns those a [`Pattern`] matches, one per address and one per name (aliases
//! such as `getpid`/`__getpid` share an address, and a uprobe per address is enough; of a name's several
//! versions the default one wins), as BCC's tools do. IFUNC symbols are left out: their address is the resolver,
//! which runs once at load time, not the function. [`usdt_probes`] lists the `.note.stapsdt` probes of a file.
//! [`find_binary`] resolves the library or program a user names as BCC does (`c` is libc, `pthread` is
//! libpthread, else a path or a program on `$PATH`), in a process (`-p PID`) or system-wide.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use object::elf;
use object::read::elf::{ElfFile, FileHeader, ProgramHeader, SectionHeader, Sym, SymbolTable, VersionTable};
use object::read::SymbolIndex;
use object::Endianness;

use crate::process::pattern::Pattern;

/// One function symbol of an ELF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfFunction {
    /// The name without any version suffix.
    pub name: String,
    /// The symbol version (`GLIBC_2.2.5`), if the symbol has one.
    pub version: Option<String>,
    /// True for a non-default version (`name@VER` rather than `name@@VER`): old callers only.
    pub hidden_version: bool,
    /// The symbol's virtual address (`st_value`).
    pub address: u64,
    /// The symbol's size in bytes (0 if unknown).
    pub size: u64,
    /// Where the function's first instruction is in the file: the offset a uprobe is attached at.
    pub file_offset: u64,
    /// True for a global or weak symbol, false for a local (static) one.
    pub global: bool,
}

impl ElfFunction {
    /// The name with its version, as the linker spells it: `getpid@@GLIBC_2.2.5` or `memcpy@GLIBC_2.2.5`.
    pub fn versioned_name(&self) -> String {
        match &self.version {
            Some(v) if self.hidden_version => format!("{}@{v}", self.name),
            Some(v) => format!("{}@@{v}", self.name),
            None => self.name.clone(),
        }
    }
}

/// The function symbols of one ELF file.
#[derive(Debug, Clone)]
pub struct ElfSymbols {
    path: PathBuf,
    functions: Vec<ElfFunction>,
}

impl ElfSymbols {
    /// Reads the function symbols of the ELF file at `path` (both `.symtab` and `.dynsym`).
    pub fn read(path: &Path) -> Result<Self> {
        Self::read_filtered(path, None)
    }

    /// Reads only the functions called one of `names` (bare names, without a version): what a tool that probes a
    /// few known functions needs, without building the whole table first (libc has 3000 functions; building
    /// them all costs a uprobe tool a millisecond and more of its start-up).
    pub fn read_named(path: &Path, names: &[&str]) -> Result<Self> {
        Self::read_filtered(path, Some(names))
    }

    fn read_filtered(path: &Path, names: Option<&[&str]>) -> Result<Self> {
        let data = map_file(path)?;
        let functions =
            parse_any(&data, |file| file.functions(names)).with_context(|| format!("reading {}", path.display()))?;
        Ok(ElfSymbols { path: path.to_path_buf(), functions })
    }

    /// The file these symbols came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every defined function symbol, each (name, version, address) once, best candidates first: default-version
    /// and global symbols before hidden-version and local ones.
    pub fn functions(&self) -> &[ElfFunction] {
        &self.functions
    }

    /// The function called `name` (bare, or with its version as `name@@VER` / `name@VER`).
    pub fn find(&self, name: &str) -> Option<&ElfFunction> {
        self.functions.iter().find(|f| f.name == name || (name.contains('@') && f.versioned_name() == name))
    }

    /// The functions whose name matches `pattern` (the bare name, or the versioned name if the pattern contains
    /// `@`), one per address and one per name, sorted by name.
    pub fn matching(&self, pattern: &Pattern) -> Vec<&ElfFunction> {
        let versioned = pattern.as_str().contains('@');
        let mut addresses = HashSet::new();
        let mut names = HashSet::new();
        let mut found: Vec<&ElfFunction> = self
            .functions
            .iter()
            .filter(|f| if versioned { pattern.is_match(&f.versioned_name()) } else { pattern.is_match(&f.name) })
            .filter(|f| addresses.insert(f.address) && names.insert(f.name.as_str()))
            .collect();
        found.sort_by(|a, b| a.name.cmp(&b.name));
        found
    }
}

/// One USDT probe site from a `.note.stapsdt` note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsdtProbe {
    /// The provider, e.g. `libc` or `node`.
    pub provider: String,
    /// The probe's name, e.g. `setjmp`.
    pub name: String,
    /// Virtual address of the probe's `nop`.
    pub address: u64,
    /// Virtual address of the probe's semaphore (0 if it has none).
    pub semaphore: u64,
    /// The argument specification (`-4@%edi 8@%rsi`).
    pub args: String,
}

/// The USDT probe sites of the ELF file at `path` (several sites may share a provider and name).
pub fn usdt_probes(path: &Path) -> Result<Vec<UsdtProbe>> {
    let data = map_file(path)?;
    parse_any(&data, read_usdt).with_context(|| format!("reading USDT notes of {}", path.display()))
}

/// Finds the file a user names for a uprobe or USDT pattern, as BCC does: a name with a `/` is a path; `NAME` is
/// the library `libNAME` (`c` is libc) mapped by process `pid`, or, without a PID, the system's copy; failing
/// that, a program called NAME on `$PATH`.
pub fn find_binary(name: &str, pid: Option<u32>) -> Result<PathBuf> {
    if name.is_empty() {
        bail!("no library or program named");
    }
    if name.contains('/') {
        let path = PathBuf::from(name);
        if !path.is_file() {
            bail!("{name}: no such file");
        }
        return Ok(path);
    }
    let is_lib = |file: &str| {
        crate::process::procmaps::is_library_file(file, name)
            || (name == "c" && crate::process::procmaps::is_libc_file(file))
    };
    if let Some(pid) = pid {
        if let Some(path) = crate::process::procmaps::mapped_library(pid, is_lib)? {
            return Ok(path);
        }
        if let Some(path) = crate::process::procmaps::mapped_library(pid, |file| file == name)? {
            return Ok(path);
        }
    } else if name == "c" {
        if let Ok(path) = crate::process::procmaps::system_libc() {
            return Ok(path);
        }
    } else if let Some(path) = system_library(name) {
        return Ok(path);
    }
    if let Some(path) = on_path(name) {
        return Ok(path);
    }
    match pid {
        Some(pid) => {
            bail!("unable to find library {name}: process {pid} maps no lib{name} and no program {name} is on $PATH")
        }
        None => bail!("unable to find library {name}: no lib{name}.so and no program {name} on $PATH"),
    }
}

/// The system's `libNAME.so` or `libNAME.so.N` (an ELF file, not a linker script), as the loader would find it.
fn system_library(name: &str) -> Option<PathBuf> {
    let sonames = std::iter::once(format!("lib{name}.so")).chain((0..10).map(|n| format!("lib{name}.so.{n}")));
    sonames.filter_map(|soname| crate::process::procmaps::system_library(&soname)).find(|path| is_elf(path))
}

fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic)).is_ok() && magic == *b"\x7fELF"
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file() && is_elf(p))
}

/// The file at `path`, mapped read-only: only the pages the parser touches (the symbol and version tables, the
/// notes) are read, not a whole library (libc is 2 MB), which keeps a uprobe tool's start-up short.
fn map_file(path: &Path) -> Result<memmap2::Mmap> {
    let file = fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    // SAFETY: a read-only private mapping, parsed for a few milliseconds and dropped. Only a file truncated in that
    // window could fault; packages replace libraries by rename, and blazesym maps the same files the same way.
    unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("cannot read {}", path.display()))
}

/// Parses `data` as a 32- or 64-bit ELF file and hands it to `read`.
fn parse_any<T>(data: &[u8], read: impl FnOnce(&dyn ElfView) -> Result<T>) -> Result<T> {
    match object::FileKind::parse(data).context("not an ELF file")? {
        object::FileKind::Elf64 => {
            let file = ElfFile::<elf::FileHeader64<Endianness>>::parse(data).context("not a valid ELF file")?;
            read(&file)
        }
        object::FileKind::Elf32 => {
            let file = ElfFile::<elf::FileHeader32<Endianness>>::parse(data).context("not a valid ELF file")?;
            read(&file)
        }
        other => bail!("not an ELF file ({other:?})"),
    }
}

/// An IFUNC symbol: a function whose implementation a resolver picks when the file is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ifunc {
    /// The resolver's virtual address (the symbol's value).
    pub resolver: u64,
    /// Where the loader stores the implementation it picked, for the file's own calls: the virtual addresses of
    /// the IRELATIVE relocations whose addend is the resolver.
    pub slots: Vec<u64>,
}

/// The IFUNC symbol `name` of the ELF file at `path`, if it has one.
pub fn ifunc(path: &Path, name: &str) -> Result<Option<Ifunc>> {
    let data = map_file(path)?;
    parse_any(&data, |file| file.ifunc(name)).with_context(|| format!("reading {}", path.display()))
}

/// The file offset of virtual address `vaddr` of the ELF file at `path` (what a uprobe or a symbolizer of file
/// offsets takes).
pub fn file_offset_of(path: &Path, vaddr: u64) -> Option<u64> {
    let data = map_file(path).ok()?;
    parse_any(&data, |file| Ok(file.file_offset_of(vaddr))).ok().flatten()
}

/// What this module needs from an ELF file, independent of its class.
trait ElfView {
    /// The defined functions, or only those whose bare name is one of `names`.
    fn functions(&self, names: Option<&[&str]>) -> Result<Vec<ElfFunction>>;
    fn usdt(&self) -> Result<Vec<UsdtProbe>>;
    fn ifunc(&self, name: &str) -> Result<Option<Ifunc>>;
    fn file_offset_of(&self, vaddr: u64) -> Option<u64>;
}

fn read_usdt(file: &dyn ElfView) -> Result<Vec<UsdtProbe>> {
    file.usdt()
}

impl<'data, Elf: FileHeader<Endian = Endianness>> ElfView for ElfFile<'data, Elf, &'data [u8]> {
    fn functions(&self, names: Option<&[&str]>) -> Result<Vec<ElfFunction>> {
        let endian = self.endian();
        let versions = self.elf_section_table().versions(endian, self.data()).context("bad symbol versions")?;
        let mut all = Vec::new();
        collect_functions(self, self.elf_dynamic_symbol_table(), versions.as_ref(), names, &mut all);
        collect_functions(self, self.elf_symbol_table(), None, names, &mut all);
        // Best first: default or no version, then global, then lower address for a stable order.
        all.sort_by(|a, b| {
            (a.hidden_version, !a.global, a.address, &a.name).cmp(&(b.hidden_version, !b.global, b.address, &b.name))
        });
        let mut seen = HashSet::new();
        all.retain(|f| seen.insert((f.name.clone(), f.version.clone(), f.address)));
        Ok(all)
    }

    fn file_offset_of(&self, vaddr: u64) -> Option<u64> {
        file_offset(self, vaddr)
    }

    fn ifunc(&self, name: &str) -> Result<Option<Ifunc>> {
        use object::Object;
        let endian = self.endian();
        let is_ifunc = |table: &SymbolTable<'data, Elf, &'data [u8]>| {
            table.iter().find_map(|sym| {
                let raw = sym.name(endian, table.strings()).ok()?;
                let bare = raw.split(|b| *b == b'@').next().unwrap_or(raw);
                (sym.st_type() == elf::STT_GNU_IFUNC && bare == name.as_bytes() && !sym.is_undefined(endian))
                    .then(|| sym.st_value(endian).into())
            })
        };
        let Some(resolver) = is_ifunc(self.elf_dynamic_symbol_table()).or_else(|| is_ifunc(self.elf_symbol_table()))
        else {
            return Ok(None);
        };
        let irelative = [elf::R_X86_64_IRELATIVE, elf::R_AARCH64_IRELATIVE];
        let slots = self
            .dynamic_relocations()
            .into_iter()
            .flatten()
            .filter(|(_, r)| {
                matches!(r.flags(), object::RelocationFlags::Elf { r_type } if irelative.contains(&r_type))
                    && r.addend() as u64 == resolver
            })
            .map(|(at, _)| at)
            .collect();
        Ok(Some(Ifunc { resolver, slots }))
    }

    fn usdt(&self) -> Result<Vec<UsdtProbe>> {
        let endian = self.endian();
        let data = self.data();
        let sections = self.elf_section_table();
        let base_addr = sections.section_by_name(endian, b".stapsdt.base").map(|(_, s)| s.sh_addr(endian).into());
        let mut probes = Vec::new();
        let Some((_, notes_section)) = sections.section_by_name(endian, b".note.stapsdt") else {
            return Ok(probes);
        };
        let Some(mut notes) = notes_section.notes(endian, data).context("bad .note.stapsdt")? else {
            return Ok(probes);
        };
        let word = if self.is_64() { 8 } else { 4 };
        while let Some(note) = notes.next().context("bad .note.stapsdt")? {
            if note.name() != b"stapsdt" || note.n_type(endian).0 != 3 {
                continue;
            }
            if let Some(probe) = parse_stapsdt(note.desc(), word, self.is_little_endian(), base_addr) {
                probes.push(probe);
            }
        }
        Ok(probes)
    }
}

trait ElfClass {
    fn is_64(&self) -> bool;
    fn is_little_endian(&self) -> bool;
}

impl<'data, Elf: FileHeader<Endian = Endianness>> ElfClass for ElfFile<'data, Elf, &'data [u8]> {
    fn is_64(&self) -> bool {
        self.elf_header().is_class_64()
    }

    fn is_little_endian(&self) -> bool {
        self.endian() == Endianness::Little
    }
}

fn collect_functions<'data, Elf: FileHeader<Endian = Endianness>>(
    file: &ElfFile<'data, Elf, &'data [u8]>,
    table: &SymbolTable<'data, Elf, &'data [u8]>,
    versions: Option<&VersionTable<'data, Elf>>,
    names: Option<&[&str]>,
    out: &mut Vec<ElfFunction>,
) {
    let endian = file.endian();
    let strings = table.strings();
    for (index, sym) in table.iter().enumerate() {
        if sym.st_type() != elf::STT_FUNC || sym.is_undefined(endian) {
            continue;
        }
        let address: u64 = sym.st_value(endian).into();
        if address == 0 {
            continue;
        }
        let Ok(raw) = sym.name(endian, strings) else { continue };
        let Ok(raw) = std::str::from_utf8(raw) else { continue };
        if raw.is_empty() {
            continue;
        }
        if names.is_some_and(|names| !names.contains(&raw.split_once('@').map_or(raw, |(name, _)| name))) {
            continue;
        }
        let Some(file_offset) = file_offset(file, address) else { continue };
        // .symtab spells versions into the name; .dynsym keeps them in .gnu.version.
        let (name, mut version, mut hidden) = match raw.split_once('@') {
            Some((name, ver)) => match ver.strip_prefix('@') {
                Some(ver) => (name, Some(ver.to_string()), false),
                None => (name, Some(ver.to_string()), true),
            },
            None => (raw, None, false),
        };
        if let Some(table) = versions {
            let versym = table.version_index(endian, SymbolIndex(index));
            if let Ok(Some(v)) = table.version(versym.index()) {
                version = Some(String::from_utf8_lossy(v.name()).into_owned());
                hidden = versym.is_hidden();
            }
        }
        out.push(ElfFunction {
            name: name.to_string(),
            version,
            hidden_version: hidden,
            address,
            size: sym.st_size(endian).into(),
            file_offset,
            global: sym.st_bind() != elf::STB_LOCAL,
        });
    }
}

/// The file offset of virtual address `address`, from the loadable segment that contains it.
fn file_offset<'data, Elf: FileHeader<Endian = Endianness>>(
    file: &ElfFile<'data, Elf, &'data [u8]>,
    address: u64,
) -> Option<u64> {
    let endian = file.endian();
    file.elf_program_headers().iter().find_map(|ph| {
        let vaddr: u64 = ph.p_vaddr(endian).into();
        let filesz: u64 = ph.p_filesz(endian).into();
        let offset: u64 = ph.p_offset(endian).into();
        (ph.p_type(endian) == elf::PT_LOAD && address >= vaddr && address < vaddr + filesz)
            .then(|| address - vaddr + offset)
    })
}

/// Parses one stapsdt note: three addresses (probe, base, semaphore), then provider, name and arguments as
/// NUL-terminated strings. Probe and semaphore addresses are adjusted if the file was prelinked (the
/// `.stapsdt.base` section moved from the base recorded in the note).
fn parse_stapsdt(desc: &[u8], word: usize, little: bool, base_addr: Option<u64>) -> Option<UsdtProbe> {
    let read = |i: usize| -> Option<u64> {
        let bytes = desc.get(i * word..(i + 1) * word)?;
        let mut value = 0u64;
        for (n, b) in bytes.iter().enumerate() {
            let shift = if little { n } else { word - 1 - n };
            value |= u64::from(*b) << (8 * shift);
        }
        Some(value)
    };
    let (mut address, base, mut semaphore) = (read(0)?, read(1)?, read(2)?);
    if let Some(actual) = base_addr {
        if base != 0 && actual != base {
            address = address.wrapping_add(actual).wrapping_sub(base);
            if semaphore != 0 {
                semaphore = semaphore.wrapping_add(actual).wrapping_sub(base);
            }
        }
    }
    let mut strings = desc.get(3 * word..)?.split(|&b| b == 0).map(|s| String::from_utf8_lossy(s).into_owned());
    let provider = strings.next()?;
    let name = strings.next()?;
    let args = strings.next().unwrap_or_default();
    Some(UsdtProbe { provider, name, address, semaphore, args })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libc() -> PathBuf {
        find_binary("c", None).expect("libc")
    }

    #[test]
    fn libc_getpid_is_found_with_its_default_version() {
        let syms = ElfSymbols::read(&libc()).unwrap();
        let getpid = syms.find("getpid").expect("getpid in libc");
        assert!(getpid.version.as_deref().is_some_and(|v| v.starts_with("GLIBC_")), "{getpid:?}");
        assert!(!getpid.hidden_version);
        assert!(getpid.file_offset > 0);
        assert_eq!(syms.find(&getpid.versioned_name()), Some(getpid));
        // getpid and __getpid share an address: a pattern matching both gives one.
        let both = syms.matching(&Pattern::regex("^_*getpid$").unwrap());
        assert_eq!(both.iter().filter(|f| f.address == getpid.address).count(), 1, "{both:?}");
    }

    #[test]
    fn a_name_with_several_versions_is_matched_once_by_its_default_version() {
        let syms = ElfSymbols::read(&libc()).unwrap();
        // glibc has sched_setaffinity@GLIBC_2.3.3 and sched_setaffinity@@GLIBC_2.3.4 at different addresses.
        let versions = syms.functions().iter().filter(|f| f.name == "sched_setaffinity").count();
        assert!(versions >= 2, "{:?}", syms.find("sched_setaffinity"));
        let matched = syms.matching(&Pattern::glob("sched_setaffinity").unwrap());
        assert_eq!(matched.len(), 1);
        assert!(!matched[0].hidden_version, "{matched:?}");
        let old = syms.matching(&Pattern::glob("sched_setaffinity@GLIBC_2.3.3").unwrap());
        assert_eq!(old.len(), 1);
        assert!(old[0].hidden_version);
    }

    #[test]
    fn reading_named_functions_gives_what_reading_all_gives_for_them() {
        let all = ElfSymbols::read(&libc()).unwrap();
        let named = ElfSymbols::read_named(&libc(), &["getaddrinfo", "sched_setaffinity"]).unwrap();
        let expected: Vec<&ElfFunction> =
            all.functions().iter().filter(|f| f.name == "getaddrinfo" || f.name == "sched_setaffinity").collect();
        assert!(expected.len() >= 3, "{expected:?}");
        assert_eq!(named.functions().iter().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn non_elf_files_are_refused() {
        assert!(ElfSymbols::read(Path::new("/proc/self/status")).is_err());
        assert!(ElfSymbols::read(Path::new("/no/such/file")).is_err());
    }

    #[test]
    fn stapsdt_notes_parse() {
        let mut desc = Vec::new();
        desc.extend_from_slice(&0x1000u64.to_le_bytes());
        desc.extend_from_slice(&0x2000u64.to_le_bytes());
        desc.extend_from_slice(&0u64.to_le_bytes());
        desc.extend_from_slice(b"prov\0probe\0-4@%edi\0");
        let probe = parse_stapsdt(&desc, 8, true, Some(0x2100)).unwrap();
        assert_eq!((probe.provider.as_str(), probe.name.as_str(), probe.args.as_str()), ("prov", "probe", "-4@%edi"));
        assert_eq!(probe.address, 0x1100);
        assert_eq!(probe.semaphore, 0);
    }

    #[test]
    fn binaries_are_found() {
        assert!(find_binary("c", None).unwrap().exists());
        assert!(find_binary("c", Some(std::process::id())).unwrap().exists());
        assert!(find_binary("no-such-library-xyz", None).is_err());
        assert!(find_binary("/no/such/file", None).is_err());
        assert!(find_binary("sh", None).is_ok());
    }
}
