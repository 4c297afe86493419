// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funccount against real programs with known call counts: a C helper, built here, that waits for a go byte on
//! stdin and then calls `hot_fn` HOT times, fires a USDT probe HOT times, calls getpid() HOT times and write()
//! WRITES times, and after a pause calls `cold_fn` COLD times. Every run filters on the helper's PID, so tests
//! can run concurrently and the counts are exact.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use corebpf_tests::*;

const BANNER: &str = "Hit Ctrl-C to end.";
const HOT: u64 = 37;
const COLD: u64 = 11;
const WRITES: u64 = 23;

const HELPER: &str = include_str!("calls.c");

const MANY: &str = include_str!("many.c");

// Built once per test process: a second concurrent build would rename a new file over the path, and uprobes
// attach to the file (inode) the path names now, not to the one an already running helper executes.
fn helper() -> PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| build_c_helper("funccount-helper", HELPER, &["-O0"])).clone()
}

fn many() -> PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| build_c_helper("funccount-many", MANY, &["-O0"])).clone()
}

/// A helper process waiting for its go byte.
struct Helper {
    child: Child,
}

impl Helper {
    fn start(exe: &PathBuf, args: &[String]) -> Helper {
        let child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
        // Until it blocks reading its go byte, its loader may not have mapped libc yet, and `funccount -p PID
        // c:...` would find no libc in its maps (seen on a loaded machine).
        wait_sleeping(child.id(), Duration::from_secs(10));
        Helper { child }
    }

    fn standard() -> Helper {
        Helper::start(&helper(), &[HOT.to_string(), COLD.to_string(), WRITES.to_string()])
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Sends the go byte and waits for the helper to finish its calls and exit.
    fn go(mut self) {
        self.child.stdin.take().unwrap().write_all(b"g").unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "helper failed: {status}");
    }
}

/// Runs funccount with `args` (plus `-p <helper>` and the pattern), lets the helper run once attached, stops
/// funccount with SIGINT and returns what it printed.
fn count(helper: Helper, args: &[&str], pattern: &str, env: &[(&str, &str)]) -> Finished {
    let pid = helper.pid();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-p", &pid, pattern]);
    let mut run = Running::start_with_env("funccount", &all, env);
    run.wait_for_line(BANNER, Duration::from_secs(30));
    helper.go();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The FUNC/COUNT rows of the last interval of BCC-style output.
fn rows(stdout: &str) -> BTreeMap<String, u64> {
    let last = stdout.rsplit("FUNC                                    COUNT\n").next().unwrap();
    last.lines()
        .take_while(|l| *l != "Detaching...")
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (name, count) = l.rsplit_once(' ').unwrap_or_else(|| panic!("bad row '{l}' in:\n{stdout}"));
            (name.trim().to_string(), count.parse().unwrap_or_else(|_| panic!("bad count in '{l}'")))
        })
        .collect()
}

fn expect(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

#[test]
fn counts_one_user_function_exactly() {
    let exe = helper();
    let done = count(Helper::standard(), &[], &format!("{}:hot_fn", exe.display()), &[]);
    assert_eq!(rows(&done.stdout), expect(&[("hot_fn", HOT)]), "{}", done.stdout);
    assert!(done
        .stdout
        .contains(&format!("Tracing 1 functions for \"{}:hot_fn\"... Hit Ctrl-C to end.", exe.display())));
    assert!(done.stdout.ends_with("Detaching...\n"), "{}", done.stdout);
}

#[test]
fn a_glob_counts_both_functions_in_ascending_order() {
    let exe = helper();
    let done = count(Helper::standard(), &[], &format!("{}:*_fn", exe.display()), &[]);
    assert_eq!(rows(&done.stdout), expect(&[("hot_fn", HOT), ("cold_fn", COLD)]), "{}", done.stdout);
    // BCC's layout: %-36s %8d, ascending by count.
    let cold = format!("{:<36} {:>8}", "cold_fn", COLD);
    let hot = format!("{:<36} {:>8}", "hot_fn", HOT);
    let (c, h) = (done.stdout.find(&cold).expect("cold_fn row"), done.stdout.find(&hot).expect("hot_fn row"));
    assert!(c < h, "rows not ascending:\n{}", done.stdout);
}

#[test]
fn a_regex_counts_the_same() {
    let exe = helper();
    let done = count(Helper::standard(), &["-r"], &format!("{}:^(hot|cold)_fn$", exe.display()), &[]);
    assert_eq!(rows(&done.stdout), expect(&[("hot_fn", HOT), ("cold_fn", COLD)]), "{}", done.stdout);
}

#[test]
fn one_uprobe_per_function_counts_the_same() {
    let exe = helper();
    let env = [("COREBPF_ATTACH", "uprobe")];
    let done = count(Helper::standard(), &["-v"], &format!("{}:*_fn", exe.display()), &env);
    assert_eq!(rows(&done.stdout), expect(&[("hot_fn", HOT), ("cold_fn", COLD)]), "{}", done.stdout);
    assert!(done.stderr.contains("attached with uprobe\n"), "{}", done.stderr);
}

#[test]
fn uprobe_multi_is_used_where_the_kernel_has_it() {
    let exe = helper();
    let done = count(Helper::standard(), &["-v"], &format!("{}:hot_fn", exe.display()), &[]);
    assert_eq!(rows(&done.stdout), expect(&[("hot_fn", HOT)]));
    assert!(done.stderr.contains("attached with uprobe_multi"), "{}", done.stderr);
}

#[test]
fn counts_a_tracepoint_exactly() {
    let done = count(Helper::standard(), &[], "t:syscalls:sys_enter_write", &[]);
    assert_eq!(rows(&done.stdout), expect(&[("syscalls:sys_enter_write", WRITES)]), "{}", done.stdout);
}

#[test]
fn counts_a_libc_function_exactly() {
    // glibc stopped caching getpid() in 2.25: every call is a call into libc.
    let done = count(Helper::standard(), &[], "c:getpid", &[]);
    assert_eq!(rows(&done.stdout), expect(&[("getpid", HOT)]), "{}", done.stdout);
}

#[test]
fn counts_a_usdt_probe_exactly() {
    let exe = helper();
    let done = count(Helper::standard(), &[], &format!("u:{}:tick", exe.display()), &[]);
    assert_eq!(rows(&done.stdout), expect(&[("tick", HOT)]), "{}", done.stdout);
}

#[test]
fn without_cookies_slot_programs_count_twenty_functions_exactly() {
    let exe = many();
    let env = [("COREBPF_ATTACH", "uprobe"), ("COREBPF_NO_COOKIES", "1")];
    let done = count(Helper::start(&exe, &[]), &[], &format!("{}:fn_*", exe.display()), &env);
    let want: BTreeMap<String, u64> = (0..20).map(|n| (format!("fn_{n:02}"), n + 1)).collect();
    assert_eq!(rows(&done.stdout), want, "{}", done.stdout);
}

#[test]
fn without_cookies_a_tracepoint_counts_exactly() {
    let env = [("COREBPF_NO_COOKIES", "1")];
    let done = count(Helper::standard(), &[], "t:syscalls:sys_enter_write", &env);
    assert_eq!(rows(&done.stdout), expect(&[("syscalls:sys_enter_write", WRITES)]), "{}", done.stdout);
}

#[test]
fn json_lines_carry_the_counts() {
    let exe = helper();
    let helper = Helper::standard();
    let pid = helper.pid();
    let pattern = format!("{}:*_fn", exe.display());
    let mut run = Running::start("funccount", &["--json", "-p", &pid, &pattern]);
    // No banner in JSON mode: wait until the tool holds its program, then for the link.
    let deadline = Instant::now() + Duration::from_secs(30);
    while prog_ids_of(run.pid()).is_empty() {
        assert!(Instant::now() < deadline, "funccount never loaded its program");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.note_programs();
    std::thread::sleep(Duration::from_millis(300));
    helper.go();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    assert_eq!(lines[0]["pattern"], pattern.as_str());
    let counts = lines[0]["counts"].as_array().unwrap();
    assert_eq!(counts.len(), 2, "{}", done.stdout);
    assert_eq!((counts[0]["func"].as_str(), counts[0]["count"].as_u64()), (Some("cold_fn"), Some(COLD)));
    assert_eq!((counts[1]["func"].as_str(), counts[1]["count"].as_u64()), (Some("hot_fn"), Some(HOT)));
}

#[test]
fn debug_lists_what_would_be_attached_and_attaches_nothing() {
    let exe = helper();
    let helper = Helper::standard();
    let done = run_tool("funccount", &["-D", "-p", &helper.pid(), &format!("{}:*_fn", exe.display())]);
    done.assert_success();
    assert!(done.stdout.starts_with("2 matches, attached with uprobe_multi, else uprobe"), "{}", done.stdout);
    assert!(done.stdout.contains(" cold_fn ") && done.stdout.contains(" hot_fn "), "{}", done.stdout);
    assert!(done.prog_ids.is_empty(), "-D loaded BPF programs");
    helper.go();
}

/// BPF programs of funccount's kernel-function kinds loaded anywhere on the system (no other test loads them).
fn kernel_function_programs() -> Vec<(u32, String)> {
    loaded_programs()
        .into_iter()
        .filter(|(_, name)| name.starts_with("fc_fentry") || name.starts_with("fc_k"))
        .collect()
}

/// The reason the refusal line gives for fentry: `it refused fentry (REASON), kprobe_multi ...`.
fn fentry_reason(stderr: &str) -> Option<&str> {
    let last = stderr.lines().last()?;
    let rest = last.split_once("it refused fentry (")?.1;
    Some(rest.split_once("), ").map_or(rest, |(reason, _)| reason))
}

/// A pattern that matches functions without BTF (`vfs_*` matches `vfs_kern_mount.part.0` on 6.18) on a kernel
/// that refuses fentry for every function: the refusal says what the kernel said, as for one function with BTF,
/// not that some functions lack BTF (which would not have saved fentry).
#[test]
fn fentry_refusal_names_the_kernel_s_reason_not_missing_btf() {
    let one = run_tool("funccount", &["-d", "1", "vfs_write"]);
    let many = run_tool("funccount", &["-d", "1", "vfs_*"]);
    if one.status.success() {
        // A kernel that allows kernel-function tracing (the VM matrix): a missing BTF there is a real reason.
        assert!(many.status.success(), "{}", many.stderr);
        return;
    }
    let reason = fentry_reason(&one.stderr).unwrap_or_else(|| panic!("{}", one.stderr));
    assert_eq!(many.status.code(), Some(1), "{}", many.stderr);
    assert_eq!(fentry_reason(&many.stderr), Some(reason), "{}", many.stderr);
    assert!(!many.stderr.contains("BTF"), "{}", many.stderr);
}

#[test]
fn kernel_functions_fail_with_one_clear_sentence_and_leave_nothing_behind() {
    let done = run_tool("funccount", &["-v", "-d", "1", "vfs_write"]);
    if done.status.success() {
        // A kernel that allows kernel-function tracing (the VM matrix): it ran its second and stopped.
        assert!(done.stdout.contains("Tracing 1 functions for \"vfs_write\""), "{}", done.stdout);
        return;
    }
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    let last = done.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("funccount: this kernel does not let BPF trace kernel functions: it refused fentry (")
            && last.contains("kprobe_multi (")
            && last.contains("tracepoints (t:CATEGORY:EVENT), user functions (LIB:FUNC) and USDT probes"),
        "{}",
        done.stderr
    );
    assert!(done.stdout.is_empty(), "{}", done.stdout);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !kernel_function_programs().is_empty() {
        assert!(Instant::now() < deadline, "left loaded: {:?}", kernel_function_programs());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn bad_input_is_one_clear_line() {
    let exe = helper();
    let cases: [(&[&str], i32, &str); 12] = [
        (
            &["nosuchkernelfunction_xyz"],
            1,
            "funccount: no kernel functions matched by pattern \"nosuchkernelfunction_xyz\"",
        ),
        (&["c:nosuchfunction_xyz"], 1, "funccount: no functions matched by pattern \"nosuchfunction_xyz\""),
        (&["nosuchlibrary_xyz:malloc"], 1, "funccount: unable to find library nosuchlibrary_xyz"),
        (&["x:c:malloc"], 1, "funccount: type must be 'p', 't', or 'u', but got 'x'"),
        (&["a:b:c:d"], 1, "funccount: too many ':'-separated components"),
        (&["t:nosuchcategory_xyz:*"], 1, "funccount: no tracepoints matched"),
        // Issue 23 item 6: an unknown PID is a runtime fact (one line, exit 1); a malformed one a usage error.
        (&["-p", "999999999", "c:malloc"], 1, "funccount: no process with PID 999999999"),
        (&["-p", "abc", "c:malloc"], 2, "'abc' is not a PID"),
        // Item 3: intervals and durations beyond a year are usage errors naming the range, never a panic.
        (&["-i", "18446744073709551615", "c:malloc"], 2, "from 1 to 31536000"),
        (&["-d", "18446744073709551615", "c:malloc"], 2, "from 1 to 31536000"),
        (&["-i", "0", "c:malloc"], 2, "from 1 to 31536000"),
        // Issue 53 item 15: --max-series bounds --prometheus's series and changes nothing without it.
        (&["--max-series", "5", "c:malloc"], 2, "--prometheus"),
    ];
    for (args, code, message) in cases {
        let done = run_tool("funccount", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(message), "{args:?}: {}", done.stderr);
        assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
        if code == 1 {
            assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
        }
    }
    let regex = run_tool("funccount", &["-r", &format!("{}:(", exe.display())]);
    assert_eq!(regex.status.code(), Some(1));
    assert!(regex.stderr.starts_with("funccount: bad regular expression '('"), "{}", regex.stderr);
}

#[test]
fn intervals_with_timestamps_and_a_duration_end_by_themselves() {
    let exe = helper();
    let helper = Helper::standard();
    let pid = helper.pid();
    let pattern = format!("{}:hot_fn", exe.display());
    let mut run = Running::start("funccount", &["-T", "-i", "1", "-d", "2", "-p", &pid, &pattern]);
    run.wait_for_line(BANNER, Duration::from_secs(30));
    helper.go();
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    // Two intervals (BCC's blank line, HH:MM:SS, header), HOT calls in total, Detaching... once at the end.
    assert_eq!(done.stdout.matches("FUNC                                    COUNT").count(), 2, "{}", done.stdout);
    let stamps = done.stdout.lines().filter(|l| l.len() == 8 && l.as_bytes()[2] == b':').count();
    assert_eq!(stamps, 2, "{}", done.stdout);
    let total: u64 =
        done.stdout.lines().filter_map(|l| l.strip_prefix("hot_fn")).map(|c| c.trim().parse::<u64>().unwrap()).sum();
    assert_eq!(total, HOT, "{}", done.stdout);
    assert!(done.stdout.ends_with("Detaching...\n"));
    assert_eq!(done.stdout.matches("Detaching...").count(), 1);
}

/// The names `funccount -D PATTERN` would count (second column of its plan).
fn planned(args: &[&str]) -> Vec<String> {
    let done = run_tool("funccount", args);
    done.assert_success();
    done.stdout.lines().skip(1).filter_map(|l| l.split_whitespace().nth(1)).map(str::to_string).collect()
}

/// Issue 23 item 4: BCC's matching rules. A regex meets user functions and tracepoints from the start of the
/// name (Python's re.match); a glob rewrites only `*`, so `[...]` is a character class.
#[test]
fn patterns_match_as_bcc_matches_them() {
    let dup = planned(&["-D", "-r", "c:dup"]);
    assert!(dup.iter().any(|n| n == "dup") && dup.iter().any(|n| n == "dup2"), "{dup:?}");
    assert!(dup.iter().all(|n| n.starts_with("dup")), "matched inside a name: {dup:?}");

    let sched = planned(&["-D", "t:sched:sched_[sw]*"]);
    assert!(sched.iter().any(|n| n == "sched:sched_switch"), "{sched:?}");
    assert!(sched.iter().any(|n| n == "sched:sched_wakeup"), "{sched:?}");
    assert!(sched.iter().all(|n| n.starts_with("sched:sched_s") || n.starts_with("sched:sched_w")), "{sched:?}");

    // A tracepoint regex meets `category:event` from its start; `$` anchors the end.
    let done = run_tool("funccount", &["-D", "-r", "t:sched:sched_switch$"]);
    done.assert_success();
    assert!(done.stdout.contains("sched:sched_switch"), "{}", done.stdout);
}

/// BCC's examples name system calls by their old kernel names (`funccount sys_getpid`, `SyS_nanosleep`): where the
/// kernel has no such function, the name is read as this architecture's wrapper, as BCC does, and `-v` says so
/// (issue 53). A wrapper that does not exist is still no match, and a regex is taken as written.
#[test]
fn old_syscall_names_are_read_as_this_kernels_wrappers() {
    let wrapper = if cfg!(target_arch = "aarch64") { "__arm64_sys_getpid" } else { "__x64_sys_getpid" };
    for name in ["sys_getpid", "SyS_getpid"] {
        let done = run_tool("funccount", &["-D", "-v", name]);
        done.assert_success();
        assert!(done.stdout.contains(&format!(" {wrapper}")), "{name}: {}", done.stdout);
        assert!(done.stderr.contains(&format!("\"{name}\" is read as \"{wrapper}\"")), "{name}: {}", done.stderr);
    }
    let quiet = run_tool("funccount", &["-D", "sys_getpid"]);
    assert!(quiet.stderr.is_empty(), "without -v: {}", quiet.stderr);
    let none = run_tool("funccount", &["-D", "sys_no_such_call_here"]);
    assert_eq!(none.status.code(), Some(1), "{}", none.stderr);
    assert!(none.stderr.contains("no kernel function"), "{}", none.stderr);
    let regex = run_tool("funccount", &["-D", "-r", "^sys_getpid$"]);
    assert_eq!(regex.status.code(), Some(1), "a regex is not rewritten: {}", regex.stdout);
}

/// Issue 23 item 9: syscall tracepoints can be counted by one raw tracepoint on sys_enter and one on sys_exit,
/// filtered by syscall number in BPF, with the same counts as a tracepoint link each. Issue 31 item 18: that
/// path runs for every system call, so a pattern naming a few calls gets a link each unless raw_tp is asked for.
#[test]
fn syscall_tracepoints_share_two_raw_tracepoints() {
    let pattern = "t:syscalls:sys_(enter|exit)_(getpid|write)$";
    let want = expect(&[
        ("syscalls:sys_enter_getpid", HOT),
        ("syscalls:sys_exit_getpid", HOT),
        ("syscalls:sys_enter_write", WRITES),
        ("syscalls:sys_exit_write", WRITES),
    ]);
    let done = count(Helper::standard(), &["-v", "-r"], pattern, &[]);
    assert!(done.stderr.contains("attached with tracepoint"), "{}", done.stderr);
    assert_eq!(rows(&done.stdout), want, "{}", done.stdout);
    let done = count(Helper::standard(), &["-v", "-r"], pattern, &[("COREBPF_ATTACH", "raw_tp")]);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    assert_eq!(rows(&done.stdout), want, "{}", done.stdout);
}

/// Issue 31 item 18: the raw tracepoint is chosen per direction, only where the pattern matches at least half of
/// the calls (`sys_enter_*`); the other direction's few matches get a link each, and the counts are exact.
#[test]
fn a_wildcard_direction_takes_the_raw_tracepoint_and_named_calls_a_link_each() {
    let done = count(Helper::standard(), &["-v", "-r"], "t:syscalls:(sys_enter_.*|sys_exit_getpid)$", &[]);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    let counts = rows(&done.stdout);
    assert_eq!(counts.get("syscalls:sys_enter_getpid"), Some(&HOT), "{}", done.stdout);
    assert_eq!(counts.get("syscalls:sys_exit_getpid"), Some(&HOT), "{}", done.stdout);
    assert_eq!(counts.get("syscalls:sys_enter_write"), Some(&WRITES), "{}", done.stdout);
    assert_eq!(counts.get("syscalls:sys_exit_write"), None, "{}", done.stdout);
    // One named call: a tracepoint link.
    let done = count(Helper::standard(), &["-v"], "t:syscalls:sys_enter_getpid", &[]);
    assert!(done.stderr.contains("attached with tracepoint"), "{}", done.stderr);
    assert_eq!(rows(&done.stdout), expect(&[("syscalls:sys_enter_getpid", HOT)]), "{}", done.stdout);
}

/// Every syscall tracepoint at once (about 700): two links; and a pattern that mixes syscalls with another
/// category gets the raw tracepoints and a tracepoint link for the rest.
#[test]
fn all_syscalls_and_mixed_categories_count_exactly() {
    let done = count(Helper::standard(), &["-v"], "t:syscalls:*", &[]);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    let counts = rows(&done.stdout);
    assert_eq!(counts.get("syscalls:sys_enter_getpid"), Some(&HOT), "{}", done.stdout);
    assert_eq!(counts.get("syscalls:sys_exit_write"), Some(&WRITES), "{}", done.stdout);

    let pattern = "t:(syscalls|sched):(sys_enter_getpid|sched_process_exit)$";
    let done = count(Helper::standard(), &["-v", "-r"], pattern, &[("COREBPF_ATTACH", "raw_tp")]);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    let want = expect(&[("syscalls:sys_enter_getpid", HOT), ("sched:sched_process_exit", 1)]);
    assert_eq!(rows(&done.stdout), want, "{}", done.stdout);
}

/// Issue 23 item 11: `funccount PATTERN | head -1` ends once `head` has read the banner and gone, although
/// nothing more would be written before Ctrl-C (no interval): stdout is watched while the tool waits.
#[test]
fn closed_pipe_ends_without_waiting_for_ctrl_c() {
    let helper = Helper::standard();
    let mut tool = Command::new(bin("funccount"))
        .args(["-p", &helper.pid(), "t:syscalls:sys_enter_getpid"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::io::BufReader::new(tool.stdout.take().unwrap());
    let mut banner = String::new();
    std::io::BufRead::read_line(&mut reader, &mut banner).unwrap();
    assert!(banner.contains(BANNER), "{banner}");
    let ids = prog_ids_of(tool.id());
    drop(reader);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = tool.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = tool.kill();
            panic!("funccount kept running after its pipe closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut tool.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status:?} {stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    Finished { status, stdout: banner, stderr, prog_ids: ids }.assert_no_programs_left();
    helper.go();
}
