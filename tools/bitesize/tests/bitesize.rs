// SPDX-License-Identifier: Apache-2.0 OR MIT
//! bitesize against a helper whose block I/O is known (tests/writer.c: 40 O_DIRECT writes of 64 KiB and 30 of
//! 4 KiB), on the root disk (the tests named root_disk_*, which the test runner keeps apart from the other tools'
//! disk counts) and on a loop device of its own, where libbpf-tools' bitesize sees the same requests: the
//! helper's histogram holds exactly its requests, in text and JSON, filtered by name (-c) and disk (-d).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use corebpf_tests::anchor::Anchor;
use corebpf_tests::loopdev::LoopDevice;
use corebpf_tests::*;

/// The helper's requests by the low bound of their KiB slot.
const EXPECTED: [(u64, u64); 2] = [(4, 30), (64, 40)];
/// This binary's root-disk tests take turns.
static DISK: Mutex<()> = Mutex::new(());

/// A file of 3 MiB on the root file system, written and synced, so that the helper's writes are overwrites.
fn root_disk_file(tag: &str) -> ScratchFile {
    let file = ScratchFile::new(&format!("bitesize-{tag}"));
    let mut f = File::create(&file.0).unwrap();
    f.write_all(&vec![b'a'; 3 << 20]).unwrap();
    f.sync_all().unwrap();
    file
}

/// Runs the helper on `target` (a file or a device) under bitesize (`args` plus `-c` with the helper's name,
/// environment `env`), and under libbpf-tools' bitesize with `anchor_args` plus the same `-c` if given; returns
/// our output, the anchor's (empty without one) and the helper's name.
fn trace_helper(
    target: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
    anchor_args: Option<&[&str]>,
) -> (Finished, String, String) {
    let exe = build_c_helper("bitesize-writer", include_str!("writer.c"), &["-O1"]);
    // A name of its own for each run (its comm, which -c filters on): tests of this file run side by side in the
    // kernel matrix's guests, and one run's writes must not be counted by another's filter.
    let named = ScratchFile::new("bsw"); // bsw-PID-N: at most 15 bytes, the whole comm
    std::os::unix::fs::symlink(&exe, &named.0).unwrap();
    let child = Command::new(&named.0).arg(target).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut helper = KillOnDrop(child);
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", helper.0.id())).unwrap().trim_end().to_string();

    let mut ours_args = args.to_vec();
    ours_args.extend(["-c", comm.as_str()]);
    let mut run = Running::start_with_env("bitesize", &ours_args, env);
    run.wait_attached(Duration::from_secs(20));
    let anchor = anchor_args.map(|a| {
        let mut a = a.to_vec();
        a.extend(["-c", comm.as_str()]);
        Anchor::start("bitesize", &a, "Tracing")
    });

    go_and_wait(&mut helper.0);
    run.signal(libc::SIGINT);
    (run.finish(Duration::from_secs(20)), anchor.map(Anchor::finish).unwrap_or_default(), comm)
}

/// The non-empty slots of a text histogram, by low bound.
fn counted(text: &str) -> Vec<(u64, u64)> {
    hist_rows(text).into_iter().filter(|&(_, _, n)| n > 0).map(|(low, _, n)| (low, n)).collect()
}

/// The (low, count) of each bucket of a JSON histogram that counted something.
fn nonzero_buckets(hist: &serde_json::Value) -> Vec<(u64, u64)> {
    hist["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["count"].as_u64() > Some(0))
        .map(|b| (b["low"].as_u64().unwrap(), b["count"].as_u64().unwrap()))
        .collect()
}

#[test]
fn root_disk_counts_each_request_of_its_submitter() {
    let _turn = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let file = root_disk_file("text");
    let (done, _, comm) = trace_helper(&file.0, &[], &[], None);
    done.assert_success();
    assert!(done.stdout.starts_with("Tracing block I/O... Hit Ctrl-C to end.\n"), "{}", done.stdout);
    let section = format!("\nProcess Name = {comm}\n     Kbytes              : count     distribution\n");
    assert!(done.stdout.contains(&section), "no section for the helper:\n{}", done.stdout);
    assert_eq!(counted(&done.stdout), EXPECTED, "ours:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn root_disk_json_with_the_disk_filter() {
    let _turn = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let file = root_disk_file("json");
    let disk = root_disk();
    let (done, _, comm) = trace_helper(&file.0, &["-j", "-d", &disk], &[], None);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "one process name, one interval:\n{}", done.stdout);
    assert_eq!(lines[0]["comm"], comm.as_str());
    assert_eq!(lines[0]["unit"], "Kbytes");
    let slots = nonzero_buckets(&lines[0]);
    assert_eq!(slots, EXPECTED, "{}", done.stdout);
    assert_eq!(lines[0]["count"], 70);
}

#[test]
fn root_disk_forced_raw_tp_counts_the_same() {
    let _turn = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let file = root_disk_file("raw");
    // The raw_tp half of each pair, as on a kernel whose tp_btf this tool cannot use.
    let (done, _, _) = trace_helper(&file.0, &[], &[("COREBPF_ATTACH", "raw_tp")], None);
    done.assert_success();
    assert_eq!(counted(&done.stdout), EXPECTED, "ours (raw_tp):\n{}", done.stdout);
}

#[test]
fn agrees_with_libbpf_tools_on_a_disk_of_its_own() {
    let dev = LoopDevice::new("anchor");
    let name = dev.name();
    let (done, anchor, _) = trace_helper(&dev.path, &["-d", &name], &[], Some(&["-d", &name]));
    done.assert_success();
    assert_eq!(counted(&done.stdout), EXPECTED, "ours:\n{}", done.stdout);
    assert_eq!(counted(&anchor), EXPECTED, "libbpf-tools' bitesize:\n{anchor}");
}

#[test]
fn another_disk_filters_everything_out() {
    let dev = LoopDevice::new("other");
    let other = LoopDevice::new("filter");
    let (done, _, _) = trace_helper(&dev.path, &["-d", &other.name()], &[], None);
    done.assert_success();
    assert_eq!(counted(&done.stdout), [], "ours:\n{}", done.stdout);
}

#[test]
fn bad_disk_and_name_are_one_line() {
    let done = run_tool("bitesize", &["-d", "nosuchdisk"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    let done = run_tool("bitesize", &["-c", ""]);
    assert_eq!(done.status.code(), Some(2), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
}

/// `--max-series` bounds the series of `--prometheus`: without it, it would change nothing, so it is refused.
#[test]
fn max_series_without_prometheus_is_refused() {
    usage::assert_refused("bitesize", &["--max-series", "5"], 2, "--prometheus");
}

#[test]
fn root_disk_prometheus_sizes_in_bytes() {
    let _turn = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let file = root_disk_file("prom");
    let exe = build_c_helper("bitesize-writer", include_str!("writer.c"), &["-O1"]);
    let named = ScratchFile::new("bsw");
    std::os::unix::fs::symlink(&exe, &named.0).unwrap();
    let child = Command::new(&named.0).arg(&file.0).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut helper = KillOnDrop(child);
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", helper.0.id())).unwrap().trim_end().to_string();
    let (run, addr) = prom::serving("bitesize", &["-c", &comm]);
    let mut stdin = helper.0.stdin.take().unwrap();
    stdin.write_all(b"g").unwrap();
    let mut line = String::new();
    BufReader::new(helper.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "done\n", "the helper failed");
    let text = prom::scrape(&addr);
    drop(stdin);
    assert!(helper.0.wait().unwrap().success());
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    prom::promtool_accepts(&text);
    // 40 writes of 64 KiB and 30 of 4 KiB: buckets at powers of two KiB, in bytes, and the exact sum.
    let get = |series: String| prom::sample(&text, &series).unwrap_or_else(|| panic!("no {series}:\n{text}"));
    let family = "corebpf_bitesize_io_size_bytes";
    let bucket = |le: &str| get(format!("{family}_bucket{{le=\"{le}\",comm=\"{comm}\"}}"));
    assert_eq!(bucket("4096.0"), 0.0, "{text}");
    assert_eq!(bucket("8192.0"), 30.0, "{text}");
    assert_eq!(bucket("65536.0"), 30.0, "{text}");
    assert_eq!(bucket("131072.0"), 70.0, "{text}");
    assert_eq!(get(format!("{family}_count{{comm=\"{comm}\"}}")), 70.0);
    assert_eq!(get(format!("{family}_sum{{comm=\"{comm}\"}}")), (40 * 65536 + 30 * 4096) as f64);
}

/// Requests that move no data are not sizes of I/O: on a loop device of the test's own, blkdiscard's 1 MiB discard
/// and `blkdiscard -z`'s 1 MiB write-zeroes (and a flush) are not counted; only blkdiscard's probing reads are,
/// each 4 KiB.
#[test]
fn discards_write_zeroes_and_flushes_are_not_counted() {
    const MIB: u64 = 1 << 20;
    let dev = LoopDevice::on_root_fs("bitesize-ops", 8 * MIB);
    let mut run = Running::start("bitesize", &["-j", "-d", &dev.name(), "-c", "blkdiscard"]);
    run.wait_attached(Duration::from_secs(20));
    dev.requests_without_data();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    let slots = nonzero_buckets(&lines[0]);
    assert_eq!(slots.len(), 1, "only the 4 KiB reads: {}", done.stdout);
    assert_eq!(slots[0].0, 4, "{}", done.stdout);
    assert_eq!(lines[0]["count"].as_u64(), Some(slots[0].1), "{}", done.stdout);
}
