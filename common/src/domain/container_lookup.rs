// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Finding a running container by name or ID, for `--container`: what the container runtimes keep on disk, read
//! without talking to their daemons (no socket, no API version, nothing to install).
//!
//! - Docker: `/var/lib/docker/containers/<ID>/config.v2.json` holds the container's `ID`, its `Name` (with a
//!   leading `/`) and `State.Pid`, its first process as the host sees it.
//! - containerd (Kubernetes nodes, `ctr`, `nerdctl`): `/run/containerd/io.containerd.runtime.v2.task/<namespace>/
//!   <ID>/init.pid`. containerd keeps names (Kubernetes' pod and container names) in its database, not in files, so
//!   its containers are found by ID only.
//!
//! A name matches exactly (with or without Docker's `/`); an ID matches in full or by a prefix that no other
//! container shares, as `docker` accepts. The roots can be moved for a runtime installed elsewhere or a tool
//! running in a container with the host's state mounted (`COREBPF_DOCKER_ROOT`, `COREBPF_CONTAINERD_TASKS`).
//! What the filter then keys on is the first process's mount namespace: every process of a container shares it
//! (also those started later with `docker exec`), whatever the cgroup version or driver.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Where Docker keeps its containers unless `COREBPF_DOCKER_ROOT` says otherwise.
const DOCKER_CONTAINERS: &str = "/var/lib/docker/containers";
/// Where containerd's v2 shims keep each running task, one folder per namespace.
const CONTAINERD_TASKS: &str = "/run/containerd/io.containerd.runtime.v2.task";

/// A running container as a runtime describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// The runtime: `docker` or `containerd`.
    pub runtime: &'static str,
    /// Its full ID.
    pub id: String,
    /// Its name (Docker's, without the `/`), if the runtime keeps one on disk.
    pub name: Option<String>,
    /// Its first process, as the host's PID namespace numbers it.
    pub pid: u32,
}

impl Container {
    /// The ID of the container's mount namespace: what BPF reads as `task->nsproxy->mnt_ns->ns.inum`.
    pub fn mount_ns(&self) -> Result<u64> {
        let path = format!("/proc/{}/ns/mnt", self.pid);
        let meta = std::fs::metadata(&path).with_context(|| {
            format!("container {}: reading the mount namespace of its process {} ({path})", self.short_id(), self.pid)
        })?;
        Ok(meta.ino())
    }

    /// The first 12 characters of the ID, as `docker ps` shows it.
    pub fn short_id(&self) -> &str {
        &self.id[..self.id.len().min(12)]
    }
}

/// The running container named `what`, or whose ID is or starts with `what`.
pub fn find(what: &str) -> Result<Container> {
    let docker = env_path("COREBPF_DOCKER_ROOT", DOCKER_CONTAINERS);
    let containerd = env_path("COREBPF_CONTAINERD_TASKS", CONTAINERD_TASKS);
    let all: Vec<Container> = docker_containers(&docker).into_iter().chain(containerd_tasks(&containerd)).collect();
    pick(what, all, &[&docker, &containerd])
}

fn env_path(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(default))
}

/// The one container `what` names among `all`: a name first, then a full ID, then an ID prefix.
fn pick(what: &str, all: Vec<Container>, looked_in: &[&Path]) -> Result<Container> {
    let name = what.strip_prefix('/').unwrap_or(what);
    if name.is_empty() {
        bail!("--container: give a container's name or ID");
    }
    if let Some(c) = all.iter().find(|c| c.name.as_deref() == Some(name) || c.id == name) {
        return Ok(c.clone());
    }
    let mut by_prefix = all.iter().filter(|c| c.id.starts_with(name));
    match (by_prefix.next(), by_prefix.next()) {
        (Some(c), None) => Ok(c.clone()),
        (Some(_), Some(_)) => {
            bail!("--container: '{what}' is the start of more than one container's ID; give more of it")
        }
        (None, _) => {
            let places: Vec<String> = looked_in.iter().map(|p| p.display().to_string()).collect();
            bail!(
                "--container: no running container named '{what}' or with that ID (looked in {})",
                places.join(" and ")
            )
        }
    }
}

/// Docker's running containers (those whose state has a process).
fn docker_containers(root: &Path) -> Vec<Container> {
    let Ok(dirs) = std::fs::read_dir(root) else { return Vec::new() };
    dirs.flatten()
        .filter_map(|dir| {
            let text = std::fs::read(dir.path().join("config.v2.json")).ok()?;
            docker_config(&text)
        })
        .collect()
}

/// One container from Docker's `config.v2.json`, if it is running.
fn docker_config(text: &[u8]) -> Option<Container> {
    let v: serde_json::Value = serde_json::from_slice(text).ok()?;
    let pid = v.pointer("/State/Pid")?.as_u64().filter(|&p| p > 0)?;
    Some(Container {
        runtime: "docker",
        id: v.get("ID")?.as_str()?.to_string(),
        name: v.get("Name").and_then(|n| n.as_str()).map(|n| n.trim_start_matches('/').to_string()),
        pid: u32::try_from(pid).ok()?,
    })
}

/// containerd's running tasks, in every namespace (`k8s.io`, `moby`, `default`, ...).
fn containerd_tasks(root: &Path) -> Vec<Container> {
    let Ok(namespaces) = std::fs::read_dir(root) else { return Vec::new() };
    namespaces
        .flatten()
        .filter_map(|ns| std::fs::read_dir(ns.path()).ok())
        .flat_map(|tasks| tasks.flatten())
        .filter_map(|task| {
            let pid = std::fs::read_to_string(task.path().join("init.pid")).ok()?.trim().parse().ok()?;
            Some(Container { runtime: "containerd", id: task.file_name().to_str()?.to_string(), name: None, pid })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, name: Option<&str>) -> Container {
        Container { runtime: "docker", id: id.into(), name: name.map(Into::into), pid: 1 }
    }

    #[test]
    fn a_name_a_full_id_or_a_unique_prefix_picks_one() {
        let all = vec![c("abc123", Some("web")), c("abd456", Some("abc")), c("f00", None)];
        assert_eq!(pick("web", all.clone(), &[]).unwrap().id, "abc123");
        assert_eq!(pick("/web", all.clone(), &[]).unwrap().id, "abc123");
        // A name wins over an ID prefix it also is.
        assert_eq!(pick("abc", all.clone(), &[]).unwrap().id, "abd456");
        assert_eq!(pick("abd", all.clone(), &[]).unwrap().id, "abd456");
        assert_eq!(pick("f0", all.clone(), &[]).unwrap().id, "f00");
        let two = pick("ab", all.clone(), &[]).unwrap_err().to_string();
        assert!(two.contains("more than one"), "{two}");
        let none = pick("db", all.clone(), &[Path::new("/x")]).unwrap_err().to_string();
        assert_eq!(none, "--container: no running container named 'db' or with that ID (looked in /x)");
        assert!(pick("", all, &[]).is_err());
    }

    #[test]
    fn docker_state_gives_id_name_and_pid_of_running_containers_only() {
        let running = br#"{"ID":"0123456789abcdef","Name":"/web","State":{"Running":true,"Pid":4242}}"#;
        let got = docker_config(running).unwrap();
        assert_eq!((got.id.as_str(), got.name.as_deref(), got.pid), ("0123456789abcdef", Some("web"), 4242));
        assert_eq!(got.short_id(), "0123456789ab");
        let stopped = br#"{"ID":"0123","Name":"/old","State":{"Running":false,"Pid":0}}"#;
        assert_eq!(docker_config(stopped), None);
    }
}
