// SPDX-License-Identifier: Apache-2.0 OR MIT
//! syncsnoop against a helper (tests/syncs.c) that, once the tool is attached, calls fsync 3 times, fdatasync 4,
//! syncfs 2, sync_file_range 5 and msync 6 on a file of its own: with -p its PID, the tool shows exactly those
//! calls, with the helper's descriptor, at times (seconds since tracing started) that fit the helper's readings of
//! the monotonic clock before and after them.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const WANT: [(&str, u64); 5] = [("fdatasync", 4), ("fsync", 3), ("msync", 6), ("sync_file_range", 5), ("syncfs", 2)];

/// The helper's descriptor and its clock readings (seconds) before and after its calls.
struct Helper {
    fd: i64,
    t0: f64,
    t1: f64,
    /// When the tool was started (it began tracing after this, before t0).
    spawned: f64,
}

fn traced(args: &[&str]) -> (Helper, Finished) {
    let file = ScratchFile::new("syncsnoop");
    std::fs::write(&file.0, b"").unwrap();
    let exe = build_c_helper("syncsnoop-syncs", include_str!("syncs.c"), &["-O1"]);
    let mut helper =
        KillOnDrop(Command::new(exe).arg(&file.0).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap());
    let pid = helper.0.id().to_string();
    let mut all = args.to_vec();
    all.extend(["-p", &pid]);
    let spawned = monotonic_secs();
    let mut run = Running::start(TOOL, &all);
    run.wait_attached(Duration::from_secs(20));
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut text = String::new();
    helper.0.stdout.take().unwrap().read_to_string(&mut text).unwrap();
    assert!(helper.0.wait().unwrap().success(), "the helper failed");
    let f: Vec<&str> = text.split_whitespace().collect();
    let ns = |s: &str| s.parse::<u64>().unwrap() as f64 / 1e9;
    let h = Helper { fd: f[0].parse().unwrap(), t0: ns(f[1]), t1: ns(f[2]), spawned };
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    (h, done)
}

#[test]
fn every_sync_call_with_its_fd() {
    let (h, done) = traced(&["--json"]);
    let recs = json_lines(&done.stdout);
    let mut seen = BTreeMap::new();
    for r in &recs {
        *seen.entry(r["call"].as_str().unwrap()).or_insert(0u64) += 1;
        if r["call"] == "msync" {
            assert!(r["addr"].as_u64().is_some_and(|a| a > 0) && r["fd"].is_null(), "{r}");
        } else {
            assert_eq!(r["fd"], h.fd, "{r}");
        }
        assert_eq!(r["comm"], "syncsnoop-syncs", "{r}");
        // ts counts from the start of tracing, which came after the spawn and before the helper's first call.
        let ts = r["ts"].as_f64().unwrap();
        assert!(ts >= 0.0 && ts <= h.t1 - h.spawned, "{ts} not within [0, {}]: {r}", h.t1 - h.spawned);
    }
    let ts: Vec<f64> = recs.iter().map(|r| r["ts"].as_f64().unwrap()).collect();
    let spread = ts.iter().cloned().fold(f64::MIN, f64::max) - ts.iter().cloned().fold(f64::MAX, f64::min);
    assert!(spread <= h.t1 - h.t0, "the calls span {spread} s in ts, more than the helper's {} s", h.t1 - h.t0);
    assert_eq!(seen, BTreeMap::from(WANT), "{}", done.stdout);
}

#[test]
fn text_columns() {
    let (h, done) = traced(&[]);
    let mut lines = done.stdout.lines();
    assert_eq!(lines.next(), Some("TIME(s)            COMM             CALL"), "{}", done.stdout);
    let mut seen = BTreeMap::new();
    for line in lines {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols.len(), 3, "{line}");
        let ts: f64 = cols[0].parse().unwrap();
        assert!(h.t0 <= ts && ts <= h.t1 && cols[0].split('.').nth(1).unwrap().len() == 9, "{line}");
        assert_eq!(cols[1], "syncsnoop-syncs", "{line}");
        assert_eq!(&line[19..35], "syncsnoop-syncs ", "{line}");
        *seen.entry(cols[2]).or_insert(0u64) += 1;
    }
    assert_eq!(seen, BTreeMap::from(WANT), "{}", done.stdout);
}

#[test]
fn bad_input() {
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    let done = run_tool(TOOL, &["--bogus"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
}
