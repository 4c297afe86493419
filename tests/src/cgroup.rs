// SPDX-License-Identifier: Apache-2.0 OR MIT
//! cgroup v2 directories for tests: [`cgroup2_root`] finds the unified hierarchy (`/sys/fs/cgroup/unified` on a
//! hybrid host, else `/sys/fs/cgroup`), and [`TestCgroup`] is a directory made under it for one test, unique to
//! the test process and tag, removed when dropped. Tests that filter by cgroup put their workload in one and pass
//! its path (`-c PATH`) or id (its inode number) to the tool.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The cgroup v2 mount point; panics where there is none.
pub fn cgroup2_root() -> PathBuf {
    let mounts = fs::read_to_string("/proc/mounts").unwrap();
    ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .find(|p| mounts.contains(&format!(" {p} cgroup2 ")))
        .map(PathBuf::from)
        .expect("a cgroup2 mount")
}

/// A cgroup made for one test, removed when dropped (once its processes have ended: a test kills its workload
/// first, as the guards that hold it do when dropped before this).
pub struct TestCgroup(pub PathBuf);

impl TestCgroup {
    /// A new cgroup `corebpf-TAG-PID-N` under the cgroup v2 root.
    pub fn new(tag: &str) -> TestCgroup {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        TestCgroup::at(cgroup2_root().join(format!("corebpf-{tag}-{}-{n}", std::process::id())))
    }

    /// A cgroup at `path` (below another test cgroup, say), made now.
    pub fn at(path: PathBuf) -> TestCgroup {
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("making cgroup {}: {e}", path.display()));
        TestCgroup(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Its path as the tools' `-c` takes it.
    pub fn arg(&self) -> &str {
        self.0.to_str().expect("a UTF-8 cgroup path")
    }

    /// Its id, as bpf_get_current_cgroup_id() returns it: its directory's inode number.
    pub fn id(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(&self.0).unwrap().ino()
    }

    /// A shell command that moves the shell into the cgroup and then becomes `command` (same PID).
    pub fn exec_in(&self, command: &str) -> String {
        format!("echo $$ > {}/cgroup.procs && exec {command}", self.0.display())
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // A process that has just exited may still be counted for a moment: try a few times.
        for _ in 0..50 {
            if fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
