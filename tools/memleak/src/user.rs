// SPDX-License-Identifier: Apache-2.0 OR MIT
//! User mode: the allocator functions of the C library (or of -O's object), found in its ELF symbols, and their
//! probes: a uprobe at each entry, a uretprobe at each return (not for free and munmap), in one process.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use common::attach::features::Attach;
use common::attach::uprobe;
use common::process::elf::{find_binary, ElfSymbols};
use libbpf_rs::Link;

use crate::bpf::BpfSkel;

/// A probed function: the BPF programs' name (`NAME_enter`, `NAME_exit`), whether it must exist, and whether its
/// return is probed.
struct Probe {
    name: &'static str,
    required: bool,
    returns: bool,
}

/// What BCC probes, in its order: mmap, valloc, pvalloc, aligned_alloc and munmap may be missing (jemalloc,
/// bionic, C libraries before C11).
const PROBES: [Probe; 11] = [
    Probe { name: "malloc", required: true, returns: true },
    Probe { name: "calloc", required: true, returns: true },
    Probe { name: "realloc", required: true, returns: true },
    Probe { name: "mmap", required: false, returns: true },
    Probe { name: "posix_memalign", required: true, returns: true },
    Probe { name: "valloc", required: false, returns: true },
    Probe { name: "memalign", required: true, returns: true },
    Probe { name: "pvalloc", required: false, returns: true },
    Probe { name: "aligned_alloc", required: false, returns: true },
    Probe { name: "free", required: true, returns: false },
    Probe { name: "munmap", required: false, returns: false },
];

/// The allocator functions found in one file, with their file offsets.
pub struct Functions {
    path: PathBuf,
    found: Vec<(&'static Probe, u64)>,
}

impl Functions {
    /// Finds the functions in object `obj` (`c` for the C library; a library name or a path) as process `pid`
    /// maps it (or the system's), each name with `prefix` first.
    pub fn find(obj: &str, pid: Option<u32>, prefix: Option<&str>) -> Result<Self> {
        let path = find_binary(obj, pid)?;
        let prefix = prefix.unwrap_or("");
        let names: Vec<String> = PROBES.iter().map(|p| format!("{prefix}{}", p.name)).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let symbols = ElfSymbols::read_named(&path, &refs)?;
        let mut found = Vec::new();
        for (probe, name) in PROBES.iter().zip(&names) {
            let mut named = symbols.functions().iter().filter(|f| &f.name == name);
            let offset = named.clone().find(|f| !f.hidden_version).or_else(|| named.next()).map(|f| f.file_offset);
            match offset {
                Some(offset) => found.push((probe, offset)),
                None if probe.required => bail!("no function {name} in {}", path.display()),
                None => {}
            }
        }
        Ok(Functions { path, found })
    }

    pub fn len(&self) -> usize {
        self.found.len()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Attaches every function's programs of mechanism `mech` in process `pid`.
    pub fn attach(&self, skel: &BpfSkel<'static>, mech: Attach, pid: u32) -> Result<Vec<Link>> {
        use libbpf_rs::skel::Skel;
        let suffix = if mech == Attach::UprobeMulti { "_multi" } else { "" };
        let mut links = Vec::new();
        for (probe, offset) in &self.found {
            let mut sides = vec![(format!("{}_enter{suffix}", probe.name), false)];
            if probe.returns {
                sides.push((format!("{}_exit{suffix}", probe.name), true));
            }
            for (prog_name, retprobe) in sides {
                let prog = skel
                    .object()
                    .progs_mut()
                    .find(|p| p.name().to_str() == Some(prog_name.as_str()))
                    .with_context(|| format!("no BPF program {prog_name}"))?;
                links.push(uprobe::attach(&prog, mech, Some(pid), &self.path, *offset, retprobe)?);
            }
        }
        Ok(links)
    }
}
