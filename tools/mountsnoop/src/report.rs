// SPDX-License-Identifier: Apache-2.0 OR MIT
//! mountsnoop's output: libbpf-tools' line (`COMM PID TID MNT_NS CALL`, with `TIME` first under -t), the call
//! written as C (`mount("src", "/mnt", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") = 0`), its detailed mode (-d,
//! one field per line), or JSON lines. Flags are decoded into their names; a result is 0, a descriptor, or
//! `-ENAME`.

use std::io::{self, Write};

use common::attach::maps::from_bytes;
use common::domain::syscalls::errno_name;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::{consts, types::event};

// SAFETY: a #[repr(C)] struct of integers and char arrays; the BPF side fills or terminates every field.
unsafe impl plain::Plain for event {}

/// mount(2)'s MS_* flags by bit.
const MS_FLAGS: [(u64, &str); 31] = [
    (1, "MS_RDONLY"),
    (1 << 1, "MS_NOSUID"),
    (1 << 2, "MS_NODEV"),
    (1 << 3, "MS_NOEXEC"),
    (1 << 4, "MS_SYNCHRONOUS"),
    (1 << 5, "MS_REMOUNT"),
    (1 << 6, "MS_MANDLOCK"),
    (1 << 7, "MS_DIRSYNC"),
    (1 << 8, "MS_NOSYMFOLLOW"),
    (1 << 10, "MS_NOATIME"),
    (1 << 11, "MS_NODIRATIME"),
    (1 << 12, "MS_BIND"),
    (1 << 13, "MS_MOVE"),
    (1 << 14, "MS_REC"),
    (1 << 15, "MS_SILENT"),
    (1 << 16, "MS_POSIXACL"),
    (1 << 17, "MS_UNBINDABLE"),
    (1 << 18, "MS_PRIVATE"),
    (1 << 19, "MS_SLAVE"),
    (1 << 20, "MS_SHARED"),
    (1 << 21, "MS_RELATIME"),
    (1 << 22, "MS_KERNMOUNT"),
    (1 << 23, "MS_I_VERSION"),
    (1 << 24, "MS_STRICTATIME"),
    (1 << 25, "MS_LAZYTIME"),
    (1 << 26, "MS_SUBMOUNT"),
    (1 << 27, "MS_NOREMOTELOCK"),
    (1 << 28, "MS_NOSEC"),
    (1 << 29, "MS_BORN"),
    (1 << 30, "MS_ACTIVE"),
    (1 << 31, "MS_NOUSER"),
];
/// The magic number old programs put in the high 16 bits of mount(2)'s flags (the kernel drops it).
const MS_MGC_VAL: u64 = 0xC0ED_0000;
const MS_MGC_MSK: u64 = 0xFFFF_0000;

/// umount2(2)'s flags.
const UMOUNT_FLAGS: [(u64, &str); 4] = [(1, "MNT_FORCE"), (2, "MNT_DETACH"), (4, "MNT_EXPIRE"), (8, "UMOUNT_NOFOLLOW")];
const FSOPEN_FLAGS: [(u64, &str); 1] = [(1, "FSOPEN_CLOEXEC")];
const FSMOUNT_FLAGS: [(u64, &str); 1] = [(1, "FSMOUNT_CLOEXEC")];
/// fsmount(2)'s attribute flags, but for the access-time field (MOUNT_ATTR__ATIME), a value, not bits.
const MOUNT_ATTR_FLAGS: [(u64, &str); 7] = [
    (0x1, "MOUNT_ATTR_RDONLY"),
    (0x2, "MOUNT_ATTR_NOSUID"),
    (0x4, "MOUNT_ATTR_NODEV"),
    (0x8, "MOUNT_ATTR_NOEXEC"),
    (0x80, "MOUNT_ATTR_NODIRATIME"),
    (0x10_0000, "MOUNT_ATTR_IDMAP"),
    (0x20_0000, "MOUNT_ATTR_NOSYMFOLLOW"),
];
const MOUNT_ATTR_ATIME: u64 = 0x70;
const MOVE_MOUNT_FLAGS: [(u64, &str); 8] = [
    (0x1, "MOVE_MOUNT_F_SYMLINKS"),
    (0x2, "MOVE_MOUNT_F_AUTOMOUNTS"),
    (0x4, "MOVE_MOUNT_F_EMPTY_PATH"),
    (0x10, "MOVE_MOUNT_T_SYMLINKS"),
    (0x20, "MOVE_MOUNT_T_AUTOMOUNTS"),
    (0x40, "MOVE_MOUNT_T_EMPTY_PATH"),
    (0x100, "MOVE_MOUNT_SET_GROUP"),
    (0x200, "MOVE_MOUNT_BENEATH"),
];
/// fsconfig(2)'s commands, by number.
const FSCONFIG_CMDS: [&str; 9] = [
    "FSCONFIG_SET_FLAG",
    "FSCONFIG_SET_STRING",
    "FSCONFIG_SET_BINARY",
    "FSCONFIG_SET_PATH",
    "FSCONFIG_SET_PATH_EMPTY",
    "FSCONFIG_SET_FD",
    "FSCONFIG_CMD_CREATE",
    "FSCONFIG_CMD_RECONFIGURE",
    "FSCONFIG_CMD_CREATE_EXCL",
];
const AT_FDCWD: i32 = -100;

/// The names of the bits of `flags` in `table`, and the bits no name covers as one hex number.
fn flag_names(flags: u64, table: &[(u64, &'static str)]) -> Vec<String> {
    let mut names: Vec<String> =
        table.iter().filter(|(bit, _)| flags & bit != 0).map(|(_, name)| name.to_string()).collect();
    let known = table.iter().fold(0, |all, (bit, _)| all | bit);
    if flags & !known != 0 {
        names.push(format!("{:#x}", flags & !known));
    }
    names
}

fn mount_flag_names(flags: u64) -> Vec<String> {
    if flags & MS_MGC_MSK == MS_MGC_VAL {
        let mut names = vec!["MS_MGC_VAL".to_string()];
        names.extend(flag_names(flags & !MS_MGC_MSK, &MS_FLAGS));
        return names;
    }
    flag_names(flags, &MS_FLAGS)
}

fn attr_flag_names(attr: u64) -> Vec<String> {
    let mut names = flag_names(attr & !MOUNT_ATTR_ATIME, &MOUNT_ATTR_FLAGS);
    match attr & MOUNT_ATTR_ATIME {
        0 => {}
        0x10 => names.push("MOUNT_ATTR_NOATIME".into()),
        0x20 => names.push("MOUNT_ATTR_STRICTATIME".into()),
        other => names.push(format!("{other:#x}")),
    }
    names
}

/// Flags as libbpf-tools writes them: the names joined by ` | `, or `0x0`.
fn joined(names: &[String]) -> String {
    if names.is_empty() {
        "0x0".to_string()
    } else {
        names.join(" | ")
    }
}

/// A result as libbpf-tools writes it: `0`, a descriptor, or `-ENAME` (the number when the errno has no name).
fn result_text(ret: i32) -> String {
    match (ret < 0).then(|| errno_name(-ret)).flatten() {
        Some(name) => format!("-{name}"),
        None => ret.to_string(),
    }
}

fn fd_text(fd: i32) -> String {
    if fd == AT_FDCWD {
        "AT_FDCWD".to_string()
    } else {
        fd.to_string()
    }
}

/// The arguments of one call, decoded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum Args {
    Mount {
        source: Name,
        target: Name,
        fs: Name,
        flags: u64,
        flag_names: Vec<String>,
        data: Name,
    },
    Umount {
        target: Name,
        flags: u64,
        flag_names: Vec<String>,
    },
    Fsopen {
        fs: Name,
        flags: u64,
        flag_names: Vec<String>,
    },
    Fsconfig {
        fd: i32,
        cmd: u64,
        cmd_name: String,
        key: Name,
        value: Name,
        aux: i32,
    },
    Fsmount {
        fs_fd: i32,
        flags: u64,
        flag_names: Vec<String>,
        attr_flags: u64,
        attr_flag_names: Vec<String>,
    },
    MoveMount {
        from_dfd: i32,
        from_pathname: Name,
        to_dfd: i32,
        to_pathname: Name,
        flags: u64,
        flag_names: Vec<String>,
    },
    Unknown {
        op: u32,
    },
}

/// The caller's parent process (-P) and its command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parent {
    pub ppid: u32,
    pub pcomm: Name,
}

/// One call, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    pub pid: u32,
    pub tid: u32,
    pub comm: Name,
    /// With -P: the caller's parent (no fields without).
    #[serde(flatten)]
    pub parent: Option<Parent>,
    pub mnt_ns: u32,
    /// 0, a new descriptor (fsopen, fsmount), or -errno.
    pub ret: i32,
    /// The errno's name of a failed call (`ENOENT`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<&'static str>,
    pub latency_ns: u64,
    #[serde(flatten)]
    pub args: Args,
}

impl Call {
    /// The call of a record; with `parent` (-P), its caller's parent too.
    pub fn from_bytes(data: &[u8], parent: bool) -> Call {
        let e: Box<event> = Box::new(from_bytes(data));
        let flags = e.flags;
        let args = match e.op as usize {
            consts::OP_MOUNT => Args::Mount {
                source: Name::from_c(&e.src),
                target: Name::from_c(&e.dest),
                fs: Name::from_c(&e.fs),
                flags,
                flag_names: mount_flag_names(flags),
                data: Name::from_c(&e.data),
            },
            consts::OP_UMOUNT => {
                Args::Umount { target: Name::from_c(&e.dest), flags, flag_names: flag_names(flags, &UMOUNT_FLAGS) }
            }
            consts::OP_FSOPEN => {
                Args::Fsopen { fs: Name::from_c(&e.fs), flags, flag_names: flag_names(flags, &FSOPEN_FLAGS) }
            }
            consts::OP_FSCONFIG => Args::Fsconfig {
                fd: e.fd,
                cmd: flags,
                cmd_name: FSCONFIG_CMDS.get(flags as usize).map_or("UNKNOWN", |n| n).to_string(),
                key: Name::from_c(&e.fs),
                value: Name::from_c(&e.data),
                aux: e.aux,
            },
            consts::OP_FSMOUNT => Args::Fsmount {
                fs_fd: e.fd,
                flags,
                flag_names: flag_names(flags, &FSMOUNT_FLAGS),
                attr_flags: e.attr_flags.into(),
                attr_flag_names: attr_flag_names(e.attr_flags.into()),
            },
            consts::OP_MOVE_MOUNT => Args::MoveMount {
                from_dfd: e.fd,
                from_pathname: Name::from_c(&e.src),
                to_dfd: e.fd2,
                to_pathname: Name::from_c(&e.dest),
                flags,
                flag_names: flag_names(flags, &MOVE_MOUNT_FLAGS),
            },
            _ => Args::Unknown { op: e.op },
        };
        Call {
            pid: e.pid,
            tid: e.tid,
            comm: Name::from_c(&e.comm),
            parent: parent.then(|| Parent { ppid: e.ppid, pcomm: Name::from_c(&e.pcomm) }),
            mnt_ns: e.mnt_ns,
            ret: e.ret,
            errno: (e.ret < 0).then(|| errno_name(-e.ret)).flatten(),
            latency_ns: e.delta_ns,
            args,
        }
    }

    /// The call as libbpf-tools writes it, as C: `umount("/mnt", MNT_DETACH) = 0`.
    pub fn text(&self) -> String {
        let ret = result_text(self.ret);
        match &self.args {
            Args::Mount { source, target, fs, flag_names, data, .. } => {
                format!("mount(\"{source}\", \"{target}\", \"{fs}\", {}, \"{data}\") = {ret}", joined(flag_names))
            }
            Args::Umount { target, flag_names, .. } => format!("umount(\"{target}\", {}) = {ret}", joined(flag_names)),
            Args::Fsopen { fs, flag_names, .. } => format!("fsopen(\"{fs}\", {}) = {ret}", joined(flag_names)),
            Args::Fsconfig { fd, cmd_name, key, value, aux, .. } => {
                format!("fsconfig({fd}, \"{cmd_name}\", \"{key}\", \"{value}\", {aux}) = {ret}")
            }
            Args::Fsmount { fs_fd, flag_names, attr_flag_names, .. } => {
                format!("fsmount({fs_fd}, \"{}\", \"{}\") = {ret}", joined(flag_names), joined(attr_flag_names))
            }
            Args::MoveMount { from_dfd, from_pathname, to_dfd, to_pathname, flag_names, .. } => format!(
                "move_mount({from_dfd}, \"{from_pathname}\", {}, \"{to_pathname}\", \"{}\") = {ret}",
                fd_text(*to_dfd),
                joined(flag_names)
            ),
            Args::Unknown { op } => format!("op{op}() = {ret}"),
        }
    }

    /// The detailed mode's OP field and the fields that follow the common ones, as (label, value).
    fn details(&self) -> (&'static str, Vec<(&'static str, String)>) {
        match &self.args {
            Args::Mount { source, target, fs, flag_names, data, .. } => (
                "MOUNT",
                vec![
                    ("FS:     ", fs.shown()),
                    ("SOURCE: ", source.shown()),
                    ("TARGET: ", target.shown()),
                    ("DATA:   ", data.shown()),
                    ("FLAGS:  ", joined(flag_names)),
                ],
            ),
            Args::Umount { target, flag_names, .. } => {
                ("UMOUNT", vec![("TARGET: ", target.shown()), ("FLAGS:  ", joined(flag_names))])
            }
            Args::Fsopen { fs, flag_names, .. } => {
                ("FSOPEN", vec![("FS:     ", fs.shown()), ("FLAGS:  ", joined(flag_names))])
            }
            Args::Fsconfig { fd, cmd_name, key, value, .. } => (
                "FSCONFIG",
                vec![
                    ("FD:     ", fd.to_string()),
                    ("CMD:    ", cmd_name.clone()),
                    ("KEY:    ", key.shown()),
                    ("VALUE:  ", value.shown()),
                ],
            ),
            Args::Fsmount { fs_fd, flag_names, attr_flag_names, .. } => (
                "FSMOUNT",
                vec![
                    ("FS_FD:       ", fs_fd.to_string()),
                    ("FLAGS:       ", joined(flag_names)),
                    ("ATTR_FLAGS:  ", joined(attr_flag_names)),
                ],
            ),
            Args::MoveMount { from_dfd, from_pathname, to_dfd, to_pathname, flag_names, .. } => (
                "MOVE_MOUNT",
                vec![
                    ("FROM_DFD:       ", from_dfd.to_string()),
                    ("FROM_PATHNAME:  ", from_pathname.shown()),
                    ("TO_DFD:         ", to_dfd.to_string()),
                    ("TO_PATHNAME:    ", to_pathname.shown()),
                    ("FLAGS:          ", joined(flag_names)),
                ],
            ),
            Args::Unknown { .. } => ("UNKNOWN", Vec::new()),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub json: bool,
    pub timestamp: bool,
    pub detailed: bool,
    /// -P: BCC's PCOMM and PPID columns after TID.
    pub parent: bool,
}

pub struct Printer {
    style: Style,
}

#[derive(Serialize)]
struct JsonCall<'a> {
    time: String,
    #[serde(flatten)]
    call: &'a Call,
}

impl Printer {
    pub fn new(style: Style) -> Printer {
        Printer { style }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        if self.style.json || self.style.detailed {
            return Ok(());
        }
        if self.style.timestamp {
            write!(out, "{:<8} ", "TIME")?;
        }
        write!(out, "{:<16} {:<7} {:<7} ", "COMM", "PID", "TID")?;
        if self.style.parent {
            write!(out, "{:<16} {:<7} ", "PCOMM", "PPID")?;
        }
        writeln!(out, "{:<11} CALL", "MNT_NS")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, c: &Call) -> io::Result<()> {
        if self.style.json {
            return out.json_line(&JsonCall { time: clock_rfc3339(), call: c });
        }
        let mut indent = "";
        if self.style.timestamp {
            write!(out, "{} ", clock_hms())?;
            indent = "    ";
        }
        if !self.style.detailed {
            write!(out, "{:<16} {:<7} {:<7} ", c.comm, c.pid, c.tid)?;
            if let Some(Parent { ppid, pcomm }) = &c.parent {
                write!(out, "{pcomm:<16} {ppid:<7} ")?;
            }
            writeln!(out, "{:<11} {}", c.mnt_ns, c.text())?;
            return out.flush();
        }
        if self.style.timestamp {
            writeln!(out)?;
        }
        let (op, fields) = c.details();
        writeln!(out, "{indent}PID:    {}", c.pid)?;
        writeln!(out, "{indent}TID:    {}", c.tid)?;
        writeln!(out, "{indent}COMM:   {}", c.comm)?;
        if let Some(Parent { ppid, pcomm }) = &c.parent {
            writeln!(out, "{indent}PPID:   {ppid}")?;
            writeln!(out, "{indent}PCOMM:  {pcomm}")?;
        }
        writeln!(out, "{indent}OP:     {op}")?;
        writeln!(out, "{indent}RET:    {}", result_text(c.ret))?;
        writeln!(out, "{indent}LAT:    {}us", c.latency_ns / 1000)?;
        writeln!(out, "{indent}MNT_NS: {}", c.mnt_ns)?;
        for (label, value) in fields {
            writeln!(out, "{indent}{label}{value}")?;
        }
        writeln!(out)?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_decode_by_their_real_bits() {
        assert_eq!(joined(&mount_flag_names(0)), "0x0");
        assert_eq!(joined(&mount_flag_names(2 | 4 | 8)), "MS_NOSUID | MS_NODEV | MS_NOEXEC");
        assert_eq!(joined(&mount_flag_names(4096 | 16384)), "MS_BIND | MS_REC");
        assert_eq!(joined(&mount_flag_names(0xC0ED_0000 | 1)), "MS_MGC_VAL | MS_RDONLY");
        assert_eq!(joined(&mount_flag_names(512)), "0x200");
        assert_eq!(joined(&flag_names(2, &UMOUNT_FLAGS)), "MNT_DETACH");
        assert_eq!(
            joined(&attr_flag_names(0x4 | 0x8 | 0x10)),
            "MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOATIME"
        );
        assert_eq!(joined(&attr_flag_names(0)), "0x0");
        assert_eq!(result_text(-2), "-ENOENT");
        assert_eq!(result_text(5), "5");
        assert_eq!(result_text(0), "0");
        assert_eq!(fd_text(-100), "AT_FDCWD");
    }
}
