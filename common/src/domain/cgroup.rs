//! Cgroup filters (`-c CGROUP_PATH`, as in libbpf-tools).
//!
//! A tool's BPF program checks `bpf_current_task_under_cgroup()` against a one-slot `BPF_MAP_TYPE_CGROUP_ARRAY`;
//! [`set_filter`] opens the cgroup directory and stores its descriptor in that map. A path that is not a cgroup
//! directory is refused with a clear message before anything is attached.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};

const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;

/// Opens cgroup directory `path`, checking that it is one.
pub fn open(path: &Path) -> Result<File> {
    let dir = File::open(path).with_context(|| format!("cannot open cgroup '{}'", path.display()))?;
    let fs = nix::sys::statfs::fstatfs(&dir).with_context(|| format!("cannot stat cgroup '{}'", path.display()))?;
    let magic = fs.filesystem_type().0 as i64;
    if magic != CGROUP2_SUPER_MAGIC && magic != CGROUP_SUPER_MAGIC {
        bail!("'{}' is not a cgroup directory", path.display());
    }
    Ok(dir)
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
        assert!(err.contains("is not a cgroup directory"), "{err}");
        let err = open(Path::new("/no/such/cgroup")).unwrap_err().to_string();
        assert!(err.contains("cannot open cgroup"), "{err}");
    }
}
