// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ksnoop against a helper whose writes are known (tests/writer.c): after a go byte it makes N write(2)s of 1234
//! bytes to its own file and M pwrite(2)s of 99 bytes at offset 1000000, and nothing else. So, for its PID,
//! vfs_write(file, buf, count, pos) is entered N + M times: count is 1234 N times (with *pos, and the file's f_pos,
//! 0, 1234, 2468, ...: the file offset before each write) and 99 M times (*pos 1000000, f_pos N * 1234); it returns
//! what count said. Checked: the text output's values, JSON, comparisons (with entries held until the return),
//! member access, and -s (only the writes through __x64_sys_write, in entry/entry/return/return order).
//!
//! Tracing needs fentry or kprobes. Where the kernel offers neither (this development host), each tracing test
//! checks the one-line refusal instead; in the kernel matrix's guests (COREBPF_HELPER_DIR is set there) the tool
//! must attach. `info` and bad input need only the kernel's BTF and are checked everywhere.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "ksnoop";
const N: usize = 7;
const M: usize = 3;
const WAIT: Duration = Duration::from_secs(120);

/// The helper, started and waiting for its go byte.
struct Writer {
    child: KillOnDrop,
    _file: ScratchFile,
}

impl Writer {
    fn new() -> Writer {
        let exe = build_c_helper("ksnoop-writer", include_str!("writer.c"), &["-O1"]);
        let file = ScratchFile::new("ksnoop");
        let child = Command::new(exe)
            .arg(&file.0)
            .args([N.to_string(), M.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the writer");
        let pid = child.id();
        wait_sleeping(pid, Duration::from_secs(10));
        Writer { child: KillOnDrop(child), _file: file }
    }

    fn pid(&self) -> String {
        self.child.0.id().to_string()
    }

    /// Sends the go byte and waits for the writes to be done (the helper exits).
    fn go(mut self) {
        self.child.0.stdin.take().unwrap().write_all(b"g").unwrap();
        assert!(self.child.0.wait().unwrap().success(), "the writer failed");
    }
}

/// Starts ksnoop and waits until it is attached; None where the kernel offers no kernel-function tracing (outside
/// the matrix's guests only), after checking that the tool said so in one line, exit 1.
fn start(args: &[&str]) -> Option<Running> {
    let mut run = Running::start(TOOL, args);
    if wait_attached(run.pid(), WAIT).is_ok() {
        run.note_programs();
        return Some(run);
    }
    let done = run.finish(WAIT);
    assert!(std::env::var_os(HELPER_DIR_ENV).is_none(), "ksnoop did not attach in the guest: {}", done.stderr);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    assert!(done.stderr.contains("fentry") && done.stderr.contains("kprobe"), "{}", done.stderr);
    assert!(done.stdout.is_empty(), "{}", done.stdout);
    eprintln!("ksnoop cannot trace kernel functions here: checked its refusal instead (the matrix checks values)");
    None
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// One record of the text output: PID, function, and each value's name with its text (btf_dump's lines joined).
#[derive(Debug)]
struct Record {
    pid: u32,
    func: String,
    values: Vec<(String, String)>,
}

/// The records of ksnoop's text output (after its header line).
fn records(stdout: &str) -> Vec<Record> {
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next().map(str::split_whitespace).map(Iterator::collect::<Vec<_>>),
        Some(vec!["TIME", "CPU", "PID", "FUNCTION/ARGS"]),
        "{stdout}"
    );
    let mut out: Vec<Record> = Vec::new();
    let mut open = false;
    for line in lines {
        if line.is_empty() {
            continue;
        }
        if !open {
            // "            TIME  CPU      PID func("
            let f: Vec<&str> = line.split_whitespace().collect();
            assert!(f.len() == 4 && f[3].ends_with('('), "not a record's first line: {line:?}\n{stdout}");
            let pid = f[2].parse().unwrap();
            out.push(Record { pid, func: f[3].trim_end_matches('(').to_owned(), values: Vec::new() });
            open = true;
        } else if line.trim() == ");" {
            open = false;
        } else if line.starts_with(&" ".repeat(35)) && !line.starts_with(&" ".repeat(36)) && line.contains(" = ") {
            let (name, rest) = line.trim_start().split_once(" = ").unwrap();
            out.last_mut().unwrap().values.push((name.to_owned(), rest.trim().to_owned()));
        } else {
            let v = out.last_mut().unwrap().values.last_mut().expect("a value's text before its name");
            if !v.1.is_empty() {
                v.1.push(' ');
            }
            v.1.push_str(line.trim());
        }
    }
    assert!(!open, "a record was not closed:\n{stdout}");
    for r in &mut out {
        for v in &mut r.values {
            v.1 = v.1.trim_end_matches(',').to_owned();
        }
    }
    out
}

fn value<'a>(r: &'a Record, name: &str) -> &'a str {
    &r.values.iter().find(|v| v.0 == name).unwrap_or_else(|| panic!("no {name} in {r:?}")).1
}

#[test]
fn info_prints_the_btf_signature() {
    let done = run_tool(TOOL, &["info", "vfs_write", "__x64_sys_write"]);
    done.assert_success();
    assert_eq!(
        done.stdout,
        "ssize_t vfs_write(struct file *file, char *buf, size_t count, loff_t *pos);\n\
         long int __x64_sys_write(struct pt_regs *regs);\n"
    );
}

#[test]
fn bad_input() {
    assert_refused(TOOL, &["no_such_kernel_function_here"], 2, "no_such_kernel_function_here");
    assert_refused(TOOL, &["info", "no_such_kernel_function_here"], 2, "no_such_kernel_function_here");
    assert_refused(TOOL, &["vfs_write(nope)"], 2, "no argument 'nope'");
    assert_refused(TOOL, &["vfs_write(count >> 1)"], 2, "count");
    assert_refused(TOOL, &["vfs_write(count == x)"], 2, "'x' is not an integer");
    assert_refused(TOOL, &["vfs_write(file->no_member)"], 2, "no member 'no_member'");
    assert_refused(TOOL, &["vfs_write(count->x)"], 2, "not a pointer to a struct");
    assert_refused(TOOL, &["vfs_write(file == 1"], 2, "')'");
    assert_refused(TOOL, &["vfs_write(file->f_path > 1)"], 2, "cannot be compared");
    assert_refused(TOOL, &["info"], 2, "name a kernel function");
    assert_refused(TOOL, &["-P", "0", "vfs_write"], 2, "0");
    let nine: Vec<&str> = std::iter::repeat_n("vfs_write", 9).collect();
    assert_refused(TOOL, &nine, 2, "at most 8");
}

/// Every vfs_write of the helper, entry and return, with count, *pos and the return value as written.
#[test]
fn entries_and_returns_with_values() {
    let writer = Writer::new();
    let pid = writer.pid();
    let Some(run) = start(&["-p", &pid, "vfs_write"]) else { return };
    writer.go();
    let done = stop(run);
    let recs = records(&done.stdout);
    assert!(recs.iter().all(|r| r.pid.to_string() == pid && r.func == "vfs_write"), "{}", done.stdout);
    let entries: Vec<&Record> = recs.iter().filter(|r| r.values.iter().any(|v| v.0 == "count")).collect();
    let returns: Vec<&Record> = recs.iter().filter(|r| r.values.iter().any(|v| v.0 == "return")).collect();
    assert_eq!((entries.len(), returns.len()), (N + M, N + M), "{}", done.stdout);
    for (i, e) in entries.iter().enumerate() {
        let names: Vec<&str> = e.values.iter().map(|v| v.0.as_str()).collect();
        assert_eq!(names, ["file", "buf", "count", "pos"], "{}", done.stdout);
        let (count, pos) = if i < N { (1234, i * 1234) } else { (99, 1_000_000) };
        assert_eq!(value(e, "count"), format!("(size_t){count}"), "{}", done.stdout);
        assert!(value(e, "pos").ends_with(&format!("(loff_t){pos}")), "{}", done.stdout);
        assert!(value(e, "file").contains("(struct file){"), "{}", done.stdout);
        // buf is a user-space pointer, which the kernel-memory read refuses.
        assert!(
            value(e, "buf").contains("/* Cannot show 'buf' as 'char  *'; invalid/userspace ptr? */"),
            "{}",
            done.stdout
        );
    }
    for (i, r) in returns.iter().enumerate() {
        let ret = if i < N { 1234 } else { 99 };
        assert_eq!(r.values.len(), 1);
        assert_eq!(value(r, "return"), format!("(ssize_t){ret}"), "{}", done.stdout);
    }
    // Each entry is followed by its return.
    let order: Vec<&str> = recs.iter().map(|r| r.values[0].0.as_str()).collect();
    assert_eq!(order, [["file", "return"]; N + M].concat(), "{}", done.stdout);
}

/// JSON lines, comparisons (entry only, return only, and both: the entry is held until its return) and member
/// access, four runs at once on the same writes.
#[test]
fn json_comparisons_and_members() {
    let writer = Writer::new();
    let pid = writer.pid();
    let Some(plain) = start(&["--json", "-p", &pid, "vfs_write(count, pos, file->f_pos, return)"]) else { return };
    let both = start(&["-j", "-p", &pid, "vfs_write(count == 1234, return)"]).expect("attached once already");
    let entry = start(&["-j", "-p", &pid, "vfs_write(count != 1234)"]).expect("attached once already");
    let ret = start(&["-j", "-p", &pid, "vfs_write(return < 100)"]).expect("attached once already");
    writer.go();
    let (plain, both, entry, ret) = (stop(plain), stop(both), stop(entry), stop(ret));

    let num = |l: &serde_json::Value, name: &str| -> i64 {
        let v = l["values"].as_array().unwrap().iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("{l}"));
        v["value"].as_i64().unwrap_or_else(|| panic!("{l}"))
    };
    let lines = json_lines(&plain.stdout);
    assert!(
        lines.iter().all(|l| l["pid"].as_u64() == pid.parse().ok() && l["function"] == "vfs_write"),
        "{}",
        plain.stdout
    );
    let entries: Vec<_> = lines.iter().filter(|l| l["event"] == "entry").collect();
    let returns: Vec<_> = lines.iter().filter(|l| l["event"] == "return").collect();
    assert_eq!((entries.len(), returns.len()), (N + M, N + M), "{}", plain.stdout);
    for (i, e) in entries.iter().enumerate() {
        let (count, pos, f_pos) = if i < N { (1234, i * 1234, i * 1234) } else { (99, 1_000_000, N * 1234) };
        assert_eq!(num(e, "count"), count, "{e}");
        assert_eq!(num(e, "pos"), pos as i64, "{e}");
        assert_eq!(num(e, "file->f_pos"), f_pos as i64, "{e}");
        assert_eq!(e["values"][1]["type"], "loff_t *", "{e}");
        assert!(e["values"][1]["pointer"].as_u64().is_some_and(|p| p > 0), "{e}");
        assert_eq!(e["values"][0]["text"], format!("(size_t){count}"), "{e}");
    }
    let rets: Vec<i64> = returns.iter().map(|r| num(r, "return")).collect();
    assert_eq!(rets, [vec![1234; N], vec![99; M]].concat(), "{}", plain.stdout);

    // Entry and return values with a comparison: one line per call that passed, at its return, with both.
    let lines = json_lines(&both.stdout);
    assert_eq!(lines.len(), N, "{}", both.stdout);
    for l in &lines {
        assert_eq!(l["event"], "return", "{l}");
        assert_eq!((num(l, "count"), num(l, "return")), (1234, 1234), "{l}");
    }
    let lines = json_lines(&entry.stdout);
    assert_eq!(lines.len(), M, "{}", entry.stdout);
    assert!(lines.iter().all(|l| l["event"] == "entry" && num(l, "count") == 99), "{}", entry.stdout);
    // The return value is signed (ssize_t): compared as such.
    let lines = json_lines(&ret.stdout);
    assert_eq!(lines.len(), M, "{}", ret.stdout);
    assert!(lines.iter().all(|l| l["event"] == "return" && num(l, "return") == 99), "{}", ret.stdout);
}

/// -s: vfs_write only under __x64_sys_write (write(2), not pwrite(2)), in the order entry, entry, return, return.
#[test]
fn stack_mode_shows_only_the_chain_in_order() {
    let writer = Writer::new();
    let pid = writer.pid();
    let Some(run) = start(&["-s", "-p", &pid, "__x64_sys_write", "vfs_write(count, return)"]) else { return };
    writer.go();
    let done = stop(run);
    let recs = records(&done.stdout);
    let got: Vec<(String, String, String)> = recs
        .iter()
        .map(|r| {
            assert_eq!(r.pid.to_string(), pid);
            (r.func.clone(), r.values[0].0.clone(), r.values[0].1.clone())
        })
        .collect();
    let chain = |s: &str| s.to_owned();
    let one: Vec<(String, String, String)> = vec![
        (chain("__x64_sys_write"), chain("regs"), String::new()),
        (chain("vfs_write"), chain("count"), chain("(size_t)1234")),
        (chain("vfs_write"), chain("return"), chain("(ssize_t)1234")),
        (chain("__x64_sys_write"), chain("return"), chain("(long int)1234")),
    ];
    assert_eq!(got.len(), 4 * N, "{}", done.stdout);
    for (i, g) in got.iter().enumerate() {
        let want = &one[i % 4];
        assert_eq!((&g.0, &g.1), (&want.0, &want.1), "record {i}:\n{}", done.stdout);
        if !want.2.is_empty() {
            assert_eq!(g.2, want.2, "record {i}:\n{}", done.stdout);
        }
    }
}
