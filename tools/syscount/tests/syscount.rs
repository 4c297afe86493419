// SPDX-License-Identifier: Apache-2.0 OR MIT
//! syscount against a helper that, after a line on stdin (so only once the tool is attached), makes exactly N
//! `getppid` calls and M `open` calls of a unique path that does not exist (each failing with ENOENT). Every run
//! filters by the helper's PID, so concurrent tests never see each other's calls.

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corebpf_tests::cgroup::TestCgroup;
use corebpf_tests::*;
use serde_json::Value;

const BANNER: &str = "Ctrl+C to quit.";

const HELPER: &str = include_str!("syscaller.c");

const N: u64 = 1234;
const M: u64 = 321;
/// The syscall of the helper's M opens: open, or openat where the architecture has no open (arm64).
const OPEN: &str = if cfg!(target_arch = "x86_64") { "open" } else { "openat" };

/// The helper's executable and the comm the kernel gives it (its file name, cut to 15 bytes).
fn helper_exe() -> (std::path::PathBuf, String) {
    let exe = build_c_helper("syscount-helper", HELPER, &["-O1"]);
    let comm: String = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
    (exe, comm)
}

/// How a run picks out the helper's calls.
#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// `-p PID`.
    Pid,
    /// `-t TID` (the helper's only thread).
    Tid,
    /// `-c PPID`: the helper run as the child of a shell, the shell's PID given.
    Parent,
    /// `--cgroup DIR`: the helper moved into a cgroup of its own before it starts.
    Cgroup,
}

/// Runs syscount with `args` plus `-p <helper>` over one N/M helper run, ended by `signal`.
fn traced_with(args: &[&str], signal: i32) -> (Finished, u32, String) {
    traced_env(args, signal, &[], Target::Pid)
}

/// [`traced_with`] with environment `env` for the tool and the helper's calls picked out by `target`.
fn traced_env(args: &[&str], signal: i32, env: &[(&str, &str)], target: Target) -> (Finished, u32, String) {
    let (exe, comm) = helper_exe();
    let missing = ScratchFile::new("syscount-missing");
    let (n, m) = (N.to_string(), M.to_string());
    let mut cmd = if target == Target::Parent {
        // The shell forks the helper (a command follows it) and waits.
        let mut c = Command::new("sh");
        c.args(["-c", "\"$0\" \"$@\"; exit $?"]).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    let mut helper = KillOnDrop(cmd.arg(&missing.0).arg(&n).arg(&m).stdin(Stdio::piped()).spawn().unwrap());
    let pid = helper.0.id();
    let pid_arg = pid.to_string();
    let cgroup = TestCgroup::new("syscount");
    let mut all = args.to_vec();
    match target {
        Target::Pid => all.extend(["-p", &pid_arg]),
        Target::Tid => all.extend(["-t", &pid_arg]),
        Target::Parent => all.extend(["-c", &pid_arg]),
        Target::Cgroup => {
            std::fs::write(cgroup.0.join("cgroup.procs"), &pid_arg).unwrap();
            all.extend(["--cgroup", cgroup.0.to_str().unwrap()]);
        }
    }
    let mut run = Running::start_with_env("syscount", &all, env);
    // Attached once it holds its links: sys_exit, and sched_process_exit and sys_enter with -L (JSON prints no
    // banner to wait for).
    let links = if args.contains(&"-L") { 3 } else { 1 };
    let deadline = Instant::now() + Duration::from_secs(30);
    while link_count(run.pid()) < links {
        assert!(Instant::now() < deadline, "syscount {all:?} did not attach within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.note_programs();
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.0.wait().unwrap().success(), "the helper failed (does {} exist?)", missing.0.display());
    run.signal(signal);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    (done, pid, comm)
}

/// The BPF links process `pid` holds.
fn link_count(pid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return 0 };
    entries.flatten().filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("link_type:"))).count()
}

fn traced(args: &[&str]) -> Finished {
    traced_with(args, libc::SIGINT).0
}

/// The count column of the text row whose first column is `name`.
fn text_count(stdout: &str, name: &str) -> Option<u64> {
    stdout.lines().find(|l| l.split_whitespace().next() == Some(name))?.split_whitespace().nth(1)?.parse().ok()
}

/// (syscall, count, total_ns) of every row of a one-interval JSON run.
fn json_rows(stdout: &str) -> Vec<(String, u64, Option<u64>)> {
    let lines = json_lines(stdout);
    assert_eq!(lines.len(), 1, "{stdout}");
    lines[0]["syscalls"]
        .as_array()
        .unwrap_or_else(|| panic!("{stdout}"))
        .iter()
        .map(|r| (r["syscall"].as_str().unwrap().to_string(), r["count"].as_u64().unwrap(), r["total_ns"].as_u64()))
        .collect()
}

#[test]
fn counts_getppid_and_failed_opens_exactly() {
    let done = traced(&[]);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert!(lines[0].starts_with("Tracing syscalls, printing top 10..."), "{}", done.stdout);
    assert!(lines[1].starts_with('[') && lines[1].ends_with(']'), "{}", done.stdout);
    assert_eq!(lines[2], format!("{:<22} {:>8}", "SYSCALL", "COUNT"), "{}", done.stdout);
    assert_eq!(text_count(&done.stdout, "getppid"), Some(N), "{}", done.stdout);
    assert_eq!(text_count(&done.stdout, OPEN), Some(M), "{}", done.stdout);
    assert!(lines.contains(&format!("{:<22} {:>8}", "getppid", N).as_str()), "{}", done.stdout);
    assert_eq!(lines.last(), Some(&"Detaching..."), "{}", done.stdout);
}

#[test]
fn json_agrees_with_the_text() {
    let rows = json_rows(&traced(&["--json"]).stdout);
    assert!(rows.contains(&("getppid".into(), N, None)), "{rows:?}");
    assert!(rows.contains(&(OPEN.into(), M, None)), "{rows:?}");
    assert!(!rows.iter().any(|r| r.0 == "wait4"), "the test's own wait for the helper counted: {rows:?}");
    assert!(rows.windows(2).all(|w| w[0].1 >= w[1].1), "sorted by count: {rows:?}");
}

#[test]
fn failures_and_errno_filters_keep_only_the_failed_opens() {
    for args in [&["--json", "-x"][..], &["--json", "-e", "ENOENT"], &["--json", "-e", "2"]] {
        let rows = json_rows(&traced(args).stdout);
        assert!(rows.contains(&(OPEN.into(), M, None)), "{args:?}: {rows:?}");
        assert!(!rows.iter().any(|r| r.0 == "getppid"), "{args:?}: {rows:?}");
    }
    // Another errno: none of the helper's calls fails with EACCES.
    let rows = json_rows(&traced(&["--json", "-e", "EACCES"]).stdout);
    assert!(!rows.iter().any(|r| r.0 == OPEN || r.0 == "getppid"), "{rows:?}");
    let done = traced(&["-x"]);
    assert!(done.stdout.starts_with("Tracing failed syscalls"), "{}", done.stdout);
    assert_eq!(text_count(&done.stdout, OPEN), Some(M), "{}", done.stdout);
}

#[test]
fn one_syscall_only() {
    let done = traced(&["--syscall", "getppid"]);
    assert!(done.stdout.starts_with("Tracing syscall 'getppid'... Ctrl+C to quit."), "{}", done.stdout);
    let rows: Vec<&str> = done.stdout.lines().skip(3).filter(|l| !l.is_empty() && *l != "Detaching...").collect();
    assert_eq!(rows, [format!("{:<22} {:>8}", "getppid", N)], "{}", done.stdout);
}

#[test]
fn latency_is_positive_and_in_both_units() {
    let rows = json_rows(&traced(&["--json", "-L"]).stdout);
    let getppid = rows.iter().find(|r| r.0 == "getppid").unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(getppid.1, N);
    assert!(getppid.2.unwrap() > 0, "{rows:?}");
    let open = rows.iter().find(|r| r.0 == OPEN).unwrap();
    assert_eq!(open.1, M);
    assert!(open.2.unwrap() > 0, "{rows:?}");
    assert!(rows.windows(2).all(|w| w[0].2 >= w[1].2), "sorted by time: {rows:?}");
    // Text: microseconds with three decimals; -m milliseconds with six.
    for (flags, header, decimals) in [(&["-L"][..], "TIME (us)", 3), (&["-L", "-m"], "TIME (ms)", 6)] {
        let done = traced(flags);
        assert!(done.stdout.contains(&format!("{:<22} {:>8} {header:>16}", "SYSCALL", "COUNT")), "{}", done.stdout);
        let row = done.stdout.lines().find(|l| l.starts_with("getppid ")).unwrap_or_else(|| panic!("{}", done.stdout));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[1], N.to_string(), "{row}");
        assert_eq!(cols[2].split('.').nth(1).map(str::len), Some(decimals), "{row}");
        assert!(cols[2].parse::<f64>().unwrap() > 0.0, "{row}");
    }
}

#[test]
fn per_process_names_the_helper() {
    let (done, pid, comm) = traced_with(&["-P"], libc::SIGINT);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[2], format!("{:<22} {:>8}", "PID    COMM", "COUNT"), "{}", done.stdout);
    let row = lines.iter().find(|l| l.starts_with(&format!("{pid:<6} "))).unwrap_or_else(|| panic!("{}", done.stdout));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], comm, "{row}");
    // N + M calls, plus the helper's own few (reading stdin, loading libc) after the tool attached.
    let count: u64 = cols[2].parse().unwrap();
    assert!((N + M..N + M + 100).contains(&count), "{row}");
    let (done, pid, comm) = traced_with(&["-P", "--json", "--syscall", "getppid"], libc::SIGINT);
    let line = &json_lines(&done.stdout)[0];
    let procs = line["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1, "{line}");
    assert_eq!(
        (procs[0]["pid"].as_u64(), procs[0]["comm"].as_str(), procs[0]["count"].as_u64()),
        (Some(pid as u64), Some(comm.as_str()), Some(N))
    );
}

#[test]
fn sigterm_prints_the_final_report() {
    let (done, _, _) = traced_with(&[], libc::SIGTERM);
    assert_eq!(text_count(&done.stdout, "getppid"), Some(N), "{}", done.stdout);
    assert!(done.stdout.ends_with("Detaching...\n"), "{}", done.stdout);
}

#[test]
fn lists_the_syscalls_of_this_architecture() {
    let done = run_tool("syscount", &["-l"]);
    done.assert_success();
    let names: Vec<&str> = done.stdout.split_whitespace().collect();
    for name in ["getppid", "open", "openat", "read", "write", "execve"] {
        assert!(names.contains(&name), "{name} missing from -l");
    }
    assert!(names.len() > 300, "{}", names.len());
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted");
}

#[test]
fn bad_input_is_one_line() {
    for (args, code) in [
        (&["--syscall", "nosuchcall"][..], 2),
        (&["-e", "EBOGUS"], 2),
        (&["-e", "x1"], 2),
        (&["-T", "0"], 2),
        (&["-i", "0"], 2),
        (&["-p", "0"], 2),
        (&["-p", "1073741823"], 1),
        (&["-t", "1073741823"], 1),
        (&["--cgroup", "/tmp"], 1),
    ] {
        let done = run_tool("syscount", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
        assert!(done.stderr.starts_with("syscount: "), "{args:?}: {}", done.stderr);
        assert_eq!(done.stdout, "", "{args:?}");
    }
}

/// `syscount -i 1 | head -1`: the tool ends once `head` has gone, with no probe left.
#[test]
fn closed_pipe_ends_cleanly() {
    let (exe, _) = helper_exe();
    let missing = ScratchFile::new("syscount-missing");
    let helper = KillOnDrop(Command::new(exe).arg(&missing.0).arg("1").arg("1").stdin(Stdio::piped()).spawn().unwrap());
    let mut tool = Command::new(bin("syscount"))
        .args(["-i", "1", "-p", &helper.0.id().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::io::BufReader::new(tool.stdout.take().unwrap());
    let mut banner = String::new();
    reader.read_line(&mut banner).unwrap();
    assert!(banner.contains(BANNER), "{banner}");
    let ids = prog_ids_of(tool.id());
    assert!(!ids.is_empty());
    drop(reader);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = tool.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = tool.kill();
            panic!("syscount kept running after its pipe closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut tool.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(stderr, "");
    Finished { status, stdout: banner, stderr, prog_ids: ids }.assert_no_programs_left();
}

#[test]
fn intervals_and_duration() {
    let (exe, _) = helper_exe();
    let missing = ScratchFile::new("syscount-missing");
    let helper = KillOnDrop(Command::new(exe).arg(&missing.0).arg("1").arg("1").stdin(Stdio::piped()).spawn().unwrap());
    let done = run_tool("syscount", &["--json", "-i", "1", "-d", "2", "-p", &helper.0.id().to_string()]);
    done.assert_success();
    let lines: Vec<Value> = json_lines(&done.stdout);
    assert_eq!(lines.len(), 2, "{}", done.stdout);
}

#[test]
fn raw_tp_fallback_counts_the_same() {
    let env = [("COREBPF_ATTACH", "raw_tp")];
    let (done, _, _) = traced_env(&["-v", "--json", "-L"], libc::SIGINT, &env, Target::Pid);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    let rows = json_rows(&done.stdout);
    assert!(rows.iter().any(|r| r.0 == "getppid" && r.1 == N && r.2 > Some(0)), "{rows:?}");
    assert!(rows.iter().any(|r| r.0 == OPEN && r.1 == M), "{rows:?}");
}

#[test]
fn tid_parent_and_cgroup_filters_count_exactly() {
    for target in [Target::Tid, Target::Parent, Target::Cgroup] {
        let (done, _, _) = traced_env(&["--json"], libc::SIGINT, &[], target);
        let rows = json_rows(&done.stdout);
        assert!(rows.contains(&("getppid".into(), N, None)), "{rows:?}");
        assert!(rows.contains(&(OPEN.into(), M, None)), "{rows:?}");
        // This test waited for the helper (wait4) while the tool was attached: outside the filter, not counted.
        assert!(!rows.iter().any(|r| r.0 == "wait4"), "{rows:?}");
    }
}

/// `--exec`: the command runs once the tool is attached, every call of it is counted, and the tool ends with it.
#[test]
fn exec_counts_a_command_from_its_start_and_ends_with_it() {
    let (exe, _) = helper_exe();
    let missing = ScratchFile::new("syscount-missing");
    let (exe, path, n, m) = (exe.to_string_lossy(), missing.0.to_string_lossy(), N.to_string(), M.to_string());
    let done = Running::start("syscount", &["--json", "-T", "100", "--exec", &exe, &path, &n, &m, "nowait"])
        .finish(Duration::from_secs(30));
    done.assert_success();
    let rows = json_rows(&done.stdout);
    assert!(rows.contains(&("getppid".into(), N, None)), "{rows:?}");
    assert!(rows.contains(&(OPEN.into(), M, None)), "{rows:?}");
    assert!(rows.contains(&("execve".into(), 1, None)), "one exec, of the resolved path: {rows:?}");
    assert!(!rows.iter().any(|r| r.0 == "wait4"), "another process counted: {rows:?}");
    let done = run_tool("syscount", &["--exec", "no-such-command-anywhere"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr, "syscount: --exec: command not found: no-such-command-anywhere\n");
}

/// `-P --exec`: the command's calls are under the command's name (the kernel's comm after its exec), not the
/// tool's, whose name the forked child bore for its calls before the exec; it has exited by the report.
#[test]
fn exec_by_process_names_the_command() {
    let (exe, comm) = helper_exe();
    let missing = ScratchFile::new("syscount-missing");
    let (exe, path, n, m) = (exe.to_string_lossy(), missing.0.to_string_lossy(), N.to_string(), M.to_string());
    let done = Running::start("syscount", &["--json", "-P", "--exec", &exe, &path, &n, &m, "nowait"])
        .finish(Duration::from_secs(30));
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    let procs = lines[0]["processes"].as_array().unwrap_or_else(|| panic!("{}", done.stdout));
    assert_eq!(procs.len(), 1, "only the command is traced: {}", done.stdout);
    assert_eq!(procs[0]["comm"], comm.as_str(), "{}", done.stdout);
    assert!(procs[0]["count"].as_u64().unwrap() >= N + M, "{}", done.stdout);
}

/// The same helper run under libbpf-tools' syscount (the anchor) at the same time: both count N getppid and M
/// open calls.
#[test]
fn counts_agree_with_libbpf_tools() {
    let anchor = std::path::Path::new("/usr/sbin/syscount");
    if !anchor.exists() {
        eprintln!("libbpf-tools' syscount is not installed: skipped");
        return;
    }
    let (exe, _) = helper_exe();
    let missing = ScratchFile::new("syscount-missing");
    let mut helper = KillOnDrop(
        Command::new(exe).arg(&missing.0).arg(N.to_string()).arg(M.to_string()).stdin(Stdio::piped()).spawn().unwrap(),
    );
    let pid = helper.0.id().to_string();
    let mut theirs = KillOnDrop(
        Command::new(anchor).args(["-p", &pid]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap(),
    );
    let mut ours = Running::start("syscount", &["--json", "-p", &pid]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while link_count(ours.pid()) < 1 || link_count(theirs.0.id()) < 1 {
        assert!(Instant::now() < deadline, "the two syscounts did not attach within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    ours.note_programs();
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.0.wait().unwrap().success());
    ours.signal(libc::SIGINT);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(theirs.0.id() as i32, libc::SIGINT) };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut theirs.0.stdout.take().unwrap(), &mut text).unwrap();
    let _ = theirs.0.wait();
    let done = ours.finish(Duration::from_secs(30));
    done.assert_success();
    let rows = json_rows(&done.stdout);
    for (name, want) in [("getppid", N), (OPEN, M)] {
        assert_eq!(text_count(&text, name), Some(want), "libbpf-tools:\n{text}");
        assert!(rows.contains(&(name.into(), want, None)), "ours: {rows:?}");
    }
}

#[test]
fn prometheus_serves_the_getppid_and_failed_open_counts() {
    let (exe, _) = helper_exe();
    let missing = ScratchFile::new("syscount-prom-missing");
    let mut helper = KillOnDrop(
        Command::new(exe).arg(&missing.0).arg(N.to_string()).arg(M.to_string()).stdin(Stdio::piped()).spawn().unwrap(),
    );
    let pid = helper.0.id().to_string();
    let (run, addr) = prom::serving("syscount", &["-L", "-p", &pid]);
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.0.wait().unwrap().success());
    let text = prom::scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    prom::promtool_accepts(&text);
    let calls = |name: &str| prom::sample(&text, &format!("corebpf_syscount_syscalls_total{{syscall=\"{name}\"}}"));
    assert_eq!(calls("getppid"), Some(N as f64), "{text}");
    assert_eq!(calls(OPEN), Some(M as f64), "{text}");
    let time = prom::sample(&text, "corebpf_syscount_syscall_time_seconds_total{syscall=\"getppid\"}").unwrap();
    assert!(time > 0.0, "{text}");
}
