// SPDX-License-Identifier: Apache-2.0 OR MIT
//! trace's expression language against a helper whose calls are known (tests/src/exprs.c): predicates typed the
//! same whatever the format prints, C operators, casts, struct members through pointers, STRCMP, a `char *`
//! return tested for NULL, more than six format arguments and 256-byte strings. Every run filters by the
//! helper's PID.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::libc;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::{build_c_helper, Finished, KillOnDrop, Running, EXPRS_C};

fn helper() -> PathBuf {
    build_c_helper("trace-exprs", EXPRS_C, &["-O1", "-fno-omit-frame-pointer"])
}

/// Runs trace with `-p HELPER` and `args` (`{exe}` is the helper's path) around one run of the helper.
fn traced(args: &[&str]) -> Finished {
    let exe = helper();
    let child = Command::new(&exe).stdin(Stdio::piped()).spawn().expect("starting the helper");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id();
    let mut all = vec!["-p".to_owned(), pid.to_string()];
    all.extend(args.iter().map(|a| a.replace("{exe}", &exe.display().to_string())));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut run = Running::start("trace", &all);
    run.wait_for_line("PID     TID", Duration::from_secs(60));
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.0.wait().unwrap().success(), "helper failed");
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The messages of the lines whose FUNC column is `func`, sorted.
fn messages(stdout: &str, func: &str) -> Vec<String> {
    let mut out: Vec<String> = stdout
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let at = cols.iter().position(|c| *c == func)?;
            Some(cols[at + 1..].join(" "))
        })
        .collect();
    out.sort();
    out
}

fn times(text: &str, n: usize) -> Vec<String> {
    vec![text.to_owned(); n]
}

/// The sorted messages expected: each text as many times as given.
fn want(parts: &[(&str, usize)]) -> Vec<String> {
    let mut all: Vec<String> = parts.iter().flat_map(|(text, n)| times(text, *n)).collect();
    all.sort();
    all
}

/// Issue 32: `(retval < 0) "%x"` never fired, as the predicate read retval with its format's type. A user
/// function's return value is a signed 64-bit value in a predicate, whatever is printed.
#[test]
fn a_predicate_means_the_same_whatever_the_format_prints() {
    let done = traced(&[
        r#"r:{exe}:fail_or (retval < 0) "%x", retval"#,
        r#"r:{exe}:fail_or (retval == -1) "u=%u", retval"#,
        r#"r:{exe}:fail_or ((int)retval > 25) "big=%d", retval"#,
    ]);
    let expected = want(&[("ffffffff", 10), ("u=4294967295", 10), ("big=26", 1), ("big=28", 1), ("big=29", 1)]);
    assert_eq!(messages(&done.stdout, "fail_or"), expected, "{}", done.stdout);
}

#[test]
fn c_operators_parentheses_and_casts() {
    let done = traced(&[
        r#"p:{exe}:fail_or (((arg1 & 1) == 0 && arg1 % 5 != 0) || arg1 * 2 + 1 == 3 || (char)(arg1 << 8) != 0) "%d %d", arg1, -arg1 >> 1"#,
    ]);
    let mut want: Vec<String> =
        (1i64..=30).filter(|n| (n % 2 == 0 && n % 5 != 0) || *n == 1).map(|n| format!("{n} {}", (-n) >> 1)).collect();
    want.sort();
    assert_eq!(messages(&done.stdout, "fail_or"), want, "{}", done.stdout);
}

#[test]
fn struct_members_through_pointers() {
    let done = traced(&[
        r#"p:{exe}:take_ts(struct timespec *ts) (ts->tv_nsec > 2000) "%d %d", ts->tv_sec, ts->tv_nsec"#,
        r#"t:syscalls:sys_enter_nanosleep "ns=%d", args->rqtp->tv_nsec"#,
    ]);
    assert_eq!(messages(&done.stdout, "take_ts"), vec!["2 2007", "3 3007", "4 4007"], "{}", done.stdout);
    assert_eq!(messages(&done.stdout, "sys_enter_nanosleep"), times("ns=1234567", 2), "{}", done.stdout);
}

/// STRCMP compares the whole string (BCC compares only the literal's length: "alpha" would match "alphabet").
#[test]
fn strcmp_matches_whole_strings() {
    let done = traced(&[
        r#"p:{exe}:take_name (STRCMP("alpha", arg1)) "%s", arg1"#,
        r#"p:{exe}:take_name (!STRCMP("alpha", arg1) && STRCMP(arg1, "beta") == 0 && arg2 < 100) "other %s", arg1"#,
    ]);
    assert_eq!(messages(&done.stdout, "take_name"), want(&[("alpha", 3), ("other alphabet", 2)]), "{}", done.stdout);
}

#[test]
fn a_char_pointer_return_tested_for_null() {
    let done = traced(&[r#"r:{exe}:maybe (retval) "%s", retval"#, r#"r:{exe}:maybe (retval == 0) "null""#]);
    assert_eq!(messages(&done.stdout, "maybe"), want(&[("present", 4), ("null", 3)]), "{}", done.stdout);
}

#[test]
fn more_than_six_arguments_and_long_strings() {
    let done = traced(&[
        "-Z",
        "256",
        r#"p:{exe}:many "%d %d %d %d %d %d %d %d", arg1, arg2, arg3, arg4, arg5, arg6, arg1 + arg6, arg3 * arg4"#,
        r#"p:{exe}:take_name (arg2 > 100) "%s", arg1"#,
    ]);
    assert_eq!(messages(&done.stdout, "many"), vec!["1 2 3 4 5 6 7 12"], "{}", done.stdout);
    assert_eq!(messages(&done.stdout, "take_name"), vec!["x".repeat(255)], "{}", done.stdout);
}

/// `u:LIB:PROBE` and `u:LIB:PROVIDER:PROBE`: a USDT probe's arguments as arg1, arg2, ...
#[test]
fn usdt_probes_and_their_arguments() {
    let done = traced(&[
        r#"u:{exe}:tick (arg1 > 2) "%d %s", arg1, arg2"#,
        r#"u:{exe}:exprs:tick (STRCMP("even", arg2)) "even %d", arg1 * 10"#,
    ]);
    let expected = want(&[
        ("3 odd", 1),
        ("4 even", 1),
        ("5 odd", 1),
        ("6 even", 1),
        ("even 20", 1),
        ("even 40", 1),
        ("even 60", 1),
    ]);
    assert_eq!(messages(&done.stdout, "tick"), expected, "{}", done.stdout);
}

#[test]
fn expressions_it_cannot_take_fail_with_one_line() {
    let exe = helper();
    let exe = exe.display().to_string();
    let cases = [
        (format!(r#"p:{exe}:fail_or (arg1 +) "%d", arg1"#), "missing"),
        (format!(r#"p:{exe}:fail_or (STRCMP(arg1, arg2)) "%d", arg1"#), "STRCMP takes"),
        (format!(r#"p:{exe}:fail_or (foo(arg1)) "%d", arg1"#), "cannot call 'foo'"),
        (format!(r#"p:{exe}:take_ts(struct timespec *ts) "%d", ts->tv_usec"#), "no member 'tv_usec'"),
        (format!(r#"p:{exe}:take_ts(struct nosuch *ts) "%d", ts->x"#), "not in the kernel's BTF"),
        (format!(r#"p:{exe}:fail_or "%d", arg1->x"#), "not known"),
        (r#"t:syscalls:sys_enter_openat (args->filename == 0) "%d", args->flags->x"#.to_owned(), "not a pointer"),
        (format!(r#"u:{exe}:tock "%d", arg1"#), "its probes: exprs:tick"),
        (format!(r#"u:{exe}:tick "%d", n"#), "arg1, arg2"),
    ];
    for (spec, needle) in cases {
        assert_refused("trace", &[&spec], 2, needle);
    }
}

/// `-c CGROUP`: only the tasks of that cgroup; a second run of the same program outside it is not shown.
#[test]
fn cgroup_filter_keeps_only_that_cgroups_tasks() {
    use corebpf_tests::cgroup::TestCgroup;
    let exe = helper();
    let cgroup = TestCgroup::new("trace-c");
    let start = |shell: String| {
        let child = Command::new("sh").arg("-c").arg(shell).stdin(Stdio::piped()).spawn().expect("starting a helper");
        KillOnDrop(child)
    };
    let mut inside = start(cgroup.exec_in(&exe.display().to_string()));
    let mut outside = start(format!("exec {}", exe.display()));
    let spec = format!(r#"p:{}:many "%d", arg6"#, exe.display());
    let mut run = Running::start("trace", &["-c", cgroup.arg(), &spec]);
    run.wait_for_line("PID     TID", Duration::from_secs(60));
    for helper in [&mut inside, &mut outside] {
        helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(helper.0.wait().unwrap().success(), "helper failed");
    }
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    let lines: Vec<&str> = done.stdout.lines().filter(|l| l.contains(" many ")).collect();
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    assert!(lines[0].starts_with(&format!("{:<7} ", inside.0.id())), "{}", done.stdout);
}

/// -K: each event's kernel stack below it, then an empty line; -a puts each frame's address first.
#[test]
fn kernel_stacks_and_addresses() {
    let done = traced(&["-K", "-a", r#"t:syscalls:sys_enter_nanosleep "%d", args->rqtp->tv_nsec"#]);
    let events = done.stdout.lines().filter(|l| l.contains(" sys_enter_nanosleep ")).count();
    assert_eq!(events, 2, "{}", done.stdout);
    let frames: Vec<&str> = done.stdout.lines().filter(|l| l.starts_with("        ")).collect();
    assert!(frames.iter().any(|l| l.contains("do_syscall_64+0x") && l.ends_with(" [kernel]")), "{}", done.stdout);
    // -a: the address first, in hex.
    assert!(
        frames.iter().all(|l| l.trim().split(' ').next().is_some_and(|a| u64::from_str_radix(a, 16).is_ok())),
        "{}",
        done.stdout
    );
    assert_eq!(done.stdout.lines().filter(|l| l.is_empty()).count(), 2, "{}", done.stdout);
}

/// An IFUNC (strlen) cannot take a uprobe: its address is the resolver. The refusal names the implementation a
/// live process runs, and that one (a local function of the stripped libc, named by its debug file) can be traced.
#[test]
fn an_ifunc_is_refused_with_the_implementation_to_probe() {
    let exe = helper();
    let mut waiting = KillOnDrop(Command::new(&exe).stdin(Stdio::piped()).spawn().expect("starting the helper"));
    let pid = waiting.0.id().to_string();
    // Until it waits for its line in read(2): the loader has then filled the IFUNC slots.
    for _ in 0..500 {
        let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if syscall.starts_with("0 ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let done = corebpf_tests::run_tool("trace", &["-p", &pid, "c:strlen"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert!(done.stderr.contains("'strlen' in ") && done.stderr.contains("is an IFUNC"), "{}", done.stderr);
    let runs = format!("process {pid} runs ");
    let at = done.stderr.find(&runs).unwrap_or_else(|| panic!("no implementation named: {}", done.stderr));
    let chosen: String =
        done.stderr[at + runs.len()..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    assert!(chosen.starts_with("__strlen_"), "{}", done.stderr);
    drop(waiting.0.stdin.take());
    let _ = waiting.0.wait();
    // The implementation, by name: the helper's own strlen() calls on its names.
    let done = traced(&[&format!(r#"c:{chosen} (STRCMP("beta", arg1)) "%s", arg1"#)]);
    let betas = messages(&done.stdout, &chosen);
    assert!(betas.len() >= 5 && betas.iter().all(|m| m == "beta"), "{}", done.stdout);
}
