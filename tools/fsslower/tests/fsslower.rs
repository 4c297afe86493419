// SPDX-License-Identifier: Apache-2.0 OR MIT
//! fsslower against a helper whose file system operations are known (tests/fsops.c), filtered by its PID (-p) with
//! -m 0 (every operation, however fast: no timing is asserted): its lines for its own file are exactly its 2
//! opens, 4 writes, 2 fsyncs and 2 reads, in order, with their bytes and offsets, in text, CSV and JSON; on ext4
//! (the host's root), and on xfs and btrfs file systems of the test's own (loop devices); -t xfs leaves out the
//! same helper on ext4; a threshold no operation reaches shows none; the BCC names (ext4slower, xfsslower) pick
//! the file system; bad input is one line; SIGINT, SIGTERM, SIGHUP and a closed pipe end it cleanly. (Debian's
//! libbpf-tools fsslower needs fentry or kprobes, which this host refuses, so it is no anchor here.)

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::fsmount::MountedFs;
use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "fsslower";
const HEADER: &str = "TIME     COMM             PID     T BYTES   OFF_KB   LAT(ms) FILENAME";

/// The helper's operations in order: (T, BYTES, offset in bytes).
const EXPECTED: [(&str, &str, u64); 10] = [
    ("O", "0", 0),
    ("W", "8192", 0),
    ("W", "8192", 8192),
    ("W", "8192", 16384),
    ("W", "100", 0),
    ("F", "LL_MAX", 0),
    ("F", "LL_MAX", 0),
    ("O", "0", 0),
    ("R", "5000", 10240),
    ("R", "1000", 20480),
];

/// A helper started on `file`, waiting for its "go".
struct Helper {
    child: KillOnDrop,
    pid: u32,
    comm: String,
}

fn helper(file: &Path) -> Helper {
    let exe = build_c_helper("fsops", include_str!("fsops.c"), &["-O1"]);
    let child =
        Command::new(&exe).arg(file).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start the helper");
    let pid = child.id();
    wait_sleeping(pid, Duration::from_secs(10));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
    Helper { child: KillOnDrop(child), pid, comm }
}

/// A file of the test's own in `dir` (the root file system's /var/tmp unless given), removed when dropped.
fn scratch_in(dir: Option<&Path>, tag: &str) -> ScratchFile {
    match dir {
        Some(dir) => ScratchFile(dir.join(format!("{tag}-{}", std::process::id()))),
        None => ScratchFile::new(tag),
    }
}

struct Traced {
    done: Finished,
    pid: u32,
    comm: String,
    name: String,
}

/// Runs the tool (`run`, started with `args` then `-p` the helper's PID) while the helper works on a file in
/// `dir`; stops it with SIGINT once the helper is done.
fn trace_with(start: impl FnOnce(&[&str]) -> Running, args: &[&str], dir: Option<&Path>, ready: &str) -> Traced {
    let file = scratch_in(dir, "fss");
    let mut h = helper(&file.0);
    let pid = h.pid.to_string();
    let mut ours: Vec<&str> = args.to_vec();
    ours.extend(["-p", pid.as_str()]);
    let mut run = start(&ours);
    if ready.is_empty() {
        run.wait_attached(Duration::from_secs(30));
    } else {
        run.wait_for_line(ready, Duration::from_secs(30));
    }
    go_and_wait(&mut h.child.0);
    std::thread::sleep(Duration::from_millis(200));
    run.signal(libc::SIGINT);
    let name = file.0.file_name().unwrap().to_string_lossy().into_owned();
    Traced { done: run.finish(Duration::from_secs(20)), pid: h.pid, comm: h.comm, name }
}

fn trace(args: &[&str], dir: Option<&Path>, env: &[(&str, &str)]) -> Traced {
    let ready = if args.contains(&"-j") || args.contains(&"-c") { "" } else { "Tracing" };
    trace_with(|a| Running::start_with_env(TOOL, a, env), args, dir, ready)
}

/// The text lines of `pid` on `name`: (T, BYTES, OFF_KB), checking the other columns on the way.
fn text_rows(t: &Traced) -> Vec<(String, String, u64)> {
    t.done
        .stdout
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 8 || f[2] != t.pid.to_string() || f[7] != t.name {
                return None;
            }
            assert_eq!(f[1], t.comm, "{line}");
            assert!(f[6].parse::<f64>().is_ok(), "LAT(ms): {line}");
            Some((f[3].to_string(), f[4].to_string(), f[5].parse().unwrap()))
        })
        .collect()
}

fn expected_text() -> Vec<(String, String, u64)> {
    EXPECTED.iter().map(|(t, b, off)| (t.to_string(), b.to_string(), off / 1024)).collect()
}

fn exact_lines(fs: &str, dir: Option<&Path>, env: &[(&str, &str)]) {
    let t = trace(&["-t", fs, "-m", "0"], dir, env);
    t.done.assert_success();
    let mut lines = t.done.stdout.lines();
    assert_eq!(lines.next(), Some(format!("Tracing {fs} operations... Hit Ctrl-C to end.").as_str()));
    assert_eq!(lines.next(), Some(HEADER));
    assert_eq!(text_rows(&t), expected_text(), "{}", t.done.stdout);
    t.done.assert_no_programs_left();
}

#[test]
fn exact_lines_of_the_helpers_file_on_ext4() {
    exact_lines("ext4", None, &[]);
}

#[test]
fn exact_lines_forced_raw_tp() {
    exact_lines("ext4", None, &[("COREBPF_ATTACH", "raw_tp")]);
}

/// The system call path attaches two programs, at raw_syscalls' sys_enter and sys_exit, whatever the number of
/// calls it times, and both are gone when the tool ends: a classic syscalls: tracepoint pair per call made 32 links,
/// each of whose detach waited for an RCU grace period, and Ctrl-C took over a second to end it.
#[test]
fn the_system_call_path_holds_two_links() {
    assert_holds_links(TOOL, &["-t", "ext4"], "Tracing ext4", &["tp_btf", "raw_tp"], 2);
}

#[test]
fn exact_lines_on_xfs() {
    let mounted = MountedFs::new("xfs", "fsslower");
    exact_lines("xfs", Some(&mounted.dir), &[]);
}

#[test]
fn exact_lines_on_btrfs() {
    let mounted = MountedFs::new("btrfs", "fsslower");
    exact_lines("btrfs", Some(&mounted.dir), &[]);
}

#[test]
fn another_file_system_is_left_out() {
    // The helper works on ext4; -t xfs must show none of it (the loop file system makes sure xfs exists).
    let _mounted = MountedFs::new("xfs", "fsslower-other");
    let t = trace(&["-t", "xfs", "-m", "0"], None, &[]);
    t.done.assert_success();
    assert_eq!(text_rows(&t), [], "{}", t.done.stdout);
    assert_eq!(t.done.stdout.lines().count(), 2, "{}", t.done.stdout);
}

#[test]
fn a_threshold_no_operation_reaches_shows_none() {
    let t = trace(&["-t", "ext4", "-m", "100000"], None, &[]);
    t.done.assert_success();
    assert_eq!(
        t.done.stdout.lines().next(),
        Some("Tracing ext4 operations slower than 100000 ms... Hit Ctrl-C to end.")
    );
    assert_eq!(text_rows(&t), [], "{}", t.done.stdout);
}

#[test]
fn csv_lines_are_exact() {
    let t = trace(&["-t", "ext4", "-m", "0", "-c"], None, &[]);
    t.done.assert_success();
    assert_eq!(t.done.stdout.lines().next(), Some("ENDTIME_ns,TASK,PID,TYPE,BYTES,OFFSET_b,LATENCY_us,FILE"));
    let pid = t.pid.to_string();
    let rows: Vec<(String, String, u64)> = t
        .done
        .stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() == 8 && f[2] == pid && f[7] == t.name).then(|| {
                assert_eq!(f[1], t.comm);
                assert!(f[0].parse::<u64>().unwrap() > 0 && f[6].parse::<u64>().is_ok(), "{l}");
                (f[3].to_string(), f[4].to_string(), f[5].parse().unwrap())
            })
        })
        .collect();
    let expected: Vec<_> = EXPECTED.iter().map(|(t, b, off)| (t.to_string(), b.to_string(), *off)).collect();
    assert_eq!(rows, expected, "{}", t.done.stdout);
}

#[test]
fn json_lines_are_exact() {
    let t = trace(&["-t", "ext4", "-m", "0", "-j"], None, &[]);
    t.done.assert_success();
    let lines: Vec<_> = json_lines(&t.done.stdout)
        .into_iter()
        .filter(|l| l["pid"].as_u64() == Some(t.pid.into()) && l["file"] == t.name.as_str())
        .collect();
    let ops: Vec<(String, i64, i64)> = lines
        .iter()
        .map(|l| {
            assert_eq!(l["comm"], t.comm.as_str());
            assert_eq!(l["fs"], "ext4");
            assert_eq!(l["tid"], l["pid"]);
            assert!(l["latency_ns"].as_u64().unwrap() > 0, "{l}");
            (l["type"].as_str().unwrap().to_string(), l["bytes"].as_i64().unwrap(), l["offset"].as_i64().unwrap())
        })
        .collect();
    let expected: Vec<(String, i64, i64)> =
        EXPECTED.iter().map(|(t, b, off)| (t.to_string(), b.parse().unwrap_or(i64::MAX), *off as i64)).collect();
    assert_eq!(ops, expected, "{}", t.done.stdout);
    let names: Vec<&str> = lines.iter().map(|l| l["op"].as_str().unwrap()).collect();
    assert_eq!(names[..2], ["open", "write"]);
    assert_eq!((names[5], names[8]), ("fsync", "read"));
}

/// The crate's own binary, started under another name (`ext4slower`), as an installed link would start it.
fn start_named(name: &str, args: &[&str]) -> Running {
    let wrapper = PathBuf::from(env!("CARGO_BIN_EXE_fsslower"));
    let mut cmd = Command::new(&wrapper);
    cmd.arg0(name).args(args);
    Running::from_command(name, cmd)
}

/// Under BCC's names the command line is BCC's (issue 53, item 5): the threshold is positional (`ext4slower 0`,
/// BCC's headline usage) and `-j` is comma-separated values, as in BCC; `--json` is JSON under every name.
#[test]
fn bcc_names_pick_the_file_system() {
    let t = trace_with(|a| start_named("ext4slower", a), &["0"], None, "Tracing");
    t.done.assert_success();
    assert!(t.done.stdout.starts_with("Tracing ext4 operations... Hit Ctrl-C to end.\n"), "{}", t.done.stdout);
    assert_eq!(text_rows(&t), expected_text(), "{}", t.done.stdout);
    let t = trace_with(|a| start_named("ext4slower", a), &["-j", "0"], None, "");
    t.done.assert_success();
    assert_eq!(t.done.stdout.lines().next(), Some("ENDTIME_ns,TASK,PID,TYPE,BYTES,OFFSET_b,LATENCY_us,FILE"));
    let pid = t.pid.to_string();
    let csv = t.done.stdout.lines().filter(|l| l.split(',').nth(2) == Some(pid.as_str())).count();
    assert_eq!(csv, EXPECTED.len(), "{}", t.done.stdout);
    let t = trace_with(|a| start_named("ext4slower", a), &["--json", "0"], None, "");
    t.done.assert_success();
    let json = json_lines(&t.done.stdout).into_iter().filter(|l| l["pid"].as_u64() == Some(t.pid.into())).count();
    assert_eq!(json, EXPECTED.len(), "{}", t.done.stdout);
    // A threshold no operation of the helper reaches (an hour).
    let t = trace_with(|a| start_named("ext4slower", a), &["3600000"], None, "Tracing");
    assert!(t.done.stdout.starts_with("Tracing ext4 operations slower than 3600000 ms"), "{}", t.done.stdout);
    assert_eq!(text_rows(&t), [], "{}", t.done.stdout);
    let mounted = MountedFs::new("xfs", "xfsslower");
    let t = trace_with(|a| start_named("bpf-xfsslower", a), &["0"], Some(&mounted.dir), "Tracing");
    t.done.assert_success();
    assert!(t.done.stdout.starts_with("Tracing xfs operations... Hit Ctrl-C to end.\n"), "{}", t.done.stdout);
    assert_eq!(text_rows(&t), expected_text(), "{}", t.done.stdout);
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&[][..], "no file system to trace", 2),
        (&["-t", "zfs"][..], "invalid value", 2),
        // The limit said is the real one: milliseconds that fit in nanoseconds (u64).
        (&["-t", "ext4", "-m", "x"][..], "a whole number from 0 to 18446744073709 is expected", 2),
        (&["-t", "ext4", "-m", "18446744073710"][..], "a whole number from 0 to 18446744073709 is expected", 2),
        (&["-t", "ext4", "-d", "0"][..], "not a number of seconds", 2),
        (&["-t", "ext4", "-c", "-j"][..], "cannot be used with", 2),
        (&["-t", "ext4", "-p", "999999999"][..], "no process with PID", 1),
    ] {
        assert_refused(TOOL, args, code, what);
    }
    // nfs is a module this kernel may not have loaded: one line and exit 1, or it runs.
    if !std::fs::read_to_string("/proc/filesystems").unwrap().contains("\tnfs") {
        assert_refused(TOOL, &["-t", "nfs"], 1, "this kernel has no nfs file system");
    }
}

#[test]
fn duration_ends_the_run() {
    let run = Running::start(TOOL, &["-t", "ext4", "-d", "1", "-p", &std::process::id().to_string()]);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    assert!(done.stdout.starts_with("Tracing ext4 operations slower than 10 ms for 1 secs.\n"), "{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn signals_and_closed_pipe_end_cleanly() {
    let pid = std::process::id().to_string();
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        let mut run = Running::start(TOOL, &["-t", "ext4", "-p", &pid]);
        run.wait_for_line("Tracing", Duration::from_secs(30));
        run.signal(signal);
        let done = run.finish(Duration::from_secs(20));
        done.assert_success();
        assert!(done.stderr.is_empty(), "{}", done.stderr);
        done.assert_no_programs_left();
    }
    // `fsslower -m 0 | head -1`: the banner is read, the pipe closes, the next line ends the tool quietly.
    let file = ScratchFile::new("fss-pipe");
    assert_ends_when_pipe_closes(TOOL, &["-t", "ext4", "-m", "0"], "Tracing ext4", || {
        std::fs::write(&file.0, b"poke").unwrap();
    });
}
