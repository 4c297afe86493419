// SPDX-License-Identifier: Apache-2.0 OR MIT
//! memleak against a helper whose allocations are known (tests/allocs.c): with -p, the outstanding stack of
//! `leak_a` is exactly 28672 bytes in 7 allocations, calloc and realloc are counted as made, the freed ones of
//! `leak_b` vanish; -z/-Z filter by size; --combined-only and JSON give the same totals; -a lists each
//! allocation; -c runs and traces a command; kernel mode shows outstanding allocations; bad input is refused in
//! one line; SIGTERM and a closed pipe end it cleanly.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const T: Duration = Duration::from_secs(30);

fn helper_exe() -> std::path::PathBuf {
    build_c_helper("memleak_allocs", include_str!("allocs.c"), &["-O1", "-fno-omit-frame-pointer"])
}

/// The helper, waiting for its lines.
struct Helper {
    child: KillOnDrop,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Helper {
    fn start() -> Helper {
        let exe = helper_exe();
        let mut child: Child =
            Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start the helper");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let child = KillOnDrop(child);
        wait_sleeping(child.0.id(), Duration::from_secs(10));
        Helper { child, stdin, stdout }
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Sends `command` and waits for the helper's `reply` line.
    fn ask(&mut self, command: &str, reply: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim_end(), reply, "the helper failed");
    }
}

/// One stack of a report.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    bytes: u64,
    count: u64,
    frames: Vec<String>,
}

/// The reports of text output, each as its (address, size) lines of -a and its stacks.
fn reports(text: &str) -> Vec<(Vec<u64>, Vec<Entry>)> {
    let mut out: Vec<(Vec<u64>, Vec<Entry>)> = Vec::new();
    for line in text.lines() {
        if line.starts_with('[') && line.contains("stacks with outstanding allocations:") {
            out.push((Vec::new(), Vec::new()));
        } else if let Some((sizes, entries)) = out.last_mut() {
            if let Some(rest) = line.strip_prefix("\taddr = ") {
                sizes.push(rest.rsplit(' ').next().unwrap().parse().unwrap());
            } else if let Some(rest) = line.strip_prefix("\t\t") {
                entries.last_mut().expect("a frame before any stack").frames.push(rest.to_string());
            } else if let Some(rest) = line.strip_prefix('\t') {
                let words: Vec<&str> = rest.split(' ').collect();
                assert_eq!(&words[1..3], ["bytes", "in"], "{line}");
                entries.push(Entry {
                    bytes: words[0].parse().unwrap(),
                    count: words[3].parse().unwrap(),
                    frames: Vec::new(),
                });
            }
        }
    }
    out
}

/// The stack whose innermost frame is function `name` (`name+0x..`), as (bytes, allocations).
fn from(entries: &[Entry], name: &str) -> Option<(u64, u64)> {
    let prefix = format!("{name}+0x");
    let found: Vec<&Entry> =
        entries.iter().filter(|e| e.frames.first().is_some_and(|f| f.starts_with(&prefix))).collect();
    assert!(found.len() <= 1, "{name} in several stacks: {entries:?}");
    found.first().map(|e| (e.bytes, e.count))
}

/// Traces the helper with `-p PID 1` and `extra`: its allocations, then its frees. Returns the tool's output
/// and the helper's PID.
fn trace_helper(extra: &[&str], appears: &str) -> (Finished, u32) {
    let mut helper = Helper::start();
    let pid = helper.pid().to_string();
    let mut args = vec!["-p", pid.as_str()];
    args.extend_from_slice(extra);
    args.push("1");
    let mut run = Running::start(TOOL, &args);
    if !extra.contains(&"-j") {
        run.wait_for_line("Attaching to pid", T);
    }
    run.wait_attached(T);
    helper.ask("go", "allocated");
    run.wait_for_line(appears, T);
    helper.ask("free", "freed");
    wait_for_report_after_now(&mut run);
    run.signal(libc::SIGINT);
    let done = run.finish(T);
    done.assert_success();
    done.assert_no_programs_left();
    (done, helper.pid())
}

/// The local time of day `secs` seconds from now, as HH:MM:SS.
fn clock_in(secs: i64) -> String {
    // SAFETY: time(NULL) and localtime_r on a zeroed tm are sound.
    unsafe {
        let t = libc::time(std::ptr::null_mut()) + secs;
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
    }
}

/// Waits for a report whose header time is at least two seconds of the clock later than now: its maps were read
/// after everything done before this call.
fn wait_for_report_after_now(run: &mut Running) {
    // Text headers `[HH:MM:SS] Top`, JSON timestamps `...THH:MM:SS.mmm`.
    let candidates: Vec<String> =
        (2..30).map(clock_in).flat_map(|t| [format!("[{t}] Top"), format!("T{t}.")]).collect();
    let deadline = std::time::Instant::now() + T;
    while std::time::Instant::now() < deadline {
        if candidates.iter().any(|c| run.has_line_within(c, Duration::from_millis(1))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no report within {T:?}");
}

#[test]
fn outstanding_stacks_are_exact_and_freed_ones_vanish() {
    let (done, _) = trace_helper(&[], "28672 bytes in 7 allocations from stack");
    let all = reports(&done.stdout);
    let with_b = all.iter().find(|(_, e)| from(e, "leak_b").is_some()).expect("no report with leak_b");
    assert_eq!(from(&with_b.1, "leak_b"), Some((3000, 3)), "{}", done.stdout);
    let last = &all.last().unwrap().1;
    assert_eq!(from(last, "leak_a"), Some((28672, 7)), "{}", done.stdout);
    assert_eq!(from(last, "leak_c"), Some((2000, 2)), "calloc(5, 200) twice:\n{}", done.stdout);
    assert_eq!(from(last, "leak_d"), Some((3000, 1)), "malloc(100) grown by realloc to 3000:\n{}", done.stdout);
    assert_eq!(from(last, "leak_b"), None, "freed allocations still shown:\n{}", done.stdout);
    let a = last.iter().find(|e| e.frames[0].starts_with("leak_a+")).unwrap();
    assert!(a.frames[0].ends_with("]") && a.frames.iter().any(|f| f.starts_with("main+")), "{:?}", a.frames);
}

#[test]
fn combined_only_gives_the_same_totals() {
    let (done, _) = trace_helper(&["--combined-only"], "28672 bytes in 7 allocations from stack");
    let all = reports(&done.stdout);
    assert!(all.iter().any(|(_, e)| from(e, "leak_b") == Some((3000, 3))), "{}", done.stdout);
    let last = &all.last().unwrap().1;
    assert_eq!(from(last, "leak_a"), Some((28672, 7)), "{}", done.stdout);
    assert_eq!(from(last, "leak_c"), Some((2000, 2)), "{}", done.stdout);
    assert_eq!(from(last, "leak_d"), Some((3000, 1)), "{}", done.stdout);
    assert_eq!(from(last, "leak_b"), None, "{}", done.stdout);
}

#[test]
fn min_size_keeps_only_the_large_allocations() {
    let (done, _) = trace_helper(&["-z", "2000"], "28672 bytes in 7 allocations from stack");
    let last = &reports(&done.stdout).pop().unwrap().1;
    assert_eq!(from(last, "leak_a"), Some((28672, 7)), "{}", done.stdout);
    assert_eq!(from(last, "leak_d"), Some((3000, 1)), "{}", done.stdout);
    assert_eq!(from(last, "leak_c"), None, "1000-byte callocs under -z 2000:\n{}", done.stdout);
    assert!(reports(&done.stdout).iter().all(|(_, e)| from(e, "leak_b").is_none()), "{}", done.stdout);
}

#[test]
fn max_size_keeps_only_the_small_allocations() {
    let (done, _) = trace_helper(&["-Z", "1000"], "2000 bytes in 2 allocations from stack");
    let all = reports(&done.stdout);
    assert!(all.iter().any(|(_, e)| from(e, "leak_b") == Some((3000, 3))), "{}", done.stdout);
    let last = &all.last().unwrap().1;
    assert_eq!(from(last, "leak_c"), Some((2000, 2)), "{}", done.stdout);
    assert_eq!(from(last, "leak_a"), None, "4096-byte mallocs under -Z 1000:\n{}", done.stdout);
    // The malloc(100) was freed by the realloc, whose 3000 bytes are over the limit.
    assert_eq!(from(last, "leak_d"), None, "{}", done.stdout);
}

#[test]
fn show_allocs_lists_each_allocation() {
    let (done, _) = trace_helper(&["-a"], "28672 bytes in 7 allocations from stack");
    let (sizes, stacks) = reports(&done.stdout).pop().unwrap();
    assert_eq!(sizes.iter().filter(|&&s| s == 4096).count(), 7, "{}", done.stdout);
    assert_eq!(sizes.iter().filter(|&&s| s == 1000).count(), 2, "the callocs (leak_b's are freed):\n{}", done.stdout);
    assert_eq!(sizes.iter().filter(|&&s| s == 3000).count(), 1, "{}", done.stdout);
    assert_eq!(from(&stacks, "leak_a"), Some((28672, 7)));
}

#[test]
fn json_holds_the_same_totals() {
    let (done, pid) = trace_helper(&["-j"], "\"allocations\":7");
    let lines = json_lines(&done.stdout);
    let innermost = |v: &serde_json::Value| v["stack"][0]["name"].as_str().unwrap_or_default().to_string();
    let a: Vec<&serde_json::Value> = lines.iter().filter(|v| innermost(v) == "leak_a").collect();
    assert!(!a.is_empty(), "{}", done.stdout);
    let last_a = a.last().unwrap();
    assert_eq!(last_a["bytes"], 28672);
    assert_eq!(last_a["allocations"], 7);
    assert_eq!(last_a["pid"], pid);
    assert!(lines.iter().any(|v| innermost(v) == "leak_b" && v["bytes"] == 3000), "{}", done.stdout);
}

#[test]
fn command_is_started_and_traced() {
    let exe = helper_exe();
    let command = format!("{} auto", exe.display());
    let done = Running::start(TOOL, &["-c", &command, "1", "2"]).finish(T);
    done.assert_success();
    assert!(done.stdout.starts_with(&format!("Executing '{command}' and tracing the resulting process.\n")));
    let last = &reports(&done.stdout).pop().expect("no report").1;
    assert_eq!(from(last, "leak_a"), Some((28672, 7)), "{}", done.stdout);
    assert_eq!(from(last, "leak_b"), Some((3000, 3)), "{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn kernel_mode_shows_outstanding_allocations() {
    let done = Running::start(TOOL, &["--combined-only", "1", "1"]).finish(T);
    done.assert_success();
    assert!(done.stdout.starts_with("Attaching to kernel allocators, Ctrl+C to quit.\n"), "{}", done.stdout);
    let (_, stacks) = reports(&done.stdout).pop().expect("no report");
    assert!(!stacks.is_empty(), "no outstanding kernel allocation:\n{}", done.stdout);
    assert!(stacks.iter().all(|e| e.bytes > 0 && e.count > 0), "{}", done.stdout);
    assert!(stacks.iter().any(|e| e.frames.iter().any(|f| f.ends_with("[kernel]"))), "{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn unknown_pid_is_one_line_and_exit_1() {
    usage::assert_refused(TOOL, &["-p", "999999999"], 1, "999999999");
}

#[test]
fn bad_arguments_are_usage_errors() {
    usage::assert_refused(TOOL, &["-z", "10", "-Z", "5"], 2, "-Z");
    usage::assert_refused(TOOL, &["-p", "1", "-c", "true"], 2, "cannot be used with");
    usage::assert_refused(TOOL, &["--sort", "age"], 2, "age");
    usage::assert_refused(TOOL, &["-c", "/nonexistent/memleak-helper"], 1, "not found");
}

#[test]
fn sigterm_and_a_closed_pipe_end_cleanly() {
    let me = std::process::id().to_string();
    pipe::assert_sigterm_and_closed_pipe_end_cleanly(TOOL, &["-p", &me], "Attaching", "Attaching", || {});
}

#[test]
fn trace_prints_each_call() {
    let exe = helper_exe();
    let command = format!("{} auto", exe.display());
    let done = Running::start(TOOL, &["-t", "-c", &command, "1", "1"]).finish(T);
    done.assert_success();
    let count = |needle: &str| done.stdout.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count(" malloc: alloc exited, size = 4096, result = "), 7, "{}", done.stdout);
    assert_eq!(count(" calloc: alloc exited, size = 1000, result = "), 2, "{}", done.stdout);
    assert_eq!(count(" realloc: alloc exited, size = 3000, result = "), 1, "{}", done.stdout);
    assert_eq!(count(" realloc: free entered, address = "), 1, "the malloc(100) realloc replaced:\n{}", done.stdout);
}

/// `--prometheus -p PID`: after the helper's allocations, the gauges of the stacks whose innermost frame is
/// leak_a, leak_b, leak_c and leak_d read exactly the helper's outstanding bytes and allocations; after its frees,
/// leak_b's series is gone and the others are unchanged; promtool accepts the exposition. An interval too is a
/// usage error.
#[test]
fn prometheus_outstanding_bytes_and_allocations_per_stack() {
    use corebpf_tests::prom::{promtool_accepts, samples_of, scrape, serving};
    let mut helper = Helper::start();
    let (tool, addr) = serving(TOOL, &["-p", &helper.pid().to_string()]);
    // (bytes, allocations) of the stack whose innermost frame is `name`.
    let of = |text: &str, name: &str| -> Option<(f64, f64)> {
        let pick = |family: &str| {
            let found: Vec<f64> = samples_of(text, family)
                .into_iter()
                .filter(|(l, _)| l["stack"].rsplit(';').next() == Some(name))
                .map(|s| s.1)
                .collect();
            assert!(found.len() <= 1, "{name} in several stacks:\n{text}");
            found.first().copied()
        };
        Some((pick("corebpf_memleak_outstanding_bytes")?, pick("corebpf_memleak_outstanding_allocations")?))
    };
    helper.ask("go", "allocated");
    let text = scrape(&addr);
    promtool_accepts(&text);
    assert_eq!(of(&text, "leak_a"), Some((28672.0, 7.0)), "{text}");
    assert_eq!(of(&text, "leak_b"), Some((3000.0, 3.0)), "{text}");
    assert_eq!(of(&text, "leak_c"), Some((2000.0, 2.0)), "calloc(5, 200) twice:\n{text}");
    assert_eq!(of(&text, "leak_d"), Some((3000.0, 1.0)), "malloc(100) grown by realloc to 3000:\n{text}");
    assert!(text.contains("stack=\"main;leak_a\"") || text.contains(";main;leak_a\""), "{text}");
    helper.ask("free", "freed");
    let text = scrape(&addr);
    assert_eq!(of(&text, "leak_b"), None, "freed allocations still exported:\n{text}");
    assert_eq!(of(&text, "leak_a"), Some((28672.0, 7.0)), "{text}");
    assert_eq!(of(&text, "leak_d"), Some((3000.0, 1.0)), "{text}");
    tool.signal(libc::SIGTERM);
    let done = tool.finish(T);
    done.assert_success();
    done.assert_no_programs_left();
    usage::assert_refused(TOOL, &["--prometheus", "127.0.0.1:0", "5"], 2, "interval");
}

/// `-p PID`: when the process exits, memleak prints its last report (the allocations it never freed), says the
/// process exited and ends by itself, exit 0, without waiting for Ctrl-C.
#[test]
fn traced_process_exiting_ends_the_tool() {
    let mut helper = Helper::start();
    let pid = helper.pid();
    let mut run = Running::start(TOOL, &["-p", &pid.to_string(), "1"]);
    run.wait_for_line("Attaching to pid", T);
    run.wait_attached(T);
    helper.ask("go", "allocated");
    run.wait_for_line("leak_a", T);
    // End of input: the helper exits.
    drop(helper.stdin);
    assert!(helper.child.0.wait().unwrap().success());
    let done = run.finish(T);
    done.assert_success();
    done.assert_no_programs_left();
    let said = format!("Process {pid} exited.");
    assert_eq!(done.stdout.lines().filter(|l| *l == said).count(), 1, "{}", done.stdout);
    assert_eq!(done.stdout.lines().last(), Some(said.as_str()), "{}", done.stdout);
    let last = &reports(&done.stdout).pop().expect("no report").1;
    assert_eq!(from(last, "leak_a"), Some((28672, 7)), "{}", done.stdout);
}

/// `-c COMMAND`: the same when the command ends.
#[test]
fn command_ending_ends_the_tool() {
    let done = Running::start(TOOL, &["-c", "sleep 1", "1"]).finish(T);
    done.assert_success();
    let last = done.stdout.lines().last().unwrap_or_default();
    let pid = last.strip_prefix("Process ").and_then(|r| r.strip_suffix(" exited."));
    assert!(pid.is_some_and(|p| p.parse::<u32>().is_ok()), "{}", done.stdout);
    done.assert_no_programs_left();
}

/// `--percpu` is kernel mode's: with a process (-p or -c) it would be ignored, so it is refused.
#[test]
fn percpu_with_a_process_is_refused() {
    let me = std::process::id().to_string();
    usage::assert_refused(TOOL, &["--percpu", "-p", &me], 2, "--percpu");
    usage::assert_refused(TOOL, &["--percpu", "-c", "true"], 2, "--percpu");
}
