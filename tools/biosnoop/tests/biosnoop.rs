// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biosnoop against real block I/O: `dd oflag=direct` writes K 4 KiB blocks to a scratch file on the root disk,
//! and every request of that dd (known by its PID: dd is started directly, so its PID is the child's) must be
//! reported with dd's PID and comm, the root disk, `W` and its bytes. Other tests' and the system's I/O run at the
//! same time on the same disk, so every assertion looks only at the lines of the test's own dd processes.

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::loopdev::LoopDevice;
use corebpf_tests::*;
use serde_json::Value;

const HEADER: &str = "TIME(s)";
/// Blocks each dd writes.
const K: u32 = 200;

/// Starts `dd` overwriting `blocks` 4 KiB blocks of `of` with O_DIRECT; its PID is the child's.
fn dd(of: &str, blocks: u32) -> Child {
    Command::new("dd")
        .args(["if=/dev/zero", &format!("of={of}"), "bs=4k", &format!("count={blocks}"), "oflag=direct"])
        .args(["conv=notrunc", "status=none"])
        .spawn()
        .expect("dd")
}

/// A scratch file of `blocks` 4 KiB blocks already written to the disk, so that dd's O_DIRECT writes overwrite
/// allocated blocks: one request each, in dd's context (writes into a new file may also make the file system
/// zero out blocks or fall back to buffered I/O, which would blur the count).
fn written_file(tag: &str, blocks: u32) -> ScratchFile {
    use std::io::Write;
    let file = ScratchFile::new(tag);
    let mut f = std::fs::File::create(&file.0).unwrap();
    f.write_all(&vec![1u8; blocks as usize * 4096]).unwrap();
    f.sync_all().unwrap();
    file
}

fn wait_ok(mut child: Child) {
    assert!(child.wait().unwrap().success(), "dd failed");
}

/// Starts biosnoop and waits until it is attached: its header for text output, its links for JSON.
fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut run = Running::start_with_env("biosnoop", args, env);
    if args.contains(&"--json") {
        let deadline = Instant::now() + Duration::from_secs(20);
        // block_rq_complete, issue and insert on every kernel (then merge and io_start where they exist).
        while links_of(run.pid()) < 3 {
            assert!(Instant::now() < deadline, "biosnoop {args:?} did not attach within 20 s");
            thread::sleep(Duration::from_millis(20));
        }
        thread::sleep(Duration::from_millis(300));
        run.note_programs();
    } else {
        run.wait_for_line(" COMM ", Duration::from_secs(20));
    }
    run
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// One text line: TIME(s) COMM PID DISK T SECTOR BYTES [P] [QUE(ms)] LAT(ms) [FLAGS], split on whitespace.
#[derive(Debug)]
struct Line {
    comm: String,
    pid: u32,
    disk: String,
    rw: String,
    /// None for `-`: a request with no sector (a flush).
    sector: Option<u64>,
    bytes: u64,
    rest: Vec<String>,
}

/// The lines of PID `pid` (comms without spaces, as dd's; other processes' lines may not parse, and are skipped).
fn lines_of(stdout: &str, pid: u32) -> Vec<Line> {
    lines(stdout).into_iter().filter(|l| l.pid == pid).collect()
}

/// Every line that parses (comms without spaces).
fn lines(stdout: &str) -> Vec<Line> {
    stdout
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            Some(Line {
                comm: f[1].into(),
                pid: f[2].parse().ok()?,
                disk: f[3].into(),
                rw: f[4].into(),
                sector: if f[5] == "-" { None } else { Some(f[5].parse().ok()?) },
                bytes: f[6].parse().ok()?,
                rest: f[7..].iter().map(|s| s.to_string()).collect(),
            })
        })
        .collect()
}

/// The writes of dd `pid`: exactly `blocks` lines (dd waits for each O_DIRECT write before the next, so none can
/// merge), each a `W` of 4096 bytes with dd's PID and comm on `disk`, each sector once.
fn assert_writes(done: &Finished, pid: u32, disk: &str, blocks: u32) -> Vec<Line> {
    let (stdout, stderr) = (&done.stdout, &done.stderr);
    let writes: Vec<Line> = lines_of(stdout, pid).into_iter().filter(|l| l.rw == "W").collect();
    assert_eq!(
        writes.len() as u32,
        blocks,
        "dd {pid}'s {blocks} writes not each reported once:\n{stdout}\nstderr:\n{stderr}"
    );
    let mut sectors: Vec<Option<u64>> = writes.iter().map(|l| l.sector).collect();
    sectors.sort();
    sectors.dedup();
    assert_eq!(sectors.len(), writes.len(), "a request reported twice:\n{stdout}");
    for l in &writes {
        assert_eq!((l.comm.as_str(), l.pid, l.disk.as_str()), ("dd", pid, disk), "{l:?}");
        assert_eq!(l.bytes, 4096, "{l:?}");
        // LAT(ms) is the last number (FLAGS, with -e, follows it).
        let lat = l.rest.iter().rev().find_map(|s| s.parse::<f64>().ok());
        let lat = lat.unwrap_or_else(|| panic!("LAT(ms) of {l:?}"));
        assert!(lat >= 0.0, "{l:?}");
    }
    writes
}

#[test]
fn every_direct_write_with_the_issuing_pid_comm_and_disk() {
    let disk = root_disk();
    let run = start(&[], &[]);
    let file = written_file("biosnoop", K);
    let writer = dd(file.0.to_str().unwrap(), K);
    let pid = writer.id();
    wait_ok(writer);
    thread::sleep(Duration::from_millis(300));
    let done = stop(run);
    let header = done.stdout.lines().next().unwrap();
    assert_eq!(header, "TIME(s)     COMM           PID     DISK      T SECTOR     BYTES  LAT(ms)");
    let writes = assert_writes(&done, pid, &disk, K);
    assert!(writes.iter().all(|l| l.rest.len() == 1), "only LAT(ms) after BYTES without -Q/-P:\n{}", done.stdout);
    // TIME(s) counts from the first I/O printed, with 6 decimals.
    let first_time = done.stdout.lines().nth(1).unwrap().split_whitespace().next().unwrap();
    assert_eq!(first_time, "0.000000", "{}", done.stdout);
}

#[test]
fn queue_pattern_and_flags_columns_and_json_agree() {
    let disk = root_disk();
    let text = start(&["-Q", "-P", "-e"], &[]);
    let json = start(&["--json", "-Q", "-P"], &[]);
    let file = written_file("biosnoop-q", K);
    let writer = dd(file.0.to_str().unwrap(), K);
    let pid = writer.id();
    wait_ok(writer);
    thread::sleep(Duration::from_millis(300));
    let (text, json) = (stop(text), stop(json));

    let header = text.stdout.lines().next().unwrap();
    assert_eq!(header, "TIME(s)     COMM           PID     DISK      T SECTOR     BYTES  P QUE(ms) LAT(ms) FLAGS");
    let writes = assert_writes(&text, pid, &disk, K);
    for l in &writes {
        // P QUE(ms) LAT(ms) FLAGS: dd writes one block after the other, so after its first, sequential or not.
        assert_eq!(l.rest.len(), 4, "{l:?}");
        assert!(["S", "R", "?"].contains(&l.rest[0].as_str()), "{l:?}");
        assert!(l.rest[1].parse::<f64>().is_ok_and(|q| q >= 0.0), "QUE(ms) of {l:?}");
        assert!(l.rest[3].ends_with("Write"), "FLAGS of {l:?}");
    }
    // A file written block after block is mostly laid out in order on the disk.
    let sequential = writes.iter().filter(|l| l.rest[0] == "S").count();
    assert!(sequential > 0, "no sequential write among dd's:\n{}", text.stdout);

    let recs: Vec<Value> = json_lines(&json.stdout).into_iter().filter(|r| r["pid"] == pid && r["rw"] == "W").collect();
    let bytes: u64 = recs.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert_eq!(bytes, K as u64 * 4096, "JSON:\n{}", json.stdout);
    assert_eq!(recs.len(), writes.len(), "text and JSON disagree on dd's requests");
    for r in &recs {
        assert_eq!(r["comm"], "dd", "{r}");
        assert_eq!(r["disk"], disk.as_str(), "{r}");
        assert!(r["latency_ns"].as_u64().is_some_and(|n| n > 0), "{r}");
        assert!(r["queue_ns"].as_u64().is_some(), "{r}");
        assert!(r["flags"].as_str().is_some_and(|f| f.ends_with("Write")), "{r}");
        assert!(["S", "R", "?"].contains(&r["pattern"].as_str().unwrap()), "{r}");
        assert!(r["dev"].as_str().is_some_and(|d| d.contains(':')), "{r}");
    }
}

#[test]
fn raw_tp_fallback_reports_the_same_writes() {
    let disk = root_disk();
    let run = start(&["-v"], &[("COREBPF_ATTACH", "raw_tp")]);
    let file = written_file("biosnoop-rawtp", K);
    let writer = dd(file.0.to_str().unwrap(), K);
    let pid = writer.id();
    wait_ok(writer);
    thread::sleep(Duration::from_millis(300));
    let done = stop(run);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    assert_writes(&done, pid, &disk, K);
}

/// A loop device over a scratch file, detached when dropped.
struct Loop {
    dev: String,
    _backing: ScratchFile,
}

impl Loop {
    fn new() -> Loop {
        let backing = written_file("biosnoop-loop", K);
        let out = Command::new("losetup").args(["-f", "--show"]).arg(&backing.0).output().expect("losetup");
        assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Loop { dev, _backing: backing }
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

#[test]
fn disk_filter_keeps_one_disk_and_excludes_the_others() {
    let lo = Loop::new();
    let run = start(&["-d", lo.name()], &[]);
    let file = written_file("biosnoop-d", K);
    let on_root = dd(file.0.to_str().unwrap(), K);
    let on_loop = dd(&lo.dev, 64);
    let (root_pid, loop_pid) = (on_root.id(), on_loop.id());
    wait_ok(on_root);
    wait_ok(on_loop);
    thread::sleep(Duration::from_millis(300));
    let done = stop(run);
    assert!(
        lines_of(&done.stdout, root_pid).is_empty(),
        "-d {} printed the root disk's writes:\n{}",
        lo.name(),
        done.stdout
    );
    assert_writes(&done, loop_pid, lo.name(), 64);
    // Every line is of the loop device (the loop driver's own I/O to its backing file goes to the root disk).
    for line in done.stdout.lines().skip(1) {
        assert_eq!(line.split_whitespace().nth(3), Some(lo.name()), "{line}");
    }
}

#[test]
fn cgroup_filter_reports_only_that_cgroups_io() {
    let cg = corebpf_tests::cgroup::TestCgroup::new("biosnoop");
    let run = start(&["-c", cg.arg()], &[]);
    let inside = written_file("biosnoop-cg-in", K);
    let outside = written_file("biosnoop-cg-out", K);
    // The shell joins the cgroup, then becomes dd (same PID); the other dd, outside, runs at the same time.
    let script = cg.exec_in(&format!(
        "dd if=/dev/zero of={} bs=4k count={K} oflag=direct conv=notrunc status=none",
        inside.0.display()
    ));
    let dd_in = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let dd_out = dd(outside.0.to_str().unwrap(), K);
    let (in_pid, out_pid) = (dd_in.id(), dd_out.id());
    wait_ok(dd_in);
    wait_ok(dd_out);
    thread::sleep(Duration::from_millis(300));
    let done = stop(run);
    assert_writes(&done, in_pid, &root_disk(), K);
    assert!(lines_of(&done.stdout, out_pid).is_empty(), "I/O from outside the cgroup:\n{}", done.stdout);
    for line in done.stdout.lines().skip(1) {
        assert_eq!(line.split_whitespace().nth(2), Some(in_pid.to_string().as_str()), "not the cgroup's: {line}");
    }
}

#[test]
fn sigterm_and_duration_end_cleanly_with_timestamps() {
    let file = written_file("biosnoop-term", K);
    let run = start(&["-t"], &[]);
    wait_ok(dd(file.0.to_str().unwrap(), 20));
    thread::sleep(Duration::from_millis(300));
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    let mut lines = done.stdout.lines();
    assert!(lines.next().unwrap().starts_with("TIMESTAMP    COMM "), "{}", done.stdout);
    let first = lines.next().unwrap_or_else(|| panic!("no I/O line:\n{}", done.stdout));
    let ts = first.split_whitespace().next().unwrap().as_bytes();
    assert!(ts.len() == 12 && ts[2] == b':' && ts[5] == b':' && ts[8] == b'.', "HH:MM:SS.mmm: {first}");

    // A duration ends the run by itself.
    let done = Running::start("biosnoop", &["1"]).finish(Duration::from_secs(30));
    done.assert_success();
    assert!(done.stdout.starts_with(HEADER), "{}", done.stdout);
}

#[test]
fn closed_pipe_ends_quietly_and_detaches() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = Command::new(bin("biosnoop")).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    reader.read_line(&mut first).unwrap();
    assert!(first.starts_with(HEADER), "{first}");
    let ids = prog_ids_of(child.id());
    drop(reader); // like `| head -1`
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "biosnoop kept running after its pipe closed");
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
    let done = run_tool("biosnoop", &["-d", "nosuchdisk"]);
    assert_eq!(done.status.code(), Some(1));
    assert_eq!(done.stderr.trim(), "biosnoop: unknown disk 'nosuchdisk' (not in /sys/class/block)");
    assert_eq!(done.stdout, "", "nothing printed before the error");

    let done = run_tool("biosnoop", &["-c", "/no/such/cgroup"]);
    assert_eq!(done.status.code(), Some(1));
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert!(done.stderr.contains("cannot open cgroup '/no/such/cgroup'"), "{}", done.stderr);

    for args in [&["0"][..], &["-m", "x"], &["--bogus"], &["1", "2"]] {
        let done = run_tool("biosnoop", args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
    }
}

/// Requests that move no data, on a loop device of the test's own (over a file on the root file system, which
/// takes discards and write-zeroes through fallocate()): blkdiscard's 1 MiB is one `D` line of 1048576 bytes at
/// sector 0, `blkdiscard -z`'s next MiB one `Z` at sector 2048, each with the PID of the blkdiscard that asked
/// (their probing reads stay `R`, 4 KiB each), and an fsync() of the device is a `F` line with no sector (`-`).
/// biotop, run at the same time, puts the same requests in D, Z and F rows, and credits each flush to the same
/// task as biosnoop (the one that issues it: the flush request has no submitter of its own).
#[test]
fn discards_write_zeroes_and_flushes_have_their_own_type() {
    const MIB: u64 = 1 << 20;
    let dev = LoopDevice::on_root_fs("biosnoop-ops", 8 * MIB);
    let name = dev.name();
    let (major, minor) = dev.major_minor();
    let snoop = start(&["-d", &name], &[]);
    let mut top = Running::start("biotop", &["-j", "3600"]);
    top.wait_attached(Duration::from_secs(20));
    let (discard, zeroes) = dev.requests_without_data();
    let done = stop(snoop);
    top.signal(libc::SIGINT);
    let top = top.finish(Duration::from_secs(20));
    top.assert_success();
    let out = &done.stdout;
    for (pid, t, sector) in [(discard, "D", 0), (zeroes, "Z", 2048)] {
        let lines = lines_of(out, pid);
        let own: Vec<&Line> = lines.iter().filter(|l| l.rw == t).collect();
        assert_eq!(own.len(), 1, "blkdiscard {pid}: one {t} request:\n{out}");
        assert_eq!((own[0].bytes, own[0].sector, own[0].comm.as_str()), (MIB, Some(sector), "blkdiscard"), "{out}");
        for l in &lines {
            assert!(l.rw == t || (l.rw == "R" && l.bytes == 4096), "blkdiscard {pid}: {l:?}\n{out}");
        }
    }
    let flushes: Vec<Line> = lines(out).into_iter().filter(|l| l.rw == "F").collect();
    assert!(!flushes.is_empty(), "no flush request:\n{out}");
    let mut snooped: BTreeMap<(u32, String), u64> = BTreeMap::new();
    for l in &flushes {
        assert_eq!((l.disk.as_str(), l.sector, l.bytes), (name.as_str(), None, 0), "{l:?}\n{out}");
        assert!(l.pid != 0 && l.comm != "?", "a flush credited to no task: {l:?}\n{out}");
        *snooped.entry((l.pid, l.comm.clone())).or_default() += 1;
    }

    let rows: Vec<Value> = json_lines_of("biotop", &top.stdout)
        .into_iter()
        .filter(|r| r["major"] == major && r["minor"] == minor)
        .collect();
    let sum = |pid: u32, rw: &str, field: &str| -> u64 {
        rows.iter().filter(|r| r["pid"] == pid && r["rw"] == rw).map(|r| r[field].as_u64().unwrap()).sum()
    };
    for (pid, t) in [(discard, "D"), (zeroes, "Z")] {
        assert_eq!((sum(pid, t, "io"), sum(pid, t, "bytes")), (1, MIB), "biotop, {t}:\n{}", top.stdout);
        assert_eq!(sum(pid, "R", "bytes"), 4096 * sum(pid, "R", "io"), "biotop, R:\n{}", top.stdout);
        assert_eq!(sum(pid, "W", "io"), 0, "biotop, W:\n{}", top.stdout);
    }
    let mut topped: BTreeMap<(u32, String), u64> = BTreeMap::new();
    for r in rows.iter().filter(|r| r["rw"] == "F") {
        let key = (r["pid"].as_u64().unwrap() as u32, r["comm"].as_str().unwrap().to_string());
        *topped.entry(key).or_default() += r["io"].as_u64().unwrap();
    }
    assert_eq!(topped, snooped, "biotop's flushes and biosnoop's:\n{}\n{out}", top.stdout);
}
