// SPDX-License-Identifier: Apache-2.0 OR MIT
//! offwaketime against the helper of `offwake` (a "reader" thread blocked on a pipe K times, woken each time by a
//! "writer" thread after T ms, in known functions). The tests check that the
//! reader's blocked time is found under its own stack with the writer's stack and name as waker, in text, folded,
//! JSON and flame graph forms, and bad input.

use corebpf_tests::offwake::Helper;
use corebpf_tests::*;

/// The reader's blocked time whose folded line has the reader's stack, `--`, then the writer's stack and name.
fn reader_time_woken_by_writer(folded: &str) -> u64 {
    folded
        .lines()
        .filter_map(|l| {
            let (stack, total) = l.rsplit_once(' ')?;
            let (target, waker) = stack.split_once(";--;")?;
            let target: Vec<&str> = target.split(';').collect();
            let waker: Vec<&str> = waker.split(';').collect();
            let target_ok = target.first() == Some(&"reader")
                && target.windows(3).any(|w| w == ["main", "reader_loop", "reader_wait"]);
            let waker_ok =
                waker.last() == Some(&"writer") && waker.windows(2).any(|w| w == ["writer_wake", "writer_loop"]);
            (target_ok && waker_ok).then(|| total.parse::<u64>().unwrap())
        })
        .sum()
}

#[test]
fn folded_reader_stack_with_its_waker_on_top() {
    let mut helper = Helper::start(10, 20);
    let done = offwake::trace("offwaketime", &["-p", &helper.pid(), "-f"], &mut helper, false);
    let time = reader_time_woken_by_writer(&done.stdout);
    // Ten reads, each blocked until the writer's write 20 ms after the previous one: about 10 x 20 ms, less the
    // reader's own time between reads, which a busy machine stretches (a preempted reader is not blocked).
    assert!(time >= 10 * 20_000 / 2, "{time} us:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn multiline_waker_above_the_separator_target_below() {
    let mut helper = Helper::start(10, 20);
    let pid = helper.pid();
    let done = offwake::trace("offwaketime", &["-p", &pid], &mut helper, true);
    assert!(done
        .stdout
        .starts_with("Tracing blocked time (us) by user + kernel off-CPU and waker stack... Hit Ctrl-C"));
    let lines: Vec<&str> = done.stdout.lines().collect();
    // The block of the reader woken by the writer: "waker: writer TID", the writer's frames, "--  --", the
    // reader's frames, "target: reader TID", the total.
    let block = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("target:") && l.contains("reader"))
        .map(|(at, _)| {
            let start = lines[..at].iter().rposition(|l| l.trim_start().starts_with("waker:")).unwrap();
            &lines[start..=at + 1]
        })
        .find(|block| block[0].contains("writer") && block.iter().any(|l| l.trim() == "reader_wait"))
        .unwrap_or_else(|| panic!("no reader woken by the writer:\n{}", done.stdout));
    let text = block.join("\n");
    assert!(block[0].contains("writer"), "{text}");
    let sep = block.iter().position(|l| l.trim() == "--               --").unwrap_or_else(|| panic!("{text}"));
    let (waker, target_part) = block.split_at(sep);
    // Waker frames outermost first (BCC prints them reversed), the target's innermost first.
    let pos = |part: &[&str], f: &str| part.iter().position(|l| l.trim() == f);
    assert!(pos(waker, "writer_loop") < pos(waker, "writer_wake") && pos(waker, "writer_loop").is_some(), "{text}");
    assert!(pos(target_part, "reader_wait") < pos(target_part, "reader_loop"), "{text}");
    assert!(pos(target_part, "reader_wait").is_some(), "{text}");
}

#[test]
fn json_and_flamegraph() {
    let svg = ScratchFile::new("offwaketime.svg");
    let mut helper = Helper::start(10, 20);
    let done = offwake::trace(
        "offwaketime",
        &["-p", &helper.pid(), "--json", "--flamegraph", svg.0.to_str().unwrap()],
        &mut helper,
        false,
    );
    let mut time = 0;
    for s in json_lines(&done.stdout) {
        let names = |v: &serde_json::Value| -> Vec<String> {
            v.as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_string()).collect()
        };
        if s["comm"] == "reader"
            && names(&s["user_stack"]).starts_with(&["reader_wait".into(), "reader_loop".into()])
            && s["waker"]["comm"] == "writer"
            && names(&s["waker"]["user_stack"]).starts_with(&["writer_wake".into(), "writer_loop".into()])
        {
            time += s["total_us"].as_u64().unwrap();
        }
    }
    assert!(time >= 10 * 20_000 / 2, "{time} us:\n{}", done.stdout);
    let svg = std::fs::read_to_string(&svg.0).unwrap();
    assert!(svg.trim_end().ends_with("</svg>") && svg.contains("Off-Wake Time Flame Graph"));
    assert!(svg.contains(">reader_wait (") && svg.contains(">writer_wake ("), "frames missing from the SVG");
}

/// The writer's sleeps end in a timer interrupt: on an idle CPU, the idle task (`swapper/N`, PID 0) is the waker.
/// It has no user space, so its user stack is absent, not lost: no `[Missed User Stack]`, no warning about stacks
/// that could not be displayed (#31, item 11).
#[test]
fn an_idle_waker_has_no_user_stack_and_nothing_is_lost() {
    // A busy machine may have kept both CPUs busy through a run: try a few runs for an idle wakeup.
    for _ in 0..5 {
        let mut helper = Helper::start(20, 10);
        let done = offwake::trace("offwaketime", &["-p", &helper.pid(), "-f"], &mut helper, false);
        let idle: Vec<&str> = done
            .stdout
            .lines()
            .filter(|l| {
                l.rsplit_once(' ').is_some_and(|(stack, _)| stack.rsplit(';').next().unwrap().starts_with("swapper/"))
            })
            .collect();
        if idle.is_empty() {
            continue;
        }
        for line in &idle {
            let (_, waker) = line.split_once(";--;").unwrap_or_else(|| panic!("no waker: {line}"));
            assert!(!waker.contains("[Missed User Stack]"), "the idle task's user stack is not lost: {line}");
        }
        assert!(!done.stderr.contains("could not be displayed"), "{}\n{}", done.stderr, idle.join("\n"));
        return;
    }
    panic!("no wakeup by the idle task in 5 runs: were both CPUs busy throughout?");
}

#[test]
fn bad_input_is_refused() {
    let cases: [(&[&str], i32, &str); 5] = [
        (&["-p", "999999999"], 1, "no process with PID 999999999"),
        (&["-p", "1", "-t", "1"], 2, "cannot be used with"),
        (&["-u", "-k"], 2, "cannot be used with"),
        (&["-U", "-K"], 2, "cannot be used with"),
        (&["-m", "100", "-M", "10"], 2, "-M 10 is below -m 100"),
    ];
    for (args, code, message) in cases {
        let done = run_tool("offwaketime", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(message), "{args:?}: {}", done.stderr);
    }
}

/// `--prometheus -p PID`: the helper's reader blocks 10 times in main -> reader_loop -> reader_wait until the
/// writer's write from writer_loop -> writer_wake; scraped while the helper lingers after its run (so its frames
/// are named from its maps), the seconds of the series labelled comm "reader", waker "writer" with those frames
/// (each stack outermost first) are at least half of 10 x 20 ms, as the folded test's, and at most the run's wall
/// time; after the helper's exit every series reads the same; promtool accepts the exposition.
#[test]
fn prometheus_blocked_seconds_per_target_and_waker_stack() {
    use corebpf_tests::prom::{promtool_accepts, samples_of, scrape, serving};
    const FAMILY: &str = "corebpf_offwaketime_blocked_seconds_total";
    let mut helper = Helper::start_lingering(10, 20);
    let (tool, addr) = serving("offwaketime", &["-p", &helper.pid()]);
    let started = std::time::Instant::now();
    helper.go();
    let wall_us = started.elapsed().as_micros() as f64;
    let text = scrape(&addr);
    promtool_accepts(&text);
    let series = samples_of(&text, FAMILY);
    let reader: f64 = series
        .iter()
        .filter(|(l, _)| {
            let target: Vec<&str> = l["stack"].split(';').collect();
            let waker: Vec<&str> = l["waker_stack"].split(';').collect();
            l["comm"] == "reader"
                && l["waker"] == "writer"
                && target.windows(3).any(|w| w == ["main", "reader_loop", "reader_wait"])
                && waker.windows(2).any(|w| w == ["writer_loop", "writer_wake"])
        })
        .map(|s| s.1 * 1e6)
        .sum();
    assert!(reader >= 10.0 * 20_000.0 / 2.0 && reader <= wall_us, "{reader} us of {wall_us}:\n{text}");
    helper.end();
    let again = samples_of(&scrape(&addr), FAMILY);
    for (labels, value) in &series {
        let now = again.iter().find(|(l, _)| l == labels).map(|s| s.1);
        assert_eq!(now, Some(*value), "{labels:?} after the helper's exit");
    }
    tool.signal(libc::SIGTERM);
    let done = tool.finish(std::time::Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    let refused = run_tool("offwaketime", &["--prometheus", "127.0.0.1:0", "5"]);
    assert_eq!(refused.status.code(), Some(2), "a duration too: {}", refused.stderr);
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
}
