// SPDX-License-Identifier: Apache-2.0 OR MIT
//! filetop against a helper whose reads and writes are known (tests/rw.c), filtered by its PID (-p): its row for
//! its file in a directory of its own holds exactly its calls and BCC's Kbytes, in text and in JSON; -a adds
//! /dev/null (type O) and a socket pair (type S), which the default leaves out; -d keeps one directory; --read-only
//! and --write-only count one direction; -p leaves out another helper doing the same; -s orders and -r cuts the
//! rows; bad input is one line; SIGINT, SIGTERM and a closed pipe end the tool cleanly. (Debian's libbpf-tools
//! filetop needs kprobes or fentry, which this host refuses, so it is no anchor here.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "filetop";
const HEADER: &str = "TID     COMM             READS  WRITES R_Kb    W_Kb    T FILE";
/// The helper's calls on its file: 5 read() of 1000 and 2 pread64() of 200 bytes; 7 write() of 4096 and one
/// pwrite64() of 300 bytes.
const READS: u64 = 7;
const READ_BYTES: u64 = 5 * 1000 + 2 * 200;
const WRITES: u64 = 8;
const WRITE_BYTES: u64 = 7 * 4096 + 300;

/// A directory of one's own under /var/tmp (not tmpfs), removed with what is in it when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(tag: &str) -> ScratchDir {
        let path = ScratchFile::new(tag).0.clone();
        std::fs::create_dir_all(&path).unwrap();
        ScratchDir(path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits until `run` is tracing with every one of its links: the tracepoint path attaches 10 pairs of system call
/// tracepoints one after another (5 with --read-only or --write-only), which can take longer under load than
/// [`Running::wait_attached`]'s quiet time. The banner is printed once all are attached; JSON output has none, so
/// there the links are counted: the kernel-function paths hold 2 (1 one way), the tracepoint path 20 (10).
fn wait_all_linked(run: &mut Running, args: &[&str]) {
    if !args.contains(&"-j") {
        run.wait_for_line("Tracing...", Duration::from_secs(20));
        return;
    }
    run.wait_attached(Duration::from_secs(20));
    let one_way = args.iter().any(|a| a.ends_with("-only"));
    let whole: [usize; 2] = if one_way { [1, 10] } else { [2, 20] };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !whole.contains(&links_of(run.pid())) {
        assert!(std::time::Instant::now() < deadline, "{} links, not {whole:?}", links_of(run.pid()));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A helper started on `file`, waiting for its "go".
struct Helper {
    child: KillOnDrop,
    pid: u32,
    comm: String,
}

fn helper(file: &Path) -> Helper {
    let exe = build_c_helper("filetop-rw", include_str!("rw.c"), &["-O1"]);
    let child =
        Command::new(&exe).arg(file).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start the helper");
    let pid = child.id();
    wait_sleeping(pid, Duration::from_secs(10));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
    Helper { child: KillOnDrop(child), pid, comm }
}

/// What one run produced: the tool's output, the helper's PID and name, the file's name.
struct Traced {
    done: Finished,
    pid: u32,
    comm: String,
    name: String,
}

/// Runs filetop with `args` (then `-p` the helper's PID unless `no_pid`, and an interval of an hour: one report,
/// at SIGINT) while one helper does its work on a file named `name` in a directory of its own.
fn trace_helper(name: &str, args: &[&str], env: &[(&str, &str)]) -> Traced {
    let dir = ScratchDir::new("filetop");
    let file = dir.0.join(name);
    let mut h = helper(&file);
    let pid = h.pid.to_string();
    let mut ours: Vec<&str> = args.to_vec();
    ours.extend(["-p", pid.as_str(), "3600"]);
    let mut run = Running::start_with_env(TOOL, &ours, env);
    wait_all_linked(&mut run, args);
    go_and_wait(&mut h.child.0);
    run.signal(libc::SIGINT);
    Traced { done: run.finish(Duration::from_secs(20)), pid: h.pid, comm: h.comm, name: name.to_string() }
}

/// A text row: TID, COMM, READS, WRITES, R_Kb, W_Kb, T, FILE.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct TextRow {
    tid: u32,
    comm: String,
    reads: u64,
    writes: u64,
    rkb: u64,
    wkb: u64,
    kind: String,
    file: String,
}

/// Every row of every screen in `text`.
fn text_rows(text: &str) -> Vec<TextRow> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 8 || f[0] == "TID" {
                return None;
            }
            Some(TextRow {
                tid: f[0].parse().ok()?,
                comm: f[1].into(),
                reads: f[2].parse().ok()?,
                writes: f[3].parse().ok()?,
                rkb: f[4].parse().ok()?,
                wkb: f[5].parse().ok()?,
                kind: f[6].into(),
                file: f[7].into(),
            })
        })
        .collect()
}

fn rows_of(text: &str, tid: u32) -> Vec<TextRow> {
    let mut rows: Vec<TextRow> = text_rows(text).into_iter().filter(|r| r.tid == tid).collect();
    rows.sort();
    rows
}

fn file_row(t: &Traced) -> TextRow {
    TextRow {
        tid: t.pid,
        comm: t.comm.clone(),
        reads: READS,
        writes: WRITES,
        rkb: READ_BYTES / 1024,
        wkb: WRITE_BYTES / 1024,
        kind: "R".into(),
        file: t.name.clone(),
    }
}

fn exact_rows(env: &[(&str, &str)]) {
    let t = trace_helper("ft-data", &["-C"], env);
    t.done.assert_success();
    let mut lines = t.done.stdout.lines();
    assert_eq!(lines.next(), Some("Tracing... Output every 3600 secs. Hit Ctrl-C to end"));
    assert_eq!(lines.next(), Some(""), "-C: a blank line before each screen");
    let load = lines.next().unwrap();
    assert_eq!(&load[8..18], " loadavg: ", "{}", t.done.stdout);
    assert_eq!(lines.next(), Some(""));
    assert_eq!(lines.next(), Some(HEADER));
    assert_eq!(t.done.stdout.lines().last(), Some("Detaching..."));
    // Only its file: /dev/null, the socket pair and its stdin and stdout pipes are not regular files.
    assert_eq!(rows_of(&t.done.stdout, t.pid), [file_row(&t)], "{}", t.done.stdout);
    t.done.assert_no_programs_left();
}

#[test]
fn exact_row_of_the_helpers_file() {
    exact_rows(&[]);
}

#[test]
fn exact_row_forced_tracepoint() {
    exact_rows(&[("COREBPF_ATTACH", "tracepoint")]);
}

#[test]
fn json_rows_are_exact() {
    let t = trace_helper("ft-json", &["-j"], &[]);
    t.done.assert_success();
    let lines = json_lines(&t.done.stdout);
    assert_eq!(lines.len(), 1, "{}", t.done.stdout);
    let l = &lines[0];
    assert_eq!((l["tid"].as_u64(), l["pid"].as_u64()), (Some(t.pid.into()), Some(t.pid.into())), "{l}");
    assert_eq!(l["comm"], t.comm.as_str());
    assert_eq!(l["file"], "ft-json");
    assert_eq!(l["type"], "R");
    let counts = ["reads", "writes", "read_bytes", "write_bytes"].map(|f| l[f].as_u64().unwrap());
    assert_eq!(counts, [READS, WRITES, READ_BYTES, WRITE_BYTES], "{l}");
    let file = std::fs::metadata("/var/tmp/corebpf-tests").unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(l["dev_major"].as_u64(), Some(libc::major(file.dev()).into()), "{l}");
    assert_eq!(l["dev_minor"].as_u64(), Some(libc::minor(file.dev()).into()), "{l}");
    assert!(l["inode"].as_u64().unwrap() > 0);
    assert!(l["time"].as_str().unwrap().contains('T'));
}

#[test]
fn all_files_adds_dev_null_and_the_socket_pair() {
    let t = trace_helper("ft-all", &["-C", "-a"], &[]);
    t.done.assert_success();
    let rows = rows_of(&t.done.stdout, t.pid);
    assert!(rows.contains(&file_row(&t)), "{}", t.done.stdout);
    let null = TextRow { reads: 0, writes: 3, rkb: 0, wkb: 1, kind: "O".into(), file: "null".into(), ..file_row(&t) };
    assert!(rows.contains(&null), "{}", t.done.stdout);
    let sockets: Vec<(u64, u64)> = rows.iter().filter(|r| r.kind == "S").map(|r| (r.reads, r.writes)).collect();
    assert_eq!(sockets.len(), 2, "one row per end of the pair:\n{}", t.done.stdout);
    assert!(sockets.contains(&(0, 2)) && sockets.contains(&(2, 0)), "{}", t.done.stdout);
    assert_eq!(rows.len(), 4, "no pipe (they have no name):\n{}", t.done.stdout);
}

#[test]
fn read_only_and_write_only_and_directory() {
    let t = trace_helper("ft-ro", &["-C", "--read-only"], &[]);
    t.done.assert_success();
    let want = TextRow { writes: 0, wkb: 0, ..file_row(&t) };
    assert_eq!(rows_of(&t.done.stdout, t.pid), [want], "{}", t.done.stdout);

    let t = trace_helper("ft-wo", &["-C", "--write-only"], &[]);
    t.done.assert_success();
    let want = TextRow { reads: 0, rkb: 0, ..file_row(&t) };
    assert_eq!(rows_of(&t.done.stdout, t.pid), [want], "{}", t.done.stdout);

    // -d: its own directory shows the file; another directory shows nothing of it, even with -a.
    let dir = ScratchDir::new("filetop-d");
    let file = dir.0.join("ft-dir");
    let mut h = helper(&file);
    let pid = h.pid.to_string();
    let d = dir.0.to_str().unwrap();
    let args = ["-C", "-d", d, "-p", &pid, "3600"];
    let mut run = Running::start(TOOL, &args);
    wait_all_linked(&mut run, &args);
    go_and_wait(&mut h.child.0);
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(done.stdout.starts_with(&format!("Tracing directory: {d} (Inode: ")), "{}", done.stdout);
    let rows = rows_of(&done.stdout, h.pid);
    assert_eq!(
        rows.iter().map(|r| (r.file.as_str(), r.reads, r.writes)).collect::<Vec<_>>(),
        [("ft-dir", READS, WRITES)]
    );

    let other = ScratchDir::new("filetop-other");
    let t = trace_helper("ft-nodir", &["-C", "-a", "-d", other.0.to_str().unwrap()], &[]);
    t.done.assert_success();
    assert_eq!(rows_of(&t.done.stdout, t.pid), [], "{}", t.done.stdout);
}

#[test]
fn pid_filter_leaves_out_another_process() {
    let dir = ScratchDir::new("filetop-two");
    let mut ours = helper(&dir.0.join("ft-ours"));
    let mut theirs = helper(&dir.0.join("ft-theirs"));
    let pid = ours.pid.to_string();
    let args = ["-C", "-a", "-p", &pid, "3600"];
    let mut run = Running::start(TOOL, &args);
    wait_all_linked(&mut run, &args);
    go_and_wait(&mut theirs.child.0);
    go_and_wait(&mut ours.child.0);
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    let rows = text_rows(&done.stdout);
    assert!(rows.iter().all(|r| r.tid == ours.pid), "{}", done.stdout);
    assert!(rows.iter().any(|r| r.file == "ft-ours" && r.reads == READS), "{}", done.stdout);
    assert!(!done.stdout.contains("ft-theirs"), "{}", done.stdout);
}

#[test]
fn without_pid_both_helpers_are_there() {
    // The same two helpers with no -p: each has its own row (the other tests filter; this one shows the rows are
    // by thread and file, not merged).
    let dir = ScratchDir::new("filetop-both");
    let mut a = helper(&dir.0.join("ft-a"));
    let mut b = helper(&dir.0.join("ft-b"));
    let args = ["-C", "-j", "-d", dir.0.to_str().unwrap(), "3600"];
    let mut run = Running::start(TOOL, &args);
    wait_all_linked(&mut run, &args);
    go_and_wait(&mut a.child.0);
    go_and_wait(&mut b.child.0);
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    let got: BTreeMap<String, (u64, u64, u64)> = json_lines(&done.stdout)
        .iter()
        .map(|l| {
            (
                l["file"].as_str().unwrap().to_string(),
                (l["tid"].as_u64().unwrap(), l["reads"].as_u64().unwrap(), l["writes"].as_u64().unwrap()),
            )
        })
        .collect();
    let want = BTreeMap::from([
        ("ft-a".to_string(), (a.pid.into(), READS, WRITES)),
        ("ft-b".to_string(), (b.pid.into(), READS, WRITES)),
    ]);
    assert_eq!(got, want, "{}", done.stdout);
}

#[test]
fn sort_and_row_limit() {
    // By reads the file (7) comes before /dev/null (0 reads, 3 writes); by writes it also leads (8); by wbytes
    // too; -r 1 keeps one row.
    let order = |args: &[&str]| {
        let t = trace_helper("ft-sort", args, &[]);
        t.done.assert_success();
        text_rows(&t.done.stdout)
            .into_iter()
            .filter(|r| r.tid == t.pid && r.kind != "S")
            .map(|r| r.file)
            .collect::<Vec<_>>()
    };
    assert_eq!(order(&["-C", "-a", "-s", "reads"]), ["ft-sort", "null"]);
    assert_eq!(order(&["-C", "-a", "-s", "wbytes"]), ["ft-sort", "null"]);
    assert_eq!(order(&["-C", "-a", "-r", "1"]), ["ft-sort"]);
    // Socket rows: 2 reads of 100 bytes sort above the socket end with 0 reads under -s rbytes.
    let t = trace_helper("ft-sort2", &["-C", "-a", "-s", "rbytes"], &[]);
    let kinds: Vec<(String, u64)> =
        text_rows(&t.done.stdout).into_iter().filter(|r| r.tid == t.pid).map(|r| (r.kind, r.reads)).collect();
    assert_eq!(kinds.first(), Some(&("R".to_string(), READS)), "{}", t.done.stdout);
    assert_eq!(kinds[1], ("S".to_string(), 2), "{}", t.done.stdout);
}

#[test]
fn clears_the_screen_by_default() {
    let t = trace_helper("ft-clear", &[], &[]);
    t.done.assert_success();
    let after_banner = t.done.stdout.split_once('\n').unwrap().1;
    assert!(after_banner.starts_with("\x1b[H\x1b[2J"), "{:?}", t.done.stdout);
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&["-p", "999999999"][..], "no process with PID", 1),
        (&["-d", "/nonexistent-filetop-dir"][..], "/nonexistent-filetop-dir", 1),
        (&["-d", "/etc/hostname"][..], "not a directory", 1),
        (&["-r", "0"][..], "", 2),
        (&["-s", "name"][..], "invalid value", 2),
        (&["--read-only", "--write-only"][..], "cannot be used with", 2),
        (&["0"][..], "not a number of seconds", 2),
        (&["1", "0"][..], "", 2),
        (&["1", "2", "3"][..], "unexpected argument", 2),
    ] {
        assert_refused(TOOL, args, code, what);
    }
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let pid = std::process::id().to_string();
    let mut run = Running::start(TOOL, &["-C", "-p", &pid]);
    run.wait_for_line("Tracing...", Duration::from_secs(20));
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();
    // `filetop | head -1`: the banner is read, the pipe closes, the next screen ends the tool quietly.
    assert_ends_when_pipe_closes(TOOL, &["-C"], "Tracing... Output every", || {});
}

#[test]
fn long_names_are_cut_as_bcc_cuts_them() {
    // 40 bytes: the kernel's name is longer than the 32 kept, so FILE is its first 29 bytes and "...".
    let name = "ft-a-rather-long-file-name-of-40-bytes-x";
    assert_eq!(name.len(), 40);
    let t = trace_helper(name, &["-C"], &[]);
    t.done.assert_success();
    let want = TextRow { file: "ft-a-rather-long-file-name-of...".into(), ..file_row(&t) };
    assert_eq!(rows_of(&t.done.stdout, t.pid), [want], "{}", t.done.stdout);
}

/// `--prometheus` with `-p`: the helper's reads, writes and bytes on its file are the counters of its process
/// name and file, exactly; after the helper has exited its row is folded into the tool's own totals (and deleted
/// from the kernel's map), and a second scrape reads the same values. promtool accepts the exposition.
#[test]
fn prometheus_counts_every_call_and_byte() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let dir = ScratchDir::new("filetop-prom");
    let mut h = helper(&dir.0.join("ft-prom"));
    let (tool, addr) = serving(TOOL, &["-p", &h.pid.to_string()]);
    // The tracepoint path attaches twenty links one after another: serving starts before the last of them.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while ![2, 20].contains(&links_of(tool.pid())) {
        assert!(std::time::Instant::now() < deadline, "{} links", links_of(tool.pid()));
        std::thread::sleep(Duration::from_millis(20));
    }
    go_and_wait(&mut h.child.0);
    let series =
        |name: &str| format!("corebpf_filetop_{name}{{comm=\"{}\",file=\"ft-prom\",type=\"regular\"}}", h.comm);
    let check = |text: &str| {
        let got = ["reads_total", "read_bytes_total", "writes_total", "written_bytes_total"]
            .map(|n| sample(text, &series(n)));
        let want = [READS, READ_BYTES, WRITES, WRITE_BYTES].map(|n| Some(n as f64));
        assert_eq!(got, want, "{text}");
    };
    let first = scrape(&addr);
    promtool_accepts(&first);
    check(&first);
    check(&scrape(&addr));
    tool.signal(libc::SIGTERM);
    let done = tool.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    assert_refused(TOOL, &["--prometheus", "127.0.0.1:0", "1"], 2, "takes no interval");
}

/// A file name with a newline and an ANSI escape sequence shows as `ls -b` shows it, in one row, and nothing of
/// it reaches the terminal raw (issue 53 item 8); JSON keeps the name itself.
#[test]
fn control_characters_in_names_are_escaped() {
    let name = "ft-nl\nline\x1b[31mred";
    let t = trace_helper(name, &["-C"], &[]);
    t.done.assert_success();
    assert!(!t.done.stdout.contains('\x1b'), "an escape sequence reached the terminal:\n{}", t.done.stdout);
    let want = TextRow { file: r"ft-nl\nline\033[31mred".into(), ..file_row(&t) };
    assert_eq!(rows_of(&t.done.stdout, t.pid), [want], "{}", t.done.stdout);

    let t = trace_helper(name, &["-j"], &[]);
    t.done.assert_success();
    let files: Vec<serde_json::Value> = json_lines(&t.done.stdout).iter().map(|l| l["file"].clone()).collect();
    assert_eq!(files, [name], "{}", t.done.stdout);
}
