// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biolatency against real block I/O: O_DIRECT writes to a file on the root disk, counted by the tool and by
//! /proc/diskstats (and by libbpf-tools' biolatency, the anchor). Tests that make disk I/O take DISK so that
//! their windows do not overlap.

use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use corebpf_tests::*;

const BANNER: &str = "Tracing block device I/O";
/// Blocks written per test; a few adjacent O_DIRECT writes can merge into one request, so tests expect at least
/// MIN_IOS requests, as the issue states.
const BLOCKS: u32 = 2500;
const MIN_IOS: u64 = 2000;
static DISK: Mutex<()> = Mutex::new(());

fn disk_lock() -> std::sync::MutexGuard<'static, ()> {
    DISK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts biolatency with `args` (plus any environment), waits for its banner (or its first JSON line's absence:
/// JSON mode prints no banner, so give it a moment), then writes BLOCKS blocks with O_DIRECT.
fn with_writes(runs: Vec<Running>, json_runs: usize) -> Vec<Running> {
    let mut runs = runs;
    for run in runs.iter_mut().skip(json_runs) {
        run.wait_for_line(BANNER, Duration::from_secs(20));
    }
    if json_runs > 0 {
        wait_attached(&mut runs[..json_runs]);
    }
    let file = ScratchFile::new("biolatency");
    direct_writes(&file.0, BLOCKS);
    runs
}

/// For runs without a banner: waits until each process holds its BPF programs.
fn wait_attached(runs: &mut [Running]) {
    for run in runs {
        for _ in 0..200 {
            if prog_ids_of(run.pid()).len() >= 2 {
                break;
            }
            thread::sleep(Duration::from_millis(50));
        }
        run.note_programs();
        // Programs are loaded before links are made; give the attach a moment.
        thread::sleep(Duration::from_millis(200));
    }
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done
}

#[test]
fn counts_every_direct_write_and_no_more_than_diskstats() {
    let _disk = disk_lock();
    let disk = root_disk();
    let before = disk_completed_ios(&disk);
    // One-second intervals, summed: however slow the machine (the kernel matrix emulates its CPUs), every
    // write lands in some interval, and none is counted twice. The writes come in two batches 2.5 s apart, so
    // that however fast the disk, they fall into at least two different intervals. Only that disk (-d): the
    // bound is its diskstats, and other tests' loop devices make I/O of their own beside this one.
    let mut run = Running::start("biolatency", &["-d", &disk, "1", "600"]);
    run.wait_for_line(BANNER, Duration::from_secs(20));
    let file = ScratchFile::new("biolatency-intervals");
    direct_writes(&file.0, BLOCKS / 2);
    thread::sleep(Duration::from_millis(2500));
    direct_writes(&file.0, BLOCKS / 2);
    thread::sleep(Duration::from_millis(1200));
    let done = stop(run);
    let after = disk_completed_ios(&disk);
    let reports: Vec<&str> = done.stdout.split("     usecs               : count     distribution").skip(1).collect();
    let with_io = reports.iter().filter(|r| hist_total(r) > 0).count();
    assert!(with_io >= 2, "the writes of two batches 2.5 s apart are not in two interval reports:\n{}", done.stdout);
    let total = hist_total(&done.stdout);
    assert!(total >= MIN_IOS, "histogram total {total} < {MIN_IOS} I/Os:\n{}", done.stdout);
    assert!(total <= after - before, "histogram total {total} > {} I/Os completed per diskstats", after - before);
}

#[test]
fn per_disk_sections_name_the_disk() {
    let _disk = disk_lock();
    let disk = root_disk();
    let run = with_writes(vec![Running::start("biolatency", &["-D"])], 0).pop().unwrap();
    let done = stop(run);
    let section = done
        .stdout
        .split("\ndisk = ")
        .find(|s| s.starts_with(&format!("{disk}\n")))
        .unwrap_or_else(|| panic!("no 'disk = {disk}' section:\n{}", done.stdout));
    assert!(hist_total(section) >= MIN_IOS, "{}", done.stdout);
}

#[test]
fn disk_filter_and_flags_and_extension() {
    let _disk = disk_lock();
    let disk = root_disk();
    let run = with_writes(vec![Running::start("biolatency", &["-F", "-e", "-d", &disk])], 0).pop().unwrap();
    let done = stop(run);
    // O_DIRECT writes are plain or sync writes; their sections must hold all of them.
    let write_total: u64 = done
        .stdout
        .split("\nflags = ")
        .skip(1)
        .filter(|s| s.lines().next().unwrap_or("").ends_with("Write"))
        .map(hist_total)
        .sum();
    assert!(write_total >= MIN_IOS, "write sections hold {write_total}:\n{}", done.stdout);
    let counted: u64 = done
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("avg = ")?.rsplit_once("count: ")?.1.parse::<u64>().ok())
        .sum();
    assert_eq!(counted, hist_total(&done.stdout), "-e counts disagree with the histograms:\n{}", done.stdout);
}

/// Checks that each bucket's bounds, scaled by `ns_per_unit`, bracket the exact latency sum.
fn assert_buckets_bracket_sum(obj: &serde_json::Value, ns_per_unit: u64) {
    let buckets = obj["buckets"].as_array().unwrap();
    let (mut lo, mut hi) = (0u128, 0u128);
    for b in buckets {
        let count = b["count"].as_u64().unwrap() as u128;
        lo += count * b["low"].as_u64().unwrap() as u128 * ns_per_unit as u128;
        hi += count * (b["high"].as_u64().unwrap() as u128 + 1) * ns_per_unit as u128;
    }
    let sum = obj["sum_ns"].as_u64().unwrap() as u128;
    // Slot 0 also holds zero, so its low bound is 0.
    assert!(lo <= sum && sum <= hi, "sum {sum} ns outside bucket bounds [{lo}, {hi}]: {obj}");
}

/// BCC's `-j` keys: `ts` as `%Y-%m-%d %H:%M:%S`, `val_type` (the unit) and `data`, BCC's buckets from `0 -> 1` up
/// to the highest non-empty one, each `interval-start`/`interval-end`/`count` (here the same as `buckets`). BCC's
/// keys come first in the line (`line`, as printed; `obj`, as parsed).
fn assert_bcc_layout(line: &str, obj: &serde_json::Value) {
    assert!(line.starts_with(r#"{"ts":""#), "BCC's keys first: {line}");
    let at = |key: &str| line.find(&format!(r#""{key}":"#)).unwrap_or_else(|| panic!("no {key}: {line}"));
    assert!(at("ts") < at("val_type") && at("val_type") < at("data") && at("data") < at("time"), "{line}");
    let ts = obj["ts"].as_str().unwrap();
    let shape: String = ts.chars().map(|c| if c.is_ascii_digit() { '9' } else { c }).collect();
    assert_eq!(shape, "9999-99-99 99:99:99", "ts {ts:?}");
    assert!(obj["time"].as_str().unwrap().starts_with(&ts.replacen(' ', "T", 1)), "{obj}");
    assert_eq!(obj["val_type"], obj["unit"], "{obj}");
    let data = obj["data"].as_array().unwrap();
    assert_eq!((data[0]["interval-start"].as_u64(), data[0]["interval-end"].as_u64()), (Some(0), Some(1)), "{obj}");
    for (i, pair) in data.windows(2).enumerate() {
        let (end, next) = (pair[0]["interval-end"].as_u64().unwrap(), pair[1]["interval-start"].as_u64().unwrap());
        assert_eq!(next, end + 1, "bucket {i} and the next are not adjacent: {obj}");
        assert_eq!(pair[1]["interval-end"].as_u64().unwrap(), 2 * next - 1, "not a power of two: {obj}");
    }
    assert_ne!(data.last().unwrap()["count"], 0, "data ends at the highest non-empty bucket: {obj}");
    let counts: Vec<u64> = data.iter().map(|b| b["count"].as_u64().unwrap()).collect();
    let buckets: Vec<u64> = obj["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).collect();
    assert_eq!(counts, buckets, "{obj}");
}

#[test]
fn json_agrees_with_text_and_milliseconds_bucket_the_same_ios() {
    let _disk = disk_lock();
    // All three count only one cgroup's I/O, its dd's writes, which all happen while the three are attached: so
    // they must agree exactly, however much I/O other processes make beside them.
    let cg = corebpf_tests::cgroup::TestCgroup::new("biolatency-agree");
    let runs = vec![
        Running::start("biolatency", &["-j", "-c", cg.arg()]),
        Running::start("biolatency", &["-j", "-m", "-c", cg.arg()]),
        Running::start("biolatency", &["-c", cg.arg()]),
    ];
    let mut runs = runs;
    runs[2].wait_for_line(BANNER, Duration::from_secs(20));
    wait_attached(&mut runs[..2]);
    let file = ScratchFile::new("biolatency-agree");
    let dd = format!("dd if=/dev/zero of={} bs=4k count={BLOCKS} oflag=direct status=none", file.0.display());
    let status = std::process::Command::new("sh").args(["-c", &cg.exec_in(&dd)]).status().unwrap();
    assert!(status.success(), "dd in {} failed", cg.arg());
    for run in &runs {
        run.signal(libc::SIGINT);
    }
    let text = runs.pop().unwrap().finish(Duration::from_secs(20));
    let msecs = runs.pop().unwrap().finish(Duration::from_secs(20));
    let usecs = runs.pop().unwrap().finish(Duration::from_secs(20));
    for done in [&text, &msecs, &usecs] {
        done.assert_success();
    }
    let u = json_lines(&usecs.stdout);
    let m = json_lines(&msecs.stdout);
    assert_eq!(u.len(), 1, "{}", usecs.stdout);
    assert_eq!(m.len(), 1, "{}", msecs.stdout);
    let (u, m) = (&u[0], &m[0]);
    assert_eq!(u["unit"], "usecs");
    assert_eq!(m["unit"], "msecs");
    for (obj, ns) in [(u, 1_000), (m, 1_000_000)] {
        let count = obj["count"].as_u64().unwrap();
        let in_buckets: u64 = obj["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(count, in_buckets, "{obj}");
        assert!(count >= MIN_IOS, "{obj}");
        assert_buckets_bracket_sum(obj, ns);
    }
    for done in [&usecs, &msecs] {
        let line = done.stdout.lines().find(|l| l.starts_with('{')).unwrap();
        assert_bcc_layout(line, &serde_json::from_str(line).unwrap());
    }
    let text_total = hist_total(&text.stdout);
    let json_total = u["count"].as_u64().unwrap();
    let ms_total = m["count"].as_u64().unwrap();
    assert_eq!(text_total, json_total, "text and JSON:\n{}\n{}", text.stdout, usecs.stdout);
    assert_eq!(ms_total, json_total, "msecs and usecs:\n{}\n{}", msecs.stdout, usecs.stdout);
}

#[test]
fn raw_tp_fallback_counts_the_same_writes() {
    let _disk = disk_lock();
    let mut run = Running::start_with_env("biolatency", &["-v"], &[("COREBPF_ATTACH", "raw_tp")]);
    run.wait_for_line(BANNER, Duration::from_secs(20));
    let file = ScratchFile::new("biolatency-rawtp");
    direct_writes(&file.0, BLOCKS);
    let done = stop(run);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    assert!(hist_total(&done.stdout) >= MIN_IOS, "{}", done.stdout);
}

#[test]
fn queued_time_counts_every_write() {
    let _disk = disk_lock();
    let run = with_writes(vec![Running::start("biolatency", &["-Q", "-m"])], 0).pop().unwrap();
    let done = stop(run);
    assert!(done.stdout.contains("     msecs "), "{}", done.stdout);
    assert!(hist_total(&done.stdout) >= MIN_IOS, "{}", done.stdout);
}

#[test]
fn sigterm_prints_the_partial_interval_and_exits_zero() {
    let _disk = disk_lock();
    let run = with_writes(vec![Running::start("biolatency", &["-T", "60"])], 0).pop().unwrap();
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(hist_total(&done.stdout) >= MIN_IOS, "{}", done.stdout);
    let time_line = done.stdout.lines().nth(2).unwrap_or("");
    assert!(time_line.len() == 8 && time_line.as_bytes()[2] == b':', "no HH:MM:SS line:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn closed_pipe_ends_quietly_and_detaches() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child =
        Command::new(bin("biolatency")).args(["1", "5"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    reader.read_line(&mut first).unwrap();
    assert!(first.starts_with(BANNER), "{first}");
    let ids = prog_ids_of(child.id());
    drop(reader); // like `| head -1`
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "biolatency kept running after its pipe closed");
        thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status:?} {stderr}");
    assert!(stderr.is_empty(), "stderr: {stderr}");
    Finished { status, stdout: first, stderr, prog_ids: ids }.assert_no_programs_left();
}

#[test]
fn bad_input_gets_one_clear_line() {
    let done = run_tool("biolatency", &["-d", "nosuchdisk"]);
    assert_eq!(done.status.code(), Some(1));
    assert_eq!(done.stderr.trim(), "biolatency: unknown disk 'nosuchdisk' (not in /sys/class/block)");

    let done = run_tool("biolatency", &["-c", "/no/such/cgroup"]);
    assert_eq!(done.status.code(), Some(1));
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert!(done.stderr.contains("cannot open cgroup '/no/such/cgroup'"), "{}", done.stderr);

    // Issue 23 item 8: a file, or a cgroup v1 directory, is named for what it is, not "Bad file descriptor".
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let mount_of = |fstype: &str| {
        mounts.lines().map(|l| l.split(' ').collect::<Vec<_>>()).find(|f| f[2] == fstype).map(|f| f[1].to_string())
    };
    let v2 = mount_of("cgroup2").expect("a cgroup2 mount");
    let mut wrong = vec![(format!("{v2}/cgroup.procs"), "is a file, not a cgroup v2 directory")];
    if let Some(v1) = mount_of("cgroup") {
        wrong.push((v1, "cgroup v1 hierarchy, not a cgroup v2 directory"));
    }
    for (path, message) in wrong {
        let done = run_tool("biolatency", &["-c", &path]);
        assert_eq!(done.status.code(), Some(1), "{path}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
        assert!(done.stderr.contains(message) && !done.stderr.contains("os error"), "{}", done.stderr);
    }

    let done = run_tool("biolatency", &["0"]);
    assert_eq!(done.status.code(), Some(2), "usage errors exit 2: {}", done.stderr);
    // Item 3: intervals beyond a year are usage errors naming the range, never a panic (exit 134).
    for args in [&["18446744073709551615"][..], &["9223372036854775807", "1"]] {
        let done = run_tool("biolatency", args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
        assert!(done.stderr.contains("from 1 to 31536000"), "{}", done.stderr);
    }
    let done = run_tool("biolatency", &["--bogus"]);
    assert_eq!(done.status.code(), Some(2));
    assert!(!done.stderr.contains("panicked"));
}

#[test]
fn not_root_is_refused_clearly() {
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    // A copy nobody can execute wherever the checkout is (issue 53 item 17).
    let copy = BinForOthers::new("biolatency");
    let out = Command::new(copy.path()).uid(65534).gid(65534).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim(), "biolatency: must be run as root (or with CAP_BPF and CAP_PERFMON) to load BPF programs");
}

#[test]
fn total_matches_libbpf_tools_biolatency_within_two_percent() {
    let _disk = disk_lock();
    let anchor_bin = "/usr/sbin/biolatency";
    assert!(std::path::Path::new(anchor_bin).exists(), "the anchor is needed: apt-get install libbpf-tools");
    let mut anchor = KillOnDrop(
        std::process::Command::new(anchor_bin)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut ours = Running::start("biolatency", &[]);
    ours.wait_for_line(BANNER, Duration::from_secs(20));
    // The anchor prints its banner too, but we do not read its pipe until the end: wait for its attachments.
    corebpf_tests::wait_attached(anchor.0.id(), Duration::from_secs(20)).expect("the anchor attaches");
    let file = ScratchFile::new("biolatency-anchor");
    direct_writes(&file.0, BLOCKS * 2);
    thread::sleep(Duration::from_millis(200));
    unsafe {
        libc::kill(anchor.0.id() as i32, libc::SIGINT);
    }
    ours.signal(libc::SIGINT);
    let ours = ours.finish(Duration::from_secs(20));
    ours.assert_success();
    let _ = anchor.0.wait();
    let mut anchor_out = String::new();
    std::io::Read::read_to_string(&mut anchor.0.stdout.take().unwrap(), &mut anchor_out).unwrap();
    let (a, b) = (hist_total(&anchor_out), hist_total(&ours.stdout));
    assert!(a >= MIN_IOS * 2, "anchor saw {a}:\n{anchor_out}");
    let diff = a.abs_diff(b) as f64 / a as f64;
    assert!(diff <= 0.02, "ours {b} vs libbpf-tools {a}: {:.1}% apart", diff * 100.0);
}

/// The block I/O a cgroup's tasks submitted to one disk, as the kernel counts it for the cgroup: io.stat's rios
/// and wios in its cgroup v2 folder where the io controller is cgroup v2's, else `blkio.throttle.io_serviced`
/// of a cgroup v1 blkio group that the same tasks join. That one counts only while some group has a limit on
/// the disk: a sibling group, with no task, gets one (10^8 reads a second), so that the counted group's I/O is
/// never throttled (a throttled bio is sent later by a kernel worker, in another context). The folders are
/// removed when dropped.
struct CgroupIos {
    v2: std::path::PathBuf,
    v1: Option<(std::path::PathBuf, std::path::PathBuf)>,
    dev: String,
}

impl CgroupIos {
    fn new(v2: std::path::PathBuf, dev: &str) -> CgroupIos {
        let root = v2.parent().unwrap();
        let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
        std::fs::create_dir_all(&v2).unwrap();
        let mut ios = CgroupIos { v2, v1: None, dev: dev.to_string() };
        if !ios.v2.join("io.stat").exists() {
            let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
            assert!(mounts.contains(" /sys/fs/cgroup/blkio cgroup "), "no io.stat and no blkio controller");
            let name = ios.v2.file_name().unwrap().to_string_lossy().into_owned();
            let v1 = std::path::Path::new("/sys/fs/cgroup/blkio").join(&name);
            let limited = v1.with_file_name(format!("{name}-limit"));
            std::fs::create_dir_all(&v1).unwrap();
            std::fs::create_dir_all(&limited).unwrap();
            std::fs::write(limited.join("blkio.throttle.read_iops_device"), format!("{dev} 100000000")).unwrap();
            ios.v1 = Some((v1, limited));
        }
        ios
    }

    /// The shell commands that move the current shell into the cgroup(s).
    fn join(&self) -> String {
        let mut cmd = format!("echo $$ > {}/cgroup.procs", self.v2.display());
        if let Some((v1, _)) = &self.v1 {
            cmd += &format!(" && echo $$ > {}/cgroup.procs", v1.display());
        }
        cmd
    }

    /// Reads and writes so far.
    fn count(&self) -> u64 {
        match &self.v1 {
            Some((v1, _)) => {
                let text = std::fs::read_to_string(v1.join("blkio.throttle.io_serviced")).unwrap();
                let total = text.lines().find_map(|l| l.strip_prefix(&format!("{} Total ", self.dev)));
                total.map_or(0, |n| n.trim().parse().unwrap())
            }
            None => {
                let text = std::fs::read_to_string(self.v2.join("io.stat")).unwrap();
                let line = text.lines().find_map(|l| l.strip_prefix(&format!("{} ", self.dev))).unwrap_or("");
                line.split_whitespace()
                    .filter_map(|kv| kv.split_once('='))
                    .filter(|(k, _)| *k == "rios" || *k == "wios")
                    .map(|(_, v)| v.parse::<u64>().unwrap())
                    .sum()
            }
        }
    }
}

impl Drop for CgroupIos {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.v2);
        if let Some((v1, limited)) = &self.v1 {
            let _ = std::fs::remove_dir(v1);
            let _ = std::fs::remove_dir(limited);
        }
    }
}

/// True if the kernel has the block_io_start tracepoint (6.5+), where -c takes the submitter's cgroup.
fn has_block_io_start() -> bool {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap();
    btf.windows(25).any(|w| w == b"btf_trace_block_io_start\0")
}

/// -c counts the I/O the cgroup's tasks submitted, and nothing else, while a dd outside it writes to the same disk
/// at the same time. Issue 31 item 7: 2727 I/Os were counted for a dd of 2500 writes on a machine busy with other
/// I/O: block_rq_issue runs in whichever task dispatches the queue, and the dd dispatched other tasks' requests.
/// The ground truth is the kernel's own count for the cgroup ([`CgroupIos`]): the tool counts at most that, and
/// misses only the rare bio merged into another request. On kernels before 6.5 the tool can only take the task
/// at issue, and the old bounds apply.
#[test]
fn cgroup_filter_counts_only_that_cgroups_io() {
    use std::process::Command;
    let _disk = disk_lock();
    // CgroupIos makes the directory (after turning on the io controller for it) and removes it.
    let cg = corebpf_tests::cgroup::cgroup2_root().join(format!("corebpf-biolatency-{}", std::process::id()));
    let dev = std::fs::read_to_string(format!("/sys/block/{}/dev", root_disk())).unwrap().trim().to_string();
    let ios = CgroupIos::new(cg.clone(), &dev);
    let mut run = Running::start("biolatency", &["-c", cg.to_str().unwrap()]);
    run.wait_for_line(BANNER, Duration::from_secs(20));
    let inside = ScratchFile::new("biolatency-cg-in");
    let outside = ScratchFile::new("biolatency-cg-out");
    // Both files are allocated first, each in one piece, so that no write of one lands next to a write of the
    // other still queued: the scheduler would merge the two into one request, the first one's.
    for file in [&inside, &outside] {
        let f = std::fs::File::create(&file.0).unwrap();
        let len = i64::from(BLOCKS) * 4096;
        // SAFETY: fallocate on a descriptor this test owns.
        let rc = unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, len) };
        assert_eq!(rc, 0, "fallocate {}: {}", file.0.display(), std::io::Error::last_os_error());
    }
    let dd = |path: &std::path::Path| {
        format!("dd if=/dev/zero of={} bs=4k count={BLOCKS} oflag=direct conv=notrunc status=none", path.display())
    };
    // One dd joins the cgroup before it starts; the other, outside it, runs at the same time.
    let script = format!("{} && exec {}", ios.join(), dd(&inside.0));
    let before = ios.count();
    let mut dd_in = KillOnDrop(Command::new("sh").args(["-c", &script]).spawn().unwrap());
    let dd_out = Command::new("sh").args(["-c", &dd(&outside.0)]).status().unwrap();
    assert!(dd_out.success());
    assert!(dd_in.0.wait().unwrap().success());
    let issued = ios.count() - before;
    let done = stop(run);
    let total = hist_total(&done.stdout);
    assert!(issued >= BLOCKS as u64, "the cgroup's own count missed the dd's writes: {issued}");
    if has_block_io_start() {
        // Never more than the cgroup issued. The kernel counts bios, the tool requests: a bio merged into a
        // request already queued (rarely: the scheduler merges adjacent writes of any task) is not a request
        // of its own; seen: up to 7 of 2500.
        assert!(total <= issued, "counted {total}, more than the cgroup issued ({issued})\n{}", done.stdout);
        assert!(total >= issued - issued / 100, "counted {total} of the cgroup's {issued}\n{}", done.stdout);
    } else {
        assert!(total >= MIN_IOS, "cgroup's writes missing: {total}\n{}", done.stdout);
        assert!(total <= issued + 100, "writes from outside the cgroup counted: {total}\n{}", done.stdout);
    }
}
