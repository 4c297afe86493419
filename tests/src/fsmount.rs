// SPDX-License-Identifier: Apache-2.0 OR MIT
//! A file system of the test's own (xfs, btrfs) on a loop device of its own ([`crate::loopdev`]), mounted on a
//! directory of its own: for the file system tools (fsslower, fsdist), whose `-t` must see operations there and
//! nowhere else. Unmounted, and its loop device detached, when dropped. Needs mkfs.<type> (Debian's xfsprogs,
//! btrfs-progs).

use std::path::PathBuf;
use std::process::Command;

use crate::loopdev::LoopDevice;

pub struct MountedFs {
    pub dir: PathBuf,
    _dev: LoopDevice,
}

impl MountedFs {
    pub fn new(fstype: &str, tag: &str) -> MountedFs {
        // The smallest each mkfs accepts, with room: xfs wants 300 MiB.
        let size: u64 = if fstype == "xfs" { 320 << 20 } else { 256 << 20 };
        let dev = LoopDevice::with_size(&format!("{tag}-{fstype}"), size);
        let mkfs = format!("mkfs.{fstype}");
        let made = Command::new(&mkfs)
            .args(["-q", "-f"])
            .arg(&dev.path)
            .output()
            .unwrap_or_else(|e| panic!("{mkfs}: {e} (install xfsprogs and btrfs-progs)"));
        assert!(made.status.success(), "{mkfs}: {}", String::from_utf8_lossy(&made.stderr));
        let dir = PathBuf::from(format!("/tmp/corebpf-fs-{tag}-{fstype}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mounted = Command::new("mount").args(["-t", fstype]).arg(&dev.path).arg(&dir).output().unwrap();
        assert!(mounted.status.success(), "mount: {}", String::from_utf8_lossy(&mounted.stderr));
        MountedFs { dir, _dev: dev }
    }
}

impl Drop for MountedFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}
