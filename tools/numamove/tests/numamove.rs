// SPDX-License-Identifier: Apache-2.0 OR MIT
//! numamove against pages the test knows are misplaced: a helper (tests/misplaced.c), pinned to a CPU of NUMA
//! node 0, puts PAGES pages of its memory on node 1 (no transparent huge pages: one page, one migration), then
//! touches them while the test has NUMA balancing on, until every page has moved to node 0; it reports how many
//! moved (move_pages' view of where each page is). The kernel matrix's guests have two nodes, node 1 with memory
//! only (vm/vmtest.sh), so no other task's pages are misplaced, and NUMA balancing is off except in these tests.
//!
//! - With `-p`, the tool counts the migrations made in the helper: exactly the pages that moved.
//! - System-wide, the tool's count over a window equals the kernel's own count of NUMA-balancing pages migrated
//!   (/proc/vmstat numa_pages_migrated) over the same window: the tool is attached and balancing off when the
//!   window opens, and the helper has exited and balancing is off again when it closes. The kernel counts
//!   successful migrations, the tool attempts: the two agree when none fails, as here (single pages, memory to
//!   spare on node 0).
//! - Where there is only one node (this development host), no page can be misplaced: the tool must count none,
//!   in text, JSON and Prometheus form, while NUMA balancing is off (the ground truth of zero).

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// The helper's misplaced pages.
const PAGES: u64 = 512;
/// How long the helper touches its pages at most, waiting for NUMA balancing to move them all.
const TOUCH_SECONDS: u64 = 90;
const WAIT: Duration = Duration::from_secs(30);

fn two_nodes() -> bool {
    Path::new("/sys/devices/system/node/node1").exists()
}

/// NUMA balancing's switch and its scan knobs (5.10: /proc/sys/kernel/numa_balancing_*; 5.13+: debugfs), held
/// by one test at a time (a lock file: the tests of this binary may run in parallel processes), restored when
/// dropped.
struct Balancing {
    saved: Vec<(PathBuf, String)>,
    _lock: fs::File,
}

const SWITCH: &str = "/proc/sys/kernel/numa_balancing";

impl Balancing {
    /// Off, with scans that start 10 ms into a task's life and come every 10 ms of its CPU time, once on.
    fn take() -> Balancing {
        let lock = fs::File::create("/tmp/corebpf-numamove-tests.lock").unwrap();
        // SAFETY: flock on a descriptor we own.
        assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
        let mut knobs = vec![(PathBuf::from(SWITCH), "0")];
        for (old, new) in [("scan_delay_ms", "10"), ("scan_period_min_ms", "10"), ("scan_period_max_ms", "100")] {
            let proc = PathBuf::from(format!("/proc/sys/kernel/numa_balancing_{old}"));
            let debugfs = PathBuf::from(format!("/sys/kernel/debug/sched/numa_balancing/{old}"));
            if let Some(path) = [proc, debugfs].into_iter().find(|p| p.exists()) {
                knobs.push((path, new));
            }
        }
        let mut b = Balancing { saved: Vec::new(), _lock: lock };
        for (path, value) in knobs {
            let Ok(old) = fs::read_to_string(&path) else { continue };
            fs::write(&path, value).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            b.saved.push((path, old.trim().to_string()));
        }
        b
    }

    fn set(&self, on: bool) {
        fs::write(SWITCH, if on { "1" } else { "0" }).unwrap();
    }
}

impl Drop for Balancing {
    fn drop(&mut self) {
        for (path, old) in self.saved.iter().rev() {
            let _ = fs::write(path, old);
        }
    }
}

/// The kernel's count of pages NUMA balancing migrated.
fn numa_pages_migrated() -> u64 {
    let vmstat = fs::read_to_string("/proc/vmstat").unwrap();
    vmstat
        .lines()
        .find_map(|l| l.strip_prefix("numa_pages_migrated "))
        .and_then(|v| v.trim().parse().ok())
        .expect("numa_pages_migrated in /proc/vmstat")
}

/// The helper, its pages on node 1, waiting for "go".
struct Helper {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pid: u32,
}

/// The helper, built first thing in every test (the kernel matrix prebuilds it on the host, which has one node
/// and goes no further).
fn helper() -> PathBuf {
    build_c_helper("numamove-misplaced", include_str!("misplaced.c"), &["-O1"])
}

impl Helper {
    fn start(exe: &Path) -> Helper {
        let cpulist = fs::read_to_string("/sys/devices/system/node/node0/cpulist").unwrap();
        let cpu = cpulist.trim().split([',', '-']).next().unwrap().to_string();
        let mut child = Command::new(exe)
            .args([PAGES.to_string(), cpu, TOUCH_SECONDS.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let child = KillOnDrop(child);
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pid = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the helper could not place its pages on node 1: {line:?}"));
        Helper { child, stdin, stdout, pid }
    }

    /// Touches the pages with balancing on; returns how many moved to node 0. Balancing is off again after.
    fn touch(&mut self, balancing: &Balancing) -> u64 {
        balancing.set(true);
        writeln!(self.stdin.as_mut().unwrap(), "go").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        balancing.set(false);
        line.strip_prefix("moved ").and_then(|n| n.trim().parse().ok()).unwrap_or_else(|| panic!("helper: {line:?}"))
    }

    /// Ends it (end of stdin) and waits for it: its memory, and any page of it still marked for a hinting
    /// fault, is gone.
    fn end(mut self) {
        drop(self.stdin.take());
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
    }
}

/// The JSON lines' migrations and nanoseconds, summed, and the lines.
fn json_totals(stdout: &str) -> (u64, u64, Vec<serde_json::Value>) {
    let lines = json_lines(stdout);
    let sum = |key: &str| lines.iter().map(|l| l[key].as_u64().unwrap_or_else(|| panic!("{key}: {l}"))).sum();
    (sum("migrations"), sum("migration_ns"), lines)
}

/// Where there is one node (the host), the tests that need two check that there is indeed one, outside the
/// matrix's guests, which must have two.
fn assert_one_node_here() {
    assert!(std::env::var_os(HELPER_DIR_ENV).is_none(), "the matrix guest has one NUMA node (vm/vmtest.sh)");
    assert!(Path::new("/sys/devices/system/node/node0").exists() && !two_nodes());
    eprintln!("{TOOL}: one NUMA node here: pages cannot be misplaced; the kernel matrix checks the counts");
}

/// What one run with the helper saw: the tool's output, the pages the helper saw move to node 0, and the
/// kernel's numa_pages_migrated over the window (from after the tool attached, balancing still off, to after the
/// helper exited, balancing off again).
struct Migrated {
    done: Finished,
    moved: u64,
    kernel: u64,
}

/// Starts the helper, then the tool with `args` (`{pid}` stands for the helper's PID), lets NUMA balancing move
/// the helper's pages, ends the helper and stops the tool; None where there is one node (after checking that).
fn migrated(args: &[&str]) -> Option<Migrated> {
    let exe = helper();
    if !two_nodes() {
        assert_one_node_here();
        return None;
    }
    let balancing = Balancing::take();
    let mut helper = Helper::start(&exe);
    let pid = helper.pid.to_string();
    let args: Vec<&str> = args.iter().map(|&a| if a == "{pid}" { pid.as_str() } else { a }).collect();
    let mut run = Running::start(TOOL, &args);
    run.wait_attached(WAIT);
    let before = numa_pages_migrated();
    let moved = helper.touch(&balancing);
    helper.end();
    let kernel = numa_pages_migrated() - before;
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    assert_eq!(moved, PAGES, "NUMA balancing moved {moved} of the helper's {PAGES} pages in {TOUCH_SECONDS} s");
    assert!(kernel >= moved, "the helper saw {moved} pages move, the kernel counted {kernel}");
    Some(Migrated { done, moved, kernel })
}

#[test]
fn pid_filter_counts_each_page_the_helper_got_moved() {
    let Some(Migrated { done, moved, .. }) = migrated(&["-v", "-j", "-p", "{pid}"]) else { return };
    let (migrations, ns, _) = json_totals(&done.stdout);
    assert_eq!(migrations, moved, "stdout:\n{}\nstderr:\n{}", done.stdout, done.stderr);
    assert!(ns >= migrations, "{} migrations took {ns} ns in all", migrations);
}

#[test]
fn system_wide_count_is_the_kernels_numa_pages_migrated() {
    let Some(Migrated { done, kernel, .. }) = migrated(&["-j"]) else { return };
    let (migrations, ns, lines) = json_totals(&done.stdout);
    assert_eq!(migrations, kernel, "the kernel counted {kernel} migrations; stdout:\n{}", done.stdout);
    assert!(ns >= migrations);
    for l in &lines {
        assert_eq!(l["migration_ms"].as_u64(), l["migration_ns"].as_u64().map(|n| n / 1_000_000), "{l}");
    }
}

#[test]
fn text_rows_count_the_helpers_pages() {
    let Some(Migrated { done, moved, .. }) = migrated(&["-p", "{pid}"]) else { return };
    let mut lines = done.stdout.lines();
    assert_eq!(
        lines.next().map(|h| h.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["TIME", "NUMA_migrations", "NUMA_migrations_ms"])
    );
    let counted: u64 = lines.map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(counted, moved, "{}", done.stdout);
}

/// Where only one NUMA node is possible (this host), no page can ever be misplaced: numamove says so in one line
/// and exits 1, in every mode.
#[test]
fn one_node_is_refused_in_one_line() {
    if two_nodes() {
        return;
    }
    assert_one_node_here();
    for args in [&[][..], &["-j"], &["--prometheus", "127.0.0.1:0"]] {
        usage::assert_refused(TOOL, args, 1, "one NUMA node");
    }
}

/// With NUMA balancing off, no page is migrated: every count is zero, for exactly the reports asked for.
#[test]
fn without_balancing_every_count_is_zero() {
    if !two_nodes() {
        return assert_one_node_here();
    }
    let _balancing = Balancing::take();
    let done = run_tool(TOOL, &["-j", "1", "2"]);
    done.assert_success();
    let (migrations, ns, lines) = json_totals(&done.stdout);
    assert_eq!(lines.len(), 2, "{}", done.stdout);
    assert_eq!((migrations, ns), (0, 0), "{}", done.stdout);
    for l in &lines {
        assert_eq!(l["interval_s"], 1);
        assert!(l["source"] == "function" || l["source"] == "tracepoints", "{l}");
    }
    let done = run_tool(TOOL, &["1", "1"]);
    done.assert_success();
    let rows: Vec<Vec<&str>> = done.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 2, "{}", done.stdout);
    assert_eq!(rows[1][1..], ["0", "0"], "{}", done.stdout);
}

#[test]
fn prometheus_counters_start_at_zero_without_balancing() {
    if !two_nodes() {
        return assert_one_node_here();
    }
    let _balancing = Balancing::take();
    let (run, addr) = serving(TOOL, &[]);
    let text = scrape(&addr);
    promtool_accepts(&text);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    assert_eq!(sample(&text, "corebpf_numamove_migrations_total"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "corebpf_numamove_migration_seconds_total"), Some(0.0), "{text}");
}
