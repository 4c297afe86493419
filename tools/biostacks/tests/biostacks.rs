// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biostacks against a helper whose block I/O is known (tests/writer.c: 50 O_DIRECT writes of 16 KiB, each one
//! request), on the root disk (tests named root_disk_*, which take turns) and on a loop device of its own: the
//! histograms of the helper's PID hold exactly its 50 requests, under stacks that name the block submission path
//! (submit_bio) and the direct-I/O write path, in text and JSON, with tp_btf and raw_tp, in µs and ms; and -d
//! with another disk keeps none of them. libbpf-tools' biostacks (0.26 here) does not load on this host (it needs
//! fentry): a bpftrace program on the same tracepoints counts the same requests beside it.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use corebpf_tests::loopdev::LoopDevice;
use corebpf_tests::*;

const TOOL: &str = "biostacks";
const WRITES: u64 = 50;
const BANNER: &str = "Tracing block I/O with init stacks. Hit Ctrl-C to end.\n";
/// This binary's root-disk tests take turns.
static DISK: Mutex<()> = Mutex::new(());

/// A file of 4 MiB on the root file system, written and synced, so that the helper's writes are overwrites.
fn root_disk_file(tag: &str) -> ScratchFile {
    let file = ScratchFile::new(&format!("biostacks-{tag}"));
    let mut f = File::create(&file.0).unwrap();
    f.write_all(&vec![b'a'; 4 << 20]).unwrap();
    f.sync_all().unwrap();
    file
}

/// Runs the helper on `target` under biostacks with `args` (environment `env`); returns the output and the
/// helper's PID and name.
fn trace_helper(target: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (Finished, u32, String) {
    let (done, pid, comm, _) = trace_helper_beside(target, args, env, false);
    (done, pid, comm)
}

/// [`trace_helper`], with the bpftrace anchor beside it when `anchor` is set: it counts the requests the helper's
/// PID starts (block_io_start) that complete (block_rq_complete), by device and sector; returns its count too.
fn trace_helper_beside(
    target: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
    anchor: bool,
) -> (Finished, u32, String, Option<u64>) {
    let exe = build_c_helper("biostacks-writer", include_str!("writer.c"), &["-O1"]);
    let named = ScratchFile::new("bks"); // bks-PID-N: a name of its own, at most 15 bytes
    std::os::unix::fs::symlink(&exe, &named.0).unwrap();
    let child = Command::new(&named.0).arg(target).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id();
    wait_sleeping(pid, Duration::from_secs(10));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();

    let mut run = Running::start_with_env(TOOL, args, env);
    run.wait_attached(Duration::from_secs(20));
    let mut bpftrace = anchor.then(|| {
        let program = format!(
            "tracepoint:block:block_io_start /pid == {pid}/ {{ @s[args->dev, args->sector] = 1; }} \
             tracepoint:block:block_rq_complete /@s[args->dev, args->sector]/ {{ @done = count(); \
             delete(@s[args->dev, args->sector]); }} BEGIN {{ printf(\"Attached\\n\"); }}"
        );
        let mut child = KillOnDrop(
            Command::new("bpftrace")
                .args(["-e", &program])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut out = BufReader::new(child.0.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("Attached") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "bpftrace ended before attaching");
        }
        (child, out)
    });
    go_and_wait(&mut helper.0);
    run.signal(libc::SIGINT);
    let anchored = bpftrace.as_mut().map(|(child, out)| {
        // SAFETY: kill(2) on our own child; SIGINT makes bpftrace print its maps.
        unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        rest.lines().find_map(|l| l.strip_prefix("@done: ")).map_or(0, |v| v.trim().parse::<u64>().unwrap())
    });
    (run.finish(Duration::from_secs(30)), pid, comm, anchored)
}

/// The text sections (a `comm pid disk` line, the frames, the histogram) whose first line is `head`.
fn text_sections<'a>(stdout: &'a str, head: &str) -> Vec<&'a str> {
    stdout
        .split("\n\n")
        .map(|s| s.strip_prefix(BANNER).unwrap_or(s).trim_start_matches('\n'))
        .filter(|s| s.lines().next() == Some(head))
        .collect()
}

/// Asserts a stack names the block layer's submission and the direct-I/O write path. Where the request is noted at
/// block_io_start (6.5+) the stack passes submit_bio; where it is noted at block_rq_insert (older kernels), it is
/// the plug's flush (blk_finish_plug, blk_mq_flush_plug_list) that inserts it.
fn assert_write_path(frames: &[String], all: &str) {
    assert!(
        frames.iter().any(|f| f.contains("submit_bio") || f.contains("flush_plug") || f.contains("finish_plug")),
        "no block submission frame in {frames:?}:\n{all}"
    );
    assert!(
        frames.iter().any(|f| f.contains("dio") || f.contains("direct")),
        "no direct-I/O frame in {frames:?}:\n{all}"
    );
    assert!(!frames.iter().any(|f| f.starts_with("bpf_")), "tracing frames left in {frames:?}");
}

/// Checks text output: the helper's sections hold its writes exactly, under write-path stacks.
fn assert_text(stdout: &str, pid: u32, comm: &str, disk: &str, unit: &str) {
    assert!(stdout.starts_with(BANNER), "{stdout}");
    let head = format!("{comm:<14.14} {pid:<6} {disk:<7}");
    let sections = text_sections(stdout, &head);
    assert!(!sections.is_empty(), "no section headed {head:?}:\n{stdout}");
    let mut total = 0;
    for section in sections {
        let frames: Vec<String> =
            section.lines().skip(1).take_while(|l| !l.contains(" : count ")).map(str::to_string).collect();
        assert_write_path(&frames, stdout);
        assert!(section.contains(&format!("     {unit:<19} : count     distribution\n")), "{section}");
        total += hist_rows(section).iter().map(|&(_, _, n)| n).sum::<u64>();
    }
    assert_eq!(total, WRITES, "{stdout}");
}

#[test]
fn root_disk_counts_each_write_under_its_stack() {
    let _turn = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let file = root_disk_file("text");
    let (done, pid, comm) = trace_helper(&file.0, &[], &[]);
    done.assert_success();
    assert_text(&done.stdout, pid, &comm, &root_disk(), "usecs");
    done.assert_no_programs_left();
}

#[test]
fn root_disk_json_with_the_disk_filter() {
    let _turn = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let file = root_disk_file("json");
    let disk = root_disk();
    let (done, pid, comm) = trace_helper(&file.0, &["-j", "-d", &disk], &[]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert!(lines.iter().all(|l| l["disk"] == disk.as_str()), "{}", done.stdout);
    let ours: Vec<_> = lines.iter().filter(|l| l["pid"] == pid).collect();
    assert!(!ours.is_empty(), "no line for the helper:\n{}", done.stdout);
    let mut count = 0;
    for line in ours {
        assert_eq!(line["comm"], comm.as_str());
        assert_eq!(line["unit"], "usecs");
        let frames: Vec<String> =
            line["stack"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect();
        assert_write_path(&frames, &done.stdout);
        let buckets: u64 = line["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(Some(buckets), line["count"].as_u64());
        assert!(line["sum_ns"].as_u64().unwrap() > 0);
        count += buckets;
    }
    assert_eq!(count, WRITES, "{}", done.stdout);
}

#[test]
fn root_disk_forced_raw_tp_in_milliseconds() {
    let _turn = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let file = root_disk_file("raw");
    // The raw_tp half of each pair, as on a kernel whose tp_btf this tool cannot use.
    let (done, pid, comm) = trace_helper(&file.0, &["-m"], &[("COREBPF_ATTACH", "raw_tp")]);
    done.assert_success();
    assert_text(&done.stdout, pid, &comm, &root_disk(), "msecs");
}

#[test]
fn a_disk_of_its_own() {
    let dev = LoopDevice::new("own");
    let name = dev.name();
    let (done, pid, comm) = trace_helper(&dev.path, &["-d", &name], &[]);
    done.assert_success();
    assert_text(&done.stdout, pid, &comm, &name, "usecs");
}

/// Side by side with the bpftrace anchor of bench.toml's kind (libbpf-tools' biostacks needs fentry, which this
/// host refuses), on the same requests: both count the helper's 50. Host only: it needs block_io_start (6.5+)
/// and bpftrace, which the kernel matrix's guests lack.
#[test]
fn agrees_with_bpftrace_on_a_disk_of_its_own() {
    let dev = LoopDevice::new("anchor");
    let name = dev.name();
    let (done, pid, comm, anchored) = trace_helper_beside(&dev.path, &["-d", &name], &[], true);
    done.assert_success();
    assert_text(&done.stdout, pid, &comm, &name, "usecs");
    assert_eq!(anchored, Some(WRITES), "bpftrace's count");
}

#[test]
fn another_disk_filters_everything_out() {
    let dev = LoopDevice::new("other");
    let other = LoopDevice::new("filter");
    let (done, pid, _) = trace_helper(&dev.path, &["-j", "-d", &other.name()], &[]);
    done.assert_success();
    assert!(json_lines(&done.stdout).iter().all(|l| l["pid"] != pid), "{}", done.stdout);
}

#[test]
fn bad_disk_and_duration_are_one_line() {
    let done = run_tool(TOOL, &["-d", "nosuchdisk"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    let done = run_tool(TOOL, &["0"]);
    assert_eq!(done.status.code(), Some(2), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
}

/// `--prometheus` on a disk of its own: the helper's 50 requests are in the histograms of its process name and
/// the loop device, under folded stacks (outermost first) that reach the block submission path; promtool
/// accepts the exposition.
#[test]
fn prometheus_histograms_hold_every_request_under_its_stack() {
    use corebpf_tests::prom::{promtool_accepts, scrape, serving};
    let dev = LoopDevice::new("prom");
    let name = dev.name();
    let exe = build_c_helper("biostacks-writer", include_str!("writer.c"), &["-O1"]);
    let named = ScratchFile::new("bks");
    std::os::unix::fs::symlink(&exe, &named.0).unwrap();
    let child = Command::new(&named.0).arg(&dev.path).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut helper = KillOnDrop(child);
    let pid = helper.0.id();
    wait_sleeping(pid, Duration::from_secs(10));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
    let (tool, addr) = serving(TOOL, &["-d", &name]);
    go_and_wait(&mut helper.0);
    let text = scrape(&addr);
    promtool_accepts(&text);
    let ours = format!("comm=\"{comm}\",device=\"{name}\",stack=\"");
    let mut count = 0.0;
    for line in text.lines().filter_map(|l| l.strip_prefix("corebpf_biostacks_io_latency_seconds_count{")) {
        let Some(rest) = line.strip_prefix(ours.as_str()) else { continue };
        let (stack, value) = rest.rsplit_once("\"} ").unwrap();
        let frames: Vec<String> = stack.split(';').rev().map(String::from).collect();
        assert_write_path(&frames, &text);
        count += value.parse::<f64>().unwrap();
    }
    assert_eq!(count, WRITES as f64, "{text}");
    tool.signal(libc::SIGTERM);
    tool.finish(Duration::from_secs(20)).assert_success();
}

/// `--heatmap` on a disk of its own: a column each second while tracing, every histogram added up; over the run
/// the cells hold exactly what the JSON report's buckets hold (the helper's 50 requests among them), slot by slot.
#[test]
fn heat_map_holds_every_request_of_the_report() {
    let dev = LoopDevice::new("heat");
    let name = dev.name();
    let svg = std::env::temp_dir().join(format!("corebpf-heatmap-biostacks-{}.svg", std::process::id()));
    let svg_arg = svg.to_str().unwrap().to_string();
    let (done, pid, _) = trace_helper(&dev.path, &["-d", &name, "-j", "--heatmap", &svg_arg], &[]);
    done.assert_success();
    let text = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    let lines = json_lines(&done.stdout);
    let helper: u64 = lines.iter().filter(|l| l["pid"] == pid).map(|l| l["count"].as_u64().unwrap()).sum();
    assert_eq!(helper, WRITES, "{}", done.stdout);
    let report = json_bucket_sums(&lines, "time");
    assert_eq!(report.len(), 1, "one report: {}", done.stdout);
    let mut drawn: Vec<u64> = Vec::new();
    for column in heatmap_non_empty_columns(&text) {
        if drawn.len() < column.len() {
            drawn.resize(column.len(), 0);
        }
        drawn.iter_mut().zip(&column).for_each(|(d, n)| *d += n);
    }
    assert_eq!(drawn, report[0], "{}\n{text}", done.stdout);
    assert!(text.contains("(usecs)"), "the unit is on the axis");
}
