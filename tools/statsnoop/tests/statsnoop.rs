// SPDX-License-Identifier: Apache-2.0 OR MIT
//! statsnoop against a helper (tests/stats.c) that, once the tool is attached, stats three known paths in a
//! scratch directory of its own: a file K times (stat: newfstatat), a directory once (statx) and a missing file
//! once (lstat: ENOENT), and on architectures that have them the raw stat, lstat, statfs and fstat calls; all
//! filtered by the helper's PID, so concurrent tests never see each other. (No side-by-side run with
//! libbpf-tools: Debian's statsnoop 0.26 looks for `events/syscalls/<call>/format`, which no kernel has, and so
//! loads none of its programs; it prints its header and nothing else.)

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");

struct Workdir(PathBuf);

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Workdir {
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

fn workdir() -> Workdir {
    let dir = ScratchFile::new("statsnoop").0.clone();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("present.txt"), b"x").unwrap();
    Workdir(dir)
}

/// What a helper run did: its PID and, if it made the raw calls, the fd it fstat'ed.
struct Helper {
    pid: u32,
    raw_fd: Option<i64>,
}

/// Runs statsnoop with `args` plus `-p <helper>` over a K-stat helper.
fn traced(args: &[&str], k: u32) -> (Workdir, Helper, Finished) {
    traced_with(args, k, &[])
}

/// [`traced`], with more arguments for the helper.
fn traced_with(args: &[&str], k: u32, helper_args: &[&str]) -> (Workdir, Helper, Finished) {
    let dir = workdir();
    let exe = build_c_helper("statsnoop-stats", include_str!("stats.c"), &["-O1"]);
    let mut helper = KillOnDrop(
        Command::new(exe)
            .arg(&dir.0)
            .arg(k.to_string())
            .args(helper_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = helper.0.id();
    let pid_s = pid.to_string();
    let mut all = args.to_vec();
    all.extend(["-p", &pid_s]);
    let mut run = Running::start(TOOL, &all);
    run.wait_attached(Duration::from_secs(20));
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = helper.0.wait_with_output_ref();
    assert!(out.0.success(), "the helper failed: {:?}", out.0);
    let raw_fd = out.1.strip_prefix("raw ").map(|s| s.trim().parse().unwrap());
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    (dir, Helper { pid, raw_fd }, done)
}

/// `wait_with_output` for a child behind KillOnDrop: its status and its stdout.
trait WaitRef {
    fn wait_with_output_ref(&mut self) -> (std::process::ExitStatus, String);
}

impl WaitRef for std::process::Child {
    fn wait_with_output_ref(&mut self) -> (std::process::ExitStatus, String) {
        let mut text = String::new();
        if let Some(mut out) = self.stdout.take() {
            std::io::Read::read_to_string(&mut out, &mut text).unwrap();
        }
        (self.wait().unwrap(), text)
    }
}

/// (syscall, path, err) -> calls, for the records of the helper's own paths.
fn tally(recs: &[Value], dir: &Workdir) -> BTreeMap<(String, String, i64), u64> {
    let known = [dir.path("present.txt"), dir.path("sub"), dir.path("missing.txt")];
    let mut t = BTreeMap::new();
    for r in recs {
        let path = r["path"].as_str().unwrap().to_string();
        let syscall = r["syscall"].as_str().unwrap().to_string();
        if known.contains(&path) || syscall == "newfstat" {
            *t.entry((syscall, path, r["err"].as_i64().unwrap())).or_default() += 1;
        }
    }
    t
}

#[test]
fn every_stat_with_result_and_path() {
    let k = 7;
    let (dir, helper, done) = traced(&["--json"], k);
    let recs = json_lines(&done.stdout);
    assert!(recs.iter().all(|r| r["pid"] == helper.pid), "{}", done.stdout);
    let (present, sub, missing) = (dir.path("present.txt"), dir.path("sub"), dir.path("missing.txt"));
    let mut want = BTreeMap::from([
        (("newfstatat".to_string(), present.clone(), 0), k as u64),
        (("statx".to_string(), sub.clone(), 0), 1),
        (("newfstatat".to_string(), missing.clone(), 2), 1),
    ]);
    if helper.raw_fd.is_some() {
        want.insert(("newstat".into(), present.clone(), 0), 1);
        want.insert(("newlstat".into(), missing.clone(), 2), 1);
        want.insert(("statfs".into(), sub.clone(), 0), 1);
        want.insert(("newfstat".into(), String::new(), 0), 1);
    }
    assert_eq!(tally(&recs, &dir), want, "{}", done.stdout);
    let failed: Vec<&Value> = recs.iter().filter(|r| r["path"] == missing.as_str()).collect();
    assert!(failed.iter().all(|r| r["fd"] == -1 && r["errno"] == "ENOENT"), "{failed:?}");
    let ok: Vec<&Value> = recs.iter().filter(|r| r["path"] == present.as_str()).collect();
    assert!(ok.iter().all(|r| r["fd"] == 0 && r["err"] == 0 && r["errno"].is_null()), "{ok:?}");
    // fstatat and statx carry their directory descriptor (AT_FDCWD), fstat its fd.
    assert!(ok.iter().filter(|r| r["syscall"] == "newfstatat").all(|r| r["dirfd"] == -100), "{ok:?}");
    if let Some(fd) = helper.raw_fd {
        let fstat: Vec<&Value> = recs.iter().filter(|r| r["syscall"] == "newfstat" && r["dirfd"] == fd).collect();
        assert_eq!(fstat.len(), 1, "{}", done.stdout);
    }
}

/// BCC's columns with -t and -s: one row per call, the same calls as in JSON.
#[test]
fn text_columns_with_time_and_syscall() {
    let (dir, helper, done) = traced(&["-t", "-s"], 3);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "TIME(s)       PID     COMM               FD ERR SYSCALL      PATH", "{}", done.stdout);
    let missing = dir.path("missing.txt");
    let row = lines.iter().find(|l| l.ends_with(&format!("newfstatat   {missing}"))).expect("the missing file");
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1..6], [helper.pid.to_string().as_str(), "statsnoop-stats", "-1", "2", "newfstatat"], "{row}");
    assert!(cols[0].parse::<f64>().is_ok(), "{row}");
    let present = dir.path("present.txt");
    let ok = lines.iter().filter(|l| l.ends_with(&format!("newfstatat   {present}"))).collect::<Vec<_>>();
    assert_eq!(ok.len(), 3, "{}", done.stdout);
    assert!(ok.iter().all(|l| l.split_whitespace().nth(3) == Some("0") && l.split_whitespace().nth(4) == Some("0")));
    let statx = lines.iter().filter(|l| l.ends_with(&format!("statx        {}", dir.path("sub")))).count();
    assert_eq!(statx, 1, "{}", done.stdout);
}

/// A command name and a path holding an ESC sequence and a newline: escaped in the text columns (one row, no
/// control byte reaches the terminal), as they are in JSON.
#[test]
fn names_from_the_traced_system_are_escaped() {
    let (comm, odd) = ("st\x1b[2J\nx", "b\x1b[31m\nad");
    let (dir, _, done) = traced_with(&[], 1, &["names"]);
    assert!(!done.stdout.contains('\x1b'), "{:?}", done.stdout);
    let row = format!("st\\033[2J\\nx       -1   2 {}", dir.path("b\\033[31m\\nad"));
    assert_eq!(done.stdout.lines().filter(|l| l.ends_with(&row)).count(), 1, "{row}\n{}", done.stdout);
    let (dir, _, done) = traced_with(&["--json"], 1, &["names"]);
    let recs = json_lines(&done.stdout);
    let odd_path = dir.path(odd);
    let hits: Vec<&Value> = recs.iter().filter(|r| r["path"] == odd_path.as_str()).collect();
    assert_eq!(hits.len(), 1, "{}", done.stdout);
    assert_eq!(hits[0]["comm"], comm, "{}", done.stdout);
}

#[test]
fn failed_only() {
    let (dir, helper, done) = traced(&["--json", "-x"], 3);
    let recs = json_lines(&done.stdout);
    let want = if helper.raw_fd.is_some() { 2 } else { 1 };
    let mine: Vec<&Value> = recs.iter().filter(|r| r["path"] == dir.path("missing.txt").as_str()).collect();
    assert_eq!(mine.len(), want, "{}", done.stdout);
    assert!(recs.iter().all(|r| r["err"].as_i64() > Some(0)), "{}", done.stdout);
}

#[test]
fn bad_input() {
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    let done = run_tool(TOOL, &["-p", "x"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
}
