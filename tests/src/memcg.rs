// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Memory-limited cgroups for tests that need the kernel to run short of memory in one place only (OOM kills,
//! memory-cgroup reclaim): [`MemCgroup::new`] makes a cgroup unique to the test process and tag with a memory
//! limit, in the cgroup v1 memory hierarchy where the host has one (`/sys/fs/cgroup/memory`,
//! `memory.limit_in_bytes`), else in cgroup v2 with the memory controller (`memory.max`, enabled in the root's
//! `cgroup.subtree_control` if need be). A helper joins it by writing its own PID to [`MemCgroup::procs`]; the
//! cgroup is removed when dropped, once its processes are gone (drop the helper's guard first).

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::cgroup::{cgroup2_root, TestCgroup};

pub struct MemCgroup {
    cgroup: TestCgroup,
}

impl MemCgroup {
    /// A new cgroup `corebpf-TAG-PID-N` whose memory use may not exceed `limit` bytes (no swap on these hosts).
    pub fn new(tag: &str, limit: u64) -> MemCgroup {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("corebpf-{tag}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        let v1 = PathBuf::from("/sys/fs/cgroup/memory");
        let (cgroup, limit_file) = if v1.join("memory.limit_in_bytes").exists() {
            (TestCgroup::at(v1.join(name)), "memory.limit_in_bytes")
        } else {
            let root = cgroup2_root();
            let controllers = fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            assert!(controllers.split_whitespace().any(|c| c == "memory"), "no memory cgroup controller here");
            let _ = fs::write(root.join("cgroup.subtree_control"), "+memory");
            (TestCgroup::at(root.join(name)), "memory.max")
        };
        let file = cgroup.path().join(limit_file);
        fs::write(&file, limit.to_string()).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
        MemCgroup { cgroup }
    }

    /// The file a process writes its PID to, to join the cgroup.
    pub fn procs(&self) -> PathBuf {
        self.cgroup.path().join("cgroup.procs")
    }
}
