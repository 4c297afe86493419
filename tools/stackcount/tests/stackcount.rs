// SPDX-License-Identifier: Apache-2.0 OR MIT
//! stackcount against a helper with known call paths: `target()` is called CALLS_A times from `caller_a()` and
//! CALLS_B times from `caller_b()`, and makes one `getppid()` each time; `hot()` is called SITE_A times from one
//! place in `main` and SITE_B times from another. The helper (built -O0, so every function
//! sets up its frame and the kernel can name a uprobe's caller) waits for a line on stdin, so the tool is attached
//! before the first call. Kernel functions run in the VM matrix; here they are refused with one line.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::libc;
use corebpf_tests::{build_c_helper, json_lines, run_tool, wait_sleeping, Finished, KillOnDrop, Running, ScratchFile};

const CALLS_A: u64 = 37;
const CALLS_B: u64 = 23;
const SITE_A: u64 = 300;
const SITE_B: u64 = 700;
const PUTS: u64 = 11;

const HELPER: &str = include_str!("callpaths.c");

fn helper() -> PathBuf {
    build_c_helper("stackcount-helper", HELPER, &["-O0", "-fno-omit-frame-pointer"])
}

/// Runs stackcount with `args` (`{exe}` is the helper's path, `{pid}` its PID) around the helper's calls; the
/// helper exits before the tool is stopped.
fn count(args: &[&str], env: &[(&str, &str)]) -> Finished {
    let exe = helper();
    let mut child =
        KillOnDrop(Command::new(&exe).arg("300").stdin(Stdio::piped()).stdout(Stdio::null()).spawn().expect("helper"));
    let pid = child.0.id().to_string();
    // Waiting for "go" on stdin: its libraries are mapped by then (a tool started before could find no libc in it).
    wait_sleeping(child.0.id(), Duration::from_secs(10));
    let args: Vec<String> =
        args.iter().map(|a| a.replace("{exe}", &exe.display().to_string()).replace("{pid}", &pid)).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut run = Running::start_with_env("stackcount", &args, env);
    if args.contains(&"-f") || args.contains(&"--json") {
        run.wait_attached(Duration::from_secs(60));
    } else {
        run.wait_for_line("Tracing", Duration::from_secs(60));
    }
    child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.0.wait().unwrap().success());
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// BCC's multi-line output: each stack's frames and its count.
fn stacks(stdout: &str) -> Vec<(Vec<String>, u64)> {
    stdout
        .split("\n\n")
        .filter_map(|block| {
            let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
            let count = lines.last()?.trim().parse().ok()?;
            let frames = lines[..lines.len() - 1].iter().map(|l| l.trim().to_owned()).collect();
            Some((frames, count))
        })
        .collect()
}

/// Total count of the stacks whose frames include `name`.
fn count_with(stacks: &[(Vec<String>, u64)], name: &str) -> u64 {
    stacks.iter().filter(|(f, _)| f.iter().any(|x| x == name)).map(|(_, c)| c).sum()
}

#[test]
fn a_user_function_counted_per_caller_exactly() {
    for env in [&[][..], &[("COREBPF_ATTACH", "uprobe")][..]] {
        let done = count(&["-U", "-p", "{pid}", "{exe}:target"], env);
        let s = stacks(&done.stdout);
        assert_eq!(count_with(&s, "caller_a"), CALLS_A, "{env:?}:\n{}", done.stdout);
        assert_eq!(count_with(&s, "caller_b"), CALLS_B, "{env:?}:\n{}", done.stdout);
        // Innermost first: target, then its caller, then main; the helper had exited when the tool printed.
        let a = s.iter().find(|(f, _)| f.contains(&"caller_a".to_string())).unwrap();
        assert_eq!(&a.0[..3], ["target", "caller_a", "main"], "{}", done.stdout);
        assert!(done.stdout.trim_end().ends_with("Detaching..."), "{}", done.stdout);
    }
}

/// Two call sites of `hot()` in main: the stacks differ only in main's return address, so they print differently
/// with -s (offsets) and -v (addresses) and stay two entries there, as BCC prints one entry per stack; without
/// either they print alike and are one entry.
#[test]
fn two_call_sites_stay_apart_where_offsets_or_addresses_show() {
    for flags in [&["-s"][..], &["-v"][..], &["-s", "-v"][..]] {
        let mut args = flags.to_vec();
        args.extend(["-U", "-p", "{pid}", "{exe}:hot"]);
        let done = count(&args, &[]);
        let mut counts: Vec<u64> = stacks(&done.stdout).iter().map(|(_, c)| *c).collect();
        counts.sort_unstable();
        assert_eq!(counts, [SITE_A, SITE_B], "{flags:?}:\n{}", done.stdout);
    }
    let done = count(&["-U", "-p", "{pid}", "{exe}:hot"], &[]);
    let counts: Vec<u64> = stacks(&done.stdout).iter().map(|(_, c)| *c).collect();
    assert_eq!(counts, [SITE_A + SITE_B], "{}", done.stdout);
}

/// -s: each frame is `name+0xOFF`, the offset from the function's start, as BCC prints it. A uprobe fires at the
/// function's first instruction, so the innermost frame of `c:puts` is at +0x0, whatever the symbol's name
/// (libc's debug information, where installed, names it `__GI__IO_puts` but gives it no start address of its own).
#[test]
fn offsets_are_from_the_function_start() {
    let done = count(&["-s", "-U", "-p", "{pid}", "c:puts"], &[]);
    let s = stacks(&done.stdout);
    assert_eq!(s.iter().map(|(_, c)| c).sum::<u64>(), PUTS, "{}", done.stdout);
    for (frames, _) in &s {
        let (name, offset) = frames[0].rsplit_once('+').unwrap_or_else(|| panic!("no offset: {}", done.stdout));
        assert!(name.contains("puts") && offset == "0x0", "innermost frame {}:\n{}", frames[0], done.stdout);
        // Every named frame has its offset (main's own frame is skipped: puts has not pushed one yet).
        assert!(frames.iter().all(|f| f == "[unknown]" || f.contains("+0x")), "{}", done.stdout);
    }
}

#[test]
fn a_tracepoint_counts_every_event_by_stack() {
    let done = count(&["-U", "-p", "{pid}", "t:syscalls:sys_enter_getppid"], &[]);
    let s = stacks(&done.stdout);
    let total: u64 = s.iter().map(|(_, c)| c).sum();
    assert_eq!(total, CALLS_A + CALLS_B, "{}", done.stdout);
    assert_eq!(count_with(&s, "caller_a"), CALLS_A, "{}", done.stdout);
    assert_eq!(count_with(&s, "caller_b"), CALLS_B, "{}", done.stdout);
}

#[test]
fn folded_lines_and_a_flame_graph() {
    let svg = ScratchFile::new("stackcount.svg");
    let svg_arg = svg.0.display().to_string();
    let done = count(&["-f", "-U", "-p", "{pid}", "--flamegraph", &svg_arg, "{exe}:target"], &[]);
    let mut folded = BTreeMap::new();
    for line in done.stdout.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a folded line: {line}"));
        *folded.entry(stack.to_owned()).or_insert(0u64) += n.parse::<u64>().unwrap();
    }
    let a: u64 = folded.iter().filter(|(k, _)| k.ends_with(";main;caller_a;target")).map(|(_, n)| n).sum();
    let b: u64 = folded.iter().filter(|(k, _)| k.ends_with(";main;caller_b;target")).map(|(_, n)| n).sum();
    assert_eq!((a, b), (CALLS_A, CALLS_B), "{}", done.stdout);
    assert!(
        folded.keys().all(|k| k.starts_with("stackcount-help")),
        "-p lines start with the command:\n{}",
        done.stdout
    );
    let svg = std::fs::read_to_string(&svg.0).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("caller_a") && svg.contains("caller_b"), "{}", &svg[..200]);
}

#[test]
fn json_and_per_process_lines() {
    let done = count(&["--json", "-U", "-p", "{pid}", "{exe}:target"], &[]);
    let total: u64 = json_lines(&done.stdout).iter().map(|v| v["count"].as_u64().unwrap()).sum();
    assert_eq!(total, CALLS_A + CALLS_B, "{}", done.stdout);
    for v in json_lines(&done.stdout) {
        assert!(v["kernel_stack"].as_array().unwrap().is_empty(), "-U: {v}");
        assert_eq!(v["user_stack"][0]["name"], "target", "{v}");
    }
    // -P names the process under each stack, as BCC: `    comm [pid]`.
    let done = count(&["-P", "-U", "{exe}:target"], &[]);
    assert!(done.stdout.contains("    stackcount-help ["), "{}", done.stdout);
}

/// BCC's `-d` folds a `-` between the user and kernel stacks whatever they hold: a uprobe has no kernel stack, so
/// each line ends with the `-` (BCC's stackcount prints it so; only its profile leaves it out for an empty side).
/// Multi-line output prints `    --` between them likewise.
#[test]
fn delimiter_stays_when_the_kernel_stack_is_empty() {
    let done = count(&["-P", "-d", "-f", "-p", "{pid}", "{exe}:target"], &[]);
    let mut ends = (0, 0);
    for line in done.stdout.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a folded line: {line}"));
        let n: u64 = n.parse().unwrap();
        if stack.ends_with(";main;caller_a;target;-") {
            ends.0 += n;
        } else if stack.ends_with(";main;caller_b;target;-") {
            ends.1 += n;
        }
        assert!(stack.starts_with("stackcount-help;") && stack.ends_with(";-"), "{line}");
    }
    assert_eq!(ends, (CALLS_A, CALLS_B), "{}", done.stdout);
    let done = count(&["-P", "-d", "-p", "{pid}", "{exe}:target"], &[]);
    let blocks: Vec<&str> = done.stdout.split("\n\n").filter(|b| b.contains("caller_")).collect();
    assert!(!blocks.is_empty(), "{}", done.stdout);
    for block in blocks {
        let lines: Vec<&str> = block.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!((lines[0], lines[1]), ("    --", "  target"), "{block}");
    }
}

/// BCC's --debug prints the generated program and traces on; this tool says on stderr what it will attach, where,
/// how and with which map sizes, then the mechanism used, and counts as without it.
#[test]
fn debug_tells_the_plan_and_traces_on() {
    let done = count(&["--debug", "--stack-storage-size", "999", "-U", "-p", "{pid}", "{exe}:target"], &[]);
    let s = stacks(&done.stdout);
    assert_eq!(count_with(&s, "caller_a"), CALLS_A, "{}", done.stdout);
    let err: Vec<&str> = done.stderr.lines().collect();
    assert!(err[0].starts_with("1 matches, attached with uprobe_multi, else uprobe ("), "{}", done.stderr);
    assert!(err[1].trim_start().starts_with("0  target"), "{}", done.stderr);
    assert!(err[1].contains("/stackcount-helper-") && err[1].contains(" offset 0x"), "{}", done.stderr);
    assert!(err[2].starts_with("stacks: user; filters: process ") && err[2].ends_with(", CPU any"), "{}", done.stderr);
    assert!(
        err.contains(&"maps: stackmap (stack traces) 999 entries, counts (per stack and process) 10240 entries"),
        "{}",
        done.stderr
    );
    assert!(err.contains(&"attached with uprobe_multi"), "{}", done.stderr);
}

#[test]
fn bad_input_gets_one_clear_line() {
    for (args, code, needle) in [
        (&["-K", "-U", "c:getpid"][..], 2, "cannot be used with"),
        (&["c:no_such_function_at_all_xyz"][..], 1, "no_such_function_at_all_xyz"),
        (&["t:no_such_category:no_such_event"][..], 1, "no_such"),
        (&["-p", "999999999", "c:getpid"][..], 1, "no process"),
        (&["--stack-storage-size", "0", "c:getpid"][..], 2, "stack-storage-size"),
        // This host refuses kernel functions; the line says what still works, as funccount's does.
        (&["vfs_read"][..], 1, "tracepoints (t:CATEGORY:EVENT), user functions (LIB:FUNC) and USDT probes"),
    ] {
        let done = run_tool("stackcount", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {done:?}");
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
        assert!(done.stderr.starts_with("stackcount: ") && done.stderr.contains(needle), "{args:?}: {}", done.stderr);
    }
}

/// `--prometheus -U -p PID EXE:target`: the helper (kept alive after its calls, so that a scrape sees it while its
/// maps can be read) calls target() 37 times through caller_a and 23 times through caller_b; the counter's series
/// whose stacks end `main;caller_a;target` and `main;caller_b;target` add up to exactly those counts, all of the
/// helper's name, and read the same once it has been killed. An interval too is a usage error.
#[test]
fn prometheus_counts_per_folded_stack() {
    use corebpf_tests::prom::{promtool_accepts, samples_of, scrape, scrape_until, serving};
    const FAMILY: &str = "corebpf_stackcount_events_total";
    let exe = helper();
    let mut child = KillOnDrop(
        Command::new(&exe).arg("600000").stdin(Stdio::piped()).stdout(Stdio::null()).spawn().expect("helper"),
    );
    let pid = child.0.id().to_string();
    let pattern = format!("{}:target", exe.display());
    let (tool, addr) = serving("stackcount", &["-U", "-p", &pid, &pattern]);
    child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let total = |text: &str| samples_of(text, FAMILY).iter().map(|s| s.1).sum::<f64>();
    let text = scrape_until(&addr, "the helper's 60 calls", |t| total(t) >= (CALLS_A + CALLS_B) as f64);
    promtool_accepts(&text);
    let series = samples_of(&text, FAMILY);
    let through = |caller: &str| {
        let end = format!(";main;{caller};target");
        series.iter().filter(|(l, _)| l["stack"].ends_with(&end)).map(|s| s.1).sum::<f64>()
    };
    assert_eq!(through("caller_a"), CALLS_A as f64, "{text}");
    assert_eq!(through("caller_b"), CALLS_B as f64, "{text}");
    assert_eq!(total(&text), (CALLS_A + CALLS_B) as f64, "{text}");
    assert!(series.iter().all(|(l, _)| l["comm"] == "stackcount-help"), "{text}");
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let again = scrape(&addr);
    assert_eq!(samples_of(&again, FAMILY), series, "named once, while the helper lived:\n{again}");
    tool.signal(libc::SIGTERM);
    let done = tool.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    let refused = run_tool("stackcount", &["--prometheus", "127.0.0.1:0", "-i", "1", "c:getpid"]);
    assert_eq!(refused.status.code(), Some(2), "an interval too: {}", refused.stderr);
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
}
