// SPDX-License-Identifier: Apache-2.0 OR MIT
//! opensnoop's output: BCC's columns (`[TIME(s)] [UID] PID|TID COMM FD ERR [FLAGS MODE] PATH`, the format strings
//! of BCC's `tools/opensnoop.py`) or JSON lines with the errno's name and the flags' names.

use std::io::{self, Write};

use common::attach::maps::{c_bytes, c_string};
use common::output::name::Name;
use common::output::stdout::{clock_rfc3339, printable, Output, TraceStart};
use serde::Serialize;

use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and integer arrays; the BPF side fills every field it sends.
unsafe impl plain::Plain for event {}

/// open(2) flags by name, for -f and the JSON output (the running architecture's values, from libc).
const FLAGS: &[(&str, i32)] = &[
    ("O_WRONLY", libc::O_WRONLY),
    ("O_RDWR", libc::O_RDWR),
    ("O_CREAT", libc::O_CREAT),
    ("O_EXCL", libc::O_EXCL),
    ("O_NOCTTY", libc::O_NOCTTY),
    ("O_TRUNC", libc::O_TRUNC),
    ("O_APPEND", libc::O_APPEND),
    ("O_NONBLOCK", libc::O_NONBLOCK),
    ("O_DSYNC", libc::O_DSYNC),
    ("O_ASYNC", libc::O_ASYNC),
    ("O_DIRECT", libc::O_DIRECT),
    ("O_LARGEFILE", libc::O_LARGEFILE),
    ("O_DIRECTORY", libc::O_DIRECTORY),
    ("O_NOFOLLOW", libc::O_NOFOLLOW),
    ("O_NOATIME", libc::O_NOATIME),
    ("O_CLOEXEC", libc::O_CLOEXEC),
    ("O_SYNC", libc::O_SYNC),
    ("O_PATH", libc::O_PATH),
    ("O_TMPFILE", libc::O_TMPFILE),
];

/// A flag name for -f (`O_WRONLY`, case-insensitive, `O_` optional). O_RDONLY is 0 and so filters nothing, as in BCC.
pub fn parse_flag(s: &str) -> Result<u64, String> {
    let upper = s.to_ascii_uppercase();
    let name = if upper.starts_with("O_") { upper } else { format!("O_{upper}") };
    if name == "O_RDONLY" {
        return Ok(0);
    }
    FLAGS.iter().find(|(n, _)| *n == name).map(|&(_, v)| v as u64).ok_or_else(|| format!("'{s}' is not an open flag"))
}

fn flag_names(flags: u64) -> Vec<&'static str> {
    let mut names = vec![match flags as i32 & libc::O_ACCMODE {
        libc::O_WRONLY => "O_WRONLY",
        libc::O_RDWR => "O_RDWR",
        _ => "O_RDONLY",
    }];
    for &(name, v) in FLAGS {
        let v = v as u64;
        if v == 0 || v & libc::O_ACCMODE as u64 != 0 || name == "O_TMPFILE" && flags & v != v {
            continue;
        }
        if flags & v == v && !(name == "O_DIRECTORY" && flags & libc::O_TMPFILE as u64 == libc::O_TMPFILE as u64) {
            names.push(name);
        }
    }
    names
}

/// One call, decoded from the BPF record.
#[derive(Debug, Clone, Serialize)]
pub struct Open {
    #[serde(skip)]
    pub ts_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub uid: u32,
    pub comm: Name,
    /// The file descriptor, or -1.
    pub fd: i32,
    /// The errno (0 on success).
    pub err: i32,
    pub errno: Option<String>,
    pub flags: u64,
    pub flag_names: Vec<&'static str>,
    pub mode: u32,
    /// The path as given.
    pub path: String,
    /// -F: the directories above a relative path, innermost first, and whether the walk reached the root.
    #[serde(skip)]
    pub dirs: Vec<String>,
    #[serde(skip)]
    pub dirs_complete: bool,
    pub syscall: &'static str,
    /// The bytes of the path and of -F's directories, which text output escapes as `ls -b` does: a name may
    /// hold a newline or a terminal's control sequence.
    #[serde(skip)]
    pub path_bytes: Vec<u8>,
    #[serde(skip)]
    pub dir_bytes: Vec<Vec<u8>>,
}

impl Open {
    pub fn from_bytes(data: &[u8]) -> Open {
        let mut e = Box::<event>::default();
        // SAFETY: event is Plain (any bytes are a valid value).
        let bytes = unsafe { plain::as_mut_bytes(&mut *e) };
        let n = data.len().min(bytes.len());
        bytes[..n].copy_from_slice(&data[..n]);
        let depth = (e.depth as usize).min(e.dirs.len());
        let (fd, err) = if e.ret >= 0 { (e.ret, 0) } else { (-1, -e.ret) };
        Open {
            ts_ns: e.ts_ns,
            pid: e.pid,
            tid: e.tid,
            uid: e.uid,
            comm: Name::from_c(&e.comm),
            fd,
            err,
            errno: (err != 0).then(|| format!("{:?}", nix::errno::Errno::from_raw(err))),
            flags: e.flags,
            flag_names: flag_names(e.flags),
            mode: e.mode,
            path: c_string(&e.path),
            dirs: e.dirs[..depth].iter().map(|d| c_string(d)).collect(),
            dirs_complete: e.dirs_complete != 0,
            syscall: ["open", "openat", "openat2"].get(e.call as usize).copied().unwrap_or("open"),
            path_bytes: c_bytes(&e.path),
            dir_bytes: e.dirs[..depth].iter().map(|d| c_bytes(d)).collect(),
        }
    }

    /// -F: the path from the root for a relative path whose directories were read (as BCC: `/` + the directory
    /// names outermost first + the path as given, less the `/` of stacked mount roots); an absolute path as given.
    pub fn full_path(&self) -> String {
        if !self.walked() {
            return self.path.clone();
        }
        common::domain::paths::from_walk(self.dirs.iter().cloned(), self.dirs_complete, &self.path)
    }

    /// Whether -F's path is built from the directories above a relative path.
    fn walked(&self) -> bool {
        !(self.path.starts_with('/') || (self.dirs.is_empty() && !self.dirs_complete))
    }

    /// The text column's PATH (with `full`, -F's [`Open::full_path`]), escaped as `ls -b` does.
    pub fn shown_path(&self, full: bool) -> String {
        let path = printable(&self.path_bytes);
        if !(full && self.walked()) {
            return path;
        }
        common::domain::paths::from_walk(self.dir_bytes.iter().map(|d| printable(d)), self.dirs_complete, &path)
    }
}

/// Which columns to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    pub json: bool,
    /// `-T`: seconds since the first call printed.
    pub timestamp: bool,
    pub uid: bool,
    /// `-t`: the TID column instead of PID.
    pub tid: bool,
    pub extended: bool,
    pub full_path: bool,
}

#[derive(Serialize)]
struct JsonOpen<'a> {
    time: String,
    ts: f64,
    #[serde(flatten)]
    open: &'a Open,
    #[serde(skip_serializing_if = "Option::is_none")]
    full_path: Option<String>,
}

pub struct Printer {
    style: Style,
    first_ns: Option<u64>,
    /// JSON's `ts` counts from it.
    start: TraceStart,
}

impl Printer {
    pub fn new(style: Style) -> Printer {
        Printer { style, first_ns: None, start: TraceStart::now() }
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
        if s.uid {
            line += &format!("{:<6}", "UID");
        }
        line += &format!("{:<6} {:<16} {:>4} {:>3} ", if s.tid { "TID" } else { "PID" }, "COMM", "FD", "ERR");
        if s.extended {
            line += &format!("{:<8} {:<4} ", "FLAGS", "MODE");
        }
        line += "PATH";
        writeln!(out, "{line}")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, o: &Open) -> io::Result<()> {
        let s = self.style;
        let first = *self.first_ns.get_or_insert(o.ts_ns);
        let since = o.ts_ns.saturating_sub(first) as f64 / 1e9;
        if s.json {
            let full_path = s.full_path.then(|| o.full_path());
            return out.json_line(&JsonOpen {
                time: clock_rfc3339(),
                ts: self.start.secs(o.ts_ns),
                open: o,
                full_path,
            });
        }
        let mut line = String::new();
        if s.timestamp {
            line += &format!("{since:<14.9}");
        }
        if s.uid {
            line += &format!("{:<6}", o.uid);
        }
        let id = if s.tid { o.tid } else { o.pid };
        line += &format!("{id:<6} {:<16} {:>4} {:>3} ", o.comm, o.fd, o.err);
        if s.extended {
            let tmpfile = libc::O_TMPFILE as u64;
            if o.mode == 0 && o.flags & libc::O_CREAT as u64 == 0 && o.flags & tmpfile != tmpfile {
                line += &format!("{:08o} n/a  ", o.flags);
            } else {
                line += &format!("{:08o} {:04o} ", o.flags, o.mode);
            }
        }
        line += &o.shown_path(s.full_path);
        writeln!(out, "{line}")?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_by_name() {
        assert_eq!(parse_flag("O_WRONLY"), Ok(libc::O_WRONLY as u64));
        assert_eq!(parse_flag("creat"), Ok(libc::O_CREAT as u64));
        assert_eq!(parse_flag("O_RDONLY"), Ok(0));
        assert!(parse_flag("O_BOGUS").is_err());
        assert_eq!(
            flag_names((libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC) as u64),
            ["O_WRONLY", "O_CREAT", "O_CLOEXEC"]
        );
    }
}
