// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Block devices: names to device numbers and back, and names for request flags.
//!
//! BPF programs see a disk as the kernel's `dev_t` (`major << 20 | minor`, from `gendisk->major` and
//! `first_minor`). [`Disks`] maps those numbers to names like `vda` from `/sys/class/block`, and resolves a
//! `-d DISK` argument, rejecting partitions (requests are accounted to whole disks). [`RqFlagNames`] turns a
//! request's `cmd_flags` into BCC's names (`Sync-Write`), reading the operation and flag bit numbers from the
//! kernel's BTF so they stay right on kernels that renumbered them.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{bail, Result};

use crate::attach::features::KernelBtf;

const SYS_BLOCK: &str = "/sys/class/block";

/// The kernel's internal device number for major/minor (`MKDEV` with 20 minor bits).
pub fn kernel_dev(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xfffff)
}

/// Block devices by kernel device number.
#[derive(Debug, Default)]
pub struct Disks {
    names: BTreeMap<u32, String>,
}

impl Disks {
    /// Reads every block device (disks and partitions) from `/sys/class/block`.
    pub fn scan() -> Self {
        let mut names = BTreeMap::new();
        if let Ok(entries) = fs::read_dir(SYS_BLOCK) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(dev) = read_dev(&entry.path()) {
                    names.insert(dev, name);
                }
            }
        }
        Disks { names }
    }

    /// The device's name, or `?` as BCC prints for an unknown device.
    /// How many block devices (disks and partitions) there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if the system has no block devices.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn name(&self, dev: u32) -> &str {
        self.names.get(&dev).map(String::as_str).unwrap_or("?")
    }

    /// The kernel device number of whole disk `name` (as in `-d vda`).
    pub fn resolve(&self, name: &str) -> Result<u32> {
        let name = name.strip_prefix("/dev/").unwrap_or(name);
        let path = Path::new(SYS_BLOCK).join(name);
        let Some(dev) = read_dev(&path).filter(|_| !name.is_empty() && !name.contains('/')) else {
            bail!("unknown disk '{name}' (not in {SYS_BLOCK})");
        };
        if path.join("partition").exists() {
            let parent = fs::canonicalize(&path)
                .ok()
                .and_then(|p| p.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "the whole disk".into());
            bail!("'{name}' is a partition; I/O is accounted to whole disks, use '{parent}'");
        }
        Ok(dev)
    }
}

fn read_dev(dir: &Path) -> Option<u32> {
    let text = fs::read_to_string(dir.join("dev")).ok()?;
    let (major, minor) = text.trim().split_once(':')?;
    Some(kernel_dev(major.parse().ok()?, minor.parse().ok()?))
}

/// Names for `struct request::cmd_flags`, in BCC's `flags_print` style.
#[derive(Debug, Clone)]
pub struct RqFlagNames {
    op_mask: u64,
    ops: BTreeMap<u64, String>,
    /// Flag bit and name, in the order BCC prepends them.
    flags: Vec<(u64, &'static str)>,
}

/// BCC's flag names, in the order it prepends them, with the kernel enumerator and its usual bit.
const FLAG_NAMES: [(&str, &str, u32); 9] = [
    ("__REQ_SYNC", "Sync", 11),
    ("__REQ_META", "Metadata", 12),
    ("__REQ_FUA", "ForcedUnitAccess", 17),
    ("__REQ_PRIO", "Priority", 13),
    ("__REQ_NOMERGE", "NoMerge", 14),
    ("__REQ_IDLE", "Idle", 15),
    ("__REQ_RAHEAD", "ReadAhead", 19),
    ("__REQ_BACKGROUND", "Background", 20),
    ("__REQ_NOWAIT", "NoWait", 21),
];

impl RqFlagNames {
    /// Reads `enum req_op` (or `req_opf`) and `enum req_flag_bits` from the kernel's BTF; falls back to the
    /// values BCC hard-codes where the BTF lacks them.
    pub fn from_btf(btf: &KernelBtf) -> Self {
        let op_bits = btf.enum_value("__REQ_FAILFAST_DEV").unwrap_or(8) as u32;
        let mut ops = BTreeMap::new();
        let mut members = btf.enum_members("req_op");
        if members.is_empty() {
            members = btf.enum_members("req_opf");
        }
        for (name, value) in members {
            if let Some(op) = name.strip_prefix("REQ_OP_") {
                if op != "LAST" {
                    ops.insert(value as u64, op_display_name(op));
                }
            }
        }
        if ops.is_empty() {
            for (v, n) in
                [(0, "Read"), (1, "Write"), (2, "Flush"), (3, "Discard"), (5, "SecureErase"), (9, "WriteZeros")]
            {
                ops.insert(v, n.to_string());
            }
        }
        let flags = FLAG_NAMES
            .iter()
            .map(|&(enumerator, name, usual)| {
                let bit = btf.enum_value(enumerator).map(|v| v as u32).unwrap_or(usual);
                (1u64 << bit, name)
            })
            .collect();
        RqFlagNames { op_mask: (1u64 << op_bits) - 1, ops, flags }
    }

    /// `cmd_flags` as BCC prints it, e.g. `Sync-Write`, `NoMerge-Read`, `Unknown`.
    pub fn describe(&self, cmd_flags: u64) -> String {
        let mut desc = self.ops.get(&(cmd_flags & self.op_mask)).cloned().unwrap_or_else(|| "Unknown".into());
        for &(bit, name) in &self.flags {
            if cmd_flags & bit != 0 {
                desc = format!("{name}-{desc}");
            }
        }
        desc
    }

    /// The operation of `cmd_flags` as a metric label, as node_exporter and ebpf_exporter name them: `read`,
    /// `write`, `flush`, `discard`, or `other` (the flag bits and rarer operations are left out, so an idle disk
    /// gives a handful of series, not one per combination).
    pub fn operation(&self, cmd_flags: u64) -> &'static str {
        match self.ops.get(&(cmd_flags & self.op_mask)).map(String::as_str) {
            Some("Read") => "read",
            Some("Write") => "write",
            Some("Flush") => "flush",
            Some("Discard") => "discard",
            _ => "other",
        }
    }
}

/// `WRITE_ZEROES` -> `WriteZeros` (BCC's spelling), `SECURE_ERASE` -> `SecureErase`.
fn op_display_name(op: &str) -> String {
    if op == "WRITE_ZEROES" {
        return "WriteZeros".into();
    }
    op.split('_')
        .map(|word| {
            let lower = word.to_ascii_lowercase();
            let mut chars = lower.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_encoding_matches_kernel() {
        assert_eq!(kernel_dev(254, 0), 254 << 20);
        assert_eq!(kernel_dev(8, 17), (8 << 20) | 17);
    }

    #[test]
    fn op_names_match_bcc() {
        assert_eq!(op_display_name("READ"), "Read");
        assert_eq!(op_display_name("SECURE_ERASE"), "SecureErase");
        assert_eq!(op_display_name("WRITE_ZEROES"), "WriteZeros");
        assert_eq!(op_display_name("ZONE_RESET"), "ZoneReset");
    }

    #[test]
    fn operations_ignore_the_flag_bits() {
        let names = RqFlagNames::from_btf(&KernelBtf::load().unwrap());
        let sync = 1u64 << btf_bit("__REQ_SYNC");
        assert_eq!(names.operation(0), "read");
        assert_eq!(names.operation(1 | sync), "write");
        assert_eq!(names.operation(2), "flush");
        assert_eq!(names.operation(3), "discard");
        assert_eq!(names.operation(9), "other");
        assert_eq!(names.describe(1 | sync), "Sync-Write");
    }

    fn btf_bit(name: &str) -> u32 {
        KernelBtf::load().unwrap().enum_value(name).map(|v| v as u32).unwrap_or(11)
    }

    #[test]
    fn unknown_disk_is_an_error() {
        let disks = Disks::scan();
        let err = disks.resolve("nosuchdisk").unwrap_err().to_string();
        assert!(err.contains("unknown disk 'nosuchdisk'"), "{err}");
        assert!(disks.resolve("../x").is_err());
    }
}
