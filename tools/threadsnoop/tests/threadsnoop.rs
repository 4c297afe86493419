// SPDX-License-Identifier: Apache-2.0 OR MIT
//! threadsnoop against a helper (tests/threads.c) that starts known threads with known start routines: 3 running
//! corebpf_alpha_worker and 2 running corebpf_beta_worker. Each test looks only at the helper's PID (other tests
//! create threads at the same time), and asserts its exact lines: the PID, its process name, and the count per
//! routine name. One helper joins its threads and lives on; one exits right after creating them, while the tool is
//! stopped (SIGSTOP), so the tool names the routines only after the process is gone. bpftrace runs beside the tool
//! (Debian's libbpf-tools has no threadsnoop) and must count the same calls.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const ALPHA: &str = "corebpf_alpha_worker";
const BETA: &str = "corebpf_beta_worker";

fn helper() -> PathBuf {
    build_c_helper("threads", include_str!("threads.c"), &["-O1", "-g", "-pthread"])
}

/// The process name of a program run from `exe`: its file name, cut at 15 bytes.
fn comm_of(exe: &std::path::Path) -> String {
    exe.file_name().unwrap().to_string_lossy().chars().take(15).collect()
}

/// Starts the helper in `mode` with 3 alpha and 2 beta threads; it waits for a line on stdin.
fn spawn_helper(exe: &std::path::Path, mode: &str) -> KillOnDrop {
    let child = Command::new(exe)
        .args([mode, "3", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the helper");
    KillOnDrop(child)
}

/// Lets a `join` helper create its threads, waits for its "done", and ends it.
/// Runs threadsnoop with `args` while the helper creates and joins its threads, then stops it with `signal`; its
/// output, having exited successfully.
fn trace_while_joining(args: &[&str], helper: &mut KillOnDrop, signal: i32) -> Finished {
    let mut run = Running::start(TOOL, args);
    run.wait_attached(Duration::from_secs(20));
    run_joining(helper);
    run.signal(signal);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done
}

fn run_joining(helper: &mut KillOnDrop) {
    let mut stdin = helper.0.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let mut line = String::new();
    BufReader::new(helper.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    drop(stdin);
    assert!(helper.0.wait().unwrap().success(), "the helper failed");
}

/// The FUNC counts of text lines whose PID column is `pid`, each line checked to carry `comm`.
fn text_counts(stdout: &str, pid: u32, comm: &str) -> BTreeMap<String, usize> {
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some(format!("{:<10} {:<7} {:<16} FUNC", "TIME(ms)", "PID", "COMM").as_str()));
    let mut counts = BTreeMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() != 4 || fields[1] != pid.to_string() {
            continue;
        }
        assert!(fields[0].parse::<u64>().is_ok(), "TIME(ms) is not a number: {line}");
        assert_eq!(fields[2], comm, "{line}");
        *counts.entry(fields[3].to_string()).or_default() += 1;
    }
    counts
}

fn expected() -> BTreeMap<String, usize> {
    BTreeMap::from([(ALPHA.to_string(), 3), (BETA.to_string(), 2)])
}

#[test]
fn names_each_start_routine_with_exact_counts_beside_bpftrace() {
    let exe = helper();
    let comm = comm_of(&exe);
    let mut helper = spawn_helper(&exe, "join");
    let pid = helper.0.id();
    let libc = system_libc();
    let program = format!(
        "BEGIN {{ printf(\"ready\\n\"); }} uprobe:{}:pthread_create /pid == {pid}/ {{ printf(\"call %d\\n\", pid); }}",
        libc.display()
    );
    let bpftrace = Bpftrace::start(&program);

    let done = trace_while_joining(&[], &mut helper, libc::SIGINT);
    assert_eq!(text_counts(&done.stdout, pid, &comm), expected(), "output:\n{}", done.stdout);
    done.assert_no_programs_left();

    let theirs = bpftrace.finish();
    let calls = theirs.lines().filter(|l| *l == format!("call {pid}")).count();
    assert_eq!(calls, 5, "bpftrace printed:\n{theirs}");
}

#[test]
fn names_routines_of_a_process_that_exited_before_they_were_read() {
    let exe = helper();
    let comm = comm_of(&exe);
    let mut run = Running::start(TOOL, &["-j"]);
    run.wait_attached(Duration::from_secs(20));
    let mut helper = spawn_helper(&exe, "exit");
    let pid = helper.0.id();
    // The tool reads nothing while stopped: the helper creates its threads, exits and is reaped first.
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(run.pid() as i32, libc::SIGSTOP) };
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let status = helper.0.wait().unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(run.pid() as i32, libc::SIGCONT) };
    assert!(status.success(), "the helper failed: {status}");
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the helper is still there");
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();

    let canonical = std::fs::canonicalize(&exe).unwrap();
    let mut counts = BTreeMap::new();
    for line in json_lines(&done.stdout).into_iter().filter(|l| l["pid"] == pid) {
        assert_eq!(line["comm"], comm.as_str(), "{line}");
        assert_eq!(line["tid"], pid, "the main thread creates them: {line}");
        assert_eq!(line["module"], canonical.to_str().unwrap(), "{line}");
        assert!(line["address"].as_u64().is_some_and(|a| a > 0), "{line}");
        assert!(line["elapsed_ns"].as_u64().is_some(), "{line}");
        *counts.entry(line["func"].as_str().unwrap().to_string()).or_default() += 1;
    }
    assert_eq!(counts, expected(), "output:\n{}\nstderr:\n{}", done.stdout, done.stderr);
}

#[test]
fn one_letter_c_routines_keep_their_names() {
    // C functions named `f` and `d` once printed as "float" and "double": the symbolizer took them for Itanium
    // type codes.
    let exe = helper();
    let comm = comm_of(&exe);
    let child = Command::new(&exe)
        .args(["letters", "2", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the helper");
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id();
    let done = trace_while_joining(&[], &mut helper, libc::SIGINT);
    let want = BTreeMap::from([("f".to_string(), 2), ("d".to_string(), 1)]);
    assert_eq!(text_counts(&done.stdout, pid, &comm), want, "output:\n{}", done.stdout);
}

#[test]
fn json_lines_carry_the_live_process_and_its_routines() {
    let exe = helper();
    let mut helper = spawn_helper(&exe, "join");
    let pid = helper.0.id();
    let done = trace_while_joining(&["--json"], &mut helper, libc::SIGTERM);
    let mine: Vec<serde_json::Value> = json_lines(&done.stdout).into_iter().filter(|l| l["pid"] == pid).collect();
    let funcs: Vec<&str> = mine.iter().map(|l| l["func"].as_str().unwrap()).collect();
    // One thread creates them in order: three alpha, then two beta.
    assert_eq!(funcs, [ALPHA, ALPHA, ALPHA, BETA, BETA], "output:\n{}", done.stdout);
    let times: Vec<u64> = mine.iter().map(|l| l["elapsed_ns"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "times go back: {times:?}");
}

#[test]
fn operands_and_unknown_flags_are_usage_errors() {
    for args in [&["1"][..], &["-p", "1"], &["--no-such-flag"]] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: stderr: {}", done.stderr);
        assert!(!done.stderr.contains("panicked"), "{args:?}: {}", done.stderr);
    }
}

/// The system's C library, where pthread_create is on glibc 2.34+ (this test machine's).
fn system_libc() -> PathBuf {
    ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib/libc.so.6"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("no libc.so.6")
}

/// bpftrace running a program whose BEGIN prints "ready" (printed once every probe is attached).
struct Bpftrace {
    child: KillOnDrop,
    out: std::sync::mpsc::Receiver<String>,
}

impl Bpftrace {
    fn start(program: &str) -> Bpftrace {
        let mut child = Command::new("bpftrace")
            .args(["-e", program])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bpftrace (apt-get install bpftrace)");
        let stdout = child.stdout.take().unwrap();
        let (tx, out) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // "Attaching N probes..." comes first; BEGIN's "ready" once they are attached.
        loop {
            let line = out.recv_timeout(Duration::from_secs(60)).expect("bpftrace did not start");
            if line == "ready" {
                break;
            }
        }
        Bpftrace { child: KillOnDrop(child), out }
    }

    fn finish(mut self) -> String {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.0.id() as i32, libc::SIGINT) };
        self.child.0.wait().unwrap();
        let mut text = String::new();
        while let Ok(line) = self.out.recv_timeout(Duration::from_secs(5)) {
            text += &line;
            text.push('\n');
        }
        text
    }
}
