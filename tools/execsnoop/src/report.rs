// SPDX-License-Identifier: Apache-2.0 OR MIT
//! execsnoop's output: BCC's columns (`[TIME] [TIME(s)] [UID] PCOMM PID [PARENT] PPID [CPU] RET ARGS`, the format
//! strings of BCC's `tools/execsnoop.py`, where PCOMM is the process's command; -M's PARENT column is the parent's)
//! or JSON lines with the arguments as a list, and the process's container.

use std::io::{self, Write};

use common::attach::maps::c_string;
use common::domain::container_names::ContainerNames;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, monotonic_ns, printable, Output};
use serde::Serialize;

use crate::bpf::{self, types::event};

// SAFETY: a #[repr(C)] struct of integers and integer arrays; the BPF side sends it zero-initialised.
unsafe impl plain::Plain for event {}

/// One exec, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exec {
    #[serde(skip)]
    pub ts_ns: u64,
    /// The task's cgroup v2 ID, which names its container.
    #[serde(skip)]
    pub cgroup_id: u64,
    pub comm: Name,
    pub pid: u32,
    pub ppid: u32,
    pub pcomm: Name,
    pub uid: u32,
    pub cpu: u32,
    #[serde(rename = "ret")]
    pub retval: i32,
    /// The file name executed, then argv[1..].
    pub args: Vec<String>,
    /// More arguments were passed than --max-args.
    pub truncated: bool,
    pub syscall: &'static str,
}

impl Exec {
    /// Decodes a record, which the BPF side cuts after its last argument: the path executed (argv[0] when none
    /// was read), then the caller's argv[1..max_args], each cut at ARGSIZE - 1 bytes as BCC does.
    pub fn from_bytes(data: &[u8], max_args: usize) -> Exec {
        let mut e = Box::<event>::default();
        // SAFETY: event is Plain (any bytes are a valid value).
        let bytes = unsafe { plain::as_mut_bytes(&mut *e) };
        let n = data.len().min(bytes.len());
        bytes[..n].copy_from_slice(&data[..n]);
        let used = (e.args_size as usize).min(e.args.len());
        let raw: Vec<u8> = e.args[..used].iter().map(|&c| c as u8).collect();
        let raw = raw.strip_suffix(&[0]).unwrap_or(&raw);
        let cut = |a: &[u8]| String::from_utf8_lossy(&a[..a.len().min(bpf::consts::ARGSIZE - 1)]).into_owned();
        let strings: Vec<String> = if raw.is_empty() { Vec::new() } else { raw.split(|&b| b == 0).map(cut).collect() };
        let mut args = if e.from_image != 0 { callers_args(strings, e.argc, e.image_argc) } else { strings };
        let truncated = e.truncated != 0 || args.len() > max_args;
        args.truncate(max_args);
        let filename = c_string(&e.filename);
        match args.first_mut() {
            Some(first) if !filename.is_empty() => *first = filename,
            None if !filename.is_empty() => args.push(filename),
            _ => {}
        }
        Exec {
            ts_ns: e.ts_ns,
            cgroup_id: e.cgroup_id,
            comm: Name::from_c(&e.comm),
            pid: e.pid,
            ppid: e.ppid,
            pcomm: Name::from_c(&e.pcomm),
            uid: e.uid,
            cpu: e.cpu,
            retval: e.retval,
            args,
            truncated,
            syscall: if e.execveat != 0 { "execveat" } else { "execve" },
        }
    }

    /// The ARGS column: arguments joined by spaces (quoted with -q), each escaped as [`printable`] shows a name
    /// (a newline as `\n`, an ESC as `\033`), ` ...` if cut.
    fn args_text(&self, quote: bool) -> String {
        let shown = |a: &String| printable(a.as_bytes());
        let mut text = self
            .args
            .iter()
            .map(|a| if quote { format!("\"{}\"", shown(a).replace('"', "\\\"")) } else { shown(a) })
            .collect::<Vec<_>>()
            .join(" ");
        if self.truncated {
            text.push_str(" ...");
        }
        text
    }
}

/// The caller's argv out of the new program's, `image` (`image_argc` strings, maybe cut short): the same list,
/// except for a script, whose interpreter's own arguments come first (`/bin/sh -e ./s.sh one two` for
/// `./s.sh one two`): the caller's argv[1..] are the last `argc - 1`, after the script's path, which stands in
/// for argv[0]. An unknown argc leaves the list as it is.
fn callers_args(image: Vec<String>, argc: u32, image_argc: u32) -> Vec<String> {
    if argc == bpf::consts::ARGC_UNKNOWN as u32 {
        return image;
    }
    let interpreter = image_argc.saturating_sub(argc.max(1)) as usize;
    image.into_iter().skip(interpreter).collect()
}

/// Which columns to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    pub json: bool,
    /// `-T`: HH:MM:SS.
    pub clock: bool,
    /// `-t`: seconds since the tool started.
    pub timestamp: bool,
    pub uid: bool,
    pub cpu: bool,
    pub pcomm: bool,
    pub quote: bool,
}

#[derive(Serialize)]
struct JsonExec<'a> {
    time: String,
    ts: f64,
    #[serde(flatten)]
    exec: &'a Exec,
    /// The container the process runs in (absent for the host's processes).
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
}

pub struct Printer {
    style: Style,
    start_ns: u64,
    containers: ContainerNames,
}

impl Printer {
    pub fn new(style: Style) -> Printer {
        Printer { style, start_ns: monotonic_ns(), containers: ContainerNames::new() }
    }

    pub fn write_header(&mut self, out: &mut Output) -> io::Result<()> {
        let s = self.style;
        if s.json {
            return Ok(());
        }
        let mut line = String::new();
        if s.clock {
            line += &format!("{:<9}", "TIME");
        }
        if s.timestamp {
            line += &format!("{:<8}", "TIME(s)");
        }
        if s.uid {
            line += &format!("{:<6}", "UID");
        }
        line += &format!("{:<16} {:<7} ", "PCOMM", "PID");
        if s.pcomm {
            line += &format!("{:<16} ", "PARENT");
        }
        line += &format!("{:<7} ", "PPID");
        if s.cpu {
            line += &format!("{:<4} ", "CPU");
        }
        line += &format!("{:>3} {}", "RET", "ARGS");
        writeln!(out, "{line}")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, e: &Exec) -> io::Result<()> {
        let s = self.style;
        let since = e.ts_ns.saturating_sub(self.start_ns) as f64 / 1e9;
        if s.json {
            let container = self.containers.of_cgroup(e.cgroup_id);
            let container = container.as_deref();
            return out.json_line(&JsonExec { time: clock_rfc3339(), ts: since, exec: e, container });
        }
        let mut line = String::new();
        if s.clock {
            line += &format!("{:<9}", clock_hms());
        }
        if s.timestamp {
            line += &format!("{:<8.3}", since);
        }
        if s.uid {
            line += &format!("{:<6}", e.uid);
        }
        line += &format!("{:<16} {:<7} ", e.comm, e.pid);
        if s.pcomm {
            line += &format!("{:<16} ", e.pcomm);
        }
        let ppid = if e.ppid > 0 { e.ppid.to_string() } else { "?".into() };
        line += &format!("{ppid:<7} ");
        if s.cpu {
            line += &format!("{:<4} ", e.cpu);
        }
        line += &format!("{:>3} {}", e.retval, e.args_text(s.quote));
        writeln!(out, "{line}")?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(args: &[&str], truncated: bool) -> Exec {
        Exec {
            ts_ns: 0,
            cgroup_id: 0,
            comm: "true".into(),
            pid: 1,
            ppid: 0,
            pcomm: Name::default(),
            uid: 0,
            cpu: 0,
            retval: 0,
            args: args.iter().map(|a| a.to_string()).collect(),
            truncated,
            syscall: "execve",
        }
    }

    #[test]
    fn a_scripts_interpreter_arguments_are_left_out() {
        let image = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        // `./s.sh one two` with `#!/bin/sh -e`: the kernel's argv is /bin/sh -e ./s.sh one two.
        assert_eq!(callers_args(image("/bin/sh -e ./s.sh one two"), 3, 5), image("./s.sh one two"));
        // No interpreter: the same list.
        assert_eq!(callers_args(image("/bin/true a b"), 3, 3), image("/bin/true a b"));
        // An empty argv (the kernel adds an empty argv[0]), and an unknown argc.
        assert_eq!(callers_args(image(""), 0, 1), image(""));
        let unknown = bpf::consts::ARGC_UNKNOWN as u32;
        assert_eq!(callers_args(image("/bin/sh ./s.sh x"), unknown, 3), image("/bin/sh ./s.sh x"));
    }

    #[test]
    fn args_are_joined_quoted_and_marked_when_cut() {
        assert_eq!(exec(&["/bin/echo", "a b", "c\nd"], false).args_text(false), "/bin/echo a b c\\nd");
        assert_eq!(exec(&["/bin/echo", "say \"hi\""], true).args_text(true), "\"/bin/echo\" \"say \\\"hi\\\"\" ...");
    }
}
