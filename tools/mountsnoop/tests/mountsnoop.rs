// SPDX-License-Identifier: Apache-2.0 OR MIT
//! mountsnoop against a helper (tests/mounter.c) that works in a mount namespace of its own (every mount private,
//! so the host never sees them): it mounts a tmpfs on its own directory with known flags and data, unmounts it,
//! makes a mount that fails (ENOENT), then mounts a tmpfs again with the new API (fsopen, two fsconfig, fsmount,
//! move_mount) and detaches it; then it exits while the tool still traces. Every run filters by the helper's PID,
//! a process started fresh for the test. Each call must appear once, in order, with its arguments, decoded flags,
//! result and the helper's mount namespace; Debian's libbpf-tools mountsnoop (mount and umount only in its
//! version) runs beside ours and must print the same lines for them.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdout, Command, Stdio};
use std::time::Duration;

use corebpf_tests::anchor::Anchor;
use corebpf_tests::*;
use serde_json::{json, Value};

const TOOL: &str = env!("CARGO_PKG_NAME");

struct Helper {
    child: KillOnDrop,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    comm: String,
    /// Its directory, where it mounts.
    dir: String,
    /// Its mount namespace's inode number.
    mnt_ns: u64,
}

/// What the helper got: the descriptors of fsopen and fsmount.
struct Fds {
    fsfd: i64,
    mfd: i64,
}

impl Helper {
    /// Starts the helper and waits until it is in its own mount namespace, ready to mount.
    fn start() -> Helper {
        let exe = build_c_helper("mounter", include_str!("mounter.c"), &["-O1"]);
        let mut child = KillOnDrop(
            Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start the helper"),
        );
        let pid = child.0.id();
        let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let dir = line.strip_prefix("ready ").unwrap_or_else(|| panic!("the helper said {line:?}")).trim().to_string();
        let mnt_ns = ns_inode(&format!("/proc/{pid}/ns/mnt"));
        assert_ne!(mnt_ns, ns_inode("/proc/self/ns/mnt"), "the helper has a mount namespace of its own");
        let comm = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
        Helper { child, stdout, pid, comm, dir, mnt_ns }
    }

    /// Lets the helper make its calls and waits for it to exit (each call's result checked by the helper).
    fn run(&mut self) -> Fds {
        self.child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
        let fds: Vec<i64> = line.split_whitespace().map(|p| p.parse().unwrap()).collect();
        Fds { fsfd: fds[0], mfd: fds[1] }
    }

    /// The helper's calls as mountsnoop writes them, in order.
    fn calls(&self, fds: &Fds) -> Vec<String> {
        let (dir, fsfd, mfd) = (&self.dir, fds.fsfd, fds.mfd);
        vec![
            format!(
                "mount(\"corebpf-test\", \"{dir}\", \"tmpfs\", MS_NOSUID | MS_NODEV | MS_NOEXEC, \"size=1m,mode=0700\") = 0"
            ),
            format!("umount(\"{dir}\", 0x0) = 0"),
            format!("mount(\"none\", \"{dir}/missing\", \"tmpfs\", 0x0, \"\") = -ENOENT"),
            format!("fsopen(\"tmpfs\", FSOPEN_CLOEXEC) = {fsfd}"),
            format!("fsconfig({fsfd}, \"FSCONFIG_SET_STRING\", \"size\", \"2m\", 0) = 0"),
            format!("fsconfig({fsfd}, \"FSCONFIG_CMD_CREATE\", \"\", \"\", 0) = 0"),
            format!("fsmount({fsfd}, \"FSMOUNT_CLOEXEC\", \"MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC\") = {mfd}"),
            format!("move_mount({mfd}, \"\", AT_FDCWD, \"{dir}\", \"MOVE_MOUNT_F_EMPTY_PATH\") = 0"),
            format!("umount(\"{dir}\", MNT_DETACH) = 0"),
        ]
    }
}

/// The inode number of a namespace link (`mnt:[4026531841]`).
fn ns_inode(link: &str) -> u64 {
    let target = std::fs::read_link(link).unwrap().to_string_lossy().into_owned();
    target.trim_start_matches("mnt:[").trim_end_matches(']').parse().unwrap()
}

fn start(args: &[&str]) -> Running {
    let mut run = Running::start(TOOL, args);
    run.wait_attached(Duration::from_secs(20));
    run
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The rows of `COMM PID TID MNT_NS CALL` output for `pid`, as (comm, pid, tid, mnt_ns, call): the columns are
/// "%-16s %-7d %-7d %-11u ", so the call starts at byte 45.
fn rows(text: &str, pid: u32) -> Vec<(String, String, String, String, String)> {
    text.lines()
        .filter(|l| l.len() > 45 && l.is_char_boundary(45) && l[..45].split_whitespace().count() == 4)
        .map(|l| {
            let f: Vec<String> = l[..45].split_whitespace().map(str::to_string).collect();
            (f[0].clone(), f[1].clone(), f[2].clone(), f[3].clone(), l[45..].to_string())
        })
        .filter(|r| r.1 == pid.to_string())
        .collect()
}

#[test]
fn every_call_with_flags_and_result_as_libbpf_tools_sees_them() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let anchor = Anchor::start("mountsnoop", &["-p", &p], "COMM");
    let text = start(&["-p", &p]);
    let fds = h.run();
    let text = stop(text).stdout;
    let seen = anchor.finish();

    let header = format!("{:<16} {:<7} {:<7} {:<11} CALL", "COMM", "PID", "TID", "MNT_NS");
    assert_eq!(text.lines().next(), Some(header.as_str()));
    let ours = rows(&text, h.pid);
    let ns = h.mnt_ns.to_string();
    for (comm, _, tid, mnt_ns, _) in &ours {
        assert_eq!((comm, tid, mnt_ns), (&h.comm, &p, &ns), "{text}");
    }
    let calls: Vec<String> = ours.iter().map(|r| r.4.clone()).collect();
    assert_eq!(calls, h.calls(&fds), "{text}");
    // The columns line up as libbpf-tools' "%-16s %-7d %-7d %-11u %s".
    let first = text.lines().nth(1).unwrap();
    assert_eq!(first, format!("{:<16} {:<7} {:<7} {:<11} {}", h.comm, p, p, ns, calls[0]));

    // libbpf-tools 0.26 traces mount and umount only, and names umount's flags as mount's (MNT_DETACH, 2, as
    // MS_NOSUID): the first three lines must be ours, word for word, and the fourth ours up to its flags.
    let theirs: Vec<String> = rows(&seen, h.pid).into_iter().map(|r| r.4).collect();
    assert_eq!(theirs.len(), 4, "libbpf-tools printed:\n{seen}");
    assert_eq!(theirs[..3], calls[..3], "libbpf-tools printed:\n{seen}");
    assert!(theirs[3].starts_with(&format!("umount(\"{}\", ", h.dir)) && theirs[3].ends_with(") = 0"), "{seen}");
}

/// BCC's -P: PCOMM and PPID after TID, the helper's parent being this test (text and JSON).
#[test]
fn parent_process_columns() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let run = start(&["-P", "-p", &p]);
    let fds = h.run();
    let text = stop(run).stdout;
    let header =
        format!("{:<16} {:<7} {:<7} {:<16} {:<7} {:<11} CALL", "COMM", "PID", "TID", "PCOMM", "PPID", "MNT_NS");
    assert_eq!(text.lines().next(), Some(header.as_str()), "{text}");
    let me = std::process::id();
    // The parent task is the thread that started the helper (this test's thread), in this process.
    let parent: String = std::fs::read_to_string("/proc/thread-self/comm").unwrap().trim_end().to_string();
    let want: Vec<String> = h
        .calls(&fds)
        .iter()
        .map(|call| format!("{:<16} {:<7} {:<7} {:<16} {:<7} {:<11} {call}", h.comm, p, p, parent, me, h.mnt_ns))
        .collect();
    let got: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(got, want, "{text}");

    let mut h = Helper::start();
    let p = h.pid.to_string();
    let run = start(&["--parent_process", "--json", "-p", &p]);
    h.run();
    let recs = json_lines(&stop(run).stdout);
    assert_eq!(recs.len(), 9, "{recs:?}");
    assert!(recs.iter().all(|r| r["ppid"] == me && r["pcomm"] == parent.as_str()), "{recs:?}");
}

#[test]
fn json_has_every_argument_and_the_namespace() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let run = start(&["--json", "-p", &p]);
    let fds = h.run();
    let recs = json_lines(&stop(run).stdout);
    let dir = h.dir.as_str();
    let (fsfd, mfd) = (fds.fsfd, fds.mfd);
    let strip = |r: &Value| {
        let mut r = r.clone();
        let o = r.as_object_mut().unwrap();
        for k in ["time", "latency_ns", "pid", "tid", "comm", "mnt_ns"] {
            assert!(o.remove(k).is_some(), "no {k} in {o:?}");
        }
        r
    };
    let got: Vec<Value> = recs.iter().map(strip).collect();
    let want = vec![
        json!({"call": "mount", "source": "corebpf-test", "target": dir, "fs": "tmpfs", "flags": 14,
               "flag_names": ["MS_NOSUID", "MS_NODEV", "MS_NOEXEC"], "data": "size=1m,mode=0700", "ret": 0}),
        json!({"call": "umount", "target": dir, "flags": 0, "flag_names": [], "ret": 0}),
        json!({"call": "mount", "source": "none", "target": format!("{dir}/missing"), "fs": "tmpfs", "flags": 0,
               "flag_names": [], "data": "", "ret": -libc::ENOENT, "errno": "ENOENT"}),
        json!({"call": "fsopen", "fs": "tmpfs", "flags": 1, "flag_names": ["FSOPEN_CLOEXEC"], "ret": fsfd}),
        json!({"call": "fsconfig", "fd": fsfd, "cmd": 1, "cmd_name": "FSCONFIG_SET_STRING", "key": "size",
               "value": "2m", "aux": 0, "ret": 0}),
        json!({"call": "fsconfig", "fd": fsfd, "cmd": 6, "cmd_name": "FSCONFIG_CMD_CREATE", "key": "", "value": "",
               "aux": 0, "ret": 0}),
        json!({"call": "fsmount", "fs_fd": fsfd, "flags": 1, "flag_names": ["FSMOUNT_CLOEXEC"], "attr_flags": 12,
               "attr_flag_names": ["MOUNT_ATTR_NODEV", "MOUNT_ATTR_NOEXEC"], "ret": mfd}),
        json!({"call": "move_mount", "from_dfd": mfd, "from_pathname": "", "to_dfd": -100, "to_pathname": dir,
               "flags": 4, "flag_names": ["MOVE_MOUNT_F_EMPTY_PATH"], "ret": 0}),
        json!({"call": "umount", "target": dir, "flags": 2, "flag_names": ["MNT_DETACH"], "ret": 0}),
    ];
    assert_eq!(got, want);
    for r in &recs {
        assert_eq!((r["pid"].as_u64(), r["tid"].as_u64()), (Some(h.pid as u64), Some(h.pid as u64)), "{r}");
        assert_eq!(r["comm"], h.comm.as_str());
        assert_eq!(r["mnt_ns"], h.mnt_ns, "the helper's own mount namespace: {r}");
        assert!(r["latency_ns"].as_u64().unwrap() > 0, "{r}");
        assert!(r["time"].as_str().unwrap().contains('T'), "{r}");
    }
}

#[test]
fn detailed_mode_and_timestamps() {
    let mut h = Helper::start();
    let p = h.pid.to_string();
    let detailed = start(&["-d", "-t", "-p", &p]);
    let stamped = start(&["-t", "-p", &p]);
    let fds = h.run();
    let detailed = stop(detailed).stdout;
    let stamped = stop(stamped).stdout;

    // -t: a TIME column first (HH:MM:SS), the rest as without it.
    let mut lines = stamped.lines();
    let header = format!("{:<8} {:<16} {:<7} {:<7} {:<11} CALL", "TIME", "COMM", "PID", "TID", "MNT_NS");
    assert_eq!(lines.next(), Some(header.as_str()));
    let calls = h.calls(&fds);
    let ns = h.mnt_ns.to_string();
    let mut n = 0;
    for (line, call) in lines.zip(&calls) {
        let (time, rest) = line.split_at(9);
        assert!(time.len() == 9 && time.as_bytes()[2] == b':' && time.as_bytes()[5] == b':', "{line}");
        assert_eq!(rest, format!("{:<16} {:<7} {:<7} {:<11} {}", h.comm, p, p, ns, call));
        n += 1;
    }
    assert_eq!(n, calls.len(), "{stamped}");

    // -d: blocks of one field a line, indented under a time line with -t, each ended by a blank line.
    let blocks: Vec<Vec<&str>> =
        detailed.split("\n\n").filter(|b| !b.trim().is_empty()).map(|b| b.lines().collect()).collect();
    assert_eq!(blocks.len(), 9, "{detailed}");
    for b in &blocks {
        assert!(b[0].len() == 9 && b[0].ends_with(' ') && b[0].as_bytes()[2] == b':', "{b:?}");
        assert_eq!(
            b[1..4],
            [format!("    PID:    {p}"), format!("    TID:    {p}"), format!("    COMM:   {}", h.comm)]
        );
        assert!(b[6].starts_with("    LAT:    ") && b[6].ends_with("us"), "{b:?}");
        assert_eq!(b[7], format!("    MNT_NS: {ns}"));
    }
    let d = &h.dir;
    let tail = |i: usize| -> Vec<String> {
        let b = &blocks[i];
        [&b[4..6], &b[8..]].concat().iter().map(|s| s.to_string()).collect()
    };
    assert_eq!(
        tail(0),
        [
            "    OP:     MOUNT",
            "    RET:    0",
            "    FS:     tmpfs",
            "    SOURCE: corebpf-test",
            &format!("    TARGET: {d}"),
            "    DATA:   size=1m,mode=0700",
            "    FLAGS:  MS_NOSUID | MS_NODEV | MS_NOEXEC",
        ]
    );
    assert_eq!(tail(2)[1], "    RET:    -ENOENT");
    assert_eq!(
        tail(6),
        [
            "    OP:     FSMOUNT".to_string(),
            format!("    RET:    {}", fds.mfd),
            format!("    FS_FD:       {}", fds.fsfd),
            "    FLAGS:       FSMOUNT_CLOEXEC".to_string(),
            "    ATTR_FLAGS:  MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC".to_string(),
        ]
    );
    assert_eq!(
        tail(7),
        [
            "    OP:     MOVE_MOUNT".to_string(),
            "    RET:    0".to_string(),
            format!("    FROM_DFD:       {}", fds.mfd),
            "    FROM_PATHNAME:  ".to_string(),
            "    TO_DFD:         -100".to_string(),
            format!("    TO_PATHNAME:    {d}"),
            "    FLAGS:          MOVE_MOUNT_F_EMPTY_PATH".to_string(),
        ]
    );
    assert_eq!(
        tail(8),
        [
            "    OP:     UMOUNT".to_string(),
            "    RET:    0".into(),
            format!("    TARGET: {d}"),
            "    FLAGS:  MNT_DETACH".into()
        ]
    );
}

#[test]
fn pid_filter_excludes_other_processes() {
    let mut h = Helper::start();
    let mut other = Helper::start();
    let p = h.pid.to_string();
    let mine = start(&["--json", "-p", &p]);
    let fds = h.run();
    other.run();
    let recs = json_lines(&stop(mine).stdout);
    assert_eq!(recs.len(), h.calls(&fds).len(), "the other helper's calls are not shown: {recs:?}");
    assert!(recs.iter().all(|r| r["pid"] == h.pid));
}

#[test]
fn bad_input_is_one_line() {
    for (args, code, needle) in [
        (&["-p", "abc"][..], 2, "abc"),
        (&["-p", "0"][..], 2, "PID"),
        (&["-d", "-j"][..], 2, "cannot be used with"),
        (&["-p", "4194304"][..], 1, "4194304"),
    ] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.trim_end().lines().count(), 1, "{args:?}: one line:\n{}", done.stderr);
        assert!(done.stderr.contains(needle), "{args:?}: {}", done.stderr);
        assert_eq!(done.stdout, "", "{args:?}");
    }
}
