// SPDX-License-Identifier: Apache-2.0 OR MIT
//! opensnoop against a helper that, in a scratch directory of its own, opens a file K times by a relative path
//! and K times by its absolute path, one missing file (ENOENT), one new file with O_CREAT and mode 0640, and the
//! file once through openat2; all filtered by the helper's PID, so concurrent tests never see each other. The
//! helper waits for a line on stdin, so it opens only once the tool is attached.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::runtimes::Workload;
use corebpf_tests::*;
use serde_json::Value;

const HELPER: &str = include_str!("opener.c");

struct Workdir(PathBuf);

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn workdir() -> Workdir {
    let dir = ScratchFile::new("opensnoop").0.clone();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("target.txt"), b"x").unwrap();
    Workdir(dir)
}

/// True once process `pid` holds BPF links (its programs are attached).
fn has_links(pid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return false };
    entries.flatten().filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("link_type:"))).count() >= 4
}

/// Runs opensnoop with `args` plus `-p <helper>` over a K-open helper; returns the work directory and the run.
fn traced(args: &[&str], k: u32) -> (Workdir, Finished) {
    let dir = workdir();
    let done = traced_in(&dir, args, k);
    (dir, done)
}

/// [`traced`] in the work directory `dir`.
fn traced_in(dir: &Workdir, args: &[&str], k: u32) -> Finished {
    let exe = build_c_helper("opensnoop-helper", HELPER, &["-O1"]);
    let mut helper =
        KillOnDrop(Command::new(exe).arg(&dir.0).arg(k.to_string()).stdin(Stdio::piped()).spawn().unwrap());
    let pid = helper.0.id().to_string();
    let mut all = args.to_vec();
    all.extend(["-p", &pid]);
    let mut run = Running::start("opensnoop", &all);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !has_links(run.pid()) {
        assert!(Instant::now() < deadline, "opensnoop {all:?} did not attach within 20 s");
        thread::sleep(Duration::from_millis(20));
    }
    run.note_programs();
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.0.wait().unwrap().success());
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

fn with_path<'a>(recs: &'a [Value], path: &str) -> Vec<&'a Value> {
    recs.iter().filter(|r| r["path"] == path).collect()
}

/// Issue 31 item 17: the tool's own opens while it sets up (the tracefs files of the tracepoints it attaches
/// after the first) are not shown. System-wide, until every program is attached and a moment after.
#[test]
fn its_own_opens_are_not_shown() {
    let mut run = Running::start("opensnoop", &["--json"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !has_links(run.pid()) {
        assert!(Instant::now() < deadline, "opensnoop did not attach within 20 s");
        thread::sleep(Duration::from_millis(20));
    }
    run.wait_attached(Duration::from_secs(20));
    let pid = run.pid();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    let own: Vec<Value> = json_lines(&done.stdout).into_iter().filter(|r| r["pid"] == pid).collect();
    assert!(own.is_empty(), "opensnoop shows its own opens: {own:?}");
}

#[test]
fn every_open_with_fd_errno_and_path() {
    let k = 20;
    let (dir, done) = traced(&["--json"], k);
    let recs = json_lines(&done.stdout);
    let abs = dir.0.join("target.txt").to_string_lossy().into_owned();
    let rel = with_path(&recs, "target.txt");
    assert_eq!(rel.len() as u32, k + 1, "{}", done.stdout);
    assert_eq!(rel.iter().filter(|r| r["syscall"] == "openat2").count(), 1, "{}", done.stdout);
    assert_eq!(with_path(&recs, &abs).len() as u32, k, "{}", done.stdout);
    for r in rel.iter().chain(with_path(&recs, &abs).iter()) {
        assert!(r["fd"].as_i64().unwrap() >= 3, "{r}");
        assert_eq!(r["err"], 0, "{r}");
    }
    let missing = with_path(&recs, "missing.txt");
    assert_eq!(missing.len(), 1, "{}", done.stdout);
    assert_eq!((missing[0]["fd"].clone(), missing[0]["err"].clone()), (Value::from(-1), Value::from(2)));
    assert_eq!(missing[0]["errno"], "ENOENT");
    let created = with_path(&recs, "created.txt");
    assert_eq!(created.len(), 1, "{}", done.stdout);
    assert_eq!(created[0]["mode"], 0o640);
    assert_eq!(created[0]["flags"], (libc::O_WRONLY | libc::O_CREAT) as u64);
    assert_eq!(created[0]["flag_names"], serde_json::json!(["O_WRONLY", "O_CREAT"]));
}

#[test]
fn full_path_from_the_dentry_chain() {
    let (dir, done) = traced(&["--json", "-F"], 2);
    let recs = json_lines(&done.stdout);
    let abs = dir.0.join("target.txt").to_string_lossy().into_owned();
    let rel = with_path(&recs, "target.txt");
    assert_eq!(rel.len(), 3, "{}", done.stdout);
    assert!(rel.iter().all(|r| r["full_path"] == abs.as_str()), "{}", done.stdout);
    assert!(with_path(&recs, &abs).iter().all(|r| r["full_path"] == abs.as_str()));
    // The text column too.
    let (dir, done) = traced(&["-F"], 1);
    let want = dir.0.join("missing.txt").to_string_lossy().into_owned();
    let line = done.stdout.lines().find(|l| l.contains("missing.txt")).unwrap_or_else(|| panic!("{}", done.stdout));
    assert!(line.ends_with(&format!("  -1   2 {want}")), "{line}");
}

/// Two tmpfs mounted one on the other over a directory, unmounted on drop.
struct StackedMounts(PathBuf);

impl Drop for StackedMounts {
    fn drop(&mut self) {
        for _ in 0..2 {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
}

/// A directory under mounts stacked on one another (as /dev/shm is on some hosts): the walk up from the file
/// meets each stacked mount's root, which names itself `/`; the full path holds none of them.
#[test]
fn full_path_skips_stacked_mount_roots() {
    let dir = workdir();
    let mounts = StackedMounts(dir.0.clone());
    for _ in 0..2 {
        let status = Command::new("mount").args(["-t", "tmpfs", "corebpf-stacked"]).arg(&mounts.0).status().unwrap();
        assert!(status.success(), "mount -t tmpfs {}", mounts.0.display());
    }
    std::fs::write(dir.0.join("target.txt"), b"x").unwrap();
    let done = traced_in(&dir, &["--json", "-F"], 1);
    let abs = dir.0.join("missing.txt").to_string_lossy().into_owned();
    let recs = json_lines(&done.stdout);
    let missing = with_path(&recs, "missing.txt");
    assert_eq!(missing.len(), 1, "{}", done.stdout);
    assert_eq!(missing[0]["full_path"], abs.as_str(), "{}", done.stdout);
    drop(mounts);
}

#[test]
fn failed_only_and_flag_filter() {
    let (_, done) = traced(&["--json", "-x"], 3);
    let recs = json_lines(&done.stdout);
    assert_eq!(recs.len(), 1, "{}", done.stdout);
    assert_eq!(recs[0]["path"], "missing.txt");
    let (_, done) = traced(&["--json", "-f", "O_CREAT"], 3);
    let recs = json_lines(&done.stdout);
    assert_eq!(recs.len(), 1, "{}", done.stdout);
    assert_eq!(recs[0]["path"], "created.txt");
}

#[test]
fn extended_columns_and_name_filter() {
    let (_, done) = traced(&["-e", "-n", "opensnoop-h"], 1);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "PID    COMM               FD ERR FLAGS    MODE PATH", "{}", done.stdout);
    let created = lines.iter().find(|l| l.ends_with(" created.txt")).unwrap_or_else(|| panic!("{}", done.stdout));
    assert!(created.contains(&format!(" {:08o} 0640 created.txt", libc::O_WRONLY | libc::O_CREAT)), "{created}");
    let plain = lines.iter().find(|l| l.ends_with(" missing.txt")).unwrap();
    assert!(plain.contains(" 00000000 n/a  missing.txt"), "{plain}");
    let (_, done) = traced(&["--json", "-n", "no-such-comm"], 1);
    assert_eq!(done.stdout, "");
}

#[test]
fn bad_input() {
    let done = run_tool("opensnoop", &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    let done = run_tool("opensnoop", &["-f", "O_BOGUS"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
}

/// The `max_entries` of the ring buffer maps (type 27) that process `pid` holds.
fn ring_buffer_sizes(pid: u32) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return Vec::new() };
    let mut sizes: Vec<u64> = entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter(|t| t.lines().any(|l| l.split_whitespace().eq(["map_type:", "27"])))
        .filter_map(|t| t.lines().find_map(|l| l.strip_prefix("max_entries:")?.trim().parse().ok()))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// BCC's `-b BUFFER_PAGES`: the ring buffer the opens go through is that many pages. With one page, a burst of
/// opens may overflow it, and then every open is either printed or counted on stderr as lost, never both or
/// neither. A number of pages that is not a power of two is a usage error, as BCC says it must be one.
#[test]
fn buffer_pages_size_the_ring_buffer() {
    let page = 4096; // x86-64 and the matrix's kernels
    let mut run = Running::start("opensnoop", &["-b", "2", "--json", "-p", "1"]);
    run.wait_attached(Duration::from_secs(20));
    assert_eq!(ring_buffer_sizes(run.pid()), [2 * page], "-b 2");
    run.signal(libc::SIGINT);
    run.finish(Duration::from_secs(20)).assert_success();
    let mut run = Running::start("opensnoop", &["--json", "-p", "1"]);
    run.wait_attached(Duration::from_secs(20));
    assert_eq!(ring_buffer_sizes(run.pid()), [1024 * page], "the default");
    run.signal(libc::SIGINT);
    run.finish(Duration::from_secs(20)).assert_success();

    let k = 3000;
    let (_, done) = traced(&["-b", "1", "--json"], k);
    // With --json the loss is also a line of its own on stdout: count the opens alone.
    let printed = json_lines(&done.stdout).iter().filter(|r| r.get("path").is_some()).count() as u64;
    let lost: u64 = done
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("opensnoop: lost ")?.split_once(' ')?.0.parse::<u64>().ok())
        .sum();
    // 2K opens of target.txt, missing.txt, created.txt and one openat2.
    assert_eq!(printed + lost, 2 * u64::from(k) + 3, "printed {printed}, lost {lost}:\n{}", done.stderr);

    for bad in ["3", "0", "-1", "x"] {
        let done = run_tool("opensnoop", &["-b", bad]);
        assert_eq!(done.status.code(), Some(2), "-b {bad}: {}", done.stderr);
        assert_eq!(done.stderr.trim().lines().count(), 1, "-b {bad}: {}", done.stderr);
    }
}

/// A workload that renames itself (its comm) to one with an escape sequence and a newline, then opens files
/// whose names hold a newline, an ANSI escape sequence and a byte that is not UTF-8, in a directory of its own.
const HOSTILE: &str = r#"
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, b"os\x1b[1m\nx", 0, 0, 0)
d = os.fsencode(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
for n in [b"nl\nname", b"esc\x1b[31mred", b"bad\xffbyte"]:
    os.close(os.open(os.path.join(d, n), os.O_WRONLY | os.O_CREAT, 0o600))
print("done", flush=True)
"#;

/// Issue 53 item 8: COMM and PATH show control characters and bytes that are not UTF-8 as `ls -b` does, one row
/// per open, and nothing of them reaches the terminal raw; JSON keeps the names.
#[test]
fn control_characters_in_names_are_escaped() {
    let dir = workdir();
    for json in [false, true] {
        let mut workload = Workload::python_script(HOSTILE, &[dir.0.to_str().unwrap()]);
        let pid = workload.pid().to_string();
        let args: &[&str] = if json { &["--json", "-p", &pid] } else { &["-p", &pid] };
        let mut run = Running::start("opensnoop", args);
        run.wait_attached(Duration::from_secs(20));
        workload.go();
        run.signal(libc::SIGINT);
        let done = run.finish(Duration::from_secs(20));
        done.assert_success();
        let dir_text = dir.0.to_str().unwrap();
        if json {
            let recs = json_lines(&done.stdout);
            let paths: Vec<&str> = recs.iter().filter_map(|r| r["path"].as_str()).collect();
            for name in ["nl\nname", "esc\x1b[31mred", "bad\u{fffd}byte"] {
                assert!(paths.contains(&format!("{dir_text}/{name}").as_str()), "{name:?}: {}", done.stdout);
            }
            assert!(recs.iter().all(|r| r["comm"] == "os\x1b[1m\nx"), "{}", done.stdout);
            continue;
        }
        assert!(!done.stdout.contains('\x1b'), "an escape sequence reached the terminal:\n{}", done.stdout);
        let rows: Vec<Vec<&str>> = done
            .stdout
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .filter(|f: &Vec<&str>| f.len() == 5)
            .collect();
        assert!(rows.iter().all(|f| f[0] == pid && f[1] == r"os\033[1m\nx"), "{}", done.stdout);
        let paths: Vec<&str> = rows.iter().map(|f| f[4]).collect();
        for name in [r"nl\nname", r"esc\033[31mred", r"bad\xffbyte"] {
            assert!(paths.contains(&format!("{dir_text}/{name}").as_str()), "{name}: {}", done.stdout);
        }
        assert_eq!(done.stdout.lines().count(), rows.len() + 1, "a row was split:\n{}", done.stdout);
    }
}
