// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Block devices: names to device numbers and back, and names for request flags.
//!
//! BPF programs see a disk as the kernel's `dev_t` (`major << 20 | minor`, from `gendisk->major` and
//! `first_minor`). [`Disks`] maps those numbers to names like `vda` from `/sys/class/block`, and resolves a
//! `-d DISK` argument, rejecting partitions (requests are accounted to whole disks). [`RqOps`] says what a request
//! does ([`RqOp`]: read, write, flush, discard, ...) from its `cmd_flags`, and [`RqFlagNames`] turns them into
//! BCC's names (`Sync-Write`), both reading the operation and flag bit numbers from the kernel's BTF so they stay
//! right on kernels that renumbered them.

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

/// What a block request does: its operation, the low bits of `cmd_flags` (`cmd_flags & REQ_OP_MASK`, the kernel's
/// `enum req_op`). Only reads and writes move data: a flush empties the device's cache, a discard tells it a range
/// is unused, a write-zeroes zeroes a range without sending the zeroes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RqOp {
    Read,
    Write,
    Flush,
    Discard,
    SecureErase,
    WriteZeroes,
    /// Any other operation (zone management, driver-private requests).
    Other,
}

impl RqOp {
    /// The type column of biosnoop and biotop: `R` and `W` as BCC's, `F` flush, `D` discard, `E` secure erase,
    /// `Z` write-zeroes, `N` anything else (blktrace's letter for an operation it has none for).
    pub fn letter(self) -> &'static str {
        match self {
            RqOp::Read => "R",
            RqOp::Write => "W",
            RqOp::Flush => "F",
            RqOp::Discard => "D",
            RqOp::SecureErase => "E",
            RqOp::WriteZeroes => "Z",
            RqOp::Other => "N",
        }
    }

    /// The operation as a metric label, as node_exporter and ebpf_exporter name them: `read`, `write`, `flush`,
    /// `discard`, or `other` (the rarer operations together, so an idle disk gives a handful of series).
    pub fn label(self) -> &'static str {
        match self {
            RqOp::Read => "read",
            RqOp::Write => "write",
            RqOp::Flush => "flush",
            RqOp::Discard => "discard",
            _ => "other",
        }
    }

    /// True for a read or a write, the requests whose bytes are data moved to or from the device.
    pub fn moves_data(self) -> bool {
        matches!(self, RqOp::Read | RqOp::Write)
    }
}

/// The kernel's numbers for the request operations: `enum req_op` (`req_opf` before 5.19) from BTF, else the
/// numbers every kernel since 4.10 has (READ 0, WRITE 1, FLUSH 2, DISCARD 3, SECURE_ERASE 5, WRITE_ZEROES 9), and
/// the operation's width (`REQ_OP_BITS`, the first flag bit `__REQ_FAILFAST_DEV`, else 8).
#[derive(Debug, Clone)]
pub struct RqOps {
    mask: u64,
    ops: BTreeMap<u64, RqOp>,
}

impl RqOps {
    pub fn from_btf(btf: &KernelBtf) -> Self {
        const KNOWN: [(&str, u64, RqOp); 6] = [
            ("REQ_OP_READ", 0, RqOp::Read),
            ("REQ_OP_WRITE", 1, RqOp::Write),
            ("REQ_OP_FLUSH", 2, RqOp::Flush),
            ("REQ_OP_DISCARD", 3, RqOp::Discard),
            ("REQ_OP_SECURE_ERASE", 5, RqOp::SecureErase),
            ("REQ_OP_WRITE_ZEROES", 9, RqOp::WriteZeroes),
        ];
        let names: Vec<&str> = std::iter::once("__REQ_FAILFAST_DEV").chain(KNOWN.iter().map(|k| k.0)).collect();
        let found = btf.enum_values(&names);
        let (first_flag, values) = (found[0], &found[1..]);
        let op_bits = first_flag.unwrap_or(8) as u32;
        let ops = KNOWN.iter().zip(values).map(|(&(_, stable, op), &v)| (v.map_or(stable, |v| v as u64), op)).collect();
        RqOps { mask: (1u64 << op_bits) - 1, ops }
    }

    /// The operation of a request with these `cmd_flags`.
    pub fn of(&self, cmd_flags: u64) -> RqOp {
        self.ops.get(&(cmd_flags & self.mask)).copied().unwrap_or(RqOp::Other)
    }

    /// `REQ_OP_MASK`: the bits of `cmd_flags` that hold the operation.
    pub fn mask(&self) -> u64 {
        self.mask
    }

    /// The kernel's number for `op` (None for [`RqOp::Other`]).
    pub fn value(&self, op: RqOp) -> Option<u64> {
        self.ops.iter().find_map(|(&v, &o)| (o == op).then_some(v))
    }

    /// Writes the numbers into the `.rodata` of an object built with block.bpf.h (`req_op_mask`, `req_op_read`,
    /// `req_op_write`, `req_op_flush`, as far as it uses them) before it is loaded.
    pub fn set_rodata(&self, object: &mut libbpf_rs::OpenObject) {
        let values = [
            ("req_op_mask", Some(self.mask)),
            ("req_op_read", self.value(RqOp::Read)),
            ("req_op_write", self.value(RqOp::Write)),
            ("req_op_flush", self.value(RqOp::Flush)),
        ];
        for (name, value) in values {
            if let Some(v) = value {
                crate::attach::loader::set_rodata(object, name, &(v as u32).to_ne_bytes());
            }
        }
    }
}

/// Where bpf/include/block_issuer.bpf.h notes each request's submitter, and what follows from it for an object
/// built with it (bitesize, biotop): at block_io_start (6.5+), where the submitter is current for every request,
/// the notes are fresh and written over in place when a request struct is used again, so nothing is forgotten at
/// completion and the map is an LRU (the notes of request structs freed for good make way); at block_rq_insert
/// (before 6.5) a note stands until block_rq_complete forgets it, in a preallocated hash.
#[derive(Debug, Clone, Copy)]
pub struct SubmitterNotes {
    /// The tracepoint the notes are taken at.
    pub at: &'static str,
}

impl SubmitterNotes {
    pub fn new(btf: &KernelBtf) -> SubmitterNotes {
        SubmitterNotes { at: if btf.has_tracepoint("block_io_start") { "block_io_start" } else { "block_rq_insert" } }
    }

    /// True where notes are forgotten at block_rq_complete (the tool then needs that program for them too).
    pub fn forgotten_at_completion(self) -> bool {
        self.at == "block_rq_insert"
    }

    /// Sets `object` up for this point before it is loaded (after `autoload_by_section`): the other noting
    /// program off, `block_issuer_at_insert` in `.rodata`, and the `block_issuers` map's type.
    pub fn prepare(self, object: &mut libbpf_rs::OpenObject) -> Result<()> {
        for unused in ["block_io_start", "block_rq_insert"].into_iter().filter(|&t| t != self.at) {
            crate::attach::loader::skip_tracepoint(object, unused);
        }
        crate::attach::loader::set_rodata_flag(object, "block_issuer_at_insert", self.forgotten_at_completion());
        if !self.forgotten_at_completion() {
            for mut map in object.maps_mut() {
                if map.name() == "block_issuers" {
                    map.set_type(libbpf_rs::MapType::LruHash)?;
                }
            }
        }
        Ok(())
    }
}

/// Names for `struct request::cmd_flags`, in BCC's `flags_print` style.
#[derive(Debug, Clone)]
pub struct RqFlagNames {
    kinds: RqOps,
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
        let kinds = RqOps::from_btf(btf);
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
        let bits = btf.enum_values(&FLAG_NAMES.map(|(enumerator, _, _)| enumerator));
        let flags = FLAG_NAMES
            .iter()
            .zip(bits)
            .map(|(&(_, name, usual), bit)| (1u64 << bit.map_or(usual, |v| v as u32), name))
            .collect();
        RqFlagNames { kinds, ops, flags }
    }

    /// `cmd_flags` as BCC prints it, e.g. `Sync-Write`, `NoMerge-Read`, `Unknown`.
    pub fn describe(&self, cmd_flags: u64) -> String {
        let mut desc = self.ops.get(&(cmd_flags & self.kinds.mask)).cloned().unwrap_or_else(|| "Unknown".into());
        for &(bit, name) in &self.flags {
            if cmd_flags & bit != 0 {
                desc = format!("{name}-{desc}");
            }
        }
        desc
    }

    /// The operation of `cmd_flags` as a metric label ([`RqOp::label`]).
    pub fn operation(&self, cmd_flags: u64) -> &'static str {
        self.kinds.of(cmd_flags).label()
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

    #[test]
    fn each_operation_has_its_own_type() {
        let ops = RqOps::from_btf(&KernelBtf::load().unwrap());
        let sync = 1u64 << btf_bit("__REQ_SYNC");
        let typed = |v: u64| ops.of(v | sync).letter();
        assert_eq!(
            [typed(0), typed(1), typed(2), typed(3), typed(5), typed(9), typed(13)],
            ["R", "W", "F", "D", "E", "Z", "N"]
        );
        assert!(ops.of(1).moves_data() && ops.of(0).moves_data());
        assert!(!ops.of(2).moves_data() && !ops.of(3).moves_data() && !ops.of(9).moves_data());
        assert_eq!((ops.mask(), ops.value(RqOp::Flush), ops.value(RqOp::Other)), (0xff, Some(2), None));
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
