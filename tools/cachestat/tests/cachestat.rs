// SPDX-License-Identifier: Apache-2.0 OR MIT
//! cachestat against a helper whose page cache traffic is known (tests/pages.c): a file of N pages written,
//! synced and dropped from the page cache (POSIX_FADV_DONTNEED on that file only; mincore must then find none of
//! its pages cached), read once (N misses), read again (N hits), read through a mapping once dropped again, and M pages written into a new file (M dirtied
//! pages). cachestat is system-wide, as BCC's: other processes add to every column, so the checks are lower
//! bounds. Each read or write runs inside one long interval that SIGINT ends, so the figures of one step are in
//! one row. Also: -T and interval/count output, bad input, SIGTERM and a closed pipe.

use std::process::Command;
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const WAIT: Duration = Duration::from_secs(30);
const HEADER: &str = "    HITS   MISSES  DIRTIES HITRATIO   BUFFERS_MB  CACHED_MB";
/// Pages of the file read (8 MiB) and of the file written.
const N: u64 = 2048;
const M: u64 = 1000;

fn helper(args: &[&str]) -> u64 {
    let exe = build_c_helper("cachestat-pages", include_str!("pages.c"), &["-O1"]);
    let out = Command::new(exe).args(args).output().expect("cachestat-pages");
    assert!(out.status.success(), "pages {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("a number")
}

/// A file of N pages on the root filesystem, synced and out of the page cache.
fn uncached_file() -> ScratchFile {
    let file = ScratchFile::new("cachestat");
    let cached = helper(&["prepare", file.0.to_str().unwrap(), &N.to_string()]);
    assert_eq!(cached, 0, "the file's pages are still cached after POSIX_FADV_DONTNEED");
    file
}

/// Runs cachestat with `args` and a 100 s interval around `step`, ends it with SIGINT and returns its output:
/// the header (text) and the one row of the interval SIGINT cut short.
fn around(args: &[&str], step: impl FnOnce()) -> Finished {
    let mut all = args.to_vec();
    all.push("100");
    let mut run = Running::start(TOOL, &all);
    run.wait_attached(WAIT);
    step();
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The columns of a text row: hits, misses, dirties, the ratio in percent, buffers and cached MB.
fn columns(line: &str) -> (i64, i64, u64, f64, u64, u64) {
    assert_eq!(line.len(), HEADER.len(), "BCC's widths: {line:?}");
    let v: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(v.len(), 6, "{line:?}");
    let ratio = v[3].strip_suffix('%').unwrap_or_else(|| panic!("{line:?}"));
    (
        v[0].parse().unwrap(),
        v[1].parse().unwrap(),
        v[2].parse().unwrap(),
        ratio.parse().unwrap(),
        v[4].parse().unwrap(),
        v[5].parse().unwrap(),
    )
}

/// The only row of a run of `around` in text.
fn only_row(done: &Finished) -> (i64, i64, u64, f64, u64, u64) {
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", done.stdout);
    assert_eq!(lines[0], HEADER);
    columns(lines[1])
}

/// The text columns through the three steps. BCC takes the pages dirtied in an interval off its misses (pages a
/// write adds are no read misses), and the system dirties pages all the time (file system metadata at least), so
/// the misses are checked with the interval's DIRTIES added back.
fn text_steps(path: &str) {
    let done = around(&[], || assert_eq!(helper(&["read", path]), N));
    let (_, misses, dirties, _, _, cached) = only_row(&done);
    assert!(misses + dirties as i64 >= N as i64, "{N} pages read from disk, {misses} misses:\n{}", done.stdout);
    assert!(cached > 0, "{}", done.stdout);

    let done = around(&[], || assert_eq!(helper(&["read", path]), N));
    let (hits, _, _, ratio, _, _) = only_row(&done);
    assert!(hits >= N as i64, "{N} cached pages read, {hits} hits:\n{}", done.stdout);
    assert!(ratio > 0.0 && ratio <= 100.0, "{}", done.stdout);

    let written = ScratchFile::new("cachestat-w");
    let done = around(&[], || assert_eq!(helper(&["write", written.0.to_str().unwrap(), &M.to_string()]), M));
    let (_, _, dirties, _, _, _) = only_row(&done);
    assert!(dirties >= M, "{M} pages written, {dirties} dirties:\n{}", done.stdout);
}

/// The same steps in JSON, with the raw counters.
fn json_steps(path: &str) {
    let done = around(&["--json"], || assert_eq!(helper(&["read", path]), N));
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    let r = &lines[0];
    let counts = &r["counts"];
    assert!(counts["added"].as_u64().unwrap() >= N, "{r}");
    let dirtied = counts["dirtied"].as_i64().unwrap();
    assert!(r["misses"].as_i64().unwrap() + dirtied >= N as i64, "{r}");
    assert_eq!(r["interval_s"], 100, "{r}");
    assert!(r["cached_kb"].as_u64().unwrap() > 0, "{r}");
    let source = r["source"].as_str().unwrap();
    assert!(source == "tracepoints" || source == "functions", "{r}");
    if source == "tracepoints" {
        // Pages, counted once per read.
        assert!(counts["accessed"].as_u64().unwrap() >= N, "{r}");
        assert!(counts["buffers_dirtied"].is_null(), "{r}");
    }

    let done = around(&["-j"], || assert_eq!(helper(&["read", path]), N));
    let r = &json_lines(&done.stdout)[0];
    assert!(r["hits"].as_i64().unwrap() >= N as i64, "{r}");
    let ratio = r["hit_ratio"].as_f64().unwrap();
    assert!(ratio > 0.0 && ratio <= 100.0, "{r}");

    let written = ScratchFile::new("cachestat-w");
    let done = around(&["-j"], || assert_eq!(helper(&["write", written.0.to_str().unwrap(), &M.to_string()]), M));
    let r = &json_lines(&done.stdout)[0];
    assert!(r["dirties"].as_u64().unwrap() >= M, "{r}");
    if r["source"] == "tracepoints" {
        assert_eq!(r["dirties"], r["counts"]["dirtied"], "{r}");
    }
}

/// Reads through a mapping: the kernel-function path sees the pages added (mapped reads mark no page accessed
/// there, so BCC's misses stay low), the tracepoint path counts the faults as accesses too, so the misses show.
fn mapped_step(path: &str) {
    let done = around(&["-j"], || assert_eq!(helper(&["map", path]), N));
    let r = &json_lines(&done.stdout)[0];
    assert!(r["counts"]["added"].as_u64().unwrap() >= N, "{r}");
    if r["source"] == "tracepoints" {
        assert!(r["counts"]["accessed"].as_u64().unwrap() >= N, "{r}");
        let dirtied = r["counts"]["dirtied"].as_i64().unwrap();
        assert!(r["misses"].as_i64().unwrap() + dirtied >= N as i64, "{r}");
    }
}

/// `--prometheus`: the raw counters, cumulative; reading the dropped file adds at least its pages.
fn prometheus_step(path: &str) {
    let (run, addr) = corebpf_tests::prom::serving(TOOL, &[]);
    let series = |text: &str, event: &str| {
        ["pages", "calls"]
            .iter()
            .find_map(|unit| {
                let name = format!("corebpf_cachestat_page_cache_events_total{{event=\"{event}\",unit=\"{unit}\"}}");
                corebpf_tests::prom::sample(text, &name)
            })
            .unwrap_or_else(|| panic!("no {event} series: {text}"))
    };
    let before = corebpf_tests::prom::scrape(&addr);
    assert_eq!(helper(&["read", path]), N);
    let after = corebpf_tests::prom::scrape(&addr);
    run.signal(libc::SIGINT);
    run.finish(WAIT).assert_success();
    corebpf_tests::prom::promtool_accepts(&after);
    assert!(series(&after, "added") - series(&before, "added") >= N as f64, "{before}\n{after}");
    assert!(series(&after, "accessed") >= series(&before, "accessed"), "{after}");
    assert!(after.contains("corebpf_attach_info{tool=\"cachestat\",mechanism=\""), "{after}");
}

/// One test for every step that moves pages, so that they do not run beside each other.
#[test]
fn reads_miss_then_hit_and_writes_dirty() {
    let file = uncached_file();
    let path = file.0.to_str().unwrap().to_string();
    text_steps(&path);
    drop(file);
    let file = uncached_file();
    json_steps(file.0.to_str().unwrap());
    drop(file);
    let file = uncached_file();
    mapped_step(file.0.to_str().unwrap());
}

/// Its own test, outside the kernel matrix (the guests have no promtool): its bounds hold beside the other steps.
#[test]
fn prometheus_counts_a_dropped_files_reads() {
    let file = uncached_file();
    prometheus_step(file.0.to_str().unwrap());
}

#[test]
fn timestamps_interval_and_count() {
    let done = run_tool(TOOL, &["-T", "1", "2"]);
    done.assert_success();
    done.assert_no_programs_left();
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two rows:\n{}", done.stdout);
    assert_eq!(lines[0], format!("{:<8} {HEADER}", "TIME"));
    for l in &lines[1..] {
        let (time, rest) = l.split_at(9);
        let t: Vec<&str> = time.trim_end().split(':').collect();
        assert!(t.len() == 3 && t.iter().all(|p| p.len() == 2 && p.parse::<u8>().is_ok()), "{l:?}");
        columns(rest);
    }
}

#[test]
fn bad_input_is_refused() {
    for args in [&["0"][..], &["x"], &["1", "0"], &["1", "x"], &["-x"], &["1", "2", "3"]] {
        usage::assert_refused(TOOL, args, 2, "");
    }
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    pipe::assert_sigterm_and_closed_pipe_end_cleanly(TOOL, &["1"], "HITS", "    HITS", || {});
}
