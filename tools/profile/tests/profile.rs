// SPDX-License-Identifier: Apache-2.0 OR MIT
//! profile against programs whose hot code is known: C and Rust helpers, built here with frame pointers, that spin
//! in `main -> outer_fn -> hot_fn` (or read /dev/zero, to spend their time in the kernel). The tests check where
//! the samples land, that names are demangled, that -K/-U/-I select what they say, that a process that exits
//! before the end is still named, and the flame graph.
//!
//! Helpers spin on a CPU; the idle test needs idle CPUs, so it takes CPU exclusively while the others share it.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, RwLock};
use std::thread;
use std::time::Duration;

use corebpf_tests::cgroup::TestCgroup;
use corebpf_tests::pinned::PinnedMaps;
use corebpf_tests::*;

static CPU: RwLock<()> = RwLock::new(());

const C_HELPER: &str = include_str!("spin.c");

const RUST_HELPER: &str = r#"
use std::time::Instant;

mod work {
    #[inline(never)]
    pub fn hot_fn(n: u64) -> u64 {
        let mut sum = 0u64;
        for i in 0..n {
            sum = sum.wrapping_add(std::hint::black_box(i));
        }
        sum
    }

    #[inline(never)]
    pub fn outer_fn(n: u64) -> u64 {
        hot_fn(n) ^ 1
    }
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let start = Instant::now();
    let mut acc = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        acc = acc.wrapping_add(work::outer_fn(100_000));
    }
    std::process::exit((acc == 42) as i32);
}
"#;

fn c_helper() -> PathBuf {
    build_c_helper("profile-spin", C_HELPER, &["-fno-omit-frame-pointer", "-O0", "-g"])
}

fn rust_helper() -> PathBuf {
    build_rust_helper("rspin", RUST_HELPER, &["-C", "force-frame-pointers=yes", "-C", "opt-level=1", "-g"])
}

/// A running helper, killed and reaped when dropped.
struct Helper(Child);

impl Helper {
    fn start(exe: &Path, args: &[&str]) -> Helper {
        let child = Command::new(exe).args(args).stdin(Stdio::null()).spawn().expect("starting the helper");
        Helper(child)
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Names of kernel functions, from /proc/kallsyms.
fn kernel_names() -> &'static HashSet<String> {
    static NAMES: OnceLock<HashSet<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let text = fs::read_to_string("/proc/kallsyms").unwrap();
        text.lines().filter_map(|l| l.split_whitespace().nth(2)).map(str::to_string).collect()
    })
}

/// Folded lines as (frames without the command name, count).
fn folded(stdout: &str) -> Vec<(Vec<String>, u64)> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (stack, count) = l.rsplit_once(' ').unwrap_or_else(|| panic!("not a folded line: {l}"));
            let count = count.parse().unwrap_or_else(|_| panic!("no count in folded line: {l}"));
            let frames = stack.split(';').skip(1).map(str::to_string).collect();
            (frames, count)
        })
        .collect()
}

/// Samples whose user stack ends in `leaf` called from `caller` called from `root`, in that order, with only
/// kernel frames (an interrupt) after `leaf`; and all samples.
fn samples_ending_in(lines: &[(Vec<String>, u64)], root: &str, caller: &str, leaf: &str) -> (u64, u64) {
    let kernel = kernel_names();
    let mut good = 0;
    let mut total = 0;
    for (frames, count) in lines {
        total += count;
        let Some(at) = frames.iter().position(|f| f == leaf) else { continue };
        let called_right = at >= 2 && frames[at - 1] == caller && frames[..at - 1].iter().any(|f| f == root);
        if called_right && frames[at + 1..].iter().all(|f| kernel.contains(f)) {
            good += count;
        }
    }
    (good, total)
}

fn run_profile(args: &[&str]) -> Finished {
    let done = Running::start("profile", args).finish(Duration::from_secs(60));
    done.assert_success();
    done
}

#[test]
fn c_helper_samples_land_in_hot_fn_under_outer_fn() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let helper = Helper::start(&exe, &["30"]);
    let done = run_profile(&["-p", &helper.pid(), "-f", "3"]);
    let lines = folded(&done.stdout);
    let (good, total) = samples_ending_in(&lines, "main", "outer_fn", "hot_fn");
    assert!(total >= 20, "too few samples ({total}):\n{}", done.stdout);
    assert!(good * 100 >= total * 80, "{good} of {total} samples in main;outer_fn;hot_fn:\n{}", done.stdout);
    assert!(done.stdout.lines().all(|l| l.starts_with("profile-spin-")), "{}", done.stdout);
}

#[test]
fn rust_names_are_demangled() {
    let exe = rust_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let helper = Helper::start(&exe, &["30"]);
    let done = run_profile(&["-p", &helper.pid(), "-f", "3"]);
    let lines = folded(&done.stdout);
    let (good, total) = samples_ending_in(&lines, "rspin::main", "rspin::work::outer_fn", "rspin::work::hot_fn");
    assert!(total >= 20, "too few samples ({total}):\n{}", done.stdout);
    assert!(good * 100 >= total * 80, "{good} of {total} samples in rspin::work::hot_fn:\n{}", done.stdout);
    assert!(!done.stdout.contains("_ZN"), "mangled names left:\n{}", done.stdout);
    assert!(!done.stdout.contains("17h"), "symbol hashes left:\n{}", done.stdout);
}

#[test]
fn kernel_stacks_only_shows_kernel_frames() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let helper = Helper::start(&exe, &["30", "read"]);
    let done = run_profile(&["-p", &helper.pid(), "-K", "-f", "2"]);
    let lines = folded(&done.stdout);
    let kernel = kernel_names();
    let frames: Vec<&String> = lines.iter().flat_map(|(f, _)| f).collect();
    assert!(frames.iter().any(|f| f.as_str() == "vfs_read"), "no vfs_read in:\n{}", done.stdout);
    let not_kernel: Vec<&&String> = frames.iter().filter(|f| !kernel.contains(f.as_str())).collect();
    assert!(not_kernel.is_empty(), "non-kernel frames {not_kernel:?} in:\n{}", done.stdout);
    // The header names the stacks collected.
    let done = run_profile(&["-p", &helper.pid(), "-K", "1"]);
    assert!(done.stdout.contains(&format!("of PID [{}] by kernel stack for 1 secs.", helper.pid())), "{}", done.stdout);
}

/// Without CAP_SYSLOG (here: root's capabilities cut down to CAP_BPF and CAP_PERFMON), /proc/kallsyms shows zero
/// addresses, so no kernel frame can be named: profile says so once, with the fix, instead of a silent
/// `[unknown]` in every kernel frame (#31, item 13).
#[test]
fn hidden_kernel_addresses_are_explained_once() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let helper = Helper::start(&exe, &["30", "read"]);
    let without_syslog = ["setpriv", "--bounding-set=-all,+bpf,+perfmon", "--"];
    let kallsyms = std::process::Command::new(without_syslog[0])
        .args(&without_syslog[1..])
        .args(["head", "-1", "/proc/kallsyms"])
        .output()
        .expect("running setpriv");
    let first = String::from_utf8_lossy(&kallsyms.stdout).to_string();
    assert!(
        first.starts_with("0000000000000000 "),
        "this host shows kernel addresses without CAP_SYSLOG (kernel.perf_event_paranoid <= 1?): {first}"
    );
    let done = Running::start_wrapped(&without_syslog, "profile", &["-p", &helper.pid(), "-K", "-f", "2"])
        .finish(Duration::from_secs(60));
    done.assert_success();
    let frames: Vec<String> = folded(&done.stdout).into_iter().flat_map(|(f, _)| f).collect();
    assert!(!frames.is_empty() && frames.iter().all(|f| f == "[unknown]"), "{}", done.stdout);
    let warnings: Vec<&str> = done.stderr.lines().filter(|l| l.contains("kernel frames print as [unknown]")).collect();
    assert_eq!(warnings.len(), 1, "want one warning:\n{}", done.stderr);
    assert!(warnings[0].starts_with("profile: "), "{}", warnings[0]);
    assert!(warnings[0].contains("/proc/kallsyms") && warnings[0].contains("CAP_SYSLOG"), "{}", warnings[0]);
}

#[test]
fn user_stacks_only_shows_user_frames() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let helper = Helper::start(&exe, &["30", "read"]);
    let done = run_profile(&["-p", &helper.pid(), "-U", "-f", "2"]);
    let lines = folded(&done.stdout);
    let kernel = kernel_names();
    let frames: Vec<&String> = lines.iter().flat_map(|(f, _)| f).collect();
    assert!(frames.iter().any(|f| f.as_str() == "main"), "no main in:\n{}", done.stdout);
    let in_kernel: Vec<&&String> = frames.iter().filter(|f| kernel.contains(f.as_str())).collect();
    assert!(in_kernel.is_empty(), "kernel frames {in_kernel:?} in:\n{}", done.stdout);
    // The same process, unfiltered, spends its time in the kernel: -U did remove frames.
    let done = run_profile(&["-p", &helper.pid(), "-f", "1"]);
    assert!(done.stdout.contains(";vfs_read"), "{}", done.stdout);
}

#[test]
fn idle_is_sampled_only_with_include_idle() {
    let _cpu = CPU.write().unwrap_or_else(|e| e.into_inner());
    let idle = |out: &str| json_lines(out).into_iter().filter(|v| v["pid"] == 0).collect::<Vec<_>>();
    // This test runs alone (the Makefile's ALONE pass), on a machine otherwise idle: a thread of its own spins
    // during the first window, so that there is something other than idle to sample.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let done = run_profile(&["-K", "--json", "-F", "199", "1"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinner.join().unwrap();
    assert!(!json_lines(&done.stdout).is_empty(), "no samples at all");
    assert!(idle(&done.stdout).is_empty(), "idle samples without -I:\n{}", done.stdout);
    // Idle needs a CPU with nothing to do during the window: a machine running every test at once (load 7 on
    // two cores) may not idle for a while, so try windows of 5 s for up to 40 s.
    for attempt in 1..=8 {
        let done = run_profile(&["-K", "-I", "--json", "-F", "199", "5"]);
        let samples = idle(&done.stdout);
        if let Some(sample) = samples.first() {
            assert!(sample["comm"].as_str().unwrap().starts_with("swapper"), "{sample}");
            return;
        }
        assert!(attempt < 8, "no idle samples with -I in eight windows of 5 s:\n{}", done.stdout);
    }
}

#[test]
fn helper_that_exits_first_is_still_symbolized() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let mut helper = Helper::start(&exe, &["2"]);
    let pid = helper.pid();
    // 199 Hz: under load, profile may start late in the helper's two seconds.
    let run = Running::start("profile", &["-p", &pid, "-F", "199", "-f", "4"]);
    let status = helper.0.wait().unwrap();
    assert!(status.success());
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "helper {pid} not reaped");
    let profile_state = fs::read_to_string(format!("/proc/{}/stat", run.pid())).unwrap_or_default();
    assert!(!profile_state.is_empty(), "profile ended before the helper exited");
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();
    let (good, total) = samples_ending_in(&folded(&done.stdout), "main", "outer_fn", "hot_fn");
    assert!(total >= 5, "too few samples ({total}):\n{}", done.stdout);
    assert!(good * 100 >= total * 80, "{good} of {total} samples named hot_fn:\n{}", done.stdout);
}

#[test]
fn flamegraph_and_multiline_output_until_ctrl_c() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let helper = Helper::start(&exe, &["30"]);
    let svg = ScratchFile::new("profile-flamegraph.svg");
    let svg_path = svg.0.to_str().unwrap();
    let mut run = Running::start("profile", &["-p", &helper.pid(), "-F", "99", "--flamegraph", svg_path]);
    run.wait_for_line(
        &format!("Sampling at 99 Hertz of PID [{}] by user + kernel stack... Hit Ctrl-C to end.", helper.pid()),
        Duration::from_secs(20),
    );
    thread::sleep(Duration::from_secs(2));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();
    done.assert_no_programs_left();

    // BCC's multi-line stacks: innermost frame first (`name+0xOFF [module]`), then `-    comm (pid)` and the count.
    let lines: Vec<&str> = done.stdout.lines().collect();
    let block = lines.windows(3).any(|w| {
        let names: Vec<&str> = w.iter().map(|l| l.trim_start().split('+').next().unwrap()).collect();
        names == ["hot_fn", "outer_fn", "main"] && w.iter().all(|l| l.contains(" [profile-spin-"))
    });
    assert!(block, "no hot_fn+0x.. [exe], outer_fn, main block:\n{}", done.stdout);
    let owner = "    -                profile-spin-";
    let owner_line = done.stdout.lines().find(|l| l.starts_with(owner)).unwrap_or_else(|| panic!("{}", done.stdout));
    assert!(owner_line.ends_with(&format!(" ({})", helper.pid())), "{owner_line}");

    let svg = fs::read_to_string(&svg.0).expect("flame graph written");
    assert!(svg.starts_with("<?xml"), "not an SVG: {}", &svg[..svg.len().min(200)]);
    assert!(svg.contains("<svg"), "not an SVG");
    assert!(svg.contains(">hot_fn ("), "hot_fn not in the flame graph");
    assert!(svg.contains(">outer_fn ("), "outer_fn not in the flame graph");
}

#[test]
fn json_lines_carry_pid_comm_and_frames() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let helper = Helper::start(&exe, &["30"]);
    let done = run_profile(&["-p", &helper.pid(), "--json", "-U", "2"]);
    let samples = json_lines(&done.stdout);
    assert!(!samples.is_empty());
    let mut hot = 0;
    let mut total = 0;
    for s in &samples {
        assert_eq!(s["pid"].as_u64().unwrap().to_string(), helper.pid(), "{s}");
        assert!(s["comm"].as_str().unwrap().starts_with("profile-spin-"), "{s}");
        // Both lists are always present (issue 23 item 10); -U leaves the kernel one empty.
        assert_eq!(s["kernel_stack"].as_array().map(Vec::len), Some(0), "kernel stack with -U: {s}");
        let count = s["count"].as_u64().unwrap();
        total += count;
        let names: Vec<&str> =
            s["user_stack"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
        let addr = s["user_stack"][0]["addr"].as_str().unwrap();
        assert!(u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap() > 0, "{s}");
        if names.starts_with(&["hot_fn", "outer_fn", "main"]) {
            hot += count;
        }
    }
    assert!(hot * 100 >= total * 80, "{hot} of {total} samples in hot_fn:\n{}", done.stdout);
}

#[test]
fn bad_input_is_refused() {
    let cases: [(&[&str], i32, &str); 12] = [
        (&["-p", "999999999"], 1, "no process with PID 999999999"),
        (&["-C", "-2", "1"], 2, "or -1 for all CPUs"),
        (&["--cgroup", "/tmp", "1"], 1, "'/tmp' is not a cgroup v2 directory"),
        (&["--cgroupmap", "/no/such/map", "1"], 1, "--cgroupmap: cannot open the pinned BPF map '/no/such/map'"),
        (&["--mntnsmap", "/no/such/map", "1"], 1, "--mntnsmap: cannot open the pinned BPF map '/no/such/map'"),
        (&["--mntnsmap", "/proc/self/status", "1"], 1, "'/proc/self/status' is not a pinned BPF map"),
        (&["-F", "0"], 2, "must be greater than 0"),
        (&["-F", "100000000", "1"], 1, "above the kernel's limit"),
        (&["-C", "4096", "1"], 1, "CPU 4096 does not exist or is offline"),
        (&["-U", "-K"], 2, "cannot be used with"),
        (&["-p", "1", "-L", "1"], 2, "cannot be used with"),
        (&["--flamegraph", "/nonexistent/dir/cpu.svg", "1"], 1, "cannot create /nonexistent/dir/cpu.svg"),
    ];
    for (args, code, message) in cases {
        let done = run_tool("profile", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(message), "{args:?}: {}", done.stderr);
        assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
    }
}

#[test]
fn closed_pipe_ends_quietly() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let helper = Helper::start(&exe, &["30"]);
    let cmd = format!("{} -p {} 1 | head -1", bin("profile").display(), helper.pid());
    let out = Command::new("bash").args(["-o", "pipefail", "-c", &cmd]).output().unwrap();
    assert!(out.status.success(), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Sampling at 49 Hertz"));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_process_that_never_runs_has_no_samples_and_no_flame_graph() {
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let svg = ScratchFile::new("profile-empty.svg");
    let pid = sleeper.id().to_string();
    let done = run_profile(&["-p", &pid, "--flamegraph", svg.0.to_str().unwrap(), "1"]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(done.stdout.starts_with(&format!("Sampling at 49 Hertz of PID [{pid}]")), "{}", done.stdout);
    assert!(!done.stdout.contains("    -  "), "samples of a sleeping process:\n{}", done.stdout);
    assert!(done.stderr.contains("no samples, so no flame graph written"), "{}", done.stderr);
    assert!(!svg.0.exists());
}

/// Issue 23 item 1: one address that cannot be named (a return address inside a mapped non-ELF file, a stripped
/// executable) must not cost the names of the others. dd spends its time in libc's read and write; every run, in
/// every output form, must name those libc frames.
#[test]
fn libc_frames_are_named_every_run() {
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    // Killed when the test ends, however it ends (a failed assertion, or the kernel matrix's prebuild pass,
    // which stops every test at its first tool run).
    let dd = KillOnDrop(
        Command::new("dd")
            .args(["if=/dev/zero", "of=/dev/null", "bs=64k"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting dd"),
    );
    let pid = dd.0.id().to_string();
    let is_libc_io = |name: &str| name.contains("read") || name.contains("write");
    for run in 0..6 {
        let svg = ScratchFile::new("profile-libc.svg");
        let form = run % 3;
        let mut args = vec!["-U", "-F", "199", "-p", &pid];
        match form {
            0 => args.push("-f"),
            1 => args.push("--json"),
            _ => args.extend(["-f", "--flamegraph", svg.0.to_str().unwrap()]),
        }
        args.push("1");
        let done = run_profile(&args);
        let (named, total): (u64, u64) = if form == 1 {
            json_lines(&done.stdout).iter().fold((0, 0), |(n, t), s| {
                let count = s["count"].as_u64().unwrap();
                let names: Vec<&str> =
                    s["user_stack"].as_array().unwrap().iter().filter_map(|f| f["name"].as_str()).collect();
                (n + if names.iter().any(|f| is_libc_io(f)) { count } else { 0 }, t + count)
            })
        } else {
            folded(&done.stdout).iter().fold((0, 0), |(n, t), (frames, count)| {
                (n + if frames.iter().any(|f| is_libc_io(f)) { *count } else { 0 }, t + count)
            })
        };
        assert!(total > 0, "run {run}: no samples of dd\n{}", done.stdout);
        assert!(
            named * 2 >= total,
            "run {run}: {named} of {total} samples in a named libc read/write:\n{}",
            done.stdout
        );
        if form == 2 {
            let svg = fs::read_to_string(&svg.0).unwrap();
            assert!(svg.contains("read") && svg.contains("write"), "libc frames not in the flame graph");
        }
    }
}

// ---- Issue 23 item 5: BCC's frame format, -A, -C -1, --cgroup, --cgroupmap and --mntnsmap. ----

/// The address helper running, with the addresses it printed.
struct AddrHelper {
    helper: Helper,
    exe_name: String,
    outer_fn: u64,
}

fn start_addr_helper(args: &[&str]) -> AddrHelper {
    use std::io::{BufRead, BufReader};
    let exe = build_c_helper("profile-addr", C_HELPER, &["-fno-omit-frame-pointer", "-O0", "-g", "-DPRINT_ADDRS"]);
    let mut child =
        Command::new(&exe).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().expect("starting the helper");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let _hot_fn = lines.next().unwrap().unwrap();
    let second = lines.next().unwrap().unwrap();
    let outer_fn = second.strip_prefix("outer_fn 0x").map(|h| u64::from_str_radix(h, 16).unwrap());
    AddrHelper {
        helper: Helper(child),
        exe_name: exe.file_name().unwrap().to_string_lossy().into_owned(),
        outer_fn: outer_fn.unwrap_or_else(|| panic!("helper said {second}")),
    }
}

/// The address of kernel function `name`, from /proc/kallsyms (every address it has: there may be several).
fn kernel_addresses(name: &str) -> Vec<u64> {
    fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && f[2] == name).then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .collect()
}

/// A multi-line frame `[0xADDR ]name+0xOFF [module]` as (address, name, offset, module).
fn parse_frame(line: &str, with_address: bool) -> Option<(Option<u64>, String, u64, String)> {
    let mut text = line.trim();
    let mut addr = None;
    if with_address {
        let (a, rest) = text.split_once(' ')?;
        addr = Some(u64::from_str_radix(a.strip_prefix("0x")?, 16).ok()?);
        text = rest.trim_start();
    }
    let (symbol, module) = text.rsplit_once(" [")?;
    let module = module.strip_suffix(']')?.to_string();
    let (name, offset) = symbol.rsplit_once("+0x")?;
    Some((addr, name.to_string(), u64::from_str_radix(offset, 16).ok()?, module))
}

/// BCC's profile prints every frame as `symbol+offset [module]` (b.ksym / b.sym with show_module and
/// show_offset), `-A` puts the address first (`0x%-16x` kernel, `0x%016x` user), `-a` annotates folded kernel
/// frames only, and folded lines carry bare names. Checked against the helper's own address of hot_fn and the
/// kernel's address of vfs_read: address - offset must be the function's start, and the module the right file.
/// (The helper reads /dev/zero: libc's read has no frame pointer, so the frame-pointer walk goes from read to
/// outer_fn, whose address the helper prints.)
#[test]
fn frames_are_symbol_offset_module_as_bcc_prints_them() {
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let h = start_addr_helper(&["30", "read"]);
    let pid = h.helper.pid();
    let vfs_read = kernel_addresses("vfs_read");
    assert!(!vfs_read.is_empty(), "no vfs_read in /proc/kallsyms");

    let done = run_profile(&["-A", "-a", "-d", "-F", "199", "-p", &pid, "2"]);
    let (mut user_checked, mut kernel_checked) = (0, 0);
    for line in done.stdout.lines().filter(|l| l.starts_with("    0x")) {
        // An address no symbol covers (a static function of a stripped libc, say) is `[unknown] [module]`, as BCC.
        if let Some((hex, rest)) = line.trim().split_once(' ') {
            if rest == "[unknown]" || (rest.starts_with("[unknown] [") && rest.ends_with(']')) {
                assert_eq!(hex.len(), 18, "address not as BCC's 0x%016x: {line:?}");
                continue;
            }
        }
        let (addr, name, offset, module) =
            parse_frame(line, true).unwrap_or_else(|| panic!("not `0xADDR name+0xOFF [module]`: {line:?}"));
        let addr = addr.unwrap();
        let hex = line.trim().split(' ').next().unwrap();
        if addr >= 0xffff_0000_0000_0000 {
            assert_eq!(hex.len(), 18, "kernel address not as BCC's 0x%-16x: {line:?}");
            assert!(!name.ends_with("_[k]"), "-a annotates folded output only: {line:?}");
            assert!(module == "kernel" || !module.contains('/'), "{line:?}");
            if name == "vfs_read" {
                assert_eq!(module, "kernel", "{line:?}");
                assert!(vfs_read.contains(&(addr - offset)), "{line:?}: not at vfs_read ({vfs_read:x?}) + offset");
                kernel_checked += 1;
            }
        } else {
            assert_eq!(hex.len(), 18, "user address not zero-padded as BCC's 0x%016x: {line:?}");
            if name == "outer_fn" {
                assert_eq!(module, h.exe_name, "{line:?}");
                assert_eq!(addr - offset, h.outer_fn, "{line:?}: not at outer_fn ({:#x}) + offset", h.outer_fn);
                user_checked += 1;
            }
        }
    }
    assert!(user_checked > 0 && kernel_checked > 0, "no outer_fn or vfs_read frames:\n{}", done.stdout);
    // -d: `--` between the kernel and user frames of a stack.
    assert!(done.stdout.contains(" [kernel]\n    --\n    0x"), "{}", done.stdout);

    // Without -A: the same frames, no address.
    let done = run_profile(&["-F", "199", "-p", &pid, "1"]);
    let lines: Vec<&str> = done
        .stdout
        .lines()
        .filter(|l| l.starts_with("    ") && !l.starts_with("    -  ") && !l.starts_with("        "))
        .collect();
    // `[unknown] [module]`: an address no symbol covers (a stripped libc's static function), as BCC prints it.
    let unknown_in: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.trim().strip_prefix("[unknown]"))
        .map(|rest| rest.trim().trim_start_matches('[').trim_end_matches(']'))
        .collect();
    let frames: Vec<_> = lines
        .iter()
        .filter(|l| !l.trim().starts_with("[unknown]"))
        .map(|l| parse_frame(l, false).unwrap_or_else(|| panic!("not `name+0xOFF [module]`: {l:?}")))
        .collect();
    let is_libc = |m: &str| m == "libc.so.6" || m.starts_with("libc-");
    assert!(frames.iter().any(|f| f.1 == "outer_fn" && f.3 == h.exe_name), "{}", done.stdout);
    assert!(frames.iter().any(|f| is_libc(&f.3)) || unknown_in.iter().any(|m| is_libc(m)), "{}", done.stdout);
    assert!(frames.iter().any(|f| f.1 == "vfs_read" && f.3 == "kernel"), "{}", done.stdout);

    // Folded: bare names, and `_[k]` on kernel frames with -a.
    let done = run_profile(&["-f", "-a", "-F", "199", "-p", &pid, "1"]);
    assert!(done.stdout.contains(";main;outer_fn;"), "{}", done.stdout);
    assert!(done.stdout.contains(";vfs_read_[k];"), "{}", done.stdout);
    assert!(!done.stdout.contains("+0x") && !done.stdout.contains(" ["), "{}", done.stdout);
}

/// `-C -1` is BCC's default, all CPUs; `-C N` samples CPU N only: a helper pinned to the last CPU is seen with
/// -C -1 and with its own CPU, never with another.
#[test]
fn cpu_minus_one_means_all_cpus() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let last = (cpus - 1).to_string();
    let child =
        Command::new("taskset").args(["-c", &last]).arg(&exe).arg("30").stdin(Stdio::null()).spawn().expect("taskset");
    let helper = Helper(child);
    let pid = helper.pid();
    let samples = |stdout: &str| folded(stdout).iter().map(|(_, n)| n).sum::<u64>();

    let done = run_profile(&["-C", "-1", "-p", &pid, "1"]);
    assert!(
        done.stdout.starts_with(&format!("Sampling at 49 Hertz of PID [{pid}] by user + kernel stack for 1 secs.")),
        "{}",
        done.stdout
    );
    let done = run_profile(&["-C", "-1", "-F", "199", "-f", "-p", &pid, "2"]);
    assert!(samples(&done.stdout) >= 20, "too few samples with -C -1:\n{}", done.stdout);
    let done = run_profile(&["-C", &last, "-F", "199", "-f", "-p", &pid, "2"]);
    assert!(samples(&done.stdout) >= 20, "too few samples on CPU {last}:\n{}", done.stdout);
    if cpus > 1 {
        let done = run_profile(&["-C", "0", "-F", "199", "-f", "-p", &pid, "2"]);
        assert_eq!(samples(&done.stdout), 0, "samples on CPU 0 of a helper pinned to CPU {last}:\n{}", done.stdout);
    }
}

/// Starts `exe args` inside cgroup `cg` (it joins before it execs).
fn spawn_in(cg: &TestCgroup, exe: &Path, args: &str) -> Helper {
    let script = cg.exec_in(&format!("{} {args}", exe.display()));
    Helper(Command::new("sh").args(["-c", &script]).stdin(Stdio::null()).spawn().unwrap())
}

/// The PIDs of the samples in JSON output, with their counts added up.
fn samples_by_pid(stdout: &str) -> std::collections::HashMap<String, u64> {
    let mut by_pid = std::collections::HashMap::new();
    for s in json_lines(stdout) {
        *by_pid.entry(s["pid"].to_string()).or_default() += s["count"].as_u64().unwrap();
    }
    by_pid
}

/// Two identical spinning helpers, one in the test's cgroup: only the member is sampled, with no PID filter.
fn assert_only_member_sampled(member: &Helper, outsider: &Helper, args: &[&str]) {
    let mut all = args.to_vec();
    all.extend(["--json", "-U", "-F", "199", "2"]);
    let done = run_profile(&all);
    let by_pid = samples_by_pid(&done.stdout);
    assert!(by_pid.get(&member.pid()).copied().unwrap_or(0) >= 20, "member not sampled {args:?}:\n{}", done.stdout);
    assert_eq!(by_pid.len(), 1, "samples outside the filter {args:?}: {by_pid:?}");
    assert!(!by_pid.contains_key(&outsider.pid()));
}

/// --cgroup PATH: a helper in a cgroup below PATH is sampled; the same helper outside it is not.
#[test]
fn cgroup_path_filters_by_membership() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let cg = TestCgroup::new("profile-cg");
    let below = TestCgroup::at(cg.path().join("below"));
    let member = spawn_in(&below, &exe, "30");
    let outsider = Helper::start(&exe, &["30"]);
    thread::sleep(Duration::from_millis(200));
    assert_only_member_sampled(&member, &outsider, &["--cgroup", cg.arg()]);
    drop(member);
}

/// BCC's --cgroupmap: a pinned hash whose keys are cgroup ids. Only tasks whose cgroup is a key are sampled; a map
/// of the wrong shape is refused in one line.
#[test]
fn cgroupmap_filters_by_the_pinned_maps_cgroup_ids() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let cg = TestCgroup::new("profile-cgmap");
    let pins = PinnedMaps::new("cgmap");
    let map = pins.hash("cgroupset", 8, &[cg.id()]);
    let member = spawn_in(&cg, &exe, "30");
    let outsider = Helper::start(&exe, &["30"]);
    thread::sleep(Duration::from_millis(200));
    assert_only_member_sampled(&member, &outsider, &["--cgroupmap", map.to_str().unwrap()]);

    let empty = pins.hash("empty", 8, &[]);
    let done = run_profile(&["--cgroupmap", empty.to_str().unwrap(), "--json", "1"]);
    assert!(json_lines(&done.stdout).is_empty(), "samples with an empty cgroup map:\n{}", done.stdout);

    // The pinned map is used live, as in BCC: a cgroup id added while profile runs is sampled from then on.
    let mut run = Running::start("profile", &["--cgroupmap", empty.to_str().unwrap(), "-U", "-F", "199"]);
    run.wait_for_line("Hit Ctrl-C to end.", Duration::from_secs(20));
    thread::sleep(Duration::from_millis(300));
    pins.insert(&empty, cg.id());
    thread::sleep(Duration::from_secs(1));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();
    // `    -                comm (pid)` after each stack.
    let pids: HashSet<&str> = done
        .stdout
        .lines()
        .filter(|l| l.starts_with("    -  "))
        .filter_map(|l| l.rsplit_once(" (").and_then(|(_, p)| p.strip_suffix(')')))
        .collect();
    assert_eq!(pids, HashSet::from([member.pid().as_str()]), "after adding the id:\n{}", done.stdout);

    let narrow = pins.hash("narrow", 4, &[]);
    let done = run_tool("profile", &["--cgroupmap", narrow.to_str().unwrap(), "1"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert!(done.stderr.contains("with 4-byte keys, not a hash of cgroup ids"), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    drop(member);
}

/// BCC's --mntnsmap: a pinned hash whose keys are mount namespace ids (the inode of /proc/PID/ns/mnt). A helper
/// in a mount namespace of its own (unshare -m) is the only thing sampled.
#[test]
fn mntnsmap_filters_by_the_pinned_maps_mount_namespaces() {
    use std::os::unix::fs::MetadataExt;
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let ours = fs::metadata("/proc/self/ns/mnt").unwrap().ino();
    let child = Command::new("unshare").args(["-m", "--propagation", "private"]).arg(&exe).arg("30").spawn();
    let member = Helper(child.expect("unshare"));
    let outsider = Helper::start(&exe, &["30"]);
    let mut ns = ours;
    for _ in 0..100 {
        ns = fs::metadata(format!("/proc/{}/ns/mnt", member.pid())).map(|m| m.ino()).unwrap_or(ours);
        if ns != ours {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert_ne!(ns, ours, "the helper did not get a mount namespace of its own");
    let pins = PinnedMaps::new("mntns");
    let map = pins.hash("mount_ns_set", 8, &[ns]);
    assert_only_member_sampled(&member, &outsider, &["--mntnsmap", map.to_str().unwrap()]);
}

/// The `corebpf_profile_samples_total` series of an exposition: (comm, stack, samples).
fn sample_series(text: &str) -> Vec<(String, String, f64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("corebpf_profile_samples_total{comm=\"")?;
            let (comm, rest) = rest.split_once("\",stack=\"")?;
            let (stack, value) = rest.rsplit_once("\"} ")?;
            Some((comm.to_string(), stack.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// `--prometheus -p PID` on the C helper spinning in main -> outer_fn -> hot_fn: scraped until it has 20 samples,
/// at least 80% of them are in stacks folded outermost first through `main;outer_fn;hot_fn` (kernel frames only
/// after it), all of the helper's name; once the helper is killed the counters stop, and two scrapes read the same
/// series and values (no stack renamed, no counter gone back).
#[test]
fn prometheus_counts_samples_per_folded_stack() {
    use corebpf_tests::prom::{promtool_accepts, scrape, serving};
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let mut helper = Helper::start(&exe, &["30"]);
    // Its name from its file (cut to 15 bytes): /proc may show the test's thread until the exec.
    let name = exe.file_name().unwrap().to_string_lossy().into_owned();
    let comm = name[..name.len().min(15)].to_string();
    let (tool, addr) = serving("profile", &["-p", &helper.pid()]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = scrape(&addr);
        if sample_series(&text).iter().map(|s| s.2).sum::<f64>() >= 20.0 || std::time::Instant::now() > deadline {
            break text;
        }
        thread::sleep(Duration::from_millis(500));
    };
    promtool_accepts(&text);
    let series = sample_series(&text);
    let total: f64 = series.iter().map(|s| s.2).sum();
    assert!(total >= 20.0, "too few samples ({total}):\n{text}");
    assert!(series.iter().all(|s| s.0 == comm), "only the helper's samples:\n{text}");
    let kernel = kernel_names();
    let good: f64 = series
        .iter()
        .filter(|(_, stack, _)| {
            let frames: Vec<&str> = stack.split(';').collect();
            frames
                .windows(3)
                .position(|w| w == ["main", "outer_fn", "hot_fn"])
                .is_some_and(|at| frames[at + 3..].iter().all(|f| kernel.contains(*f)))
        })
        .map(|s| s.2)
        .sum();
    assert!(good * 100.0 >= total * 80.0, "{good} of {total} samples in main;outer_fn;hot_fn:\n{text}");
    let _ = helper.0.kill();
    let _ = helper.0.wait();
    let after = sample_series(&scrape(&addr));
    assert_eq!(after, sample_series(&scrape(&addr)), "counters moved after the helper's end");
    for (comm, stack, n) in &series {
        let later = after.iter().find(|s| &s.0 == comm && &s.1 == stack).map(|s| s.2);
        assert!(later.is_some_and(|later| later >= *n), "{stack}: {n} then {later:?}");
    }
    tool.signal(libc::SIGTERM);
    let done = tool.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    for args in [&["--prometheus", "127.0.0.1:0", "5"][..], &["--prometheus", "127.0.0.1:0", "--flamegraph", "x.svg"]] {
        let refused = run_tool("profile", args);
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {}", refused.stderr);
    }
}
