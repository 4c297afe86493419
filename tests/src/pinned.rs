// SPDX-License-Identifier: Apache-2.0 OR MIT
//! BPF maps pinned for a test, as users pin them for BCC's --cgroupmap and --mntnsmap (profile, capable): a bpf
//! file system of the test's own, maps made with the bpf() system call (no bpftool needed).

use std::fs;
use std::path::{Path, PathBuf};

/// BPF maps pinned on a bpf file system mounted for the test, made with the bpf() system call (no bpftool).
pub struct PinnedMaps {
    dir: PathBuf,
}

fn bpf_syscall(cmd: libc::c_long, attr: &mut [u64; 16]) -> i64 {
    // SAFETY: attr is a zeroed, 8-aligned 128-byte bpf_attr.
    unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of_val(attr)) }
}

impl PinnedMaps {
    pub fn new(tag: &str) -> PinnedMaps {
        let dir = std::env::temp_dir().join(format!("corebpf-bpffs-{tag}-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let target = c(dir.to_str().unwrap());
        // SAFETY: valid C strings; a fresh bpf file system instance on a directory of our own.
        let rc = unsafe { libc::mount(c("bpf").as_ptr(), target.as_ptr(), c("bpf").as_ptr(), 0, std::ptr::null()) };
        assert_eq!(rc, 0, "mounting a bpf file system: {}", std::io::Error::last_os_error());
        PinnedMaps { dir }
    }

    /// Pins a hash map (`key_size`-byte keys, 8-byte values) holding `keys`; returns its path.
    pub fn hash(&self, name: &str, key_size: u32, keys: &[u64]) -> PathBuf {
        const BPF_MAP_CREATE: libc::c_long = 0;
        const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
        const BPF_OBJ_PIN: libc::c_long = 6;
        const BPF_MAP_TYPE_HASH: u64 = 1;
        let mut attr = [0u64; 16];
        attr[0] = BPF_MAP_TYPE_HASH | (key_size as u64) << 32; // map_type, key_size
        attr[1] = 8 | 64 << 32; // value_size, max_entries
        let fd = bpf_syscall(BPF_MAP_CREATE, &mut attr);
        assert!(fd >= 0, "creating a map: {}", std::io::Error::last_os_error());
        let value = 1u64;
        for key in keys {
            let mut attr = [0u64; 16];
            attr[0] = fd as u64;
            attr[1] = key as *const u64 as u64;
            attr[2] = &value as *const u64 as u64;
            assert_eq!(bpf_syscall(BPF_MAP_UPDATE_ELEM, &mut attr), 0, "{}", std::io::Error::last_os_error());
        }
        let path = self.dir.join(name);
        let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let mut attr = [0u64; 16];
        attr[0] = cpath.as_ptr() as u64;
        attr[1] = fd as u64;
        assert_eq!(bpf_syscall(BPF_OBJ_PIN, &mut attr), 0, "pinning: {}", std::io::Error::last_os_error());
        // SAFETY: fd is ours; the pin keeps the map.
        unsafe { libc::close(fd as i32) };
        path
    }
}

impl PinnedMaps {
    /// Adds `key` to the map pinned at `path`.
    pub fn insert(&self, path: &Path, key: u64) {
        const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
        const BPF_OBJ_GET: libc::c_long = 7;
        let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let mut attr = [0u64; 16];
        attr[0] = cpath.as_ptr() as u64;
        let fd = bpf_syscall(BPF_OBJ_GET, &mut attr);
        assert!(fd >= 0, "opening {}: {}", path.display(), std::io::Error::last_os_error());
        let value = 1u64;
        let mut attr = [0u64; 16];
        attr[0] = fd as u64;
        attr[1] = &key as *const u64 as u64;
        attr[2] = &value as *const u64 as u64;
        assert_eq!(bpf_syscall(BPF_MAP_UPDATE_ELEM, &mut attr), 0, "{}", std::io::Error::last_os_error());
        // SAFETY: fd is ours.
        unsafe { libc::close(fd as i32) };
    }
}

impl Drop for PinnedMaps {
    fn drop(&mut self) {
        let target = std::ffi::CString::new(self.dir.to_str().unwrap()).unwrap();
        // SAFETY: our own mount point.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        let _ = fs::remove_dir(&self.dir);
    }
}
