// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The syscall path: which system calls reach which VFS function, by number for the architecture built for
//! (libc's `SYS_*`), written into the BPF side's `syscall_class` array before its program is attached.
//!
//! Only the calls that enter the counted functions from user space: read/pread64 (vfs_read; readv and preadv
//! go through vfs_iter_read, which BCC does not count either), write/pwrite64, fsync/fdatasync, the open family,
//! mknod of a regular file (the only way in to vfs_create: open(O_CREAT) and creat create through the
//! filesystem's own create and count as OPEN on every path), unlink, mkdir and rmdir (unlinkat and mkdirat too).

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapMut};

use crate::bpf::consts::*;

/// (system call number, class) for every call counted.
fn classes() -> Vec<(libc::c_long, usize)> {
    // Only x86-64 adds to it: arm64 has no open, creat, mknod, unlink, mkdir or rmdir of its own.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut list = vec![
        (libc::SYS_read, SC_READ),
        (libc::SYS_pread64, SC_READ),
        (libc::SYS_write, SC_WRITE),
        (libc::SYS_pwrite64, SC_WRITE),
        (libc::SYS_fsync, SC_FSYNC),
        (libc::SYS_fdatasync, SC_FSYNC),
        (libc::SYS_openat, SC_OPEN),
        (libc::SYS_openat2, SC_OPEN),
        (libc::SYS_open_by_handle_at, SC_OPEN),
        (libc::SYS_mknodat, SC_MKNODAT),
        (libc::SYS_unlinkat, SC_UNLINKAT),
        (libc::SYS_mkdirat, SC_MKDIR),
    ];
    #[cfg(target_arch = "x86_64")]
    list.extend([
        (libc::SYS_open, SC_OPEN),
        (libc::SYS_creat, SC_OPEN),
        (libc::SYS_mknod, SC_MKNOD),
        (libc::SYS_unlink, SC_UNLINK),
        (libc::SYS_mkdir, SC_MKDIR),
        (libc::SYS_rmdir, SC_RMDIR),
    ]);
    list
}

/// Writes the class of every counted system call into the BPF array `map`.
pub fn fill_classes(map: &MapMut<'_>) -> Result<()> {
    for (nr, class) in classes() {
        let nr = u32::try_from(nr).ok().filter(|&n| (n as usize) < SYSCALL_SLOTS).context("system call number")?;
        map.update(&nr.to_ne_bytes(), &(class as u32).to_ne_bytes(), MapFlags::ANY)
            .with_context(|| format!("setting the class of system call {nr}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_fits_and_is_classed_once() {
        let list = classes();
        for (i, (nr, _)) in list.iter().enumerate() {
            assert!((*nr as usize) < SYSCALL_SLOTS, "{nr}");
            assert!(list[i + 1..].iter().all(|(other, _)| other != nr), "{nr} twice");
        }
    }
}
