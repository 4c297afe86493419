// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Naming a start routine, also after the process that created the thread has exited.
//!
//! While the process lives, blazesym reads its memory maps and names the address ([`Namer::name`]). Once it is
//! gone, its maps are too, so the BPF side records what the name needs: the mapping's start and file offset, and
//! the file's inode, device and dentry names up to the root of its file system. The file is found again by
//! looking that path up under each mount of the same device (`/proc/self/mountinfo`: a bind mount shows a
//! subdirectory of its file system), and accepted only if its inode is the recorded one; its symbols then name
//! the routine by its file offset. Found files are cached by device and inode.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use common::attach::maps::c_string;
use common::process::symbols::{Symbol, Symbolizer};

use crate::bpf::consts::{NAME_LEN, PATH_DEPTH};
use crate::bpf::types::event;

pub struct Namer {
    symbolizer: Symbolizer,
    /// Files found (or not) by (kernel device, inode).
    files: HashMap<(u32, u64), Option<PathBuf>>,
    page_size: u64,
}

impl Namer {
    pub fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        Namer { symbolizer: Symbolizer::new(), files: HashMap::new(), page_size: page_size.max(4096) as u64 }
    }

    /// The symbol at the start routine's address of `e`, or why there is none.
    pub fn name(&mut self, e: &event) -> Result<Symbol, String> {
        let live = self.symbolizer.user_each(e.pid, &[e.start]).pop().unwrap_or_else(|| Err("no result".into()));
        if let Ok(mut sym) = live {
            // The module is named only when the name came from the recorded file.
            sym.module = None;
            return Ok(sym);
        }
        if e.vm_start == 0 || e.depth == 0 || e.complete == 0 {
            return live;
        }
        let Some(path) = self.file(e) else {
            return Err(format!("{}; and its file (inode {}) is not found from here", live.unwrap_err(), e.ino));
        };
        let offset = e.start.wrapping_sub(e.vm_start).wrapping_add(e.vm_pgoff.wrapping_mul(self.page_size));
        let mut found = self.symbolizer.file_offsets_each(&path, &[offset]);
        found.pop().unwrap_or_else(|| Err("no result".into())).map(|mut sym| {
            sym.module = Some(path.display().to_string());
            sym
        })
    }

    /// The file of the mapping `e` records, found through the mounts of its device.
    fn file(&mut self, e: &event) -> Option<PathBuf> {
        let key = (e.dev, e.ino);
        if let Some(found) = self.files.get(&key) {
            return found.clone();
        }
        let mut within = String::new();
        let len = NAME_LEN;
        for i in (0..(e.depth as usize).min(PATH_DEPTH)).rev() {
            within.push('/');
            within.push_str(&c_string(&e.names[i * len..(i + 1) * len]));
        }
        let found = locate(e.dev, e.ino, &within);
        self.files.insert(key, found.clone());
        found
    }
}

/// The path under which the file at `within` (from the root of the file system on kernel device `dev`) with
/// inode `ino` is reachable from this process, if any.
fn locate(dev: u32, ino: u64, within: &str) -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let wanted = format!("{}:{}", dev >> 20, dev & 0xf_ffff);
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            (fields.len() > 4 && fields[2] == wanted).then(|| (unescape(fields[3]), unescape(fields[4])))
        })
        .filter_map(|(root, mount_point)| {
            let rest = if root == "/" { within } else { within.strip_prefix(root.as_str())? };
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            Some(PathBuf::from(format!("{}{rest}", mount_point.trim_end_matches('/'))))
        })
        .find(|path| std::fs::metadata(path).is_ok_and(|m| m.ino() == ino))
}

/// A mountinfo path with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal =
            bytes.get(i + 1..i + 4).filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(r"/var/my\040dir"), "/var/my dir");
        assert_eq!(unescape(r"/plain"), "/plain");
        assert_eq!(unescape(r"/trailing\04"), r"/trailing\04");
    }

    #[test]
    fn a_file_is_found_by_its_inode_under_its_mounts() {
        let exe = std::fs::canonicalize("/proc/self/exe").unwrap();
        let meta = std::fs::metadata(&exe).unwrap();
        // The kernel dev_t of the super block, from the user-space encoding stat gives.
        let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        let dev = (major << 20) | minor;
        let found = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter(|l| l.split(' ').nth(2) == Some(&format!("{major}:{minor}")) && l.split(' ').nth(3) == Some("/"))
            .filter_map(|l| {
                let mp = unescape(l.split(' ').nth(4).unwrap());
                let within = exe.to_str()?.strip_prefix(mp.trim_end_matches('/'))?.to_string();
                locate(dev, meta.ino(), &within)
            })
            .next();
        assert_eq!(found.as_deref(), Some(exe.as_path()));
        assert_eq!(locate(dev, meta.ino() + 1, "/no/such/file"), None);
    }
}
