// SPDX-License-Identifier: Apache-2.0 OR MIT
//! execsnoop against a helper that execs `/bin/true` with argument lists unique to the test, a failing exec and
//! an fexecve (execveat), all children of the helper, so `-P <helper>` keeps every test to its own workload while
//! the tests of all tools run concurrently. The helper waits for a line on stdin, so it execs only once the tool
//! is attached.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::*;
use serde_json::Value;

const HELPER: &str = include_str!("execer.c");

struct Helper {
    child: KillOnDrop,
    tag: String,
}

impl Helper {
    fn start(k: u32, extra: u32, uid: i32) -> Helper {
        let exe = build_c_helper("execsnoop-helper", HELPER, &["-O1"]);
        let tag = format!("esnoop{}_{}", std::process::id(), rand_suffix());
        let child = Command::new(exe)
            .args([&tag, &k.to_string(), &extra.to_string(), &uid.to_string()])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        Helper { child: KillOnDrop(child), tag }
    }
    fn pid(&self) -> u32 {
        self.child.0.id()
    }
    /// Lets the helper exec and waits for it to finish.
    fn go(mut self) -> String {
        let child: &mut Child = &mut self.child.0;
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(child.wait().unwrap().success());
        self.tag.clone()
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(Instant::now().elapsed().as_nanos() as u64);
    h.finish() % 1_000_000
}

/// True once process `pid` holds its five BPF links (its programs are attached).
fn has_link(pid: u32) -> bool {
    links_of(pid) >= 5
}

fn start(args: &[&str]) -> Running {
    let mut run = Running::start("execsnoop", args);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !has_link(run.pid()) {
        assert!(Instant::now() < deadline, "execsnoop {args:?} did not attach within 20 s");
        thread::sleep(Duration::from_millis(20));
    }
    run.note_programs();
    run
}

fn stop(run: Running, signal: i32) -> Finished {
    run.signal(signal);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// Runs execsnoop with `args` plus `-P <helper>` over a helper's workload; returns the helper's PID, the tag and
/// the finished run.
fn traced(args: &[&str], k: u32, extra: u32, uid: i32, signal: i32) -> (u32, String, Finished) {
    let helper = Helper::start(k, extra, uid);
    let pid = helper.pid().to_string();
    let mut all = args.to_vec();
    all.extend(["-P", &pid]);
    let run = start(&all);
    let tag = helper.go();
    (pid.parse().unwrap(), tag, stop(run, signal))
}

fn records(done: &Finished) -> Vec<Value> {
    json_lines(&done.stdout)
}

#[test]
fn every_exec_once_with_parent_args_and_result() {
    let k = 25;
    let (ppid, tag, done) = traced(&["--json", "-x"], k, 0, -1, libc::SIGTERM);
    let recs = records(&done);
    assert_eq!(recs.len() as u32, k + 2, "{}", done.stdout);
    for i in 0..k {
        let want = serde_json::json!(["/bin/true", tag, i.to_string(), if i % 2 == 1 { "odd" } else { "even" }]);
        let found: Vec<_> = recs.iter().filter(|r| r["args"] == want).collect();
        assert_eq!(found.len(), 1, "exec {i}: {}", done.stdout);
        let r = found[0];
        assert_eq!(r["ppid"], ppid, "{r}");
        assert_eq!(r["ret"], 0, "{r}");
        assert_eq!(r["comm"], "true", "{r}");
        assert_eq!(r["syscall"], "execve", "{r}");
        assert_eq!(r["truncated"], false, "{r}");
        assert_ne!(r["pid"], ppid, "{r}");
    }
    let missing = format!("/nonexistent/{tag}");
    let failed: Vec<_> = recs.iter().filter(|r| r["args"][0] == missing.as_str()).collect();
    assert_eq!(failed.len(), 1, "{}", done.stdout);
    assert_eq!(failed[0]["ret"], -2, "ENOENT: {}", failed[0]);
    // fexecve: execveat with an empty path; argv[0] stands for the file name.
    let fexec: Vec<_> = recs.iter().filter(|r| r["syscall"] == "execveat").collect();
    assert_eq!(fexec.len(), 1, "{}", done.stdout);
    assert_eq!(fexec[0]["args"], serde_json::json!(["fexecve-true", tag]), "{}", fexec[0]);
    assert_eq!(fexec[0]["ret"], 0);
}

/// Issue 53, item 2: a thread other than the main one execs; the kernel gives it the process's ID on the way, so
/// the exec's return is under another thread ID than its entry. It is one line all the same, under the process's
/// PID, with the program's name and arguments.
#[test]
fn an_exec_by_a_thread_other_than_the_main_one() {
    let exe = build_c_helper("execsnoop-thread-exec", include_str!("thread_exec.c"), &["-O1", "-pthread"]);
    let tag = format!("esthread{}_{}", std::process::id(), rand_suffix());
    let run = start(&["--json"]);
    let mut child = KillOnDrop(Command::new(exe).arg(&tag).stdin(Stdio::piped()).spawn().unwrap());
    let pid = child.0.id();
    child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.0.wait().unwrap().success(), "/bin/true exits 0");
    let done = stop(run, libc::SIGINT);
    let recs = records(&done);
    let mine: Vec<_> = recs.iter().filter(|r| r["args"] == serde_json::json!(["/bin/true", tag, "thread"])).collect();
    assert_eq!(mine.len(), 1, "{}", done.stdout);
    assert_eq!((&mine[0]["pid"], &mine[0]["ret"], &mine[0]["comm"]), (&pid.into(), &0.into(), &"true".into()));
    assert_eq!(mine[0]["ppid"], std::process::id(), "{}", mine[0]);
}

/// A script's exec shows the argv its caller passed, as BCC, libbpf-tools and bpftrace show it: not the one the
/// kernel rewrites for the interpreter (`/bin/sh -e SCRIPT one two`, `/usr/bin/env bash SCRIPT three`).
#[test]
fn scripts_show_the_callers_argv() {
    use std::os::unix::fs::PermissionsExt;
    let dash_e = ScratchFile::new("execsnoop-dash-e.sh");
    let env_bash = ScratchFile::new("execsnoop-env-bash.sh");
    for (file, shebang) in [(&dash_e, "#!/bin/sh -e"), (&env_bash, "#!/usr/bin/env bash")] {
        std::fs::write(&file.0, format!("{shebang}\nexit 0\n")).unwrap();
        std::fs::set_permissions(&file.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (s1, s2) = (dash_e.0.to_str().unwrap(), env_bash.0.to_str().unwrap());
    // A shell that waits for a line, then runs both scripts as its children (`; true`: no exec in place).
    let mut shell = KillOnDrop(
        Command::new("/bin/sh")
            .args(["-c", r#"read x; "$1" one two; "$2" three; true"#, "sh", s1, s2])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let run = start(&["--json", "-P", &shell.0.id().to_string()]);
    shell.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(shell.0.wait().unwrap().success());
    let done = stop(run, libc::SIGINT);
    let recs = records(&done);
    let of = |path: &str| recs.iter().filter(|r| r["args"][0] == path).cloned().collect::<Vec<_>>();
    assert_eq!(of(s1).len(), 1, "{}", done.stdout);
    assert_eq!(of(s1)[0]["args"], serde_json::json!([s1, "one", "two"]), "{}", done.stdout);
    assert_eq!(of(s2).len(), 1, "{}", done.stdout);
    assert_eq!(of(s2)[0]["args"], serde_json::json!([s2, "three"]), "{}", done.stdout);
}

/// The same for a script exec'd right after fork with its path and arguments in string literals: the child has
/// not touched those pages, so the kernel's tracepoint cannot read them at entry, and they are read from the new
/// program's memory at exit, where a script's argv starts with its interpreter's (`/bin/sh -e SCRIPT one two`):
/// still the caller's argv is shown.
#[test]
fn scripts_exec_from_unread_literals_show_the_callers_argv() {
    use std::os::unix::fs::PermissionsExt;
    const SCRIPT: &str = "/var/tmp/corebpf-tests/execsnoop-literal-script.sh";
    let helper = build_c_helper(
        "execsnoop-literal-exec",
        include_str!("literal_exec.c"),
        &["-O1", &format!("-DSCRIPT=\"{SCRIPT}\"")],
    );
    std::fs::create_dir_all("/var/tmp/corebpf-tests").unwrap();
    let tmp = ScratchFile::new("execsnoop-literal-script");
    std::fs::write(&tmp.0, "#!/bin/sh -e\nexit 0\n").unwrap();
    std::fs::set_permissions(&tmp.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp.0, SCRIPT).unwrap();
    let mut child = KillOnDrop(Command::new(helper).stdin(Stdio::piped()).spawn().unwrap());
    let run = start(&["--json", "-P", &child.0.id().to_string()]);
    child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.0.wait().unwrap().success());
    let done = stop(run, libc::SIGINT);
    let recs = records(&done);
    assert_eq!(recs.len(), 1, "{}", done.stdout);
    assert_eq!(recs[0]["args"], serde_json::json!([SCRIPT, "one", "two"]), "{}", done.stdout);
}

#[test]
fn failed_execs_only_with_x() {
    let k = 3;
    let (_, tag, done) = traced(&["--json"], k, 0, -1, libc::SIGINT);
    let recs = records(&done);
    assert_eq!(recs.len() as u32, k + 1, "{}", done.stdout);
    assert!(recs.iter().all(|r| r["ret"] == 0), "{}", done.stdout);
    assert!(!done.stdout.contains(&format!("/nonexistent/{tag}")));
}

#[test]
fn text_columns_as_bcc_with_truncation_marked() {
    let (ppid, tag, done) = traced(&["-x", "-U", "-M", "--max-args", "5"], 2, 6, -1, libc::SIGHUP);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "UID   PCOMM            PID     PARENT           PPID    RET ARGS", "{}", done.stdout);
    let ok: Vec<&&str> = lines.iter().filter(|l| l.contains(" /bin/true ")).collect();
    assert_eq!(ok.len(), 2, "{}", done.stdout);
    // The file name and 4 arguments of the 10 given, then the mark.
    assert!(ok[0].ends_with(&format!("  0 /bin/true {tag} 0 even x1 ...")), "{}", ok[0]);
    let cols: Vec<&str> = ok[0].split_whitespace().collect();
    assert_eq!(cols[0], "0");
    assert_eq!(cols[1], "true");
    assert_eq!(cols[3], "execsnoop-helpe", "PCOMM: {}", ok[0]);
    assert_eq!(cols[4], ppid.to_string());
    let failed = lines.iter().find(|l| l.contains("/nonexistent/")).unwrap();
    assert!(failed.contains(&format!(" -2 /nonexistent/{tag} {tag}")), "{failed}");
}

#[test]
fn more_arguments_than_are_counted_are_still_marked_cut() {
    // 4 + 200 arguments: past MAX_ARGC (128), where the entry program stops counting (argc unknown).
    let (_, tag, done) = traced(&["--json", "--max-args", "60"], 1, 200, -1, libc::SIGINT);
    let recs = records(&done);
    let r = recs.iter().find(|r| r["args"][1] == tag.as_str() && r["args"][0] == "/bin/true").expect(&done.stdout);
    assert_eq!(r["truncated"], true, "{r}");
    assert_eq!(r["args"].as_array().unwrap().len(), 60, "{r}");
    assert_eq!(r["args"][59], "x56", "{r}");
}

#[test]
fn name_and_line_filters() {
    let k = 6;
    // The k execs of /bin/true and the fexecve of it (its comm is the file's name too); not the failed exec.
    let (_, _, done) = traced(&["--json", "-n", "^tru"], k, 0, -1, libc::SIGINT);
    assert_eq!(records(&done).len() as u32, k + 1, "{}", done.stdout);
    let (_, _, done) = traced(&["--json", "-l", "odd$"], k, 0, -1, libc::SIGINT);
    let recs = records(&done);
    assert_eq!(recs.len() as u32, k / 2, "{}", done.stdout);
    assert!(recs.iter().all(|r| r["args"][3] == "odd"));
    let (_, _, done) = traced(&["--json", "-n", "^no-such-comm$"], k, 0, -1, libc::SIGINT);
    assert_eq!(records(&done).len(), 0, "{}", done.stdout);
}

#[test]
fn uid_filter() {
    let k = 4;
    let (_, _, done) = traced(&["--json", "-u", "65534"], k, 0, 65534, libc::SIGINT);
    let recs = records(&done);
    assert_eq!(recs.len() as u32, k + 1, "{}", done.stdout);
    assert!(recs.iter().all(|r| r["uid"] == 65534));
    let (_, _, done) = traced(&["--json", "-u", "root"], k, 0, 65534, libc::SIGINT);
    assert_eq!(records(&done).len(), 0, "{}", done.stdout);
}

#[test]
fn burst_of_short_execs_complete_or_counted() {
    let k = 2000;
    let (_, _, done) = traced(&["--json"], k, 0, -1, libc::SIGINT);
    let seen = records(&done).len() as u64;
    let lost: u64 = done
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("execsnoop: lost ")?.split(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(seen + lost, k as u64 + 1, "seen {seen}, lost {lost}: {}", done.stderr);
}

#[test]
fn unknown_parent_and_bad_max_args() {
    let done = run_tool("execsnoop", &["-P", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    let done = run_tool("execsnoop", &["--max-args", "61"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    let done = run_tool("execsnoop", &["-u", "no-such-user-anywhere"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
}
