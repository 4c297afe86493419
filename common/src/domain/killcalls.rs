// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The user-space half of `bpf/include/killcalls.bpf.h`, shared by killsnoop and sigsnoop: the signal record
//! ([`SignalRecord`], decoded into [`SignalEvent`]), the signal-set filter (`-s`, [`SignalSet`]) written into the
//! BPF side's `.rodata`, and the six kill/tkill/tgkill syscall tracepoint programs: turned on or off before load
//! ([`set_autoload`]) and attached exits first ([`attach`]).

use anyhow::Result;
use libbpf_rs::{Link, Object, OpenObject};
use serde::Serialize;

use crate::attach::features::Attach;
use crate::attach::loader::attach_tracepoint;
use crate::attach::maps::{c_string, from_bytes};
use crate::domain::signals;
use crate::domain::syscalls::errno_name;

/// `struct signal_event`'s `source`: the kernel generated the signal (sigsnoop's default), or one of the calls.
pub const SRC_GENERATE: u8 = 0;
pub const SRC_KILL: u8 = 1;
pub const SRC_TKILL: u8 = 2;
pub const SRC_TGKILL: u8 = 3;

/// `struct signal_event` of killcalls.bpf.h, field for field. A tool checks at compile time that its skeleton's
/// `types::signal_event` has the same size ([`RECORD_SIZE`]).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SignalRecord {
    pub ts_ns: u64,
    pub cgroup_id: u64,
    pub pid: u32,
    pub tid: u32,
    pub tpid: i32,
    pub tgid: i32,
    pub sig: i32,
    pub ret: i32,
    pub code: i32,
    pub source: u8,
    pub group: u8,
    pub has_tcomm: u8,
    pub _pad: u8,
    pub comm: [u8; 16],
    pub tcomm: [u8; 16],
}

// SAFETY: a #[repr(C)] struct of integers and byte arrays, every bit pattern valid.
unsafe impl plain::Plain for SignalRecord {}

/// The size of `struct signal_event`.
pub const RECORD_SIZE: usize = std::mem::size_of::<SignalRecord>();

/// The names of signal_generate's results (the kernel's enum trace_signal_result).
const RESULTS: [&str; 5] = ["delivered", "ignored", "already_pending", "overflow_fail", "lose_info"];

/// One signal sent (or one kill/tkill/tgkill call), decoded from the BPF record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalEvent {
    /// What saw it: `generate` (the kernel generated it), or the system call: `kill`, `tkill`, `tgkill`.
    pub source: &'static str,
    /// The sender's cgroup v2 ID, which names its container.
    #[serde(skip)]
    pub cgroup_id: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub sig: i32,
    /// The target: the thread signalled, or the PID argument of the call.
    pub tpid: i32,
    /// The target's process (signal_generate through tp_btf/raw_tp, tgkill's first argument), if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tgid: Option<i32>,
    /// The target's name, if the kernel generated the signal and the tool looked.
    pub tcomm: Option<String>,
    /// signal_generate's result (0 delivered, 1 ignored, 2 already pending, 3 overflow, 4 info lost), or the
    /// call's return value (0, or a negative errno).
    pub result: i32,
    /// The result in words: a result name, `ok`, or the errno name of a failed call.
    pub result_name: String,
    /// signal_generate: sent to the whole thread group, and its si_code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
}

impl SignalEvent {
    pub fn from_bytes(data: &[u8]) -> SignalEvent {
        SignalEvent::from_record(&from_bytes(data))
    }

    pub fn from_record(e: &SignalRecord) -> SignalEvent {
        let generate = e.source == SRC_GENERATE;
        let result_name = if generate {
            RESULTS.get(e.ret as usize).map_or_else(|| e.ret.to_string(), |s| s.to_string())
        } else if e.ret < 0 {
            errno_name(-e.ret).map_or_else(|| e.ret.to_string(), str::to_string)
        } else {
            "ok".to_string()
        };
        SignalEvent {
            source: match e.source {
                SRC_KILL => "kill",
                SRC_TKILL => "tkill",
                SRC_TGKILL => "tgkill",
                _ => "generate",
            },
            cgroup_id: e.cgroup_id,
            pid: e.pid,
            tid: e.tid,
            comm: c_string(&e.comm),
            sig: e.sig,
            tpid: e.tpid,
            tgid: (e.tgid >= 0).then_some(e.tgid),
            tcomm: (e.has_tcomm != 0).then(|| c_string(&e.tcomm)),
            result: e.ret,
            result_name,
            group: generate.then_some(e.group != 0),
            code: generate.then_some(e.code),
        }
    }
}

/// The SIG column: the number, or with `names` the name (`SIGKILL`, `SIGRTMIN+2`; 0 stays `0`).
pub fn sig_column(sig: i32, names: bool) -> String {
    match (names, u32::try_from(sig).ok().and_then(signals::name)) {
        (true, Some(name)) => format!("SIG{name}"),
        _ => sig.to_string(),
    }
}

/// A set of signals from `-s`: numbers or names separated by commas; signal 0 (the existence probe of
/// `kill(pid, 0)`) only where the tool allows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignalSet {
    /// Bit `n - 1` for signal `n` (1 to 64).
    pub mask: u64,
    /// Signal 0 is in the set.
    pub zero: bool,
}

impl SignalSet {
    /// Parses `9,TERM,SIGUSR1` (and `0` if `allow_zero`), or says which item is not a signal.
    pub fn parse(s: &str, allow_zero: bool) -> Result<SignalSet, String> {
        s.split(',').try_fold(SignalSet::default(), |mut set, one| {
            let one = one.trim();
            match signals::parse(one) {
                Some(n) => set.mask |= 1 << (n - 1),
                None if allow_zero && one == "0" => set.zero = true,
                None => {
                    let low = if allow_zero { 0 } else { 1 };
                    return Err(format!("'{one}' is not a signal (a number from {low} to {} or a name)", signals::MAX));
                }
            }
            Ok(set)
        })
    }
}

/// The calls, by tracepoint name, with their BPF programs' names: (`kill`, `kill_enter`, `kill_exit`), ...
const CALLS: [(&str, &str, &str); 3] = [
    ("kill", "kill_enter", "kill_exit"),
    ("tkill", "tkill_enter", "tkill_exit"),
    ("tgkill", "tgkill_enter", "tgkill_exit"),
];

/// Turns the six syscall programs on or off before the object is loaded.
pub fn set_autoload(object: &mut OpenObject, on: bool) {
    for mut prog in object.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        if CALLS.iter().any(|(_, enter, exit)| name == *enter || name == *exit) {
            prog.set_autoload(on);
        }
    }
}

/// Attaches the six loaded syscall programs of `object`: every exit first, so that no call is left in flight by
/// an entry seen without its exit.
pub fn attach(object: &Object) -> Result<Vec<Link>> {
    let mut links = Vec::new();
    for exits in [true, false] {
        for (call, enter, exit) in CALLS {
            let (prog_name, point) = if exits { (exit, "sys_exit") } else { (enter, "sys_enter") };
            let prog = object
                .progs_mut()
                .find(|p| p.name().to_string_lossy() == prog_name)
                .ok_or_else(|| anyhow::anyhow!("the BPF object has no program {prog_name}"))?;
            links.push(attach_tracepoint(&prog, "syscalls", &format!("{point}_{call}"), Attach::Tracepoint)?);
        }
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_layout_matches_the_c_struct() {
        // 2 * 8 + 7 * 4 + 4 * 1 + 2 * 16 bytes, no padding.
        assert_eq!(RECORD_SIZE, 80);
    }

    #[test]
    fn signal_sets() {
        assert_eq!(
            SignalSet::parse("9,TERM,sigusr1", false),
            Ok(SignalSet { mask: 1 << 8 | 1 << 14 | 1 << 9, zero: false })
        );
        assert_eq!(SignalSet::parse("0,64", true), Ok(SignalSet { mask: 1 << 63, zero: true }));
        assert!(SignalSet::parse("0", false).unwrap_err().contains("from 1 to 64"));
        assert!(SignalSet::parse("9,NOPE", true).unwrap_err().contains("'NOPE'"));
        assert!(SignalSet::parse("", true).is_err());
    }

    #[test]
    fn decoding_a_failed_call() {
        let mut r =
            SignalRecord { pid: 7, tid: 8, tpid: 99, tgid: -1, ret: -3, source: SRC_KILL, ..Default::default() };
        r.comm[..4].copy_from_slice(b"bash");
        let e = SignalEvent::from_record(&r);
        assert_eq!(
            (e.source, e.comm.as_str(), e.result_name.as_str(), e.tgid, e.tcomm),
            ("kill", "bash", "ESRCH", None, None)
        );
        assert_eq!((e.group, e.code), (None, None));
        assert_eq!(sig_column(10, true), "SIGUSR1");
        assert_eq!(sig_column(0, true), "0");
        assert_eq!(sig_column(34, true), "SIGRTMIN+2");
        assert_eq!(sig_column(34, false), "34");
    }
}
