// SPDX-License-Identifier: Apache-2.0 OR MIT
//! swapin against a helper (tests/swapper.c) whose swap-ins are known. The test makes a swap file of its own on
//! the root file system (header written here, swapon(2) called here: the guests have no mkswap), sets
//! vm.page-cluster to 0 (no readahead: one fault, one page read), and puts the helper in a memory cgroup of its
//! own, where it locks everything it has mapped and then fills PAGES pages of its own pattern. The cgroup's own
//! reclaim (memory.reclaim, memory.force_empty on a cgroup v1 host, else a lowered memory.high) pushes the pages
//! out to swap, nothing else on the machine; the helper then says how many of its pages are out and not in the
//! swap cache (pagemap and mincore), which VmSwap in /proc/PID/status must agree with, and reads them all back,
//! checking every page's pattern. Each such page is exactly one page swapped in by the helper: the tool must
//! report exactly that many for the helper's PID (in text, in JSON, and as the Prometheus counter of its name).
//! The swap file, page-cluster and the cgroup are undone when the test ends, however it ends (guards dropped in
//! order: helper, cgroup, swap); swap tests of this file take a lock so only one swap file is active at a time.
//! While it is on (a few seconds), a swap area is the whole machine's: another test's memory cgroup at its limit
//! could swap into it rather than reclaim or kill, so it is kept small (8 MiB, twice the helper's pages).

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use corebpf_tests::memcg::MemCgroup;
use corebpf_tests::pipe::assert_sigterm_and_closed_pipe_end_cleanly;
use corebpf_tests::prom::{sample, scrape, serving};
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const PAGES: u64 = 1024;
/// Small: while it is on, any memory cgroup of the machine may swap into it, not only the helper's.
const SWAP_MIB: u64 = 8;
const WAIT: Duration = Duration::from_secs(60);
const HEADER: &str = "COMM             PID     COUNT";
const DIR: &str = "/var/tmp/corebpf-tests";
const SOURCE_ENV: &str = "COREBPF_SWAPIN_SOURCE";

/// A swap file of this test, active while it lives, with vm.page-cluster at 0; holds the lock that keeps other
/// swap tests waiting. Dropped: swapoff, the file removed, page-cluster restored, the lock released.
struct Swap {
    path: PathBuf,
    page_cluster: String,
    _lock: fs::File,
}

impl Swap {
    fn on() -> Swap {
        fs::create_dir_all(DIR).unwrap();
        let lock = fs::File::create(Path::new(DIR).join("swapin.lock")).unwrap();
        // SAFETY: flock on a file descriptor this function owns.
        assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) }, 0);
        remove_stale_swap_files();
        let path = Path::new(DIR).join(format!("swapin-swap-{}", std::process::id()));
        let page_cluster = fs::read_to_string("/proc/sys/vm/page-cluster").unwrap();
        let mut swap = Swap { path, page_cluster, _lock: lock };
        write_swap_file(&swap.path, SWAP_MIB << 20);
        let c = std::ffi::CString::new(swap.path.to_str().unwrap()).unwrap();
        // SWAP_FLAG_PREFER with priority 100: this file before any other swap area the machine has.
        // SAFETY: a NUL-terminated path and plain flags.
        let r = unsafe { libc::swapon(c.as_ptr(), 0x8000 | 100) };
        if r != 0 {
            let err = std::io::Error::last_os_error();
            swap.path = PathBuf::new(); // nothing to swapoff
            panic!("swapon: {err}");
        }
        fs::write("/proc/sys/vm/page-cluster", "0").unwrap();
        swap
    }
}

impl Drop for Swap {
    fn drop(&mut self) {
        let _ = fs::write("/proc/sys/vm/page-cluster", &self.page_cluster);
        if self.path.as_os_str().is_empty() {
            return;
        }
        swapoff(&self.path);
        let _ = fs::remove_file(&self.path);
    }
}

fn swapoff(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::swapoff(c.as_ptr()) } != 0 {
        eprintln!("swapoff {}: {}", path.display(), std::io::Error::last_os_error());
    }
}

/// Swap files a killed test run left active (its process gone): off and removed.
fn remove_stale_swap_files() {
    let swaps = fs::read_to_string("/proc/swaps").unwrap_or_default();
    for line in swaps.lines().skip(1) {
        let Some(path) = line.split_whitespace().next() else { continue };
        let Some(pid) = path.strip_prefix(&format!("{DIR}/swapin-swap-")) else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            swapoff(Path::new(path));
            let _ = fs::remove_file(path);
        }
    }
}

/// A swap file of `bytes` (allocated: no holes), with the version 1 header mkswap writes: in the first page,
/// version 1, the last page's number and no bad pages at byte 1024, and the signature in its last 10 bytes.
fn write_swap_file(path: &Path, bytes: u64) {
    let mut file = fs::File::create(path).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    let mut first = vec![0u8; 4096];
    first[1024..1028].copy_from_slice(&1u32.to_ne_bytes());
    first[1028..1032].copy_from_slice(&((bytes / 4096 - 1) as u32).to_ne_bytes());
    first[4096 - 10..].copy_from_slice(b"SWAPSPACE2");
    file.write_all(&first).unwrap();
    let zeroes = vec![0u8; 1 << 20];
    let mut left = bytes - 4096;
    while left > 0 {
        let n = left.min(zeroes.len() as u64) as usize;
        file.write_all(&zeroes[..n]).unwrap();
        left -= n as u64;
    }
    file.sync_all().unwrap();
}

/// The helper, in its own memory cgroup, with its pages filled.
struct Helper {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    comm: String,
    // Dropped in this order: the helper, then its cgroup.
    _child: KillOnDrop,
    cgroup: MemCgroup,
}

/// What the helper's pagemap and mincore say of its buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
struct State {
    /// Swapped out, not in the swap cache: touching each reads it from swap.
    out: u64,
    /// Swapped out but still in the swap cache: touching it reads nothing.
    cached: u64,
    present: u64,
}

impl Helper {
    fn start(zero: bool) -> Helper {
        let exe = build_c_helper("swapin-pages", include_str!("swapper.c"), &["-O1"]);
        let cgroup = MemCgroup::new("swapin", 1 << 30);
        let dir = cgroup.procs().parent().unwrap().to_path_buf();
        // A cgroup v1 memory cgroup inherits its parent's swappiness; 0 there would keep anonymous pages in.
        let _ = fs::write(dir.join("memory.swappiness"), "100");
        let mut cmd = Command::new(&exe);
        cmd.arg(cgroup.procs()).arg(PAGES.to_string());
        if zero {
            cmd.arg("zero");
        }
        let mut child = KillOnDrop(cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap());
        let stdin = child.0.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pid = line.strip_prefix("ready ").and_then(|p| p.trim().parse().ok());
        let pid = pid.unwrap_or_else(|| panic!("the helper said {line:?} ({:?})", child.0.try_wait()));
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
        Helper { stdin, stdout, pid, comm, _child: child, cgroup }
    }

    fn ask(&mut self, command: &str, answer: &str) -> Vec<u64> {
        self.stdin.write_all(command.as_bytes()).unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let rest = line.strip_prefix(answer).unwrap_or_else(|| panic!("the helper said {line:?}"));
        rest.split_whitespace().map(|n| n.parse().unwrap()).collect()
    }

    fn state(&mut self) -> State {
        let v = self.ask("s", "state ");
        State { out: v[0], cached: v[1], present: v[2] }
    }

    /// Reads every page back; the helper checks them all.
    fn touch(&mut self) {
        assert_eq!(self.ask("t", "touched "), [0], "pages read back from swap did not hold what was written");
    }

    fn cgroup_file(&self, name: &str) -> PathBuf {
        self.cgroup.procs().parent().unwrap().join(name)
    }

    /// Pushes the buffer out to swap with the cgroup's own reclaim until every page is out of memory and of the
    /// swap cache (a page whose write has just finished stays cached until the next pass), or 20 passes.
    fn push_out(&mut self) -> State {
        let mut state = self.state();
        for _ in 0..20 {
            if state.out == PAGES {
                break;
            }
            let reclaim = self.cgroup_file("memory.reclaim");
            let force_empty = self.cgroup_file("memory.force_empty");
            if reclaim.exists() {
                let _ = fs::write(&reclaim, (2 * PAGES * 4096).to_string());
            } else if force_empty.exists() {
                let _ = fs::write(&force_empty, "0");
            } else {
                // Linux before 5.19, cgroup v2: memory.high lowered below the buffer makes the kernel reclaim
                // towards it at once, and never kills (memory.max would, if it fell short); then no limit again.
                let high = self.cgroup_file("memory.high");
                let current = fs::read_to_string(self.cgroup_file("memory.current")).unwrap();
                let current: u64 = current.trim().parse().unwrap();
                let lower = current.saturating_sub(state.present * 4096).max(1 << 20);
                let _ = fs::write(&high, lower.to_string());
                fs::write(&high, "max").unwrap();
            }
            state = self.state();
        }
        state
    }

    /// VmSwap of /proc/PID/status, in pages.
    fn vm_swap_pages(&self) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        let kb = status.lines().find_map(|l| l.strip_prefix("VmSwap:")).expect("VmSwap in status");
        kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() / 4
    }
}

/// Pages out, then read back: returns how many were read from swap (the ground truth), once VmSwap agreed.
fn swap_out_and_back(helper: &mut Helper) -> u64 {
    let state = helper.push_out();
    assert!(state.out >= PAGES / 2, "the cgroup's reclaim pushed out too few pages to test: {state:?}");
    assert_eq!(helper.vm_swap_pages(), state.out + state.cached, "VmSwap against pagemap: {state:?}");
    eprintln!("helper {} ({}): {state:?} after the cgroup's reclaim", helper.pid, helper.comm);
    helper.touch();
    let after = helper.state();
    assert_eq!((after.out, after.cached, after.present), (0, 0, PAGES), "after reading them all back");
    state.out
}

fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut run = Running::start_with_env(TOOL, args, env);
    run.wait_attached(WAIT);
    run
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The pages the JSON lines give `pid`, summed over the intervals; every interval's total checked too.
fn json_pages(stdout: &str, pid: u32, comm: &str) -> u64 {
    let mut sum = 0;
    for line in json_lines(stdout) {
        let processes = line["processes"].as_array().expect("processes");
        let total: u64 = processes.iter().map(|p| p["count"].as_u64().unwrap()).sum();
        assert_eq!(line["total"].as_u64(), Some(total), "{line}");
        for p in processes.iter().filter(|p| p["pid"] == pid) {
            assert_eq!(p["comm"], comm, "{p}");
            sum += p["count"].as_u64().unwrap();
        }
    }
    sum
}

/// The pages the text tables give `pid`, summed over the intervals; checks BCC's layout on the way.
fn text_pages(stdout: &str, pid: u32, comm: &str, clock: bool) -> u64 {
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("Counting swap ins. Ctrl-C to end."), "{stdout}");
    let mut sum = 0;
    let mut previous = "";
    for line in lines {
        if line == HEADER && clock {
            let ok = previous.len() == 8 && previous.split(':').all(|f| f.len() == 2 && f.parse::<u8>().is_ok());
            assert!(ok, "no HH:MM:SS before the header: {previous:?}\n{stdout}");
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 3 && f[1] == pid.to_string() {
            assert_eq!(f[0], comm, "{line}");
            assert_eq!(&line[..comm.len()], comm);
            sum += f[2].parse::<u64>().unwrap();
        }
        previous = line;
    }
    assert!(stdout.contains(HEADER) && stdout.ends_with("\nDetaching...\n"), "{stdout}");
    sum
}

#[test]
fn counts_the_helpers_swapins_exactly() {
    let _swap = Swap::on();
    let mut helper = Helper::start(false);
    let json = start(&["-j"], &[]);
    let text = start(&["1"], &[]);
    let (prom, addr) = serving(TOOL, &[]);
    let expected = swap_out_and_back(&mut helper);
    let series = format!("corebpf_swapin_pages_total{{comm=\"{}\"}}", helper.comm);
    let body = scrape(&addr);
    let [json, text, prom] = [json, text, prom].map(stop);
    assert!(prom.stderr.is_empty(), "{}", prom.stderr);
    let (pid, comm) = (helper.pid, helper.comm.clone());
    assert_eq!(json_pages(&json.stdout, pid, &comm), expected, "JSON:\n{}", json.stdout);
    assert_eq!(text_pages(&text.stdout, pid, &comm, true), expected, "text:\n{}", text.stdout);
    assert_eq!(sample(&body, &series), Some(expected as f64), "{body}");
}

/// The block layer's path, chosen with COREBPF_SWAPIN_SOURCE=bio where the kernel has the memcg tracepoint too
/// (where it has not, it is the tracepoint path already).
#[test]
fn block_layer_path_counts_the_helpers_swapins() {
    let _swap = Swap::on();
    let mut helper = Helper::start(false);
    let json = start(&["-j", "-v"], &[(SOURCE_ENV, "bio")]);
    let expected = swap_out_and_back(&mut helper);
    let json = stop(json);
    assert!(json.stderr.contains("read bios"), "{}", json.stderr);
    assert_eq!(json_pages(&json.stdout, helper.pid, &helper.comm), expected, "{}", json.stdout);
}

/// Pages of zeroes: since 6.12 the kernel keeps them as a bit, writes nothing and reads nothing back (vmstat's
/// swpin_zero counts them). The memcg tracepoint and the kernel function count them; the block layer cannot: a
/// run on it (it says so with -v) must count exactly the others.
#[test]
fn zero_filled_pages_are_counted_where_the_hook_sees_them() {
    let _swap = Swap::on();
    let zero_before = vmstat("swpin_zero");
    let mut helper = Helper::start(true);
    let default = start(&["-j", "-v"], &[]);
    let bio = start(&["-j", "-v"], &[(SOURCE_ENV, "bio")]);
    let expected = swap_out_and_back(&mut helper);
    let zero_pages = vmstat("swpin_zero").zip(zero_before).map_or(0, |(after, before)| after - before);
    for done in [default, bio].map(stop) {
        let seen = if done.stderr.contains("read bios") { expected - zero_pages.min(expected) } else { expected };
        let got = json_pages(&done.stdout, helper.pid, &helper.comm);
        let hook = done.stderr.lines().find(|l| l.contains("counting")).unwrap_or("?");
        eprintln!("{got} of {expected} zero-filled pages counted ({zero_pages} read as zeroes); {hook}");
        assert_eq!(got, seen, "{} zero-filled pages read back:\n{}\n{}", zero_pages, done.stderr, done.stdout);
    }
}

fn vmstat(name: &str) -> Option<u64> {
    let text = fs::read_to_string("/proc/vmstat").unwrap();
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn notime_interval_and_count() {
    let done = Running::start(TOOL, &["-T", "1", "2"]).finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "Counting swap ins. Ctrl-C to end.", "{}", done.stdout);
    assert_eq!(lines.iter().filter(|l| **l == HEADER).count(), 2, "{}", done.stdout);
    assert!(!lines.iter().any(|l| l.len() == 8 && l.matches(':').count() == 2), "{}", done.stdout);
    assert_eq!(lines.last(), Some(&"Detaching..."), "{}", done.stdout);
}

#[test]
fn bad_input_is_refused() {
    for args in [&["0"][..], &["x"], &["1", "0"], &["--bogus"], &["-j", "--prometheus", "9"]] {
        assert_refused(TOOL, args, 2, "");
    }
    assert_refused(TOOL, &["--prometheus", "127.0.0.1:1", "1"], 2, "interval");
    let done = Running::start_with_env(TOOL, &[], &[(SOURCE_ENV, "neither")]).finish(WAIT);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    assert_sigterm_and_closed_pipe_end_cleanly(TOOL, &["1"], HEADER, "Counting swap ins", || {});
}
