// SPDX-License-Identifier: Apache-2.0 OR MIT
//! offcputime against a helper whose blocking is known: after a "go" byte on stdin it blocks K times for T ms in
//! `main -> helper_sleep_outer -> helper_sleep` (a raw nanosleep system call made from helper_sleep itself, so the
//! user stack's innermost frame is helper_sleep whatever the C library's frame pointers). The tests check the total
//! time under that stack against K*T, the filters (-m/-M, -u/-k, -U/-K, --state), the folded, JSON and flame graph
//! forms, a helper that exits before the tool prints, and bad input.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const HELPER: &str = include_str!("sleeper.c");

fn helper_exe() -> PathBuf {
    // A frame record in leaf functions too: arm64's GCC leaves it out by default, and helper_sleep's caller (the
    // return address in the link register) would be missing from the frame-pointer walk.
    build_c_helper(
        "offcpu-sleep",
        HELPER,
        &["-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-O1", "-g", "-pthread"],
    )
}

/// A helper waiting for its "go", killed and reaped when dropped.
struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    /// The blocks' wall time, in microseconds, as the helper measured it (after [`Helper::wait`]).
    wall_us: u64,
    k: u64,
    ms: u64,
}

impl Helper {
    fn start(k: u32, ms: u32, linger: bool) -> Helper {
        Helper::start_mode(k, ms, linger.then_some("linger"))
    }

    /// [`Helper::start`], blocking in a thread it starts at the "go" (`thread`), or lingering (`linger`).
    fn start_mode(k: u32, ms: u32, mode: Option<&str>) -> Helper {
        let mut cmd = Command::new(helper_exe());
        cmd.args([k.to_string(), ms.to_string()]).stdin(Stdio::piped()).stdout(Stdio::piped());
        cmd.args(mode);
        let mut child = cmd.spawn().expect("starting the helper");
        let stdin = child.stdin.take();
        Helper { child, stdin, wall_us: 0, k: k.into(), ms: ms.into() }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// The helper's command name: its file name cut to 15 bytes (read from the file, not /proc, which may still
    /// show the test's thread until the exec).
    fn comm(&self) -> String {
        let name = helper_exe().file_name().unwrap().to_string_lossy().into_owned();
        name[..name.len().min(15)].to_string()
    }

    fn go(&mut self) {
        self.stdin.as_mut().unwrap().write_all(b"g").unwrap();
    }

    /// Waits for the helper to exit without reaping it: it stays a zombie (its /proc/PID/maps empty) until dropped.
    fn wait_unreaped(&mut self) {
        self.stdin = None;
        let mut out = String::new();
        std::io::Read::read_to_string(self.child.stdout.as_mut().unwrap(), &mut out).unwrap();
        // SAFETY: waitid(2) on our own child with WNOWAIT, which leaves it to be reaped later.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, self.child.id(), &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        assert_eq!(rc, 0, "waitid");
        self.wall_us = out.trim().parse().unwrap_or_else(|_| panic!("helper printed {out:?}"));
    }

    /// Waits for the helper to finish its K blocks and exit (closing stdin ends a lingering one).
    fn wait(&mut self) {
        self.stdin = None;
        let mut out = String::new();
        std::io::Read::read_to_string(self.child.stdout.as_mut().unwrap(), &mut out).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "helper: {status}");
        self.wall_us = out.trim().parse().unwrap_or_else(|_| panic!("helper printed {out:?}"));
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const BANNER: &str = "Tracing off-CPU time (us)";

/// What a run printed, both streams: standard error counts the switch-ins the tool did not see, whose blocks are
/// missing from the totals (issue 31 item 6).
fn both(done: &Finished) -> String {
    format!("{}\nstderr:\n{}", done.stdout, done.stderr)
}

/// Starts offcputime with `args` and -v, waits until it traces (its banner, or its programs when it prints no banner),
/// lets the helper block K times and exit, then stops the tool with Ctrl-C.
fn trace(args: &[&str], helper: &mut Helper, banner: bool) -> Finished {
    let args: Vec<&str> = ["-v"].into_iter().chain(args.iter().copied()).collect();
    let mut tool = Running::start("offcputime", &args);
    if banner {
        tool.wait_for_line(BANNER, Duration::from_secs(30));
    } else {
        tool.wait_attached(Duration::from_secs(60));
    }
    helper.go();
    helper.wait();
    tool.signal(libc::SIGINT);
    let done = tool.finish(Duration::from_secs(60));
    done.assert_success();
    done
}

/// Folded lines as (frames after the command name, total).
fn folded(stdout: &str) -> Vec<(String, Vec<String>, u64)> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (stack, total) = l.rsplit_once(' ').unwrap_or_else(|| panic!("not a folded line: {l}"));
            let mut frames = stack.split(';').map(str::to_string);
            let comm = frames.next().unwrap();
            (comm, frames.collect(), total.parse().unwrap_or_else(|_| panic!("no total in: {l}")))
        })
        .collect()
}

/// The time folded under `main -> helper_sleep_outer -> helper_sleep`, in microseconds.
fn helper_sleep_time(lines: &[(String, Vec<String>, u64)]) -> u64 {
    lines
        .iter()
        .filter(|(_, frames, _)| {
            frames.windows(3).any(|w| w[0] == "main" && w[1] == "helper_sleep_outer" && w[2] == "helper_sleep")
        })
        .map(|(_, _, total)| total)
        .sum()
}

/// The switch-ins the tool said it missed, in `output`: with -p, each is one of the helper's blocks that is missing
/// from the totals, and said so. (sched_switch does not report every switch-in on every host; the tool times such a
/// block afterwards, from the scheduler's run-time accounting, and says it missed only those it could not time.)
fn reported_missed(output: &str) -> u64 {
    output
        .lines()
        .find_map(|l| {
            l.strip_prefix("offcputime: missed ")?
                .split_once(" switch-ins (not reported by sched_switch")?
                .0
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The helper's blocks took at least K*T off CPU, and at most their wall time as the helper measured it (a thread
/// woken on a busy machine waits for a CPU too: that wait is off CPU, so the total can exceed K*T). A block the tool
/// reported as missed (a switch-in sched_switch did not report and the tool could not time) lowers the bound by T: a
/// loss is allowed only when it is said.
fn assert_blocked(actual: u64, helper: &Helper, what: &str, output: &str) {
    let missed = reported_missed(output).min(helper.k);
    let least = (helper.k - missed) * helper.ms * 1000;
    let most = helper.wall_us + helper.wall_us / 100;
    assert!(
        actual * 100 >= least * 99 && actual <= most,
        "{what}: {actual} us off CPU, expected from K*T = {least} us ({missed} blocks reported missed) to the helper's \
         wall time {} us:\n{output}",
        helper.wall_us
    );
}

#[test]
fn folded_total_under_the_blocking_functions_is_k_times_t() {
    let mut helper = Helper::start(20, 25, false);
    let done = trace(&["-p", &helper.pid(), "-f"], &mut helper, false);
    let lines = folded(&done.stdout);
    assert_blocked(helper_sleep_time(&lines), &helper, "time in helper_sleep", &both(&done));
    // The kernel part follows the user part: the blocked stack ends in the scheduler.
    let line = lines.iter().find(|(_, f, _)| f.iter().any(|n| n == "helper_sleep")).unwrap();
    assert!(line.1.last().is_some_and(|f| f.contains("schedule")), "{:?}", line.1);
    done.assert_no_programs_left();
}

/// Issue 31 item 6: a thread's block went missing once in some twenty runs on a busy machine. sched_switch had not
/// reported the thread's switch-in: on the development host the kernel never emits it when a thread of its
/// supervisor (PID 1) is switched out (ftrace's own buffer: 0 switch-outs of them against 8,000 switch-ins), so the
/// task switched in after one comes on unseen by ftrace, perf and BPF alike. Repeated on a thread started at the
/// "go" (as there), without -v: each run counts every block under helper_sleep_outer -> helper_sleep (one whose
/// switch-in went unreported is timed when the thread next goes off CPU), or says on stderr how many it could not
/// time.
#[test]
fn repeated_runs_on_a_new_thread_count_or_report_every_block() {
    for run in 0..6 {
        let mut helper = Helper::start_mode(10, 20, Some("thread"));
        let mut tool = Running::start("offcputime", &["-p", &helper.pid(), "-f"]);
        tool.wait_attached(Duration::from_secs(60));
        helper.go();
        helper.wait();
        tool.signal(libc::SIGINT);
        let done = tool.finish(Duration::from_secs(60));
        done.assert_success();
        let lines = folded(&done.stdout);
        let in_thread: u64 = lines
            .iter()
            .filter(|(_, frames, _)| frames.windows(2).any(|w| w[0] == "helper_sleep_outer" && w[1] == "helper_sleep"))
            .map(|(_, _, total)| total)
            .sum();
        assert_blocked(in_thread, &helper, &format!("run {run}: time in the thread's helper_sleep"), &both(&done));
    }
}

#[test]
fn multiline_output_is_bccs_layout() {
    let mut helper = Helper::start(10, 20, false);
    let comm = helper.comm();
    let pid = helper.pid();
    let done = trace(&["-p", &pid], &mut helper, true);
    assert!(
        done.stdout.starts_with(&format!("{BANNER} of PIDs {pid} by user + kernel stack... Hit Ctrl-C to end.")),
        "{}",
        done.stdout
    );
    // helper_sleep, helper_sleep_outer and main in that order, then "-  comm (tid)" and the total. The blocks are
    // in nanosleep's kernel stack, and on a busy machine also in stacks of preemptions inside helper_sleep: their
    // totals add up.
    let lines: Vec<&str> = done.stdout.lines().collect();
    let mut total = 0;
    for at in lines.iter().enumerate().filter(|(_, l)| l.trim() == "helper_sleep").map(|(at, _)| at) {
        assert_eq!(lines[at + 1].trim(), "helper_sleep_outer", "{}", done.stdout);
        assert_eq!(lines[at + 2].trim(), "main", "{}", done.stdout);
        let dash = lines[at..].iter().position(|l| l.trim_start().starts_with("- ")).unwrap() + at;
        assert_eq!(lines[dash], format!("    {:<16} {comm} ({pid})", "-"));
        total += lines[dash + 1].trim().parse::<u64>().unwrap();
    }
    assert_blocked(total, &helper, "total of the helper_sleep stacks", &both(&done));
}

#[test]
fn min_and_max_block_time_filter() {
    // Blocks of 20 ms (more on a busy machine, waiting for a CPU): -m 500000 (0.5 s) keeps none of them, -M 10000
    // (10 ms) none either, -m 10000 all.
    for (args, kept) in [(&["-m", "500000"][..], false), (&["-M", "10000"][..], false), (&["-m", "10000"][..], true)] {
        let mut helper = Helper::start(10, 20, false);
        let pid = helper.pid();
        let mut all = vec!["-p", &pid, "-f"];
        all.extend(args);
        let done = trace(&all, &mut helper, false);
        let time = helper_sleep_time(&folded(&done.stdout));
        if kept {
            assert_blocked(time, &helper, &format!("{args:?}"), &both(&done));
        } else {
            assert_eq!(time, 0, "{args:?} kept blocks of 20 ms:\n{}", done.stdout);
        }
    }
}

#[test]
fn user_and_kernel_stacks_only() {
    let kernel = |name: &str| name.starts_with("__") || name.contains("schedule") || name.contains("syscall");
    let mut helper = Helper::start(5, 20, false);
    let done = trace(&["-p", &helper.pid(), "-f", "-U"], &mut helper, false);
    let lines = folded(&done.stdout);
    let line = lines.iter().find(|(_, f, _)| f.iter().any(|n| n == "helper_sleep")).expect("no helper_sleep stack");
    assert_eq!(line.1.last().unwrap(), "helper_sleep", "-U shows kernel frames: {:?}", line.1);

    let mut helper = Helper::start(5, 20, false);
    let done = trace(&["-p", &helper.pid(), "-f", "-K"], &mut helper, false);
    let lines = folded(&done.stdout);
    assert!(!lines.is_empty());
    for (_, frames, _) in &lines {
        assert!(!frames.iter().any(|f| f.starts_with("helper_") || f == "main"), "-K shows user frames: {frames:?}");
        assert!(frames.iter().any(|f| kernel(f)), "{frames:?}");
    }
}

#[test]
fn state_filter() {
    // nanosleep sleeps interruptibly (TASK_INTERRUPTIBLE, 1): --state 1 keeps it, --state 2 does not.
    for (state, kept) in [("1", true), ("2", false)] {
        let mut helper = Helper::start(10, 20, false);
        let done = trace(&["-p", &helper.pid(), "-f", "--state", state], &mut helper, false);
        let time = helper_sleep_time(&folded(&done.stdout));
        if kept {
            assert_blocked(time, &helper, &format!("--state {state}"), &both(&done));
        } else {
            assert_eq!(time, 0, "--state {state} kept interruptible sleeps:\n{}", done.stdout);
        }
    }
}

#[test]
fn user_and_kernel_threads_only() {
    // -k: kernel threads only, so never the helper and never a user stack.
    let mut helper = Helper::start(10, 20, false);
    let comm = helper.comm();
    let done = trace(&["-k", "-f", "-K"], &mut helper, false);
    let lines = folded(&done.stdout);
    assert!(!lines.is_empty(), "no kernel thread blocked at all");
    assert!(lines.iter().all(|(c, _, _)| *c != comm), "-k shows the helper:\n{}", done.stdout);
    // -u: user threads only; the helper is there. JSON, to tell this helper by its PID from the same helper run by
    // a concurrent test.
    let mut helper = Helper::start(10, 20, false);
    let pid = helper.pid();
    // All user threads of a busy machine: a bigger stack map, so that the helper's stacks are not lost to a collision.
    let done = trace(&["-u", "--json", "--stack-storage-size", "32768"], &mut helper, false);
    let mine: Vec<serde_json::Value> =
        json_lines(&done.stdout).into_iter().filter(|s| s["pid"].as_u64().unwrap().to_string() == pid).collect();
    let time = helper_sleep_json_time(&mine);
    let text: String = mine.iter().map(|s| format!("{s}\n")).collect();
    assert_blocked(time, &helper, "-u time in helper_sleep", &format!("{text}{}", done.stderr));
}

/// The time of the JSON objects whose user stack is `helper_sleep <- helper_sleep_outer <- main`, in microseconds.
fn helper_sleep_json_time(objects: &[serde_json::Value]) -> u64 {
    let mut time = 0;
    for s in objects {
        let names: Vec<&str> = s["user_stack"].as_array().unwrap().iter().filter_map(|f| f["name"].as_str()).collect();
        if names.starts_with(&["helper_sleep", "helper_sleep_outer", "main"]) {
            time += s["total_us"].as_u64().unwrap();
        }
    }
    time
}

#[test]
fn json_and_flamegraph() {
    let svg = ScratchFile::new("offcputime.svg");
    let mut helper = Helper::start(10, 20, false);
    let pid = helper.pid();
    let done = trace(&["-p", &pid, "--json", "--flamegraph", svg.0.to_str().unwrap()], &mut helper, false);
    let objects = json_lines(&done.stdout);
    for s in &objects {
        assert_eq!(s["pid"].as_u64().unwrap().to_string(), pid, "{s}");
        assert!(s["kernel_stack"].is_array() && s["user_stack"].is_array(), "{s}");
    }
    assert_blocked(helper_sleep_json_time(&objects), &helper, "JSON total under helper_sleep", &both(&done));
    let svg = std::fs::read_to_string(&svg.0).unwrap();
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"), "not an SVG");
    assert!(svg.contains("Off-CPU Time Flame Graph"), "no title");
    assert!(svg.contains(">helper_sleep (") && svg.contains(">helper_sleep_outer ("), "helper frames missing");
}

#[test]
fn a_helper_that_exits_first_is_still_named() {
    // The helper exits (trace() waits for it) before the tool reads and names its stacks.
    let mut helper = Helper::start(10, 20, false);
    let pid = helper.pid();
    let done = trace(&["-p", &pid, "-f", "-U"], &mut helper, false);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert_blocked(helper_sleep_time(&folded(&done.stdout)), &helper, "time of the exited helper", &both(&done));
}

#[test]
fn a_zombie_helper_is_still_named() {
    // Exited but not reaped: /proc/PID/maps exists and is empty, so the maps saved while it lived must be used.
    let mut helper = Helper::start(10, 20, false);
    let pid = helper.pid();
    let mut tool = Running::start("offcputime", &["-p", &pid, "-f", "-U"]);
    tool.wait_attached(Duration::from_secs(60));
    helper.go();
    helper.wait_unreaped();
    assert_eq!(std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap(), "", "not a zombie");
    tool.signal(libc::SIGINT);
    let done = tool.finish(Duration::from_secs(60));
    done.assert_success();
    assert_blocked(helper_sleep_time(&folded(&done.stdout)), &helper, "time of the zombie helper", &both(&done));
}

#[test]
fn duration_ends_the_trace() {
    let done = Running::start("offcputime", &["-k", "1"]).finish(Duration::from_secs(30));
    done.assert_success();
    assert!(done.stdout.starts_with(&format!("{BANNER} of kernel threads by user + kernel stack for 1 secs.")));
    done.assert_no_programs_left();
}

#[test]
fn bad_input_is_refused() {
    let cases: [(&[&str], i32, &str); 8] = [
        (&["-p", "999999999"], 1, "no process with PID 999999999"),
        (&["-t", "999999999"], 1, "no process with PID 999999999"),
        (&["-p", "1", "-t", "1"], 2, "cannot be used with"),
        (&["-u", "-k"], 2, "cannot be used with"),
        (&["-U", "-K"], 2, "cannot be used with"),
        (&["-m", "100", "-M", "10"], 2, "-M 10 is below -m 100"),
        (&["-k", "-U"], 2, "doesn't make sense"),
        (&["--flamegraph", "/nonexistent/dir/off.svg", "1"], 1, "cannot create /nonexistent/dir/off.svg"),
    ];
    for (args, code, message) in cases {
        let done = run_tool("offcputime", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(message), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
    }
}

/// `--prometheus -p PID`: the helper blocks 20 times for 25 ms in main -> helper_sleep_outer -> helper_sleep and
/// lingers (a process is named at the first scrape that sees it, while it lives); the seconds of the series whose stack is folded outermost first through those three functions are K*T
/// to the helper's wall time (less T per switch-in the tool says it missed, in `corebpf_lost_events_total`), all of
/// the helper's name; scraped again after its exit, every series reads the same.
#[test]
fn prometheus_offcpu_seconds_per_folded_stack() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let mut helper = Helper::start(20, 25, true);
    let (tool, addr) = serving("offcputime", &["-p", &helper.pid()]);
    helper.go();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(helper.child.stdout.as_mut().unwrap()), &mut line)
        .unwrap();
    helper.wall_us = line.trim().parse().unwrap_or_else(|_| panic!("helper printed {line:?}"));
    let text = scrape(&addr);
    promtool_accepts(&text);
    let series: Vec<(String, String, f64)> = text
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("corebpf_offcputime_offcpu_seconds_total{comm=\"")?;
            let (comm, rest) = rest.split_once("\",stack=\"")?;
            let (stack, value) = rest.rsplit_once("\"} ")?;
            Some((comm.to_string(), stack.to_string(), value.parse().ok()?))
        })
        .collect();
    assert!(series.iter().all(|s| s.0 == helper.comm()), "only the helper's blocks:\n{text}");
    let through = |stack: &str| {
        let frames: Vec<&str> = stack.split(';').collect();
        frames.windows(3).any(|w| w == ["main", "helper_sleep_outer", "helper_sleep"])
    };
    let seconds: f64 = series.iter().filter(|s| through(&s.1)).map(|s| s.2).sum();
    let missed = sample(&text, "corebpf_lost_events_total{tool=\"offcputime\",what=\"switch-ins\"}").unwrap_or(0.0);
    let said = format!("offcputime: missed {missed} switch-ins (not reported by sched_switch, from the metric)");
    assert_blocked((seconds * 1e6).round() as u64, &helper, "seconds in helper_sleep", &format!("{said}\n{text}"));
    assert!(missed <= helper.k as f64, "{said}");
    helper.stdin = None;
    assert!(helper.child.wait().unwrap().success());
    let again = scrape(&addr);
    for (comm, stack, value) in &series {
        let series = format!("corebpf_offcputime_offcpu_seconds_total{{comm=\"{comm}\",stack=\"{stack}\"}}");
        assert_eq!(sample(&again, &series), Some(*value), "{series}:\n{again}");
    }
    tool.signal(libc::SIGTERM);
    let done = tool.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    let refused = run_tool("offcputime", &["--prometheus", "127.0.0.1:0", "5"]);
    assert_eq!(refused.status.code(), Some(2), "a duration too: {}", refused.stderr);
}
