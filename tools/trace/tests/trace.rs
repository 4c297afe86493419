// SPDX-License-Identifier: Apache-2.0 OR MIT
//! trace against a helper whose events are known (tests/src/work.c): after a `go` line on stdin it calls `work(n)`
//! 10, 20 and 30 times with n = 1, 2, 3 (returning n*10-25), opens MISSING unique missing files
//! (`/nonexistent/trace-PID-I`) and /dev/null 3 times, and writes 7 bytes of 1 and 5 of 4096 to it. Every run
//! filters by the helper's PID (-p), so concurrent tests never show up. The tool prints its header once attached.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::libc;
use corebpf_tests::{build_c_helper, json_lines, run_tool, Finished, KillOnDrop, Running, EXPRS_C, WORK_C};

const MISSING: usize = 6;
const WRITES_LARGE: usize = 5;

fn helper() -> PathBuf {
    let missing = format!("-DMISSING={MISSING}");
    build_c_helper("trace-helper", WORK_C, &["-O1", "-static", "-DTAG=\"trace\"", &missing, "-DNULL_OPENS=3"])
}

/// Runs trace with `-p HELPER` and `args` (`{exe}` is the helper's path) around one run of the helper. The tool
/// is stopped with SIGINT after the helper exits, unless `stops_itself`; returns (finished tool, helper PID).
fn run_with_helper(args: &[&str], stops_itself: bool) -> (Finished, u32) {
    run_with(&helper(), args, stops_itself)
}

/// [`run_with_helper`] around `exe`, a helper that waits for a line on stdin before it works.
fn run_with(exe: &std::path::Path, args: &[&str], stops_itself: bool) -> (Finished, u32) {
    let child = Command::new(exe).stdin(Stdio::piped()).spawn().expect("starting the helper");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id();
    let mut all = vec!["-p".to_owned(), pid.to_string()];
    all.extend(args.iter().map(|a| a.replace("{exe}", &exe.display().to_string())));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let json = all.contains(&"--json");
    let mut run = Running::start("trace", &all);
    if json {
        run.wait_attached(Duration::from_secs(60));
    } else {
        run.wait_for_line("PID     TID", Duration::from_secs(60));
    }
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.0.wait().unwrap().success(), "helper failed");
    if !stops_itself {
        // The last events are in the ring buffer by now; SIGINT drains it.
        run.signal(libc::SIGINT);
    }
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    (done, pid)
}

/// The message column of the event lines (after the FUNC column) whose FUNC is `func`.
fn messages(stdout: &str, func: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let at = cols.iter().position(|c| *c == func)?;
            Some(cols[at + 1..].join(" "))
        })
        .collect()
}

#[test]
fn openat_prints_each_unique_file_name_once() {
    let (done, pid) = run_with_helper(&[r#"t:syscalls:sys_enter_openat "%s", args->filename"#], false);
    assert!(done.stdout.starts_with("PID     TID     COMM            FUNC             -\n"), "{}", done.stdout);
    let names = messages(&done.stdout, "sys_enter_openat");
    for i in 0..MISSING {
        let want = format!("/nonexistent/trace-{pid}-{i}");
        assert_eq!(names.iter().filter(|n| **n == want).count(), 1, "{want} in:\n{}", done.stdout);
    }
    // Each line is the helper's: PID and TID columns.
    for line in done.stdout.lines().skip(1) {
        assert!(line.starts_with(&format!("{pid:<7} {pid:<7} ")), "{line}");
    }
}

#[test]
fn retval_filter_shows_only_failures() {
    let (done, _) = run_with_helper(
        &[
            r#"t:syscalls:sys_exit_openat (args->ret < 0) "ret=%d", args->ret"#,
            // work returns an int: a user function's retval is a 64-bit value unless cast.
            r#"r:{exe}:work ((int)retval < 0) "ret=%d", retval"#,
        ],
        false,
    );
    let opens = messages(&done.stdout, "sys_exit_openat");
    assert_eq!(opens, vec!["ret=-2".to_owned(); MISSING], "{}", done.stdout);
    let mut rets = messages(&done.stdout, "work");
    rets.sort();
    let mut want = vec!["ret=-15".to_owned(); 10];
    want.extend(vec!["ret=-5".to_owned(); 20]);
    assert_eq!(rets, want, "{}", done.stdout);
}

#[test]
fn signature_names_and_predicates_on_arguments() {
    let (done, _) = run_with_helper(&[r#"p:{exe}:work(int n) (n == 2 || n > 2 && n < 3) "n=%d", n"#], false);
    assert_eq!(messages(&done.stdout, "work"), vec!["n=2".to_owned(); 20], "{}", done.stdout);
}

#[test]
fn max_events_stops_after_five() {
    let (done, _) = run_with_helper(&["-M", "5", r#"p:{exe}:work "n=%d", arg1"#], true);
    assert_eq!(messages(&done.stdout, "work"), vec!["n=1".to_owned(); 5], "{}", done.stdout);
}

#[test]
fn json_events() {
    let (done, pid) =
        run_with_helper(&["--json", r#"t:syscalls:sys_enter_write (args->count > 100) "%d", args->count"#], false);
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), WRITES_LARGE, "{}", done.stdout);
    for l in lines {
        assert_eq!(l["pid"], pid);
        assert_eq!(l["msg"], "4096");
        assert_eq!(l["values"][0], 4096);
    }
}

#[test]
fn kernel_function_probes_need_kprobes() {
    let _ = helper();
    if !std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        let done = run_tool("trace", &[r#"p::vfs_write (arg3 > 100) "count=%d", arg3"#]);
        assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
        assert!(done.stderr.contains("kprobes"), "{}", done.stderr);
        // Parameter names from the kernel's BTF.
        let done = run_tool("trace", &[r#"p::vfs_write (count > 100) "count=%d", count"#]);
        assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
        let done = run_tool("trace", &[r#"p::vfs_write (cnt > 100) "count=%d", cnt"#]);
        assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
        assert!(done.stderr.contains("its parameters: file, buf, count"), "{}", done.stderr);
        return;
    }
    let (done, _) = run_with_helper(&[r#"p::vfs_write (arg3 > 100) "count=%d", arg3"#], false);
    assert_eq!(messages(&done.stdout, "vfs_write"), vec!["count=4096".to_owned(); WRITES_LARGE], "{}", done.stdout);
}

#[test]
fn bad_probes_fail_with_one_line() {
    let cases: [(&[&str], &str); 9] = [
        (&[r#"t:syscalls:sys_enter_openat "%s", args->filenam"#], "no field 'filenam'"),
        (&[r#"t:syscalls:sys_enter_opnat "%s", args->filename"#], "unknown tracepoint"),
        (&[r#"t:syscalls:sys_enter_openat (args->flags & ) "%d", args->flags"#], "missing"),
        (&[r#"t:syscalls:sys_enter_openat "%s %d", args->filename"#], "conversions"),
        (&[r#"t:syscalls:sys_enter_openat "%f", args->flags"#], "%f"),
        (&["u:c:no_such_probe"], "no USDT probe 'no_such_probe'"),
        (&["c:open (arg1 == 1"], "unmatched"),
        (&["-K", "c:open", "-a", "-z"], "-z"),
        (&["p:c:write (arg1 == 1) \"%d\", retval"], "retval"),
    ];
    for (args, needle) in cases {
        let done = run_tool("trace", args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(needle), "{args:?}: expected '{needle}' in {}", done.stderr);
    }
}

/// Expressions on kernel functions, typed by BTF: members through pointers (`file->f_path.dentry->d_name.name`,
/// a member of an anonymous union included), a parameter named in a return probe (kept from the entry), and the
/// return value's BTF type (ssize_t). The kernel matrix runs it through fentry and kprobes; a kernel that refuses
/// both refuses it with one line.
#[test]
fn kernel_function_expressions() {
    let _ = helper();
    let entry = r#"p::vfs_write (count > 100 && file->f_path.dentry->d_name.len == 4) "%s %d", file->f_path.dentry->d_name.name, count"#;
    let ret = r#"r::vfs_write (count > 100 && retval > 0) "ret=%d", retval"#;
    if !std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        corebpf_tests::usage::assert_refused("trace", &[entry], 1, "kernel function vfs_write");
        return;
    }
    let (done, _) = run_with_helper(&[entry, ret], false);
    assert_eq!(
        messages(&done.stdout, "vfs_write").iter().filter(|m| *m == "null 4096").count(),
        WRITES_LARGE,
        "{}",
        done.stdout
    );
    assert_eq!(
        messages(&done.stdout, "vfs_write").iter().filter(|m| *m == "ret=4096").count(),
        WRITES_LARGE,
        "{}",
        done.stdout
    );
}

/// -U: each event's user stack below it, named as BCC's trace names them (`name+0xOFF [module]`), then an empty
/// line; %U names a user address. The probe is on take_fn's first instruction, before it saves its frame record,
/// so the kernel's walk of the stack skips its caller (main) on arm64 and on older x86 kernels: the tool reads
/// the caller at the probe and puts it second, where a newer x86 kernel has it already (never twice).
#[test]
fn user_stacks_and_symbolized_addresses() {
    // The expressions' helper (built as tests/expressions.rs builds it), with frame pointers.
    let exe = build_c_helper("trace-exprs", EXPRS_C, &["-O1", "-fno-omit-frame-pointer"]);
    let module = exe.file_name().unwrap().to_str().unwrap().to_owned();
    let (done, _) = run_with(&exe, &["-U", r#"p:{exe}:take_fn "%U", arg1"#], false);
    let lines: Vec<&str> = done.stdout.lines().collect();
    let at = lines.iter().position(|l| l.contains(" take_fn ")).unwrap_or_else(|| panic!("{}", done.stdout));
    assert!(lines[at].ends_with(&format!("take_fn          scaled+0x0 [{module}]")), "{}", done.stdout);
    assert_eq!(lines[at + 1], format!("        take_fn+0x0 [{module}]"), "{}", done.stdout);
    let main = "        main+0x";
    assert!(lines[at + 2].starts_with(main) && lines[at + 2].ends_with(&format!(" [{module}]")), "{}", done.stdout);
    let block: Vec<&str> = lines[at + 1..].iter().take_while(|l| !l.is_empty()).copied().collect();
    assert_eq!(block.iter().filter(|l| l.starts_with(main)).count(), 1, "{}", done.stdout);
    // The walk goes on past main, into the C library (named on the host; the guests' copy may be [unknown]).
    assert!(block.len() >= 3, "{}", done.stdout);
}
