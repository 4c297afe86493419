// SPDX-License-Identifier: Apache-2.0 OR MIT
//! filelife against a helper (tests/life.c) that, once the tool is attached, creates seven files in a scratch
//! directory of its own (open with O_CREAT|O_EXCL, creat, openat2, openat in a subdirectory...), sleeps 300 ms and
//! deletes six of them (unlink, rename then unlinkat with a directory descriptor, unlinkat, a relative path with
//! a directory, an absolute path while a younger file of the same name lives in the subdirectory, then that one).
//! Exactly those six are reported, by the helper's PID and name, each at least
//! 300 ms old; not the file made before tracing began (opened with O_CREAT, then deleted), nor the file left in
//! place, nor a failed unlink. Everything is filtered by the helper's PID, so concurrent tests never mix.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::runtimes::Workload;
use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// The names the helper deletes after creating them, in its order.
const DELETED: [&str; 6] = ["a.txt", "b2.txt", "c.txt", "d.txt", "e.txt", "e.txt"];
/// The helper's sleep between its creations and its deletions, in seconds.
const SLEEP_S: f64 = 0.3;

/// A scratch directory with pre.txt in it, made before any tracing; removed when dropped.
struct Workdir(PathBuf);

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn workdir() -> Workdir {
    let dir = ScratchFile::new("filelife").0.clone();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pre.txt"), b"made before tracing").unwrap();
    Workdir(dir)
}

/// A helper started and waiting for its go line.
struct Helper {
    child: KillOnDrop,
    pid: u32,
    comm: String,
    dir: Workdir,
}

fn helper() -> Helper {
    let dir = workdir();
    let exe = build_c_helper("filelife-life", include_str!("life.c"), &["-O1"]);
    let child = Command::new(exe).arg(&dir.0).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    wait_sleeping(pid, Duration::from_secs(10));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
    Helper { child: KillOnDrop(child), pid, comm, dir }
}

impl Helper {
    /// Lets the helper run and waits until it is done.
    fn go(&mut self) {
        self.child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut line = String::new();
        BufReader::new(self.child.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line, "done\n", "the helper failed");
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
        assert!(self.dir.0.join("keep.txt").exists() && !self.dir.0.join("pre.txt").exists());
    }
}

/// Runs filelife with `args` plus `-p <helper>` while `helpers` run (the first one is the one traced).
fn traced(args: &[&str], helpers: &mut [Helper]) -> Finished {
    let pid = helpers[0].pid.to_string();
    let mut all = args.to_vec();
    all.extend(["-p", &pid]);
    let mut run = Running::start(TOOL, &all);
    run.wait_attached(Duration::from_secs(20));
    for h in helpers.iter_mut() {
        h.go();
    }
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

#[test]
fn every_file_created_and_deleted_with_its_age() {
    let mut h = [helper()];
    let done = traced(&["--json"], &mut h);
    let recs = json_lines(&done.stdout);
    let mut files: Vec<&str> = recs.iter().map(|r| r["file"].as_str().unwrap()).collect();
    files.sort();
    assert_eq!(files, DELETED, "{}", done.stdout);
    for r in &recs {
        assert_eq!(r["pid"], h[0].pid, "{r}");
        assert_eq!(r["tid"], h[0].pid, "{r}");
        assert_eq!(r["creator_pid"], h[0].pid, "{r}");
        assert_eq!(r["comm"], h[0].comm.as_str(), "{r}");
        let age_ns = r["age_ns"].as_u64().unwrap();
        assert!(age_ns as f64 >= SLEEP_S * 1e9, "{r}");
        assert!((r["age"].as_f64().unwrap() - age_ns as f64 / 1e9).abs() < 1e-6, "{r}");
        assert!(r["ino"].as_u64().unwrap() > 0, "{r}");
        assert!(r["time"].as_str().unwrap().contains('T'), "{r}");
    }
}

/// BCC's columns: the header, then one row per deleted file with the time, PID, name, age and file.
#[test]
fn text_columns() {
    let mut h = [helper()];
    let done = traced(&[], &mut h);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "TIME     PID     COMM             AGE(s)  FILE", "{}", done.stdout);
    let mut files = Vec::new();
    for row in &lines[1..] {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols.len(), 5, "{row}");
        assert_eq!(cols[0].len(), 8, "{row}");
        assert_eq!(cols[0].matches(':').count(), 2, "{row}");
        assert_eq!(cols[1..3], [h[0].pid.to_string().as_str(), h[0].comm.as_str()], "{row}");
        let age: f64 = cols[3].parse().unwrap();
        assert!(age >= SLEEP_S - 0.005, "{row}");
        assert_eq!(cols[3].split('.').nth(1).map(str::len), Some(2), "{row}");
        files.push(cols[4]);
    }
    files.sort();
    assert_eq!(files, DELETED, "{}", done.stdout);
}

/// -F: each file's path from the root, read from the directories above it (through a renamed file and a
/// subdirectory too); without -F, JSON has no path.
#[test]
fn full_path_from_the_root() {
    let mut h = [helper()];
    let done = traced(&["--json", "-F"], &mut h);
    let recs = json_lines(&done.stdout);
    let mut paths: Vec<String> = recs.iter().map(|r| r["path"].as_str().unwrap().to_string()).collect();
    paths.sort();
    let dir = h[0].dir.0.canonicalize().unwrap();
    let mut want: Vec<String> = ["a.txt", "b2.txt", "c.txt", "sub/d.txt", "e.txt", "sub/e.txt"]
        .iter()
        .map(|n| dir.join(n).to_string_lossy().into_owned())
        .collect();
    want.sort();
    assert_eq!(paths, want, "{}", done.stdout);
    let mut h = [helper()];
    let done = traced(&["--json"], &mut h);
    assert!(json_lines(&done.stdout).iter().all(|r| r.get("path").is_none()), "{}", done.stdout);
}

/// -p: another process doing the same in its own directory at the same time is not shown.
#[test]
fn pid_filter_leaves_out_other_processes() {
    let mut hs = [helper(), helper()];
    let done = traced(&["--json"], &mut hs);
    let recs = json_lines(&done.stdout);
    assert_eq!(recs.len(), DELETED.len(), "{}", done.stdout);
    assert!(recs.iter().all(|r| r["pid"] == hs[0].pid), "{}", done.stdout);
    assert!(!recs.iter().any(|r: &Value| r["pid"] == hs[1].pid), "{}", done.stdout);
}

#[test]
fn bad_input() {
    usage::assert_refused(TOOL, &["-p", "999999999"], 1, "999999999");
    usage::assert_refused(TOOL, &["-p", "x"], 2, "x");
    usage::assert_refused(TOOL, &["--no-such-flag"], 2, "no-such-flag");
}

/// SIGTERM ends a quiet run cleanly; `filelife | head -1` ends once a deletion is written to the closed pipe.
#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let me = std::process::id().to_string();
    let dir = workdir();
    let file = dir.0.join("poke.txt");
    pipe::assert_sigterm_and_closed_pipe_end_cleanly(TOOL, &["-p", &me], "TIME", "TIME", || {
        std::fs::write(&file, b"x").unwrap();
        std::fs::remove_file(&file).unwrap();
    });
}

/// A workload that renames itself (its comm) to one with an escape sequence and a newline, then creates and
/// deletes files whose names hold a newline, an ANSI escape sequence and a byte that is not UTF-8: the text
/// columns show them as `ls -b` does, one row each (issue 53 item 8), and JSON keeps the names themselves.
const HOSTILE: &str = r#"
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, b"fl\x1b[1m\nx", 0, 0, 0)
d = os.fsencode(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
names = [b"nl\nname", b"esc\x1b[31mred", b"bad\xffbyte"]
for n in names:
    open(os.path.join(d, n), "wb").close()
for n in names:
    os.unlink(os.path.join(d, n))
print("done", flush=True)
"#;

fn hostile_run(args: &[&str]) -> (u32, Finished) {
    let dir = workdir();
    let mut workload = Workload::python_script(HOSTILE, &[dir.0.to_str().unwrap()]);
    let pid = workload.pid();
    let pid_arg = pid.to_string();
    let mut all = args.to_vec();
    all.extend(["-p", &pid_arg]);
    let mut run = Running::start(TOOL, &all);
    run.wait_attached(Duration::from_secs(20));
    workload.go();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    (pid, done)
}

#[test]
fn control_characters_in_names_are_escaped() {
    let (pid, done) = hostile_run(&[]);
    assert!(!done.stdout.contains('\x1b'), "an escape sequence reached the terminal:\n{}", done.stdout);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "one header and three rows:\n{}", done.stdout);
    let mut shown = Vec::new();
    for row in &lines[1..] {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols.len(), 5, "{row}");
        assert_eq!(cols[1], pid.to_string(), "{row}");
        shown.push((cols[2], cols[4]));
    }
    let comm = r"fl\033[1m\nx";
    assert_eq!(shown, [(comm, r"nl\nname"), (comm, r"esc\033[31mred"), (comm, r"bad\xffbyte")], "{}", done.stdout);
}

#[test]
fn control_characters_in_names_stay_in_json() {
    let (_, done) = hostile_run(&["--json"]);
    let recs = json_lines(&done.stdout);
    let files: Vec<&str> = recs.iter().map(|r| r["file"].as_str().unwrap()).collect();
    assert_eq!(files, ["nl\nname", "esc\x1b[31mred", "bad\u{fffd}byte"], "{}", done.stdout);
    assert!(recs.iter().all(|r| r["comm"] == "fl\x1b[1m\nx"), "{}", done.stdout);
}
