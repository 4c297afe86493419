// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biopattern against a helper whose reads are known (tests/pattern.c: 31 reads of 8 KiB back to back, then 10 of
//! 4 KiB apart, with O_DIRECT). On a loop device of the test's own, no other request reaches the disk, so the
//! counts are exact (the first read has no predecessor: 30 sequential, 10 random, 280 KiB), in text, with -T and
//! in JSON, and libbpf-tools' biopattern prints the same line. On the root disk (the tests named root_disk_*, for
//! the kernel matrix's guests, which have no loop driver) other I/O interleaves, so the helper's requests are
//! lower bounds there.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::anchor::Anchor;
use corebpf_tests::loopdev::LoopDevice;
use corebpf_tests::*;

const HEADER: &str = "DISK     %RND  %SEQ    COUNT     KBYTES";
/// The helper's requests after its first: sequential, random, KiB.
const SEQUENTIAL: u64 = 30;
const RANDOM: u64 = 10;
const KBYTES: u64 = 30 * 8 + 10 * 4;

/// Runs the helper on `target` under biopattern (`args`, environment `env`) and, with `anchor_args`, under
/// libbpf-tools' biopattern too; returns ours and the anchor's output (empty without one).
fn trace_helper(
    target: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    anchor_args: Option<&[&str]>,
) -> (Finished, String) {
    let exe = build_c_helper("biopattern-reader", include_str!("pattern.c"), &["-O1"]);
    let child = Command::new(&exe).arg(target).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut helper = KillOnDrop(child);
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    let mut run = Running::start_with_env("biopattern", args, env);
    run.wait_attached(Duration::from_secs(20));
    let anchor = anchor_args.map(|a| Anchor::start("biopattern", a, "Tracing"));

    go_and_wait(&mut helper.0);
    run.signal(libc::SIGINT);
    (run.finish(Duration::from_secs(20)), anchor.map(Anchor::finish).unwrap_or_default())
}

/// The fields of `disk`'s lines: (%RND, %SEQ, COUNT, KBYTES), after the time with -T.
fn disk_rows(text: &str, disk: &str) -> Vec<[u64; 4]> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter_map(|f| {
            let at = f.iter().position(|&w| w == disk)?;
            let nums: Vec<u64> = f[at + 1..].iter().filter_map(|w| w.parse().ok()).collect();
            nums.try_into().ok()
        })
        .collect()
}

#[test]
fn exact_split_on_a_disk_of_its_own() {
    let dev = LoopDevice::new("biopattern-text");
    let name = dev.name();
    let (done, _) = trace_helper(&dev.path, &[], &[], None);
    done.assert_success();
    let mut lines = done.stdout.lines();
    assert_eq!(lines.next(), Some("Tracing block device I/O requested seeks... Hit Ctrl-C to end."));
    assert_eq!(lines.next(), Some(HEADER));
    let want = format!("{name:<7} {:>5} {:>5} {:>8} {:>10}", 25, 75, 40, KBYTES);
    assert!(done.stdout.lines().any(|l| l == want), "no line '{want}':\n{}", done.stdout);
    assert_eq!(disk_rows(&done.stdout, &name).len(), 1, "{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn disk_filter_timestamps_and_the_raw_tp_path() {
    let dev = LoopDevice::new("biopattern-t");
    let other = LoopDevice::new("biopattern-other");
    let name = dev.name();
    let (done, _) = trace_helper(&dev.path, &["-T", "-d", &name], &[("COREBPF_ATTACH", "raw_tp")], None);
    done.assert_success();
    assert_eq!(done.stdout.lines().nth(1), Some(format!("{:<9} {HEADER}", "TIME").as_str()));
    let rows: Vec<&str> = done.stdout.lines().skip(2).collect();
    assert_eq!(rows.len(), 1, "one disk only (-d):\n{}", done.stdout);
    let (time, rest) = rows[0].split_at(10);
    assert!(time.len() == 10 && time.as_bytes()[2] == b':' && time.as_bytes()[5] == b':', "{}", rows[0]);
    assert_eq!(rest, format!("{name:<7} {:>5} {:>5} {:>8} {:>10}", 25, 75, 40, KBYTES));

    // The same pattern on one disk, traced with -d naming another: nothing.
    let (done, _) = trace_helper(&dev.path, &["-d", &other.name()], &[], None);
    done.assert_success();
    assert_eq!(done.stdout.lines().count(), 2, "only the banner and the header:\n{}", done.stdout);
}

#[test]
fn json_has_the_exact_counts_and_bytes() {
    let dev = LoopDevice::new("biopattern-json");
    let (major, minor) = dev.major_minor();
    let (done, _) = trace_helper(&dev.path, &["-j", "-d", &dev.name()], &[], None);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    let l = &lines[0];
    assert_eq!(l["disk"], dev.name().as_str());
    assert_eq!((l["major"].as_u64(), l["minor"].as_u64()), (Some(major as u64), Some(minor as u64)));
    assert_eq!(l["sequential"], SEQUENTIAL);
    assert_eq!(l["random"], RANDOM);
    assert_eq!(l["count"], SEQUENTIAL + RANDOM);
    assert_eq!(l["bytes"], KBYTES * 1024);
}

#[test]
fn agrees_with_libbpf_tools_on_a_disk_of_its_own() {
    let dev = LoopDevice::new("biopattern-anchor");
    let name = dev.name();
    let (done, anchor) = trace_helper(&dev.path, &["-d", &name], &[], Some(&["-d", &name]));
    done.assert_success();
    assert_eq!(disk_rows(&done.stdout, &name), [[25, 75, 40, KBYTES]], "ours:\n{}", done.stdout);
    assert_eq!(disk_rows(&anchor, &name), [[25, 75, 40, KBYTES]], "libbpf-tools' biopattern:\n{anchor}");
}

/// A file of 1 MiB on the root file system, written and synced, so that the helper's reads reach the disk.
fn root_disk_file() -> ScratchFile {
    let file = ScratchFile::new("biopattern");
    let mut f = std::fs::File::create(&file.0).unwrap();
    f.write_all(&vec![b'a'; 1 << 20]).unwrap();
    f.sync_all().unwrap();
    file
}

fn root_disk_bounds(env: &[(&str, &str)]) {
    let file = root_disk_file();
    let disk = root_disk();
    let (done, _) = trace_helper(&file.0, &["-d", &disk, "-j"], env, None);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    let l = &lines[0];
    let n = |k: &str| l[k].as_u64().unwrap();
    // Every read of the helper after its first is counted, and none of its 10 gapped reads starts where another
    // request ended.
    assert!(n("count") >= SEQUENTIAL + RANDOM, "{}", done.stdout);
    assert!(n("random") >= RANDOM, "{}", done.stdout);
    assert!(n("sequential") >= 1, "{}", done.stdout);
    assert!(n("bytes") >= KBYTES * 1024, "{}", done.stdout);
    assert_eq!(n("count"), n("random") + n("sequential"));
}

#[test]
fn root_disk_counts_at_least_the_helper() {
    root_disk_bounds(&[]);
}

#[test]
fn root_disk_forced_raw_tp() {
    root_disk_bounds(&[("COREBPF_ATTACH", "raw_tp")]);
}

#[test]
fn bad_disk_and_interval_are_one_line() {
    for (args, code) in [(&["-d", "nosuchdisk"][..], 1), (&["0"][..], 2), (&["1", "0"][..], 2)] {
        let done = run_tool("biopattern", args);
        assert_eq!(done.status.code(), Some(code), "stderr: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    }
}

/// `--prometheus` on a disk of its own: the helper's requests as counters, exactly (30 sequential, 10 random,
/// 280 KiB), and promtool accepts the exposition.
#[test]
fn prometheus_counters_are_exact_on_a_disk_of_its_own() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let dev = LoopDevice::new("biopattern-prom");
    let name = dev.name();
    let exe = build_c_helper("biopattern-reader", include_str!("pattern.c"), &["-O1"]);
    let child = Command::new(&exe).arg(&dev.path).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut helper = KillOnDrop(child);
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    let (tool, addr) = serving("biopattern", &["-d", &name]);
    go_and_wait(&mut helper.0);
    let text = scrape(&addr);
    promtool_accepts(&text);
    let requests = |pattern: &str| {
        sample(&text, &format!("corebpf_biopattern_requests_total{{device=\"{name}\",pattern=\"{pattern}\"}}"))
    };
    assert_eq!(requests("sequential"), Some(SEQUENTIAL as f64), "{text}");
    assert_eq!(requests("random"), Some(RANDOM as f64), "{text}");
    let bytes = sample(&text, &format!("corebpf_biopattern_bytes_total{{device=\"{name}\"}}"));
    assert_eq!(bytes, Some((KBYTES * 1024) as f64), "{text}");
    tool.signal(libc::SIGTERM);
    tool.finish(Duration::from_secs(20)).assert_success();
}

/// Requests that move no data are no part of the pattern: on a loop device of the test's own, blkdiscard's 1 MiB
/// discard, `blkdiscard -z`'s 1 MiB write-zeroes and a flush leave only blkdiscard's probing reads counted, 4 KiB
/// each.
#[test]
fn discards_write_zeroes_and_flushes_are_not_counted() {
    const MIB: u64 = 1 << 20;
    let dev = LoopDevice::on_root_fs("biopattern-ops", 8 * MIB);
    let mut run = Running::start("biopattern", &["-j", "-d", &dev.name()]);
    run.wait_attached(Duration::from_secs(20));
    dev.requests_without_data();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    let lines = json_lines(&done.stdout);
    let count: u64 = lines.iter().map(|l| l["count"].as_u64().unwrap()).sum();
    let bytes: u64 = lines.iter().map(|l| l["bytes"].as_u64().unwrap()).sum();
    assert!(count > 0, "blkdiscard's reads: {}", done.stdout);
    assert_eq!(bytes, 4096 * count, "only 4 KiB reads: {}", done.stdout);
}
