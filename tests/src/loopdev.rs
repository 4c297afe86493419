// SPDX-License-Identifier: Apache-2.0 OR MIT
//! A loop device of the test's own, over a file in memory: a disk whose every request comes from the test (no
//! other test, file system or flusher touches it), so the block tools' counts on it are exact and their disk
//! filters (`-d loopN`) have a disk to name. Detached when dropped. [`LoopDevice::on_root_fs`] puts the file on
//! the root file system instead, for requests tmpfs cannot take (write-zeroes); [`LoopDevice::discard`] and
//! [`LoopDevice::flush`] send the requests that move no data.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::ScratchFile;

pub struct LoopDevice {
    dev: File,
    pub path: PathBuf,
    _backing: ScratchFile,
}

impl LoopDevice {
    /// A free loop device over an 8 MiB file in /dev/shm (else /tmp); `tag` names the file.
    pub fn new(tag: &str) -> LoopDevice {
        LoopDevice::with_size(tag, 8 << 20)
    }

    /// A free loop device over a sparse file of `bytes` in /dev/shm (else /tmp), for a file system with a minimum
    /// size (xfs wants 300 MiB); only the blocks written take memory.
    pub fn with_size(tag: &str, bytes: u64) -> LoopDevice {
        let dir = if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
        LoopDevice::over(ScratchFile(format!("{dir}/corebpf-loop-{tag}-{}", std::process::id()).into()), bytes)
    }

    /// A free loop device over a file of `bytes` on the root file system (not tmpfs), whose fallocate() takes
    /// every range request the loop driver passes on: discards (a hole punched) and write-zeroes (a range zeroed)
    /// complete as themselves.
    pub fn on_root_fs(tag: &str, bytes: u64) -> LoopDevice {
        LoopDevice::over(ScratchFile::new(&format!("loop-{tag}")), bytes)
    }

    /// Discards `len` bytes at `offset` (`blkdiscard`; with `zero`, `blkdiscard -z`: write-zeroes), and returns the
    /// PID of the blkdiscard that asked.
    pub fn discard(&self, offset: u64, len: u64, zero: bool) -> u32 {
        let mut cmd = std::process::Command::new("blkdiscard");
        if zero {
            cmd.arg("-z");
        }
        let mut child =
            cmd.args(["-o", &offset.to_string(), "-l", &len.to_string()]).arg(&self.path).spawn().expect("blkdiscard");
        let pid = child.id();
        let status = child.wait().unwrap();
        assert!(status.success(), "blkdiscard {offset} {len} {zero}: {status}");
        pid
    }

    /// Flushes the device's write cache (fsync() on the device: one empty REQ_PREFLUSH bio, which the block layer
    /// sends as a flush request).
    pub fn flush(&self) {
        File::open(&self.path).and_then(|f| f.sync_all()).expect("fsync on the loop device");
    }

    /// The requests that move no data, as the block tools' tests make them: a 1 MiB discard at offset 0, a 1 MiB
    /// write-zeroes at 1 MiB (each by a blkdiscard, which also makes a few 4 KiB probing reads) and a flush, then
    /// 300 ms for the last completions to be seen. Returns the two blkdiscards' PIDs.
    pub fn requests_without_data(&self) -> (u32, u32) {
        const MIB: u64 = 1 << 20;
        let discard = self.discard(0, MIB, false);
        let zeroes = self.discard(MIB, MIB, true);
        self.flush();
        std::thread::sleep(std::time::Duration::from_millis(300));
        (discard, zeroes)
    }
    /// A free loop device over `backing`, made a sparse file of `bytes`.
    fn over(backing: ScratchFile, bytes: u64) -> LoopDevice {
        const LOOP_SET_FD: libc::c_ulong = 0x4C00;
        const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
        let file = File::create(&backing.0).unwrap();
        file.set_len(bytes).unwrap();
        let file = OpenOptions::new().read(true).write(true).open(&backing.0).unwrap();
        let control = File::open("/dev/loop-control").expect("/dev/loop-control (the loop driver)");
        // Another test may take the free device first: ask again.
        for _ in 0..20 {
            // SAFETY: ioctls on descriptors we own, with integer arguments.
            let n = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) };
            assert!(n >= 0, "no free loop device: {}", std::io::Error::last_os_error());
            let path = PathBuf::from(format!("/dev/loop{n}"));
            let dev = OpenOptions::new().read(true).write(true).open(&path).unwrap();
            if unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_SET_FD, file.as_raw_fd()) } == 0 {
                return LoopDevice { dev, path, _backing: backing };
            }
        }
        panic!("could not set up a loop device");
    }

    /// Its name, as `-d` takes it (`loop3`).
    pub fn name(&self) -> String {
        self.path.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// Its `major:minor`, read from sysfs.
    pub fn major_minor(&self) -> (u32, u32) {
        let text = std::fs::read_to_string(format!("/sys/class/block/{}/dev", self.name())).unwrap();
        let (major, minor) = text.trim().split_once(':').unwrap();
        (major.parse().unwrap(), minor.parse().unwrap())
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
        // SAFETY: an ioctl on a descriptor we own.
        unsafe { libc::ioctl(self.dev.as_raw_fd(), LOOP_CLR_FD, 0) };
    }
}
