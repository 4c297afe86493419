// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Finding the shared libraries a uprobe tool attaches to: a library mapped by a running process, or the system's
//! copy as the dynamic loader would choose it.
//!
//! [`mapped_library`] reads `/proc/PID/maps` and returns the library's path reached through `/proc/PID/root`, so a
//! process in a container, a chroot or another mount namespace gets its own file, not the host's file at the same
//! path (a library replaced on disk since it was mapped is reached through `/proc/PID/map_files`). [`system_library`]
//! looks a soname up in `/etc/ld.so.cache` and then in the loader's default directories, which works from a
//! statically linked tool too. [`process_libc`] and [`system_libc`] apply these to the C library (glibc's
//! `libc.so.6`, older `libc-2.x.so`, or musl's `ld-musl-<arch>.so.1`), with errors that name the path tried.
//! [`user_library_path`] resolves a library the user names on the command line (`-l PATH`) to an absolute path.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// glibc's soname, the name the loader looks up.
const LIBC_SONAME: &str = "libc.so.6";
const LD_SO_CACHE: &str = "/etc/ld.so.cache";

/// True if `file_name` (no directory) is a file of library `lib` ("c" for libc, "pthread", ...): `libc.so`,
/// `libc.so.6`, or the versioned `libc-2.31.so` of older glibc.
pub fn is_library_file(file_name: &str, lib: &str) -> bool {
    let Some(rest) = file_name.strip_prefix("lib").and_then(|r| r.strip_prefix(lib)) else {
        return false;
    };
    if rest == ".so" || rest.starts_with(".so.") {
        return true;
    }
    // libc-2.31.so, but not libcrypto-3.so (the prefix must end at the '-').
    rest.strip_prefix('-')
        .and_then(|v| v.strip_suffix(".so"))
        .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
}

/// True if `file_name` is a C library: glibc's `libc.so.6` (or `libc-2.x.so`), or musl's `ld-musl-<arch>.so.1`,
/// which is its loader and C library in one.
pub fn is_libc_file(file_name: &str) -> bool {
    is_library_file(file_name, "c") || (file_name.starts_with("ld-musl-") && file_name.contains(".so"))
}

/// The first file mapped by process `pid` whose name satisfies `wanted`, as a path this process can open to
/// reach that very file (same device and inode as the mapping): `/proc/PID/root/<path>` when the process has its own
/// mount namespace (a container), `<path>` itself when the kernel already shows the mapping as reachable from our
/// root (a chroot), else `/proc/PID/map_files/<range>` (a file deleted or replaced since it was mapped, or one hidden
/// from both). `None` if no mapped file matches.
pub fn mapped_library(pid: u32, wanted: impl Fn(&str) -> bool) -> Result<Option<PathBuf>> {
    let maps_path = format!("/proc/{pid}/maps");
    let maps = fs::read_to_string(&maps_path).with_context(|| format!("cannot read {maps_path}"))?;
    for line in maps.lines() {
        let Some(mapping) = MapsLine::parse(line) else { continue };
        let Some(file_name) = Path::new(mapping.path).file_name().and_then(|n| n.to_str()) else { continue };
        if !wanted(file_name.trim_end_matches(" (deleted)")) {
            continue;
        }
        let candidates = [PathBuf::from(format!("/proc/{pid}/root{}", mapping.path)), PathBuf::from(mapping.path)];
        let same_file = candidates.into_iter().find(|p| mapping.is_file(p));
        return Ok(Some(
            same_file.unwrap_or_else(|| PathBuf::from(format!("/proc/{pid}/map_files/{}", mapping.range))),
        ));
    }
    Ok(None)
}

/// The C library of process `pid`, reached through `/proc/PID/root` (see [`mapped_library`]). Fails, naming
/// `/proc/PID/maps`, if the process has none mapped (it is statically linked, say: then pass its executable).
pub fn process_libc(pid: u32) -> Result<PathBuf> {
    match mapped_library(pid, is_libc_file)? {
        Some(path) => Ok(path),
        None => bail!(
            "process {pid} has no shared C library to probe (none in /proc/{pid}/maps: statically linked?); \
             a static program's own copy of the functions is probed with -l /proc/{pid}/exe"
        ),
    }
}

/// The absolute path of a library or program the user named (`-l PATH`): an absolute path as it is; else a file
/// relative to the current directory; else a library name the loader would find (`libc.so.6`, through
/// `/etc/ld.so.cache` and its default directories). Fails naming the places tried.
pub fn user_library_path(given: &Path) -> Result<PathBuf> {
    if given.as_os_str().is_empty() {
        bail!("empty library path");
    }
    if given.is_absolute() {
        if !given.exists() {
            bail!("{}: no such file", given.display());
        }
        return Ok(given.to_path_buf());
    }
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let relative = cwd.join(given);
    if relative.exists() {
        return Ok(relative);
    }
    let bare = given.components().count() == 1;
    if let Some(found) = given.to_str().filter(|_| bare).and_then(system_library) {
        return Ok(found);
    }
    if bare {
        bail!(
            "{}: no such file in {} and no library of that name in {LD_SO_CACHE} or {}",
            given.display(),
            cwd.display(),
            default_dirs().join(", ")
        );
    }
    bail!("{}: no such file", relative.display())
}

/// The system's C library, as the dynamic loader would find it (see [`system_library`]); musl's loader if the
/// system has no glibc. Fails naming the places searched.
pub fn system_libc() -> Result<PathBuf> {
    if let Some(path) = system_library(LIBC_SONAME) {
        return Ok(path);
    }
    if let Some(musl) = musl_loader() {
        return Ok(musl);
    }
    bail!(
        "cannot find the system C library: {LIBC_SONAME} is neither in {LD_SO_CACHE} nor in {}",
        default_dirs().join(", ")
    )
}

/// Where the dynamic loader would find `soname` (e.g. `libc.so.6`) for a program of this architecture: the
/// loader's cache `/etc/ld.so.cache`, then its default directories.
pub fn system_library(soname: &str) -> Option<PathBuf> {
    if let Ok(cache) = fs::read(LD_SO_CACHE) {
        if let Some(path) = ld_so_cache_lookup(&cache, soname) {
            if Path::new(&path).exists() {
                return Some(PathBuf::from(path));
            }
        }
    }
    default_dirs().iter().map(|dir| Path::new(dir).join(soname)).find(|p| p.exists())
}

/// The loader's trusted directories for this architecture, searched after its cache.
fn default_dirs() -> Vec<String> {
    let mut dirs = Vec::new();
    if let Some(triple) = multiarch_triple() {
        dirs.push(format!("/lib/{triple}"));
        dirs.push(format!("/usr/lib/{triple}"));
    }
    if cfg!(target_pointer_width = "64") {
        dirs.extend(["/lib64".to_string(), "/usr/lib64".to_string()]);
    }
    dirs.extend(["/lib".to_string(), "/usr/lib".to_string()]);
    dirs
}

/// Debian's multiarch directory name for this architecture.
fn multiarch_triple() -> Option<&'static str> {
    if cfg!(target_arch = "x86_64") {
        Some("x86_64-linux-gnu")
    } else if cfg!(target_arch = "aarch64") {
        Some("aarch64-linux-gnu")
    } else {
        None
    }
}

/// musl's `ld-musl-<arch>.so.1` in `/lib`, which is also its C library.
fn musl_loader() -> Option<PathBuf> {
    let entries = fs::read_dir("/lib").ok()?;
    entries.flatten().map(|e| e.path()).find(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("ld-musl-") && n.ends_with(".so.1"))
    })
}

/// The fields of one `/proc/PID/maps` line that matter here.
struct MapsLine<'a> {
    /// `start-end`, as `/proc/PID/map_files` names the mapping.
    range: &'a str,
    /// The device, `major:minor` in hex, and the inode of the mapped file.
    dev: &'a str,
    inode: u64,
    /// The mapped file's absolute path, as the kernel shows it to this process (may end in ` (deleted)`).
    path: &'a str,
}

impl<'a> MapsLine<'a> {
    /// `start-end perms offset dev inode path`; `None` for anonymous mappings and `[heap]`-style names. The path
    /// is everything after the inode field, so paths with spaces survive.
    fn parse(line: &'a str) -> Option<Self> {
        let mut fields = [""; 5];
        let mut rest = line;
        for field in &mut fields {
            let trimmed = rest.trim_start();
            let end = trimmed.find(' ')?;
            *field = &trimmed[..end];
            rest = &trimmed[end..];
        }
        let path = rest.trim_start();
        let inode = fields[4].parse().ok()?;
        path.starts_with('/').then_some(MapsLine { range: fields[0], dev: fields[3], inode, path })
    }

    /// True if `candidate` is the mapped file itself: same inode on the same device.
    fn is_file(&self, candidate: &Path) -> bool {
        let Ok(meta) = fs::metadata(candidate) else { return false };
        let dev = meta.dev();
        let shown = format!("{:02x}:{:02x}", libc::major(dev), libc::minor(dev));
        meta.ino() == self.inode && shown == self.dev
    }
}

/// Flags of an `ld.so.cache` entry (glibc's `dl-cache.h`): the low byte is the library type, the next the ABI.
const FLAG_TYPE_MASK: i32 = 0x00ff;
const FLAG_ELF_LIBC6: i32 = 0x0003;
const FLAG_ABI_MASK: i32 = 0xff00;

/// The ABI bits a library for this architecture carries in the cache.
fn native_abi_flags() -> Option<i32> {
    if cfg!(target_arch = "x86_64") {
        Some(0x0300) // FLAG_X8664_LIB64
    } else if cfg!(target_arch = "aarch64") {
        Some(0x0a00) // FLAG_AARCH64_LIB64
    } else {
        None
    }
}

const CACHE_MAGIC_OLD: &[u8] = b"ld.so-1.7.0";
const CACHE_MAGIC_NEW: &[u8] = b"glibc-ld.so.cache1.1";
/// Size of the new format's header and of one of its entries.
const NEW_HEADER_LEN: usize = 48;
const NEW_ENTRY_LEN: usize = 24;
const OLD_HEADER_LEN: usize = 16;
const OLD_ENTRY_LEN: usize = 12;

/// Looks `soname` up in the contents of an `ld.so.cache` in glibc's new format (alone, or after the old format
/// as ldconfig wrote both before glibc 2.32). Returns the path of the first entry for this architecture, the one
/// the loader would use.
fn ld_so_cache_lookup(cache: &[u8], soname: &str) -> Option<String> {
    let start = if cache.starts_with(CACHE_MAGIC_NEW) {
        0
    } else if cache.starts_with(CACHE_MAGIC_OLD) {
        let nlibs = read_u32(cache, 12)? as usize;
        // The new header follows the old entries, aligned to 8 bytes.
        let end = OLD_HEADER_LEN.checked_add(nlibs.checked_mul(OLD_ENTRY_LEN)?)?;
        let aligned = end.checked_add(7)? & !7;
        if !cache.get(aligned..)?.starts_with(CACHE_MAGIC_NEW) {
            return None;
        }
        aligned
    } else {
        return None;
    };
    let new = cache.get(start..)?;
    let nlibs = read_u32(new, 20)? as usize;
    let abi = native_abi_flags()?;
    // String offsets in the new format count from the start of its header.
    let string_at = |offset: u32| -> Option<&str> {
        let bytes = new.get(offset as usize..)?;
        let len = bytes.iter().position(|&b| b == 0)?;
        std::str::from_utf8(&bytes[..len]).ok()
    };
    (0..nlibs).find_map(|i| {
        let entry = NEW_HEADER_LEN + i * NEW_ENTRY_LEN;
        let flags = read_u32(new, entry)? as i32;
        if flags & FLAG_TYPE_MASK != FLAG_ELF_LIBC6 || flags & FLAG_ABI_MASK != abi {
            return None;
        }
        if string_at(read_u32(new, entry + 4)?)? != soname {
            return None;
        }
        string_at(read_u32(new, entry + 8)?).map(str::to_string)
    })
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_paths_resolve_absolute_relative_then_by_name() {
        assert_eq!(user_library_path(Path::new("/proc/self/exe")).unwrap(), Path::new("/proc/self/exe"));
        assert!(user_library_path(Path::new("/no/such/lib.so")).unwrap_err().to_string().contains("no such file"));
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(user_library_path(Path::new("Cargo.toml")).unwrap(), cwd.join("Cargo.toml"));
        if let Some(libc) = system_library(LIBC_SONAME) {
            assert_eq!(user_library_path(Path::new(LIBC_SONAME)).unwrap(), libc);
        }
        let err = user_library_path(Path::new("libnosuch-corebpf.so")).unwrap_err().to_string();
        assert!(err.contains("no such file in") && err.contains(LD_SO_CACHE), "{err}");
        assert!(user_library_path(Path::new("sub/nosuch.so")).is_err());
    }

    #[test]
    fn library_file_names() {
        for yes in ["libc.so.6", "libc.so", "libc-2.31.so"] {
            assert!(is_library_file(yes, "c"), "{yes}");
        }
        for no in ["libcrypto.so.3", "libc++.so.6", "libcap-ng.so.0", "libc-dev.so", "ld-linux-x86-64.so.2"] {
            assert!(!is_library_file(no, "c"), "{no}");
        }
        assert!(is_library_file("libpthread.so.0", "pthread"));
        assert!(is_libc_file("ld-musl-x86_64.so.1"));
        assert!(!is_libc_file("ld-linux-x86-64.so.2"));
    }

    #[test]
    fn maps_lines() {
        let line = "7f1c2a400000-7f1c2a428000 r--p 00000000 fe:01 1572 /usr/lib/x86_64-linux-gnu/libc.so.6";
        let m = MapsLine::parse(line).unwrap();
        assert_eq!(m.range, "7f1c2a400000-7f1c2a428000");
        assert_eq!((m.dev, m.inode), ("fe:01", 1572));
        assert_eq!(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        let spaced = MapsLine::parse("1000-2000 r-xp 00000000 fe:01 12 /opt/my lib/libc.so.6 (deleted)").unwrap();
        assert_eq!(spaced.path, "/opt/my lib/libc.so.6 (deleted)");
        assert!(MapsLine::parse("7ffd1000-7ffd2000 rw-p 00000000 00:00 0          [stack]").is_none());
        assert!(MapsLine::parse("7ffd1000-7ffd2000 rw-p 00000000 00:00 0").is_none());
    }

    /// This test binary links libc dynamically: its own maps must show it, through /proc/PID/root.
    #[test]
    fn own_libc_is_found_through_proc_root() {
        let pid = std::process::id();
        let path = process_libc(pid).unwrap();
        let text = path.to_string_lossy();
        assert!(text.starts_with(&format!("/proc/{pid}/root/")), "{text}");
        assert!(path.exists());
        assert!(mapped_library(pid, |n| n == "no-such-library.so").unwrap().is_none());
        assert!(process_libc(u32::MAX).is_err());
    }

    /// The cache lookup agrees with the loader: the libc this test process was given is the one found.
    #[test]
    fn system_libc_is_the_loaders_choice() {
        let ours = process_libc(std::process::id()).unwrap();
        let system = system_libc().unwrap();
        assert_eq!(fs::canonicalize(ours).unwrap(), fs::canonicalize(&system).unwrap());
        if let Ok(cache) = fs::read(LD_SO_CACHE) {
            assert!(ld_so_cache_lookup(&cache, LIBC_SONAME).is_some(), "libc.so.6 not in {LD_SO_CACHE}");
            assert!(ld_so_cache_lookup(&cache, "libno-such-thing.so.9").is_none());
        }
        assert!(ld_so_cache_lookup(b"garbage", LIBC_SONAME).is_none());
        assert!(ld_so_cache_lookup(CACHE_MAGIC_NEW, LIBC_SONAME).is_none());
    }
}
