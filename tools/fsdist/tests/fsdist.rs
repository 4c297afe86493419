// SPDX-License-Identifier: Apache-2.0 OR MIT
//! fsdist against a helper whose file system operations are known (fsslower's tests/fsops.c), filtered by its PID
//! (-p): each operation's histogram holds exactly the helper's 2 reads, 4 writes, 2 opens, 2 fsyncs and 2 getattrs
//! (fstat and stat), in text, JSON and Prometheus metrics; on ext4 (the host's root) and on xfs and btrfs file
//! systems of the test's own (loop devices); -t xfs leaves out the same helper on ext4; the BCC names (ext4dist)
//! pick the file system; -m changes the unit; interval and count end the run; bad input is one line; SIGINT,
//! SIGTERM, SIGHUP and a closed pipe end it cleanly. No latency is asserted, only counts. (Debian's libbpf-tools
//! fsdist needs fentry or kprobes, which this host refuses, so it is no anchor here.)

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::fsmount::MountedFs;
use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "fsdist";
/// The helper's operations per name.
const EXPECTED: [(&str, u64); 5] = [("fsync", 2), ("getattr", 2), ("open", 2), ("read", 2), ("write", 4)];

fn expected() -> BTreeMap<String, u64> {
    EXPECTED.iter().map(|(op, n)| (op.to_string(), *n)).collect()
}

/// A helper started on a file in `dir` (the root file system's /var/tmp unless given), waiting for its "go".
fn helper(file: &Path) -> KillOnDrop {
    let exe = build_c_helper("fsops", include_str!("../../fsslower/tests/fsops.c"), &["-O1"]);
    let child =
        Command::new(&exe).arg(file).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start the helper");
    wait_sleeping(child.id(), Duration::from_secs(10));
    KillOnDrop(child)
}

fn scratch_in(dir: Option<&Path>) -> ScratchFile {
    match dir {
        Some(dir) => ScratchFile(dir.join(format!("fsd-{}", std::process::id()))),
        None => ScratchFile::new("fsd"),
    }
}

/// Runs the tool (started by `start` with `args`, then `-p` the helper's PID) while the helper works on its file;
/// one report, at SIGINT.
fn trace_with(start: impl FnOnce(&[&str]) -> Running, args: &[&str], dir: Option<&Path>) -> Finished {
    let file = scratch_in(dir);
    let mut h = helper(&file.0);
    let pid = h.0.id().to_string();
    let mut ours: Vec<&str> = args.to_vec();
    ours.extend(["-p", pid.as_str()]);
    let mut run = start(&ours);
    if args.contains(&"-j") {
        run.wait_attached(Duration::from_secs(30));
    } else {
        run.wait_for_line("Tracing", Duration::from_secs(30));
    }
    go_and_wait(&mut h.0);
    run.signal(libc::SIGINT);
    run.finish(Duration::from_secs(20))
}

fn trace(args: &[&str], dir: Option<&Path>, env: &[(&str, &str)]) -> Finished {
    trace_with(|a| Running::start_with_env(TOOL, a, env), args, dir)
}

/// The count of each `operation = 'NAME'` section of a text report, and the unit its histograms name.
fn text_counts(text: &str) -> (BTreeMap<String, u64>, Vec<String>) {
    let mut counts = BTreeMap::new();
    let mut units = Vec::new();
    for section in text.split("operation = '").skip(1) {
        let (name, rest) = section.split_once("'\n").unwrap();
        let hist = rest.split("\n\n").next().unwrap();
        units.push(hist.split_whitespace().next().unwrap().to_string());
        counts.insert(name.to_string(), hist_total(hist));
    }
    (counts, units)
}

fn exact_text(fs: &str, dir: Option<&Path>, env: &[(&str, &str)]) {
    let done = trace(&["-t", fs], dir, env);
    done.assert_success();
    let banner = format!("Tracing {fs} operation latency... Hit Ctrl-C to end.\n\n");
    assert!(done.stdout.starts_with(&banner), "{}", done.stdout);
    let (counts, units) = text_counts(&done.stdout);
    assert_eq!(counts, expected(), "{}", done.stdout);
    assert!(units.iter().all(|u| u == "usecs"), "{units:?}");
    done.assert_no_programs_left();
}

#[test]
fn exact_counts_on_ext4() {
    exact_text("ext4", None, &[]);
}

#[test]
fn exact_counts_forced_raw_tp() {
    exact_text("ext4", None, &[("COREBPF_ATTACH", "raw_tp")]);
}

/// The system call path attaches two programs, at raw_syscalls' sys_enter and sys_exit, whatever the number of
/// calls it times, and both are gone when the tool ends: a classic syscalls: tracepoint pair per call made 42 links,
/// each of whose detach waited for an RCU grace period, and Ctrl-C took over a second to end it.
#[test]
fn the_system_call_path_holds_two_links() {
    assert_holds_links(TOOL, &["-t", "ext4"], "Tracing ext4", &["tp_btf", "raw_tp"], 2);
}

#[test]
fn exact_counts_on_xfs() {
    let mounted = MountedFs::new("xfs", "fsdist");
    exact_text("xfs", Some(&mounted.dir), &[]);
}

#[test]
fn exact_counts_on_btrfs() {
    let mounted = MountedFs::new("btrfs", "fsdist");
    exact_text("btrfs", Some(&mounted.dir), &[]);
}

#[test]
fn another_file_system_is_left_out() {
    let _mounted = MountedFs::new("xfs", "fsdist-other");
    let done = trace(&["-t", "xfs"], None, &[]);
    done.assert_success();
    assert_eq!(text_counts(&done.stdout).0, BTreeMap::new(), "{}", done.stdout);
}

#[test]
fn milliseconds_and_timestamp() {
    let done = trace(&["-t", "ext4", "-m", "-T"], None, &[]);
    done.assert_success();
    let (counts, units) = text_counts(&done.stdout);
    assert_eq!(counts, expected(), "{}", done.stdout);
    assert!(units.iter().all(|u| u == "msecs"), "{units:?}");
    let time = done.stdout.lines().nth(2).unwrap();
    assert_eq!((time.len(), &time[2..3], &time[5..6]), (8, ":", ":"), "{}", done.stdout);
}

#[test]
fn json_counts_are_exact() {
    let done = trace(&["-t", "ext4", "-j"], None, &[]);
    done.assert_success();
    let mut counts = BTreeMap::new();
    for l in json_lines(&done.stdout) {
        assert_eq!((l["fs"].as_str(), l["unit"].as_str()), (Some("ext4"), Some("usecs")), "{l}");
        let count = l["count"].as_u64().unwrap();
        let buckets: u64 = l["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(buckets, count, "{l}");
        assert!(l["sum_ns"].as_u64().unwrap() > 0, "{l}");
        counts.insert(l["operation"].as_str().unwrap().to_string(), count);
    }
    assert_eq!(counts, expected(), "{}", done.stdout);
}

#[test]
fn prometheus_counts_are_exact() {
    let file = ScratchFile::new("fsd-prom");
    let mut h = helper(&file.0);
    let pid = h.0.id().to_string();
    let (run, addr) = serving(TOOL, &["-t", "ext4", "-m", "-p", &pid]);
    go_and_wait(&mut h.0);
    let body = scrape(&addr);
    for (op, n) in EXPECTED {
        let series = format!("corebpf_fsdist_operation_latency_seconds_count{{fs=\"ext4\",operation=\"{op}\"}}");
        assert_eq!(sample(&body, &series), Some(n as f64), "{series}\n{body}");
        let inf =
            format!("corebpf_fsdist_operation_latency_seconds_bucket{{le=\"+Inf\",fs=\"ext4\",operation=\"{op}\"}}");
        assert_eq!(sample(&body, &inf), Some(n as f64), "{inf}\n{body}");
    }
    promtool_accepts(&body);
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
}

#[test]
fn bcc_names_pick_the_file_system() {
    let start = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fsdist"));
        cmd.arg0("ext4dist").args(args);
        Running::from_command("ext4dist", cmd)
    };
    let done = trace_with(start, &[], None);
    done.assert_success();
    assert!(done.stdout.starts_with("Tracing ext4 operation latency"), "{}", done.stdout);
    assert_eq!(text_counts(&done.stdout).0, expected(), "{}", done.stdout);
}

/// Under a BCC name, BCC's clock: each interval's report starts with `HH:MM:SS:`, unless -T (--notimestamp).
#[test]
fn bcc_names_print_the_time_unless_notimestamp() {
    let me = std::process::id().to_string();
    for (flag, clock) in [(None, true), (Some("-T"), false), (Some("--notimestamp"), false)] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fsdist"));
        cmd.arg0("ext4dist").args(flag).args(["-p", &me, "1", "1"]);
        let done = Running::from_command("ext4dist", cmd).finish(Duration::from_secs(30));
        done.assert_success();
        let lines: Vec<&str> = done.stdout.lines().collect();
        assert_eq!(lines[..2], ["Tracing ext4 operation latency... Hit Ctrl-C to end.", ""], "{}", done.stdout);
        let timed = lines.get(2).is_some_and(|l| {
            l.len() == 9 && l.ends_with(':') && l[..8].split(':').all(|n| n.len() == 2 && n.parse::<u8>().is_ok())
        });
        assert_eq!(timed, clock, "{flag:?}:\n{}", done.stdout);
    }
}

#[test]
fn interval_and_count_end_the_run() {
    let run = Running::start(TOOL, &["-t", "ext4", "-p", &std::process::id().to_string(), "1", "2"]);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    assert!(done.stdout.starts_with("Tracing ext4 operation latency"), "{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&[][..], "no file system to trace", 2),
        (&["-t", "zfs"][..], "invalid value", 2),
        (&["-t", "ext4", "0"][..], "not a number of seconds", 2),
        (&["-t", "ext4", "1", "0"][..], "", 2),
        (&["-t", "ext4", "--prometheus", "127.0.0.1:1", "1"][..], "takes no interval", 2),
        (&["-t", "ext4", "-j", "--prometheus", "9"][..], "cannot be used with", 2),
        (&["-t", "ext4", "-p", "999999999"][..], "no process with PID", 1),
    ] {
        assert_refused(TOOL, args, code, what);
    }
    if !std::fs::read_to_string("/proc/filesystems").unwrap().contains("\tnfs") {
        assert_refused(TOOL, &["-t", "nfs"], 1, "this kernel has no nfs file system");
    }
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
    assert_ends_when_pipe_closes(TOOL, &["-t", "ext4", "1"], "Tracing ext4", || {});
}
