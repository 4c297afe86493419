// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Cgroup filters (`-c CGROUP_PATH`, as in libbpf-tools).
//!
//! A tool's BPF program checks `bpf_current_task_under_cgroup()` against a one-slot `BPF_MAP_TYPE_CGROUP_ARRAY`;
//! [`set_filter`] opens the cgroup directory and stores its descriptor in that map. A path that is not a cgroup v2
//! directory (a file, a cgroup v1 hierarchy, any other directory) is refused with a clear message before anything
//! is attached: the kernel's cgroup array takes cgroup v2 directories only.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};

const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;

/// Opens cgroup v2 directory `path`, checking that it is one.
pub fn open(path: &Path) -> Result<File> {
    let dir = File::open(path).with_context(|| format!("cannot open cgroup '{}'", path.display()))?;
    let fs = nix::sys::statfs::fstatfs(&dir).with_context(|| format!("cannot stat cgroup '{}'", path.display()))?;
    let magic = fs.filesystem_type().0 as i64;
    let is_dir = dir.metadata().is_ok_and(|m| m.is_dir());
    match (magic, is_dir) {
        (CGROUP2_SUPER_MAGIC, true) => Ok(dir),
        (CGROUP2_SUPER_MAGIC, false) => {
            bail!("'{}' is a file, not a cgroup v2 directory (give the directory that holds it)", path.display())
        }
        (CGROUP_SUPER_MAGIC, _) => {
            bail!("'{}' is in a cgroup v1 hierarchy, not a cgroup v2 directory (under /sys/fs/cgroup on a unified system)", path.display())
        }
        _ => bail!("'{}' is not a cgroup v2 directory", path.display()),
    }
}

/// Stores the cgroup's descriptor in slot 0 of `map` (a cgroup array).
pub fn set_filter(map: &impl MapCore, cgroup: &File) -> Result<()> {
    let key = 0u32.to_ne_bytes();
    let fd = cgroup.as_raw_fd().to_ne_bytes();
    map.update(&key, &fd, MapFlags::ANY).context("setting the cgroup filter")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_cgroup_paths_are_refused() {
        let err = open(Path::new("/tmp")).unwrap_err().to_string();
        assert!(err.contains("is not a cgroup v2 directory"), "{err}");
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let mount_of = |fstype: &str| {
            mounts
                .lines()
                .map(|l| l.split(' ').collect::<Vec<_>>())
                .find(|f| f.len() > 2 && f[2] == fstype)
                .map(|f| f[1].to_string())
        };
        if let Some(v2) = mount_of("cgroup2") {
            assert!(open(Path::new(&v2)).is_ok());
            let err = open(&Path::new(&v2).join("cgroup.procs")).unwrap_err().to_string();
            assert!(err.contains("is a file, not a cgroup v2 directory"), "{err}");
        }
        if let Some(v1) = mount_of("cgroup") {
            let err = open(Path::new(&v1)).unwrap_err().to_string();
            assert!(err.contains("cgroup v1 hierarchy, not a cgroup v2 directory"), "{err}");
        }
        let err = open(Path::new("/no/such/cgroup")).unwrap_err().to_string();
        assert!(err.contains("cannot open cgroup"), "{err}");
    }
}
