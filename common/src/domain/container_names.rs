// SPDX-License-Identifier: Apache-2.0 OR MIT
//! From a task to its container, the other way round from [`super::container_lookup`]: the container a task runs
//! in, named as a user knows it, for the `container` field of JSON events and the `container` label of metrics.
//!
//! A container runtime puts each container's processes in a cgroup of their own whose path ends with the
//! container's ID: `/docker/<ID>` (Docker, cgroupfs driver), `docker-<ID>.scope` (Docker, systemd driver),
//! `cri-containerd-<ID>.scope` and `/kubepods/.../pod<UID>/<ID>` (containerd under Kubernetes), `crio-<ID>.scope`
//! (CRI-O), `libpod-<ID>.scope` (Podman). [`container_id_in_path`] finds the ID in such a path. The BPF side
//! records a task's cgroup v2 ID (`bpf_get_current_cgroup_id()`), which is the inode number of its directory in
//! the cgroup v2 file system; [`ContainerNames`] maps it to the directory (one walk of the tree, again only for an
//! ID it has never seen), the directory to the ID, and the ID to a name: Docker's, from its `config.v2.json`
//! (`COREBPF_DOCKER_ROOT` moves it, as for `--container`); containerd keeps names in its database only, so its
//! containers are shown by their short ID. Every answer is cached: an event costs a hash lookup.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The length of a container ID as the runtimes make them (64 hexadecimal digits).
const ID_LEN: usize = 64;
/// How long a cgroup ID that is nowhere in the tree waits before the tree is walked again for it.
const RESCAN_AFTER: Duration = Duration::from_millis(200);

/// The container ID a cgroup path ends in, if any: the last component that is, or holds between a runtime's
/// prefix and `.scope`, 64 hexadecimal digits.
pub fn container_id_in_path(path: &str) -> Option<&str> {
    path.rsplit('/').find_map(|part| {
        let part = part.strip_suffix(".scope").unwrap_or(part);
        let id = match part.rfind('-') {
            Some(dash) => &part[dash + 1..],
            None => part,
        };
        (id.len() == ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
    })
}

/// The container of a task as shown: its name where the runtime keeps one on disk, else its ID's first 12
/// characters (as `docker ps` shows it).
fn display_name(id: &str, docker_root: &Path) -> String {
    let config = docker_root.join(id).join("config.v2.json");
    let name = std::fs::read(config).ok().and_then(|text| {
        let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
        Some(v.get("Name")?.as_str()?.trim_start_matches('/').to_string())
    });
    name.filter(|n| !n.is_empty()).unwrap_or_else(|| id[..12].to_string())
}

/// Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a hybrid
/// one (from /proc/self/mountinfo).
fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount_point = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next() == Some("cgroup2")).then(|| PathBuf::from(mount_point))
    })
}

/// Task → container, cached. One per tool run; not shared between threads.
#[derive(Debug)]
pub struct ContainerNames {
    root: Option<PathBuf>,
    docker_root: PathBuf,
    /// cgroup ID → its path below the root, from the last walk of the tree.
    paths: HashMap<u64, String>,
    /// cgroup ID → its container's name (None: not a container's cgroup).
    names: HashMap<u64, Option<Rc<str>>>,
    last_walk: Option<Instant>,
}

impl Default for ContainerNames {
    fn default() -> Self {
        Self::new()
    }
}

impl ContainerNames {
    pub fn new() -> Self {
        let docker_root = std::env::var_os("COREBPF_DOCKER_ROOT")
            .map_or_else(|| PathBuf::from("/var/lib/docker/containers"), PathBuf::from);
        ContainerNames {
            root: cgroup2_root(),
            docker_root,
            paths: HashMap::new(),
            names: HashMap::new(),
            last_walk: None,
        }
    }

    /// The container of the task whose cgroup v2 ID is `cgroup_id` (what `bpf_get_current_cgroup_id()` returned),
    /// or None for a host task (or a cgroup that no longer exists and was never seen).
    pub fn of_cgroup(&mut self, cgroup_id: u64) -> Option<Rc<str>> {
        if cgroup_id == 0 {
            return None;
        }
        if let Some(known) = self.names.get(&cgroup_id) {
            return known.clone();
        }
        if !self.paths.contains_key(&cgroup_id) && self.last_walk.is_none_or(|t| t.elapsed() >= RESCAN_AFTER) {
            self.walk();
        }
        // An ID still unknown is not cached: its cgroup may be made after this walk.
        let path = self.paths.get(&cgroup_id)?;
        let name = self.name_of_path(&path.clone());
        self.names.insert(cgroup_id, name.clone());
        name
    }

    /// The `container` label of a series counted for the tasks of cgroup `cgroup_id`: the container's name, or
    /// empty for the host's tasks.
    pub fn label(&mut self, cgroup_id: u64) -> String {
        self.of_cgroup(cgroup_id).as_deref().unwrap_or_default().to_string()
    }

    /// The container of process `pid`, from its cgroup v2 line in /proc/PID/cgroup (None for a host process or
    /// one that has gone).
    pub fn of_pid(&mut self, pid: u32) -> Option<Rc<str>> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
        self.name_of_path(path)
    }

    fn name_of_path(&self, path: &str) -> Option<Rc<str>> {
        container_id_in_path(path).map(|id| Rc::from(display_name(id, &self.docker_root)))
    }

    /// Indexes every cgroup directory of the v2 hierarchy by inode number (its cgroup ID).
    fn walk(&mut self) {
        self.last_walk = Some(Instant::now());
        let Some(root) = self.root.clone() else { return };
        let mut stack = vec![(root.clone(), String::new())];
        while let Some((dir, rel)) = stack.pop() {
            if let Ok(meta) = std::fs::metadata(&dir) {
                self.paths.insert(meta.ino(), if rel.is_empty() { "/".to_string() } else { rel.clone() });
            }
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    stack.push((entry.path(), format!("{rel}/{name}")));
                }
            }
        }
    }
}

/// `--container-label`, for tools whose metrics are labelled per process or per process name: off by default, so
/// that turning it on is a choice. On series per process it adds a label, not series (a process is in one
/// container); on series per process name the BPF side keys them by cgroup too, so a name that runs in two
/// containers has a series in each.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct ContainerLabelArgs {
    /// With --prometheus: label each series with the container its processes run in (its name, else its short
    /// ID; empty for the host's)
    #[arg(long)]
    pub container_label: bool,
}

impl ContainerLabelArgs {
    /// The lookups of the label by PID if the flag is given. `per_process`: the tool's series are per process now
    /// (else `needs`, the flag that makes them so, is named in the usage error); the flag also needs --prometheus.
    pub fn open(&self, serving: bool, per_process: bool, needs: &str) -> Option<PidContainers> {
        if !self.wanted(serving) {
            return None;
        }
        if !per_process {
            crate::cli::usage_error(&format!("--container-label labels the series of processes: it needs {needs}"));
        }
        Some(PidContainers::default())
    }

    /// The lookups of the label by cgroup ID if the flag is given, for a tool whose BPF side then keys its series
    /// by the cgroup of the tasks counted (series per process name, whose processes may have exited by the
    /// scrape); the flag needs --prometheus.
    pub fn open_by_cgroup(&self, serving: bool) -> Option<ContainerNames> {
        self.wanted(serving).then(ContainerNames::new)
    }

    /// Whether the flag is given; a usage error without --prometheus.
    fn wanted(&self, serving: bool) -> bool {
        if self.container_label && !serving {
            crate::cli::usage_error("--container-label labels metrics: it needs --prometheus");
        }
        self.container_label
    }
}

/// The `container` label of per-process series, by PID: looked up once, while the process lives (its counts
/// may outlive it in the kernel's map), and kept.
#[derive(Debug, Default)]
pub struct PidContainers {
    names: ContainerNames,
    by_pid: HashMap<u32, Option<Rc<str>>>,
}

impl PidContainers {
    /// The label's name.
    pub const LABEL: &'static str = "container";

    /// The label's value for process `pid`: its container's name, or empty for a host process.
    pub fn label(&mut self, pid: u32) -> String {
        if !self.by_pid.contains_key(&pid) {
            let found = self.names.of_pid(pid);
            // A process already gone is not remembered as a host process: it may be a PID seen too late.
            if found.is_none() && !Path::new(&format!("/proc/{pid}")).exists() {
                return String::new();
            }
            self.by_pid.insert(pid, found);
        }
        self.by_pid[&pid].as_deref().unwrap_or_default().to_string()
    }

    /// Forgets the PIDs for which `keep` is false (processes whose series are gone).
    pub fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.by_pid.retain(|&pid, _| keep(pid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "8c77638e8a35e166ccafffa5a38d210791bb861b7a12581a34aca9f99fd1dd9e";

    #[test]
    fn runtimes_cgroup_paths_give_the_container_id() {
        for path in [
            format!("/docker/{ID}"),
            format!("/system.slice/docker-{ID}.scope"),
            format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-{ID}.scope"
            ),
            format!("/kubepods/burstable/pod2c3d6a4e-0000-4000-8000-000000000000/{ID}"),
            format!("/kubepods.slice/kubepods-pod1.slice/crio-{ID}.scope"),
            format!("/machine.slice/libpod-{ID}.scope/container"),
        ] {
            assert_eq!(container_id_in_path(&path), Some(ID), "{path}");
        }
        for host in ["/", "/user.slice/user-0.slice/session-3.scope", "/system.slice/docker.service", "/docker/abc"] {
            assert_eq!(container_id_in_path(host), None, "{host}");
        }
    }

    #[test]
    fn a_docker_name_else_the_short_id() {
        let root = std::env::temp_dir().join(format!("corebpf-names-{}", std::process::id()));
        std::fs::create_dir_all(root.join(ID)).unwrap();
        assert_eq!(display_name(ID, &root), "8c77638e8a35");
        std::fs::write(root.join(ID).join("config.v2.json"), format!(r#"{{"ID":"{ID}","Name":"/web"}}"#)).unwrap();
        assert_eq!(display_name(ID, &root), "web");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
