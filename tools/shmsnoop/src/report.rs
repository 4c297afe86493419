// SPDX-License-Identifier: Apache-2.0 OR MIT
//! shmsnoop's output: BCC's columns (`[TIME(s)] PID COMM SYS RET ARGs`, with the same widths, the return value in
//! hexadecimal as an unsigned word, and each call's arguments as `name: value` pairs with the flags and shmctl
//! commands named) or JSON lines with the same numbers, typed as the kernel types them.

use std::io::{self, Write};

use common::domain::syscalls::errno_name;
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, Output, TraceStart};
use serde::Serialize;

use crate::bpf::consts::{SYS_SHMAT, SYS_SHMCTL, SYS_SHMDT, SYS_SHMGET};
use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and integer arrays; the BPF side fills every field it sends.
unsafe impl plain::Plain for event {}

/// The calls by their SYS_* number in shmsnoop.h, as their tracepoints name them.
pub const CALLS: [&str; 4] = ["shmget", "shmat", "shmdt", "shmctl"];

/// shmget's flag bits, in the order the names are listed. The huge page size (bits 26-31, log2 of the size) is a
/// field, not bits: it is named apart ([`HUGE_SIZES`]).
const SHMGET_FLAGS: [(&str, u64); 5] = [
    ("IPC_CREAT", 0o1000),
    ("IPC_EXCL", 0o2000),
    ("SHM_HUGETLB", 0o4000),
    ("SHM_NORESERVE", 0o10000),
    ("SHM_EXEC", 0o100000),
];

/// The huge page sizes shmget's flags name, by the log2 of the size in bits 26-31, listed after SHM_HUGETLB.
const HUGE_SIZES: [(&str, u64); 2] = [("SHM_HUGE_2MB", 21), ("SHM_HUGE_1GB", 30)];
const HUGE_SHIFT: u32 = 26;
const HUGE_MASK: u64 = 0x3f << HUGE_SHIFT;

const SHMAT_FLAGS: [(&str, u64); 4] =
    [("SHM_RDONLY", 0o10000), ("SHM_RND", 0o20000), ("SHM_REMAP", 0o40000), ("SHM_EXEC", 0o100000)];

/// shmctl's commands.
const SHMCTL_CMDS: [(&str, u64); 9] = [
    ("IPC_RMID", 0),
    ("IPC_SET", 1),
    ("IPC_STAT", 2),
    ("IPC_INFO", 3),
    ("SHM_LOCK", 11),
    ("SHM_UNLOCK", 12),
    ("SHM_STAT", 13),
    ("SHM_INFO", 14),
    ("SHM_STAT_ANY", 15),
];

/// The names of the flags set in `val` (in the table's order), and the bits no name covers.
fn flag_names(val: u64, table: &[(&'static str, u64)], huge: bool) -> (Vec<&'static str>, u64) {
    let mut names = Vec::new();
    let mut rest = val;
    for &(name, bit) in table {
        if rest & bit != 0 {
            names.push(name);
            rest &= !bit;
        }
        if huge && name == "SHM_HUGETLB" {
            let size = (rest & HUGE_MASK) >> HUGE_SHIFT;
            if let Some(&(size_name, _)) = HUGE_SIZES.iter().find(|&&(_, log2)| log2 == size) {
                names.push(size_name);
                rest &= !HUGE_MASK;
            }
        }
    }
    (names, rest)
}

/// Flags as BCC shows them: `0x3b6 (IPC_CREAT|0666)`, the value in hexadecimal and, unless it is 0, the names of
/// its flags with the bits left over (a permission mode, or unknown bits) in octal.
pub fn flags_text(val: u64, table: &[(&'static str, u64)], huge: bool) -> String {
    if val == 0 {
        return "0x0".into();
    }
    let (mut names, rest) = flag_names(val, table, huge);
    let rest_text = format!("0{rest:o}");
    if rest != 0 || names.is_empty() {
        names.push(&rest_text);
    }
    format!("0x{val:x} ({})", names.join("|"))
}

/// shmctl's command by name, or in hexadecimal when it has none (IPC_64, 0x100, marks the 64-bit layout some C
/// libraries ask for: it is part of the number).
pub fn cmd_name(cmd: u64) -> String {
    SHMCTL_CMDS.iter().find(|&&(_, c)| c == cmd).map_or_else(|| format!("0x{cmd:x}"), |&(name, _)| name.to_string())
}

/// One call, decoded from the BPF record.
#[derive(Debug, Clone)]
pub struct Call {
    pub ts_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: Name,
    pub sys: usize,
    /// The argument words as the call received them.
    pub args: [u64; 3],
    pub ret: i64,
}

impl Call {
    pub fn from_bytes(data: &[u8]) -> Call {
        let mut e = event::default();
        // SAFETY: event is Plain (any bytes are a valid value).
        let bytes = unsafe { plain::as_mut_bytes(&mut e) };
        let n = data.len().min(bytes.len());
        bytes[..n].copy_from_slice(&data[..n]);
        Call {
            ts_ns: e.ts_ns,
            pid: e.pid,
            tid: e.tid,
            comm: Name::from_c(&e.comm),
            sys: e.sys as usize,
            args: e.args,
            ret: e.ret,
        }
    }

    /// BCC's name for the SYS column.
    fn sys_column(&self) -> &'static str {
        match self.sys {
            SYS_SHMGET => "SHMGET",
            SYS_SHMAT => "SHMAT",
            SYS_SHMDT => "SHMDT",
            SYS_SHMCTL => "SHMCTL",
            _ => "N/A",
        }
    }

    /// The ARGs column: BCC's `name: value` pairs for the call.
    pub fn args_text(&self) -> String {
        let [a0, a1, a2] = self.args;
        match self.sys {
            SYS_SHMGET => {
                format!("key: 0x{a0:x}, size: {a1}, shmflg: {}", flags_text(a2, &SHMGET_FLAGS, true))
            }
            SYS_SHMAT => {
                format!("shmid: 0x{a0:x}, shmaddr: 0x{a1:x}, shmflg: {}", flags_text(a2, &SHMAT_FLAGS, false))
            }
            SYS_SHMDT => format!("shmaddr: 0x{a0:x}"),
            SYS_SHMCTL => format!("shmid: 0x{a0:x}, cmd: {a1} ({}), buf: 0x{a2:x}", cmd_name(a1)),
            _ => String::new(),
        }
    }
}

/// One call as JSON. The arguments are typed as the kernel types them: key, shmid, shmflg and cmd are C ints
/// (their low 32 bits), size and addresses are words.
#[derive(Serialize)]
struct JsonCall<'a> {
    time: String,
    ts: f64,
    pid: u32,
    tid: u32,
    comm: &'a Name,
    call: &'static str,
    /// The return value: the segment's ID (shmget), the address attached (shmat), 0 or a shmctl result, or -errno.
    ret: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shmid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shmaddr: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shmflg: Option<u32>,
    /// The names of shmflg's flags.
    #[serde(skip_serializing_if = "Option::is_none")]
    flags: Option<Vec<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cmd: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cmd_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    buf: Option<u64>,
}

/// Which columns to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    pub json: bool,
    /// `-T`: seconds since the first call seen.
    pub timestamp: bool,
    /// `-t`: the first column shows thread IDs.
    pub tid: bool,
}

pub struct Printer {
    style: Style,
    /// The first call's time, in microseconds (BCC's resolution).
    first_us: Option<u64>,
    /// JSON's `ts` counts from it.
    start: TraceStart,
}

impl Printer {
    pub fn new(style: Style) -> Printer {
        Printer { style, first_us: None, start: TraceStart::now() }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        let s = self.style;
        if s.json {
            return Ok(());
        }
        let mut line = String::new();
        if s.timestamp {
            line += &format!("{:<14}", "TIME(s)");
        }
        line += &format!("{:<6} {:<16} {:>6} {:>16} ARGs", if s.tid { "TID" } else { "PID" }, "COMM", "SYS", "RET");
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// Starts the clock of the TIME(s) column at the first call seen.
    pub fn note_time(&mut self, call: &Call) {
        self.first_us.get_or_insert(call.ts_ns / 1000);
    }

    pub fn write(&mut self, out: &mut Output, call: &Call) -> io::Result<()> {
        let s = self.style;
        let first = *self.first_us.get_or_insert(call.ts_ns / 1000);
        let since = (call.ts_ns / 1000).saturating_sub(first) as f64 / 1e6;
        if s.json {
            return out.json_line(&json(call, self.start.secs(call.ts_ns)));
        }
        let mut line = String::new();
        if s.timestamp {
            line += &format!("{since:<14.9}");
        }
        let id = if s.tid { call.tid } else { call.pid };
        line += &format!(
            "{id:<6} {:<16} {:>6} {:>16x} {}",
            call.comm,
            call.sys_column(),
            call.ret as u64,
            call.args_text()
        );
        writeln!(out, "{line}")?;
        out.flush()
    }
}

fn json(call: &Call, since: f64) -> JsonCall<'_> {
    let [a0, a1, a2] = call.args;
    let (int0, int1, int2) = (a0 as u32, a1 as u32, a2 as u32);
    let mut j = JsonCall {
        time: clock_rfc3339(),
        ts: since,
        pid: call.pid,
        tid: call.tid,
        comm: &call.comm,
        call: CALLS.get(call.sys).copied().unwrap_or("N/A"),
        ret: call.ret,
        error: (call.ret < 0).then(|| i32::try_from(-call.ret).ok().and_then(errno_name)).flatten(),
        key: None,
        size: None,
        shmid: None,
        shmaddr: None,
        shmflg: None,
        flags: None,
        cmd: None,
        cmd_name: None,
        buf: None,
    };
    match call.sys {
        SYS_SHMGET => {
            j.key = Some(int0);
            j.size = Some(a1);
            j.shmflg = Some(int2);
            j.flags = Some(flag_names(u64::from(int2), &SHMGET_FLAGS, true).0);
        }
        SYS_SHMAT => {
            j.shmid = Some(int0 as i32);
            j.shmaddr = Some(a1);
            j.shmflg = Some(int2);
            j.flags = Some(flag_names(u64::from(int2), &SHMAT_FLAGS, false).0);
        }
        SYS_SHMDT => j.shmaddr = Some(a0),
        SYS_SHMCTL => {
            j.shmid = Some(int0 as i32);
            j.cmd = Some(int1 as i32);
            j.cmd_name = Some(cmd_name(u64::from(int1)));
            j.buf = Some(a2);
        }
        _ => {}
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(sys: usize, args: [u64; 3], ret: i64) -> Call {
        Call { ts_ns: 0, pid: 1, tid: 1, comm: "x".into(), sys, args, ret }
    }

    #[test]
    fn flags_as_bcc_shows_them() {
        assert_eq!(flags_text(0, &SHMGET_FLAGS, true), "0x0");
        assert_eq!(flags_text(0o1666, &SHMGET_FLAGS, true), "0x3b6 (IPC_CREAT|0666)");
        assert_eq!(flags_text(0o666, &SHMGET_FLAGS, true), "0x1b6 (0666)");
        assert_eq!(flags_text(0o3600, &SHMGET_FLAGS, true), "0x780 (IPC_CREAT|IPC_EXCL|0600)");
        assert_eq!(flags_text(0o1000, &SHMGET_FLAGS, true), "0x200 (IPC_CREAT)");
        let huge2m = 0o5600 | (21 << 26);
        assert_eq!(flags_text(huge2m, &SHMGET_FLAGS, true), "0x54000b80 (IPC_CREAT|SHM_HUGETLB|SHM_HUGE_2MB|0600)");
        let huge1g = 0o4000 | (30 << 26);
        assert_eq!(flags_text(huge1g, &SHMGET_FLAGS, true), "0x78000800 (SHM_HUGETLB|SHM_HUGE_1GB)");
        assert_eq!(flags_text(0o10000, &SHMAT_FLAGS, false), "0x1000 (SHM_RDONLY)");
        assert_eq!(flags_text(0o30000 | 0o100000, &SHMAT_FLAGS, false), "0xb000 (SHM_RDONLY|SHM_RND|SHM_EXEC)");
        assert_eq!(flags_text(0o7, &SHMAT_FLAGS, false), "0x7 (07)");
    }

    #[test]
    fn args_as_bcc_shows_them() {
        let get = call(SYS_SHMGET, [0x7802_0001, 20, 0o1666], 0x10000);
        assert_eq!(get.args_text(), "key: 0x78020001, size: 20, shmflg: 0x3b6 (IPC_CREAT|0666)");
        let at = call(SYS_SHMAT, [0x10000, 0, 0], 0x7f1c_f8b1_f000);
        assert_eq!(at.args_text(), "shmid: 0x10000, shmaddr: 0x0, shmflg: 0x0");
        let dt = call(SYS_SHMDT, [0x7f1c_f8b1_f000, 0, 0], 0);
        assert_eq!(dt.args_text(), "shmaddr: 0x7f1cf8b1f000");
        let ctl = call(SYS_SHMCTL, [0x10000, 0, 0], 0);
        assert_eq!(ctl.args_text(), "shmid: 0x10000, cmd: 0 (IPC_RMID), buf: 0x0");
        assert_eq!(cmd_name(0x102), "0x102");
        assert_eq!(cmd_name(14), "SHM_INFO");
    }
}
