// SPDX-License-Identifier: Apache-2.0 OR MIT
//! File system operations as fsslower and fsdist time them: the file systems they know (ext4, xfs, btrfs, nfs)
//! with each one's kernel functions and super block magic, the operations (read, write, open, fsync, getattr),
//! the file system a BCC-style name picks (`ext4slower`, `xfsdist`), and the loading and attaching of the
//! programs of `bpf/include/fsop.bpf.h` over the attach ladder (fentry/fexit, kprobes, and the system calls at
//! raw_syscalls' tracepoints).
//!
//! Both tools' BPF objects include that header, so their programs and maps have the same names: this module works
//! on the object by those names, not on either tool's skeleton type.

use std::path::Path;

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, Object, OpenObject};

use crate::attach::features::Attach;
use crate::attach::links::Links;
use crate::attach::loader::{attach_loaded_tracepoint, autoload_by_section, set_rodata};

/// A file system the tools can trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FsType {
    Btrfs,
    Ext4,
    Nfs,
    Xfs,
}

/// An operation, numbered as `bpf/include/fsop.h` numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Read = 0,
    Write = 1,
    Open = 2,
    Fsync = 3,
    Getattr = 4,
}

impl Op {
    pub const ALL: [Op; 5] = [Op::Read, Op::Write, Op::Open, Op::Fsync, Op::Getattr];

    pub fn from_index(i: u32) -> Option<Op> {
        Op::ALL.get(i as usize).copied()
    }

    /// Its name in fsdist's report (`operation = 'read'`).
    pub fn name(self) -> &'static str {
        ["read", "write", "open", "fsync", "getattr"][self as usize]
    }

    /// Its letter in fsslower's T column.
    pub fn letter(self) -> char {
        ['R', 'W', 'O', 'F', 'G'][self as usize]
    }

    /// The stem of its BPF programs in fsop.bpf.h (`fsop_<stem>_fentry`, `_fexit`, `_kprobe`).
    fn stem(self) -> &'static str {
        self.name()
    }
}

impl FsType {
    pub const ALL: [FsType; 4] = [FsType::Btrfs, FsType::Ext4, FsType::Nfs, FsType::Xfs];

    pub fn name(self) -> &'static str {
        match self {
            FsType::Btrfs => "btrfs",
            FsType::Ext4 => "ext4",
            FsType::Nfs => "nfs",
            FsType::Xfs => "xfs",
        }
    }

    /// Its super block's `s_magic` (include/uapi/linux/magic.h).
    pub fn magic(self) -> u64 {
        match self {
            FsType::Btrfs => 0x9123_683E,
            FsType::Ext4 => 0xEF53,
            FsType::Nfs => 0x6969,
            FsType::Xfs => 0x5846_5342,
        }
    }

    /// The kernel function that does `op` for this file system (the file or inode operation it registers), as
    /// libbpf-tools chooses them; getattr also for xfs and btrfs, whose functions libbpf-tools leaves out.
    pub fn function(self, op: Op) -> &'static str {
        use FsType::*;
        use Op::*;
        match (self, op) {
            (Btrfs, Read) => "btrfs_file_read_iter",
            (Btrfs, Write) => "btrfs_file_write_iter",
            (Btrfs, Open) => "btrfs_file_open",
            (Btrfs, Fsync) => "btrfs_sync_file",
            (Btrfs, Getattr) => "btrfs_getattr",
            (Ext4, Read) => "ext4_file_read_iter",
            (Ext4, Write) => "ext4_file_write_iter",
            (Ext4, Open) => "ext4_file_open",
            (Ext4, Fsync) => "ext4_sync_file",
            (Ext4, Getattr) => "ext4_file_getattr",
            (Nfs, Read) => "nfs_file_read",
            (Nfs, Write) => "nfs_file_write",
            (Nfs, Open) => "nfs_file_open",
            (Nfs, Fsync) => "nfs_file_fsync",
            (Nfs, Getattr) => "nfs_getattr",
            (Xfs, Read) => "xfs_file_read_iter",
            (Xfs, Write) => "xfs_file_write_iter",
            (Xfs, Open) => "xfs_file_open",
            (Xfs, Fsync) => "xfs_file_fsync",
            (Xfs, Getattr) => "xfs_vn_getattr",
        }
    }

    /// The names /proc/filesystems and mountinfo give it.
    fn kernel_names(self) -> &'static [&'static str] {
        match self {
            FsType::Nfs => &["nfs", "nfs4"],
            other => std::slice::from_ref(match other {
                FsType::Btrfs => &"btrfs",
                FsType::Ext4 => &"ext4",
                _ => &"xfs",
            }),
        }
    }

    /// The file system a BCC-style name stands for: `ext4slower` (or an installed `bpf-ext4slower`) is ext4 for
    /// the tool whose names end in `suffix` (`slower`), as BCC's ext4slower, xfsslower, ... are.
    pub fn from_invoked_name(invoked: &str, suffix: &str) -> Option<FsType> {
        let base = crate::identity::without_debian_suffix(Path::new(invoked).file_name()?.to_str()?);
        FsType::ALL.into_iter().find(|fs| base.ends_with(&format!("{}{suffix}", fs.name())))
    }

    /// Fails with one line unless this kernel has the file system (built in, or its module loaded).
    pub fn require_registered(self) -> Result<()> {
        let known = std::fs::read_to_string("/proc/filesystems").context("reading /proc/filesystems")?;
        let names = self.kernel_names();
        if known.lines().filter_map(|l| l.split_whitespace().last()).any(|n| names.contains(&n)) {
            return Ok(());
        }
        bail!(
            "this kernel has no {} file system (not in /proc/filesystems: load its module or mount one first)",
            self.name()
        )
    }

    /// The device numbers (the kernel's `major << 20 | minor`) of every mount of this file system now.
    pub fn mounted_devices(self) -> Vec<u32> {
        let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
        let mut devs: Vec<u32> = info
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let sep = fields.iter().position(|f| *f == "-")?;
                let fstype = fields.get(sep + 1)?;
                if !self.kernel_names().contains(fstype) {
                    return None;
                }
                let (major, minor) = fields.get(2)?.split_once(':')?;
                let dev = major.parse::<u32>().ok()? << 20 | minor.parse::<u32>().ok()?;
                // A btrfs subvolume answers stat with a device number of its own, not the super block's: the
                // mounted subvolume's is its root's. (Subvolumes nested below a mount point have others again.)
                let subvolume = (self == FsType::Btrfs).then(|| fields.get(4).and_then(|m| subvolume_dev(m))).flatten();
                Some([Some(dev), subvolume])
            })
            .flatten()
            .flatten()
            .collect();
        devs.sort_unstable();
        devs.dedup();
        devs
    }
}

/// The device number stat gives for mount point `escaped` (mountinfo's octal escapes undone), in the kernel's
/// encoding.
fn subvolume_dev(escaped: &str) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let mut path = Vec::new();
    let bytes = escaped.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            if let Ok(c) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 4]).ok()?, 8) {
                path.push(c);
                i += 4;
                continue;
            }
        }
        path.push(bytes[i]);
        i += 1;
    }
    let dev = std::fs::metadata(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&path)).ok()?.dev();
    Some(libc::major(dev) << 20 | libc::minor(dev))
}

/// Which of `names` the kernel (or a loaded module) has as functions (/proc/kallsyms). /proc/kallsyms is read once
/// for all the names not asked before (a read takes tens of milliseconds; each attach path that is tried asks for
/// the same ones, and fsslower started at about 330 ms reading it eight times); the answers are kept for the
/// process's life.
pub fn kernel_functions_present(names: &[&str]) -> std::collections::HashSet<String> {
    static KNOWN: std::sync::Mutex<Option<std::collections::HashMap<String, bool>>> = std::sync::Mutex::new(None);
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let known = known.get_or_insert_with(Default::default);
    let unknown: Vec<&str> = names.iter().copied().filter(|n| !known.contains_key(*n)).collect();
    if !unknown.is_empty() {
        let syms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let found: std::collections::HashSet<&str> = syms
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let (_, kind, sym) = (f.next(), f.next(), f.next()?);
                (matches!(kind, Some("t" | "T")) && unknown.contains(&sym)).then_some(sym)
            })
            .collect();
        for name in unknown {
            known.insert(name.to_string(), found.contains(name));
        }
    }
    names.iter().filter(|n| known.get(**n) == Some(&true)).map(|n| n.to_string()).collect()
}

/// Which of `names` this kernel has, for `mech`: fentry finds a built-in file system's functions in the vmlinux
/// BTF (tens of milliseconds less than a /proc/kallsyms read, which fsdist's and fsslower's start-up waited for);
/// those it lacks there (a file system built as a module) and the kprobe path's come from /proc/kallsyms.
fn functions_present(mech: Attach, names: &[&str]) -> std::collections::HashSet<String> {
    let btf = (mech == Attach::Fentry).then(crate::attach::features::KernelBtf::load).and_then(Result::ok);
    let in_btf: Vec<&str> = names.iter().copied().filter(|n| btf.as_ref().is_some_and(|b| b.has_function(n))).collect();
    let rest: Vec<&str> = names.iter().copied().filter(|n| !in_btf.contains(n)).collect();
    let mut present = if rest.is_empty() { Default::default() } else { kernel_functions_present(&rest) };
    present.extend(in_btf.into_iter().map(str::to_owned));
    present
}

/// What a system call is to the system call path, numbered as `bpf/include/fsop.h`'s `FSOP_SC_*`: how its
/// sys_enter finds the file, the position or the stat buffer among the call's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum SyscallKind {
    Read = 1,
    Pread = 2,
    Write = 3,
    Pwrite = 4,
    Open = 5,
    Fsync = 6,
    Statx = 7,
    Fstatat = 8,
    Stat = 9,
}

/// Size of fsop.bpf.h's `fsop_syscall_kind` table (fsop.h's FSOP_MAX_SYSCALLS).
const MAX_SYSCALLS: usize = 512;

/// The system calls of each operation on the system call path, by their `__NR_` names, with how each is read.
/// Which exist depends on the architecture (arm64 has no open, creat, stat or lstat, and calls newfstatat
/// fstatat).
fn syscalls(op: Op) -> &'static [(&'static str, SyscallKind)] {
    use SyscallKind::*;
    match op {
        Op::Read => &[("read", Read), ("readv", Read), ("pread64", Pread), ("preadv", Pread), ("preadv2", Pread)],
        Op::Write => {
            &[("write", Write), ("writev", Write), ("pwrite64", Pwrite), ("pwritev", Pwrite), ("pwritev2", Pwrite)]
        }
        Op::Open => &[("open", Open), ("openat", Open), ("openat2", Open), ("creat", Open)],
        Op::Fsync => &[("fsync", Fsync), ("fdatasync", Fsync)],
        // newfstatat is arm64's fstatat
        Op::Getattr => &[
            ("statx", Statx),
            ("newfstatat", Fstatat),
            ("fstatat", Fstatat),
            ("stat", Stat),
            ("lstat", Stat),
            ("fstat", Stat),
        ],
    }
}

/// What [`Plan::new`] decided for one load: the operations timed and, on the system call path, the calls by
/// number.
#[derive(Debug, Clone)]
pub struct Plan {
    pub fs: FsType,
    pub mech: Attach,
    pub ops: Vec<Op>,
    calls: Vec<(u32, SyscallKind)>,
}

impl Plan {
    /// The operations `wanted` of `fs` that `mech` can time here. On the kernel-function paths an operation whose
    /// function this kernel lacks is left out if it is getattr (not every kernel exports it by that name), else
    /// the path fails; on the system call path the calls this architecture has are used.
    pub fn new(fs: FsType, mech: Attach, wanted: &[Op]) -> Result<Plan> {
        let mut ops = Vec::new();
        let mut calls = Vec::new();
        match mech {
            Attach::Fentry | Attach::Kprobe => {
                if mech == Attach::Kprobe && !crate::probe::attach::kprobes_available() {
                    bail!("this kernel has no kprobes");
                }
                let funcs: Vec<&str> = wanted.iter().map(|&op| fs.function(op)).collect();
                let present = functions_present(mech, &funcs);
                for &op in wanted {
                    let func = fs.function(op);
                    if present.contains(func) {
                        ops.push(op);
                    } else if op != Op::Getattr {
                        bail!("this kernel has no function {func} ({} {})", fs.name(), op.name());
                    }
                }
            }
            Attach::TpBtf | Attach::RawTp => {
                for &op in wanted {
                    let present: Vec<_> = syscalls(op)
                        .iter()
                        .filter_map(|&(name, kind)| Some((crate::domain::syscalls::number(name)?, kind)))
                        .filter(|&(nr, _)| (nr as usize) < MAX_SYSCALLS)
                        .collect();
                    if !present.is_empty() {
                        ops.push(op);
                        calls.extend(present);
                    }
                }
            }
            other => bail!("{other} is not a way this tool attaches"),
        }
        Ok(Plan { fs, mech, ops, calls })
    }

    /// The operations timed, by name, for `-v`.
    pub fn describe(&self) -> String {
        let ops: Vec<&str> = self.ops.iter().map(|o| o.name()).collect();
        match self.mech {
            Attach::TpBtf | Attach::RawTp => {
                format!("{} {} at {} system calls (raw_syscalls)", self.fs.name(), ops.join(", "), self.calls.len())
            }
            _ => {
                let funcs: Vec<&str> = self.ops.iter().map(|&o| self.fs.function(o)).collect();
                format!("{} {} at {}", self.fs.name(), ops.join(", "), funcs.join(", "))
            }
        }
    }

    /// Keeps the programs of this plan (and none other of the object's), with their fentry/fexit targets set, or
    /// on the system call path the table of the calls timed.
    pub fn prepare(&self, object: &mut OpenObject) -> Result<()> {
        if matches!(self.mech, Attach::TpBtf | Attach::RawTp) {
            autoload_by_section(object, self.mech);
            let mut kinds = [0u8; MAX_SYSCALLS];
            for &(nr, kind) in &self.calls {
                kinds[nr as usize] = kind as u8;
            }
            if !set_rodata(object, "fsop_syscall_kind", &kinds) {
                bail!("the BPF object has no fsop_syscall_kind[{MAX_SYSCALLS}]");
            }
            return Ok(());
        }
        let wanted: Vec<String> = match self.mech {
            Attach::Fentry => self
                .ops
                .iter()
                .flat_map(|o| [format!("fsop_{}_fentry", o.stem()), format!("fsop_{}_fexit", o.stem())])
                .collect(),
            _ => self
                .ops
                .iter()
                .map(|o| format!("fsop_{}_kprobe", o.stem()))
                .chain(["fsop_kretprobe".to_string()])
                .collect(),
        };
        for mut prog in object.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            let keep = wanted.contains(&name);
            prog.set_autoload(keep);
            if keep && self.mech == Attach::Fentry {
                let op = self.ops.iter().find(|o| name.starts_with(&format!("fsop_{}_", o.stem()))).copied();
                if let Some(op) = op {
                    prog.set_attach_target(0, Some(self.fs.function(op).to_string()))
                        .with_context(|| format!("setting the target of {name}"))?;
                }
            }
        }
        Ok(())
    }

    /// Fills what the loaded programs read (the devices of the file system's mounts, for getattr on the system
    /// call path), then attaches them: each return before its start, so that no start is kept with nobody to end
    /// it.
    pub fn attach(&self, object: &Object) -> Result<Links> {
        let prog = |name: &str| {
            object
                .progs_mut()
                .find(|p| p.name() == name)
                .with_context(|| format!("the BPF object has no program {name}"))
        };
        let mut links = Links::default();
        match self.mech {
            Attach::Fentry => {
                for op in &self.ops {
                    let func = self.fs.function(*op);
                    for end in ["fexit", "fentry"] {
                        let p = prog(&format!("fsop_{}_{end}", op.stem()))?;
                        links.push(p.attach().with_context(|| format!("attaching to {func} ({end})"))?);
                    }
                }
            }
            Attach::Kprobe => {
                let ret = prog("fsop_kretprobe")?;
                for op in &self.ops {
                    let func = self.fs.function(*op);
                    links.push(ret.attach_kprobe(true, func).with_context(|| format!("kretprobe {func}"))?);
                    let p = prog(&format!("fsop_{}_kprobe", op.stem()))?;
                    links.push(p.attach_kprobe(false, func).with_context(|| format!("kprobe {func}"))?);
                }
            }
            _ => {
                if self.ops.contains(&Op::Getattr) {
                    let devs = object
                        .maps()
                        .find(|m| m.name() == "fsop_devs")
                        .context("the BPF object has no map fsop_devs")?;
                    for dev in self.fs.mounted_devices() {
                        devs.update(&dev.to_ne_bytes(), &[1], MapFlags::ANY).context("filling fsop_devs")?;
                    }
                }
                for tp in ["sys_exit", "sys_enter"] {
                    links.push(attach_loaded_tracepoint(object, "raw_syscalls", tp)?);
                }
            }
        }
        Ok(links)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One read of /proc/kallsyms answers for several names; asking again for some of them gives the kept answers.
    #[test]
    fn kernel_functions_are_looked_up_once() {
        let asked = ["vfs_read", "vfs_write", "no_such_function_corebpf"];
        let present = kernel_functions_present(&asked);
        // Root sees the addresses; anyone sees the names.
        assert!(present.contains("vfs_read") && present.contains("vfs_write"), "{present:?}");
        assert!(!present.contains("no_such_function_corebpf"));
        assert_eq!(kernel_functions_present(&asked[..1]), ["vfs_read".to_string()].into());
    }

    #[test]
    fn bcc_names_pick_the_file_system() {
        assert_eq!(FsType::from_invoked_name("ext4slower", "slower"), Some(FsType::Ext4));
        assert_eq!(FsType::from_invoked_name("/usr/sbin/bpf-xfsslower", "slower"), Some(FsType::Xfs));
        assert_eq!(FsType::from_invoked_name("btrfsdist", "dist"), Some(FsType::Btrfs));
        assert_eq!(FsType::from_invoked_name("nfsdist", "slower"), None);
        assert_eq!(FsType::from_invoked_name("fsslower", "slower"), None);
        assert_eq!(FsType::from_invoked_name("ext4slower-bpfcc", "slower"), Some(FsType::Ext4));
    }

    /// `#define NAME VALUE` of bpf/include/fsop.h, the home of the numbers both sides use.
    fn c_define(name: &str) -> usize {
        crate::c_header::define(include_str!("../../../bpf/include/fsop.h"), name)
    }

    #[test]
    fn ops_are_numbered_as_the_c_header() {
        for op in Op::ALL {
            assert_eq!(op as usize, c_define(&format!("FSOP_{}", op.name().to_uppercase())), "{op:?}");
        }
        assert_eq!(Op::ALL.len(), c_define("FSOP_COUNT"));
        assert_eq!(Op::from_index(3), Some(Op::Fsync));
        assert_eq!(Op::from_index(5), None);
    }

    #[test]
    fn system_call_kinds_are_numbered_as_the_c_header() {
        use SyscallKind::*;
        for kind in [Read, Pread, Write, Pwrite, Open, Fsync, Statx, Fstatat, Stat] {
            let name = format!("FSOP_SC_{}", format!("{kind:?}").to_uppercase());
            assert_eq!(kind as usize, c_define(&name), "{kind:?}");
        }
        assert_eq!(MAX_SYSCALLS, c_define("FSOP_MAX_SYSCALLS"));
    }

    /// Every operation has system calls on this architecture, each number inside the table, none named twice.
    #[test]
    fn the_system_call_path_times_every_operation() {
        let plan = Plan::new(FsType::Ext4, Attach::RawTp, &Op::ALL).unwrap();
        assert_eq!(plan.ops, Op::ALL);
        let mut numbers: Vec<u32> = plan.calls.iter().map(|&(nr, _)| nr).collect();
        let n = numbers.len();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), n, "{:?}", plan.calls);
        let read = crate::domain::syscalls::number("read").unwrap();
        assert!(plan.calls.contains(&(read, SyscallKind::Read)));
        let at = ["newfstatat", "fstatat"].iter().find_map(|n| crate::domain::syscalls::number(n)).unwrap();
        assert!(plan.calls.contains(&(at, SyscallKind::Fstatat)));
    }
}
