// SPDX-License-Identifier: Apache-2.0 OR MIT
//! capable against a helper whose capability checks are known (tests/checker.c): as root, after a go byte, it
//! calls setuid(0) S times (one CAP_SETUID check each, from a set*id() call: INSETID 1), chown() of its scratch
//! file C times (one CAP_CHOWN check each) and maps M private writable pages (one CAP_SYS_ADMIN check each, which
//! the kernel does not audit: AUDIT 0, shown only with -v); with "deny" it first drops CAP_CHOWN, so those checks
//! are denied. Each test filters by the helper's PID (or its cgroup or mount namespace, with another helper
//! beside it that must not show), so concurrent tests and the machine's own checks do not count.
//! Debian's libbpf-tools capable needs a kprobe on cap_capable and cannot load here: there is no anchor.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{ChildStdout, Command, Stdio};
use std::time::Duration;

use corebpf_tests::cgroup::TestCgroup;
use corebpf_tests::pinned::PinnedMaps;
use corebpf_tests::serde_json::Value;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "capable";
/// How long the tool may take to attach: fentry's trampolines took over 20 s in an emulated guest of the matrix.
const WAIT: Duration = Duration::from_secs(60);
const SETUIDS: usize = 3;
const CHOWNS: usize = 4;
const MMAPS: usize = 5;

fn exe() -> PathBuf {
    build_c_helper("capchk", include_str!("checker.c"), &["-O1", "-fno-omit-frame-pointer"])
}

/// A running helper, waiting for its go byte.
struct Checker {
    child: KillOnDrop,
    out: BufReader<ChildStdout>,
    pid: u32,
    comm: String,
    _file: ScratchFile,
}

impl Checker {
    /// Starts the helper, through the shell script `wrapper` makes of its command line (which ends by exec'ing
    /// it) if given.
    fn start(wrapper: Option<&dyn Fn(&str) -> String>, deny: bool) -> Checker {
        let exe = exe();
        let file = ScratchFile::new("capable-chown");
        std::fs::write(&file.0, b"").unwrap();
        let mut args = vec![file.0.display().to_string(), SETUIDS.to_string(), CHOWNS.to_string(), MMAPS.to_string()];
        if deny {
            args.push("deny".into());
        }
        let mut cmd = match wrapper {
            None => {
                let mut c = Command::new(&exe);
                c.args(&args);
                c
            }
            Some(wrapper) => {
                let mut c = Command::new("sh");
                c.args(["-c", &wrapper(&format!("{} {}", exe.display(), args.join(" ")))]);
                c
            }
        };
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("starting the helper");
        let out = BufReader::new(child.stdout.take().unwrap());
        let pid = child.id();
        let child = KillOnDrop(child);
        // Through a wrapper, the same PID becomes the helper once it has exec'd and waits for its go byte.
        let deadline = std::time::Instant::now() + WAIT;
        let real = std::fs::canonicalize(&exe).unwrap();
        while !std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == real) {
            assert!(std::time::Instant::now() < deadline, "the helper did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        wait_sleeping(pid, WAIT);
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
        Checker { child, out, pid, comm, _file: file }
    }

    /// Lets it make its checks; returns how many chown() calls were refused.
    fn go(&mut self) -> usize {
        self.child.0.stdin.as_mut().unwrap().write_all(b"g").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line.trim().strip_prefix("done ").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("helper: {line:?}"))
    }
}

/// Runs the tool with `args` while each helper makes its checks.
fn trace(args: &[&str], env: &[(&str, &str)], checkers: &mut [&mut Checker]) -> Finished {
    let mut run = Running::start_with_env(TOOL, args, env);
    run.wait_attached(WAIT);
    for c in checkers.iter_mut() {
        c.go();
    }
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done
}

fn traced_alone(args: &[&str], deny: bool) -> (Finished, Checker) {
    let mut c = Checker::start(None, deny);
    let pid = c.pid.to_string();
    let mut all = vec!["-p", pid.as_str()];
    all.extend_from_slice(args);
    let done = trace(&all, &[], &mut [&mut c]);
    (done, c)
}

/// Text rows as (column, value) maps, by the header's column names.
fn rows(stdout: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = stdout.lines();
    let header: Vec<String> = lines.next().unwrap_or_default().split_whitespace().map(String::from).collect();
    lines
        .filter(|l| l.as_bytes().first().is_some_and(u8::is_ascii_digit))
        .map(|l| header.iter().cloned().zip(l.split_whitespace().map(String::from)).collect())
        .collect()
}

/// How many rows have each capability name.
fn by_name(rows: &[BTreeMap<String, String>]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for r in rows {
        *counts.entry(r["NAME"].clone()).or_default() += 1;
    }
    counts
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|&(n, c)| (n.to_string(), c)).collect()
}

#[test]
fn prints_each_audited_check_with_extra_columns() {
    let (done, c) = traced_alone(&["-x"], false);
    assert!(
        done.stdout.starts_with(
            "TIME      UID    PID    TID    COMM             CAP  NAME                 AUDIT  VERDICT INSETID\n"
        ),
        "{}",
        done.stdout
    );
    let rows = rows(&done.stdout);
    assert_eq!(by_name(&rows), counts(&[("CAP_SETUID", SETUIDS), ("CAP_CHOWN", CHOWNS)]), "{}", done.stdout);
    for r in &rows {
        let setuid = r["NAME"] == "CAP_SETUID";
        assert_eq!(r["CAP"], if setuid { "7" } else { "0" }, "{r:?}");
        assert_eq!((r["UID"].as_str(), r["AUDIT"].as_str(), r["VERDICT"].as_str()), ("0", "1", "allow"), "{r:?}");
        assert_eq!(r["INSETID"], if setuid { "1" } else { "0" }, "{r:?}");
        assert_eq!((r["PID"].clone(), r["TID"].clone()), (c.pid.to_string(), c.pid.to_string()), "{r:?}");
        assert_eq!(r["COMM"], c.comm, "{r:?}");
    }
    done.assert_no_programs_left();
}

#[test]
fn verbose_adds_the_checks_the_kernel_does_not_audit() {
    let (done, c) = traced_alone(&["-v", "--json"], false);
    assert!(done.stderr.contains("attached with"), "{}", done.stderr);
    let lines = json_lines(&done.stdout);
    let mut seen: BTreeMap<(String, u64, u64), usize> = BTreeMap::new();
    for l in &lines {
        assert_eq!(l["pid"], c.pid as u64, "{l}");
        assert_eq!(l["verdict"], "allow", "{l}");
        let key =
            (l["name"].as_str().unwrap().to_string(), l["audit"].as_u64().unwrap(), l["insetid"].as_u64().unwrap());
        *seen.entry(key).or_default() += 1;
    }
    // The mapping checks come from cap_vm_enough_memory(), in the same file as cap_capable(): a compiler may
    // inline cap_capable() there, and then fexit and kprobes on the function do not see them (5.10 to 6.12 do
    // inline it). The tracepoint, inside cap_capable() itself, sees every call.
    let tracepoint = ["tp_btf", "raw_tp"].iter().any(|m| done.stderr.contains(&format!("attached with {m}")));
    let mappings = seen.remove(&("CAP_SYS_ADMIN".to_string(), 0, 0)).unwrap_or(0);
    if tracepoint {
        assert_eq!(mappings, MMAPS, "{}", done.stdout);
    } else {
        assert!(mappings == 0 || mappings == MMAPS, "{mappings} mapping checks: {}", done.stdout);
    }
    let want: BTreeMap<(String, u64, u64), usize> =
        [(("CAP_CHOWN".to_string(), 1, 0), CHOWNS), (("CAP_SETUID".to_string(), 1, 1), SETUIDS)].into();
    assert_eq!(seen, want, "{}", done.stdout);
}

#[test]
fn refused_checks_say_deny() {
    let (done, c) = traced_alone(&[], true);
    let rows = rows(&done.stdout);
    assert_eq!(by_name(&rows), counts(&[("CAP_SETUID", SETUIDS), ("CAP_CHOWN", CHOWNS)]), "{}", done.stdout);
    for r in &rows {
        let want = if r["NAME"] == "CAP_CHOWN" { "deny" } else { "allow" };
        assert_eq!(r["VERDICT"], want, "{r:?}");
    }
    drop(c);
}

/// -U: each check's user stack starts in the helper's function that made the system call; -K: the kernel stack
/// goes down to the system call. The tool is stopped (SIGSTOP) while the helper makes its checks and is killed, so
/// it reads every check only once the process is gone, as a tool on a busy machine may: the helper's memory maps,
/// saved at the start (-p), still name its frames.
#[test]
fn stacks_name_the_calling_functions() {
    let mut c = Checker::start(None, false);
    let pid = c.pid;
    let mut run = Running::start_with_env(TOOL, &["-p", &pid.to_string(), "-U", "-K"], &[]);
    run.wait_attached(WAIT);
    run.signal(libc::SIGSTOP);
    c.go();
    drop(c);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the helper was not reaped");
    run.signal(libc::SIGCONT);
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    let exe_name = exe().file_name().unwrap().to_string_lossy().into_owned();
    let blocks: Vec<&str> = done.stdout.split('\n').collect();
    let mut checked = 0;
    for (i, line) in blocks.iter().enumerate() {
        let Some(func) = [("CAP_SETUID", "setuid_calls"), ("CAP_CHOWN", "chown_calls")]
            .iter()
            .find(|(cap, _)| line.contains(cap))
            .map(|&(_, f)| f)
        else {
            continue;
        };
        let frames: Vec<&str> =
            blocks[i + 1..].iter().take_while(|l| l.starts_with("    ")).map(|l| l.trim()).collect();
        let sys = if func == "setuid_calls" { "sys_setuid" } else { "sys_chown" };
        assert!(frames.iter().any(|f| f.contains(sys)), "no {sys} in {frames:?}");
        // The tool's own program is not a frame (named with the kernel's symbols read after it was loaded).
        assert!(!frames.iter().any(|f| f.ends_with("[bpf]")), "{frames:?}");
        let user = frames.iter().position(|f| !f.ends_with("[kernel]")).expect("a user stack");
        assert!(frames[user].starts_with(&format!("{func}+0x")), "{frames:?}");
        assert!(frames[user].ends_with(&format!("[{exe_name}]")), "{frames:?}");
        assert!(frames[user..].iter().any(|f| f.starts_with("main+0x")), "{frames:?}");
        checked += 1;
    }
    assert_eq!(checked, SETUIDS + CHOWNS, "{}", done.stdout);
}

/// --unique: a capability with the same stacks is printed once per process.
#[test]
fn unique_prints_each_capability_once() {
    let (done, _c) = traced_alone(&["-u"], false);
    let first = rows(&done.stdout);
    assert_eq!(by_name(&first), counts(&[("CAP_SETUID", 1), ("CAP_CHOWN", 1)]), "{}", done.stdout);
    let (done, _c) = traced_alone(&["-u", "-U"], false);
    assert_eq!(by_name(&rows(&done.stdout)), counts(&[("CAP_SETUID", 1), ("CAP_CHOWN", 1)]), "{}", done.stdout);
}

/// The raw_tp step of the ladder sees the same checks, with the same audit flags.
#[test]
fn raw_tp_sees_the_same_checks() {
    let mut c = Checker::start(None, false);
    let pid = c.pid.to_string();
    let done = trace(&["-p", &pid, "-x", "-v"], &[("COREBPF_ATTACH", "raw_tp")], &mut [&mut c]);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    let rows = rows(&done.stdout);
    assert_eq!(
        by_name(&rows),
        counts(&[("CAP_SETUID", SETUIDS), ("CAP_CHOWN", CHOWNS), ("CAP_SYS_ADMIN", MMAPS)]),
        "{}",
        done.stdout
    );
    let audited = rows.iter().filter(|r| r["AUDIT"] == "1").count();
    assert_eq!(audited, SETUIDS + CHOWNS, "{}", done.stdout);
}

/// The JSON records of process `pid`.
fn of_pid(lines: &[Value], pid: u32) -> usize {
    lines.iter().filter(|l| l["pid"] == pid as u64).count()
}

/// --cgroupmap: only the helper whose cgroup id is in the pinned map; --mntnsmap: only the helper whose mount
/// namespace is. The other helper, beside it, is not shown.
#[test]
fn container_maps_pick_their_tasks() {
    let cg = TestCgroup::new("capable-cgmap");
    let pins = PinnedMaps::new("capable");
    let map = pins.hash("cgroups", 8, &[cg.id()]);
    let mut member = Checker::start(Some(&|cmd: &str| cg.exec_in(cmd)), false);
    let mut outsider = Checker::start(None, false);
    let done = trace(&["--cgroupmap", map.to_str().unwrap(), "--json"], &[], &mut [&mut member, &mut outsider]);
    let lines = json_lines(&done.stdout);
    assert_eq!(of_pid(&lines, member.pid), SETUIDS + CHOWNS, "{}", done.stdout);
    assert_eq!(of_pid(&lines, outsider.pid), 0, "{}", done.stdout);
    assert!(lines.iter().all(|l| l["pid"] == member.pid as u64), "{}", done.stdout);

    let mut member = Checker::start(Some(&|cmd: &str| format!("exec unshare -m {cmd}")), false);
    let mut outsider = Checker::start(None, false);
    let ns = std::fs::metadata(format!("/proc/{}/ns/mnt", member.pid)).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    let map = pins.hash("mntns", 8, &[ns.unwrap()]);
    let done = trace(&["--mntnsmap", map.to_str().unwrap(), "--json"], &[], &mut [&mut member, &mut outsider]);
    let lines = json_lines(&done.stdout);
    assert_eq!(of_pid(&lines, member.pid), SETUIDS + CHOWNS, "{}", done.stdout);
    assert!(lines.iter().all(|l| l["pid"] == member.pid as u64), "{}", done.stdout);
}

#[test]
fn bad_input_is_one_line() {
    assert_refused(TOOL, &["-p", "999999999"], 1, "999999999");
    assert_refused(TOOL, &["-p", "x"], 2, "");
    assert_refused(TOOL, &["--cgroupmap", "/no/such/map"], 1, "--cgroupmap: cannot open the pinned BPF map");
    assert_refused(TOOL, &["--mntnsmap", "/proc/self/status"], 1, "is not a pinned BPF map");
    assert_refused(TOOL, &["--bogus"], 2, "--bogus");
}
