// SPDX-License-Identifier: Apache-2.0 OR MIT
//! BCC's container filters, `--cgroupmap MAPPATH` and `--mntnsmap MAPPATH`: the user pins a BPF hash whose keys
//! are cgroup ids or mount namespace ids (u64), and the tool traces only tasks whose id is a key. And one more,
//! `--container NAME|ID`, which spares the user the pinning: the tool finds the container
//! ([`super::container_lookup`]) and makes the mount-namespace map itself, with that container's one key.
//!
//! A tool flattens [`ContainerArgs`] into its arguments for the two flags. The BPF side declares
//! `CONTAINER_FILTER;` (`bpf/include/containers.bpf.h`): two flags in `.rodata` and two one-slot arrays of maps.
//! [`ContainerArgs::open`] (or [`ContainerMaps::open`]) opens and checks the pinned maps before anything is loaded (a
//! bad path is one line and exit 1); [`ContainerMaps::before_load`] makes each the inner-map template of its outer
//! array; [`ContainerMaps::after_load`] stores it in slot 0, before the tool attaches. The pinned maps are used as
//! they are, so entries changed while the tool runs count at once, as in BCC.

use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType, OpenMapMut};

/// BCC's `--cgroupmap` and `--mntnsmap` flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ContainerArgs {
    /// Only tasks whose cgroup ID is a key of this pinned BPF hash map (as BCC's --cgroupmap)
    #[arg(long, value_name = "MAPPATH")]
    pub cgroupmap: Option<PathBuf>,
    /// Only tasks whose mount namespace ID is a key of this pinned BPF hash map (as BCC's --mntnsmap)
    #[arg(long, value_name = "MAPPATH")]
    pub mntnsmap: Option<PathBuf>,
    /// Only tasks of this running container (Docker name or ID, containerd ID): those in its mount namespace
    #[arg(long, value_name = "NAME|ID", conflicts_with = "mntnsmap")]
    pub container: Option<String>,
}

impl ContainerArgs {
    /// Opens and checks the maps the flags name ([`ContainerMaps::open`]).
    pub fn open(&self) -> Result<ContainerMaps> {
        let mut maps = ContainerMaps::open(self.cgroupmap.as_deref(), self.mntnsmap.as_deref())?;
        if let Some(what) = &self.container {
            maps.mntnsmap = Some(container_map(what)?);
        }
        Ok(maps)
    }
}

/// The pinned maps of `--cgroupmap` and `--mntnsmap`, each if given.
#[derive(Debug, Default)]
pub struct ContainerMaps {
    pub cgroupmap: Option<MapHandle>,
    pub mntnsmap: Option<MapHandle>,
}

impl ContainerMaps {
    /// Opens the pinned maps the flags name, refusing a path that is not a pinned hash with 8-byte keys.
    pub fn open(cgroupmap: Option<&Path>, mntnsmap: Option<&Path>) -> Result<ContainerMaps> {
        Ok(ContainerMaps {
            cgroupmap: cgroupmap.map(|p| pinned_id_map(p, "--cgroupmap", "cgroup ids")).transpose()?,
            mntnsmap: mntnsmap.map(|p| pinned_id_map(p, "--mntnsmap", "mount namespace ids")).transpose()?,
        })
    }

    /// The values of the BPF side's `filter_cgroupmap` and `filter_mntnsmap`.
    pub fn flags(&self) -> (bool, bool) {
        (self.cgroupmap.is_some(), self.mntnsmap.is_some())
    }

    /// Before load: makes each pinned map the inner-map template of its outer array (`cgroupset`,
    /// `mount_ns_set`).
    pub fn before_load(&self, cgroupset: &mut OpenMapMut<'_>, mount_ns_set: &mut OpenMapMut<'_>) -> Result<()> {
        if let Some(map) = &self.cgroupmap {
            cgroupset.set_inner_map_fd(map.as_fd()).context("using the --cgroupmap map")?;
        }
        if let Some(map) = &self.mntnsmap {
            mount_ns_set.set_inner_map_fd(map.as_fd()).context("using the --mntnsmap map")?;
        }
        Ok(())
    }

    /// After load, before attaching: stores each pinned map in slot 0 of its outer array.
    pub fn after_load(&self, cgroupset: &impl MapCore, mount_ns_set: &impl MapCore) -> Result<()> {
        for (outer, map) in [(cgroupset as &dyn MapCore, &self.cgroupmap), (mount_ns_set, &self.mntnsmap)] {
            if let Some(map) = map {
                let fd = map.as_fd().as_raw_fd() as u32;
                outer
                    .update(&0u32.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
                    .context("setting the container filter")?;
            }
        }
        Ok(())
    }
}

/// A mount-namespace map (as `--mntnsmap` takes) holding the namespace of the running container `what` names.
fn container_map(what: &str) -> Result<MapHandle> {
    let container = super::container_lookup::find(what)?;
    let ns = container.mount_ns()?;
    let host_ns = std::fs::metadata("/proc/1/ns/mnt").map(|m| std::os::unix::fs::MetadataExt::ino(&m)).ok();
    if host_ns == Some(ns) {
        bail!("--container: {} shares the mount namespace of PID 1: its processes cannot be told apart", what);
    }
    use libbpf_rs::libbpf_sys::bpf_map_create_opts;
    let opts = bpf_map_create_opts { sz: size_of::<bpf_map_create_opts>() as _, ..Default::default() };
    let map = MapHandle::create(MapType::Hash, Some("container_mntns"), 8, 4, 1, &opts)
        .context("--container: creating its mount namespace map")?;
    map.update(&ns.to_ne_bytes(), &1u32.to_ne_bytes(), MapFlags::ANY).context("--container: filling its map")?;
    Ok(map)
}

/// Opens the BPF map pinned at `path`, which must be a hash keyed by 64-bit ids, as BCC's
/// `BPF_TABLE_PINNED("hash", u64, ...)` is.
fn pinned_id_map(path: &Path, flag: &str, what: &str) -> Result<MapHandle> {
    let map = MapHandle::from_pinned_path(path).map_err(|e| match path.exists() {
        // A file that is not a BPF object (not on a bpf file system) gives EPERM or EINVAL.
        true => anyhow!("{flag}: '{}' is not a pinned BPF map ({e})", path.display()),
        false => anyhow!("{flag}: cannot open the pinned BPF map '{}': {e}", path.display()),
    })?;
    let hash =
        matches!(map.map_type(), MapType::Hash | MapType::LruHash | MapType::PercpuHash | MapType::LruPercpuHash);
    if !hash || map.key_size() != 8 {
        bail!(
            "{flag}: '{}' is a {:?} map with {}-byte keys, not a hash of {what} with 8-byte keys",
            path.display(),
            map.map_type(),
            map.key_size()
        );
    }
    Ok(map)
}
