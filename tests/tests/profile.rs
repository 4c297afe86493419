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

use corebpf_tests::*;

static CPU: RwLock<()> = RwLock::new(());

const C_HELPER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static char buf[1 << 20];
static int zero_fd = -1;

/* Spins in user space, or with "read" reads 1 MiB of /dev/zero (time spent in the kernel). */
void hot_fn(void)
{
	if (zero_fd >= 0) {
		if (read(zero_fd, buf, sizeof(buf)) < 0)
			exit(2);
		return;
	}
	for (int i = 0; i < 100000; i++)
		sink += i;
}

void outer_fn(void)
{
	hot_fn();
	sink++;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 10, start = now();
	if (argc > 2 && strcmp(argv[2], "read") == 0)
		zero_fd = open("/dev/zero", O_RDONLY);
	while (now() - start < secs)
		outer_fn();
	return 0;
}
"#;

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
    let done = run_profile(&["-K", "--json", "-F", "199", "1"]);
    assert!(!json_lines(&done.stdout).is_empty(), "no samples at all");
    assert!(idle(&done.stdout).is_empty(), "idle samples without -I:\n{}", done.stdout);
    // Idle needs a CPU with nothing to do during the window: try a few windows on a busy machine.
    for attempt in 1..=3 {
        let done = run_profile(&["-K", "-I", "--json", "-F", "199", "2"]);
        let samples = idle(&done.stdout);
        if let Some(sample) = samples.first() {
            assert!(sample["comm"].as_str().unwrap().starts_with("swapper"), "{sample}");
            return;
        }
        assert!(attempt < 3, "no idle samples with -I in three windows:\n{}", done.stdout);
    }
}

#[test]
fn helper_that_exits_first_is_still_symbolized() {
    let exe = c_helper();
    let _cpu = CPU.read().unwrap_or_else(|e| e.into_inner());
    let mut helper = Helper::start(&exe, &["1"]);
    let pid = helper.pid();
    let run = Running::start("profile", &["-p", &pid, "-f", "3"]);
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

    // BCC's multi-line stacks: innermost frame first, then `-    comm (pid)` and the count.
    let block = "    hot_fn\n    outer_fn\n    main\n";
    assert!(done.stdout.contains(block), "{}", done.stdout);
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
    let cases: [(&[&str], i32, &str); 7] = [
        (&["-p", "999999999"], 1, "no process with PID 999999999"),
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
    let mut dd = Command::new("dd")
        .args(["if=/dev/zero", "of=/dev/null", "bs=64k"])
        .stderr(Stdio::null())
        .spawn()
        .expect("starting dd");
    let pid = dd.id().to_string();
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
    let _ = dd.kill();
    let _ = dd.wait();
}
