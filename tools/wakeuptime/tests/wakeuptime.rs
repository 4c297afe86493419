// SPDX-License-Identifier: Apache-2.0 OR MIT
//! wakeuptime against the helper of `offwake`: a thread named "reader" blocks K times on a pipe, and a thread named
//! "writer" wakes it each time by writing the pipe after sleeping T ms (so the writer is itself woken K times by
//! its timer). The tests check that the reader's blocked time is found under the writer's name and kernel stack
//! (the pipe write), and the writer's under the timer's stack, in text, folded, JSON and flame graph forms; that
//! -p keeps to the helper, -m/-M drop blocks outside their bounds; bad input; signals; a closed pipe.

use std::process::Command;
use std::time::Duration;

use corebpf_tests::offwake::Helper;
use corebpf_tests::*;

const BANNER: &str = "Tracing blocked time (us) by kernel stack";

/// (waker, kernel frames outermost first, target, total) of each folded line.
fn folded(text: &str) -> Vec<(String, Vec<String>, String, u64)> {
    text.lines()
        .map(|l| {
            let (stack, total) = l.rsplit_once(' ').unwrap_or_else(|| panic!("not a folded line: {l}"));
            let mut parts: Vec<String> = stack.split(';').map(String::from).collect();
            let target = parts.pop().unwrap();
            let waker = parts.remove(0);
            (waker, parts, target, total.parse().unwrap_or_else(|_| panic!("bad total in {l}")))
        })
        .collect()
}

/// The time the reader was blocked until the writer's pipe write woke it.
fn reader_woken_by_writer(lines: &[(String, Vec<String>, String, u64)]) -> u64 {
    lines
        .iter()
        .filter(|(waker, frames, target, _)| {
            waker == "writer" && target == "reader" && frames.iter().any(|f| f.contains("pipe_write"))
        })
        .map(|l| l.3)
        .sum()
}

/// The time the writer slept in nanosleep until its timer woke it.
fn writer_woken_by_timer(lines: &[(String, Vec<String>, String, u64)]) -> u64 {
    lines
        .iter()
        .filter(|(_, frames, target, _)| target == "writer" && frames.last().is_some_and(|f| f == "hrtimer_wakeup"))
        .map(|l| l.3)
        .sum()
}

#[test]
fn folded_waker_stack_and_names_with_the_blocked_time() {
    let mut helper = Helper::start(10, 20);
    let started = std::time::Instant::now();
    let done = offwake::trace("wakeuptime", &["-p", &helper.pid(), "-f"], &mut helper, false);
    let wall_us = started.elapsed().as_micros() as u64;
    let lines = folded(&done.stdout);
    // Ten reads, each blocked until the writer's write 20 ms after the previous one: about 10 x 20 ms, less the
    // reader's own time between reads, which a busy machine stretches (a preempted reader is not blocked).
    let reader = reader_woken_by_writer(&lines);
    assert!(reader >= 10 * 20_000 / 2, "{reader} us:\n{}", done.stdout);
    // Ten 20 ms sleeps of the writer, each ended by its timer. A writer preempted between arming its timer and
    // blocking (a busy machine) is woken while still runnable, or blocks for less: that sleep is no block, or a
    // shorter one, so the floor is half, as for the reader; every sleep is under the timer's stack all the same.
    let writer = writer_woken_by_timer(&lines);
    assert!(writer >= 10 * 20_000 / 2, "{writer} us:\n{}", done.stdout);
    assert!(writer <= wall_us, "{writer} us of {wall_us}:\n{}", done.stdout);
    // -p: only the helper's threads are targets (the main thread is "reader"; before it is renamed it waits for
    // the "go" byte under the executable's name).
    let exe = offwake::helper_exe();
    let exe_comm: String = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
    for (_, _, target, _) in &lines {
        assert!(["reader", "writer", exe_comm.as_str()].contains(&target.as_str()), "{target}:\n{}", done.stdout);
    }
    done.assert_no_programs_left();
}

#[test]
fn multiline_target_waker_frames_and_total() {
    let mut helper = Helper::start(10, 20);
    let done = offwake::trace("wakeuptime", &["-p", &helper.pid()], &mut helper, true);
    assert!(done.stdout.starts_with(&format!("{BANNER}... Hit Ctrl-C to end.\n")), "{}", done.stdout);
    assert!(done.stdout.trim_end().ends_with("Detaching..."), "{}", done.stdout);
    let lines: Vec<&str> = done.stdout.lines().collect();
    // A block: "    target:          reader", frames "    ffffffff81234567 pipe_write", "    waker:  writer",
    // "        total", then a blank line.
    let mut reader = 0;
    for (at, line) in lines.iter().enumerate() {
        if line.trim_start() != format!("{:<16} reader", "target:") {
            continue;
        }
        let end = at + lines[at..].iter().position(|l| l.trim_start().starts_with("waker:")).unwrap();
        let frames = &lines[at + 1..end];
        for f in frames {
            let (addr, name) = f.trim_start().split_once(' ').unwrap();
            assert!(u64::from_str_radix(addr, 16).is_ok() && !name.trim().is_empty(), "{f}");
        }
        if lines[end].trim_start() == format!("{:<16} writer", "waker:")
            && frames.iter().any(|f| f.contains("pipe_write"))
        {
            reader += lines[end + 1].trim().parse::<u64>().unwrap();
        }
    }
    assert!(reader >= 10 * 20_000 / 2, "{reader} us:\n{}", done.stdout);
}

#[test]
fn min_and_max_block_times_drop_blocks_outside_them() {
    // The reader's blocks last about 20 ms: above -M 5000 us, below -m 500000 us.
    for bound in [["-M", "5000"], ["-m", "500000"]] {
        let mut helper = Helper::start(5, 20);
        let pid = helper.pid();
        let done = offwake::trace("wakeuptime", &["-p", &pid, "-f", bound[0], bound[1]], &mut helper, false);
        let lines = folded(&done.stdout);
        assert_eq!(reader_woken_by_writer(&lines), 0, "{bound:?}:\n{}", done.stdout);
        assert_eq!(writer_woken_by_timer(&lines), 0, "{bound:?}:\n{}", done.stdout);
    }
}

#[test]
fn json_and_flamegraph() {
    let svg = ScratchFile::new("wakeuptime.svg");
    let mut helper = Helper::start(10, 20);
    let args = ["-p", &helper.pid(), "--json", "--flamegraph", svg.0.to_str().unwrap()];
    let done = offwake::trace("wakeuptime", &args, &mut helper, false);
    let mut reader = 0;
    for s in json_lines(&done.stdout) {
        let frames: Vec<&str> =
            s["waker_kernel_stack"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
        assert!(s["waker_kernel_stack"][0]["addr"].as_str().is_none_or(|a| a.starts_with("0x")), "{s}");
        if s["target"] == "reader" && s["waker"] == "writer" && frames.iter().any(|f| f.contains("pipe_write")) {
            reader += s["total_us"].as_u64().unwrap();
        }
    }
    assert!(reader >= 10 * 20_000 / 2, "{reader} us:\n{}", done.stdout);
    let svg = std::fs::read_to_string(&svg.0).unwrap();
    assert!(svg.trim_end().ends_with("</svg>") && svg.contains("Wakeup Time Flame Graph"), "{svg}");
    assert!(svg.contains(">reader (") && svg.contains(">writer (") && svg.contains(">hrtimer_wakeup ("));
}

#[test]
fn sigterm_and_sighup_end_with_the_report() {
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        let mut tool = Running::start("wakeuptime", &["-u"]);
        tool.wait_for_line(BANNER, Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(300));
        tool.signal(signal);
        let done = tool.finish(Duration::from_secs(60));
        done.assert_success();
        assert!(done.stdout.trim_end().ends_with("Detaching..."), "{signal}: {}", done.stdout);
        assert!(done.stdout.contains("    waker:  "), "{signal}: {}", done.stdout);
        done.assert_no_programs_left();
    }
}

#[test]
fn bad_input_and_closed_pipe() {
    let cases: [(&[&str], i32, &str); 6] = [
        (&["-p", "999999999"], 1, "no process with PID 999999999"),
        (&["-p", "1", "-u"], 2, "cannot be used with"),
        (&["-m", "100", "-M", "10"], 2, "-M 10 is below -m 100"),
        (&["-m", "0"], 2, "must be greater than 0"),
        (&["--stack-storage-size", "0"], 2, "must be greater than 0"),
        (&["-p", "abc"], 2, "abc"),
    ];
    for (args, code, message) in cases {
        let done = run_tool("wakeuptime", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(message), "{args:?}: {}", done.stderr);
    }
    let tool = bin("wakeuptime");
    let out = Command::new("sh").arg("-c").arg(format!("{} 1 | head -1", tool.display())).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{BANNER} for 1 secs.\n"));
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--prometheus -p PID`: the helper's reader blocks 10 times until the writer's pipe write, and the writer sleeps
/// 10 times 20 ms until its timer; the seconds under target "reader", waker "writer" and a waker stack through
/// pipe_write, and under target "writer" and a stack ending in hrtimer_wakeup, are at least those of the folded
/// test and at most the helper's whole run; promtool accepts the exposition. A duration too is a usage error.
#[test]
fn prometheus_blocked_seconds_per_waker_stack() {
    use corebpf_tests::prom::{promtool_accepts, samples_of, scrape, serving};
    const FAMILY: &str = "corebpf_wakeuptime_blocked_seconds_total";
    let mut helper = Helper::start(10, 20);
    let (tool, addr) = serving("wakeuptime", &["-p", &helper.pid()]);
    let started = std::time::Instant::now();
    helper.run();
    let wall_us = started.elapsed().as_micros() as f64;
    let text = scrape(&addr);
    promtool_accepts(&text);
    let series = samples_of(&text, FAMILY);
    let us = |keep: &dyn Fn(&str, &str, &[&str]) -> bool| -> f64 {
        series
            .iter()
            .filter(|(l, _)| {
                let frames: Vec<&str> = l["waker_stack"].split(';').collect();
                keep(&l["target"], &l["waker"], &frames)
            })
            .map(|s| s.1 * 1e6)
            .sum()
    };
    let reader = us(&|target, waker, frames| {
        target == "reader" && waker == "writer" && frames.iter().any(|f| f.contains("pipe_write"))
    });
    // The waker's stack ends where its code woke the thread, as in the other forms (try_to_wake_up left out).
    let writer = us(&|target, _, frames| target == "writer" && frames.last() == Some(&"hrtimer_wakeup"));
    assert!(reader >= 10.0 * 20_000.0 / 2.0 && reader <= wall_us, "{reader} us of {wall_us}:\n{text}");
    // Half, as in folded_waker_stack_and_names_with_the_blocked_time: a preempted writer may not block at all.
    assert!(writer >= 10.0 * 20_000.0 / 2.0 && writer <= wall_us, "{writer} us of {wall_us}:\n{text}");
    tool.signal(libc::SIGTERM);
    let done = tool.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    let refused = run_tool("wakeuptime", &["--prometheus", "127.0.0.1:0", "5"]);
    assert_eq!(refused.status.code(), Some(2), "a duration too: {}", refused.stderr);
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
}
