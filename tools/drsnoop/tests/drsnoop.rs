// SPDX-License-Identifier: Apache-2.0 OR MIT
//! drsnoop against a helper (tests/cachefill.c) that writes 64 MiB of page cache inside a memory cgroup of its own
//! limited to 16 MiB: to stay within its limit the cgroup reclaims, in the helper's own task, through the memory
//! cgroup's reclaim (vmscan:mm_vmscan_memcg_reclaim_*, not the system-wide direct-reclaim tracepoints, which fire
//! only when the whole machine is short of memory). Runs filtered by the helper's PID and TID and unfiltered must
//! show the same reclaims of the helper, each with a latency within the helper's run and, together, at least
//! half the pages it wrote beyond the limit; filters that exclude it (another PID, a name, --global-only) must
//! show none of them. Debian's libbpf-tools drsnoop (system-wide direct reclaim only) runs beside them and, like
//! --global-only, must show none of the helper's reclaims.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corebpf_tests::anchor::Anchor;
use corebpf_tests::memcg::MemCgroup;
use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
const LIMIT_MIB: u64 = 16;
const WRITE_MIB: u64 = 64;

fn start(args: &[&str]) -> Running {
    let mut run = Running::start(TOOL, args);
    run.wait_attached(Duration::from_secs(20));
    run
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The records of process `pid`.
fn of_pid(recs: &[Value], pid: u32) -> Vec<Value> {
    recs.iter().filter(|r| r["pid"] == pid).cloned().collect()
}

/// What two runs must agree on for each reclaim (each run's programs read their own clock: the times differ).
fn keys(recs: &[Value]) -> Vec<String> {
    recs.iter().map(|r| format!("{} {} {} {} {}", r["pid"], r["tid"], r["kind"], r["pages"], r["comm"])).collect()
}

#[test]
fn memcg_reclaims_of_the_helper_with_filters_and_anchor() {
    let exe = build_c_helper("cachefill", include_str!("cachefill.c"), &["-O1"]);
    let comm: String = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
    let cgroup = MemCgroup::new("drsnoop", LIMIT_MIB << 20);
    let file = ScratchFile::new("drsnoop");
    let mut helper = KillOnDrop(
        Command::new(&exe)
            .arg(cgroup.procs())
            .arg(&file.0)
            .arg(WRITE_MIB.to_string())
            .stdin(Stdio::piped())
            .spawn()
            .expect("start the helper"),
    );
    let pid = helper.0.id();
    let p = pid.to_string();
    wait_sleeping(pid, Duration::from_secs(10));
    let other = KillOnDrop(Command::new("sleep").arg("600").spawn().unwrap());
    let o = other.0.id().to_string();

    let anchor = Anchor::start("drsnoop", &["-p", &p], "COMM");
    let all = start(&["--json"]);
    let by_pid = start(&["--json", "-p", &p]);
    let by_tid = start(&["--json", "-t", &p]);
    let by_other = start(&["--json", "-p", &o]);
    let by_name = start(&["--json", "-n", "no-such-name"]);
    let global = start(&["--json", "--global-only", "-p", &p]);
    let text = start(&["-T", "-U", "-e", "-n", &comm]);

    let began = Instant::now();
    helper.0.stdin.take().unwrap().write_all(b"g").unwrap();
    let status = helper.0.wait().unwrap();
    let ran = began.elapsed();
    assert!(status.success(), "the helper failed: {status}");

    let seen = anchor.finish();
    let [all, by_pid, by_tid, by_other, by_name, global, text] =
        [all, by_pid, by_tid, by_other, by_name, global, text].map(stop);
    drop(helper);
    drop(cgroup);

    let mine = of_pid(&json_lines(&all.stdout), pid);
    assert!(!mine.is_empty(), "no reclaim by the helper {pid}:\n{}", all.stdout);
    let filtered = json_lines(&by_pid.stdout);
    assert_eq!(filtered.len(), mine.len(), "{}", by_pid.stdout);
    assert_eq!(keys(&filtered), keys(&mine), "-p {pid} shows other reclaims than the unfiltered run's");
    let by_tid = json_lines(&by_tid.stdout);
    assert_eq!(keys(&by_tid), keys(&mine), "-t {pid}");
    let mut pages = 0;
    for r in &mine {
        assert_eq!((r["tid"].as_u64(), r["kind"].as_str()), (Some(pid as u64), Some("memcg")), "{r}");
        assert_eq!((r["comm"].as_str(), r["uid"].as_u64()), (Some(comm.as_str()), Some(0)), "{r}");
        let lat = r["latency_ns"].as_u64().unwrap();
        assert!(lat > 0 && lat < ran.as_nanos() as u64, "latency {lat} ns outside the helper's run {ran:?}: {r}");
        pages += r["pages"].as_u64().unwrap();
    }
    let beyond = (WRITE_MIB - LIMIT_MIB) << 20 >> 12;
    assert!(pages >= beyond / 2, "{pages} pages reclaimed for {beyond} pages written beyond the limit");

    for (label, run) in [("-p other", &by_other), ("-n", &by_name), ("--global-only", &global)] {
        assert!(of_pid(&json_lines(&run.stdout), pid).is_empty(), "{label} shows the helper:\n{}", run.stdout);
    }
    assert!(json_lines(&by_other.stdout).is_empty(), "a sleeping process reclaimed:\n{}", by_other.stdout);
    let rows: Vec<&str> = seen.lines().filter(|l| l.split_whitespace().nth(2) == Some(p.as_str())).collect();
    assert!(rows.is_empty(), "libbpf-tools saw direct reclaim by the helper: {rows:?}");

    let mut lines = text.stdout.lines();
    assert_eq!(lines.next(), Some("Tracing direct reclaim events... Hit Ctrl-C to end."));
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["TIME(s)", "UID", "COMM", "PID", "LAT(ms)", "PAGES", "FREE(KB)"]);
    let rows: Vec<Vec<&str>> =
        lines.map(|l| l.split_whitespace().collect()).filter(|f: &Vec<&str>| f.get(3) == Some(&p.as_str())).collect();
    assert_eq!(rows.len(), mine.len(), "{}", text.stdout);
    for (f, r) in rows.iter().zip(&mine) {
        assert_eq!(f.len(), 7, "{f:?}");
        assert_eq!((f[1], f[2]), ("0", &comm[..comm.len().min(14)]), "{f:?}");
        assert_eq!(f[5], r["pages"].to_string(), "{f:?} vs {r}");
        assert!(f[0].parse::<f64>().unwrap() >= 0.0 && f[6].parse::<u64>().unwrap() > 0, "{f:?}");
    }
}

#[test]
fn duration_ends_the_trace() {
    let started = Instant::now();
    let done = start(&["-d", "1"]).finish(Duration::from_secs(20));
    done.assert_success();
    assert!(started.elapsed() >= Duration::from_secs(1));
    let mut lines = done.stdout.lines();
    assert_eq!(lines.next(), Some("Tracing direct reclaim events for 1 secs."));
    assert_eq!(
        lines.next().map(|h| h.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["COMM", "PID", "LAT(ms)", "PAGES"])
    );
    done.assert_no_programs_left();
}

#[test]
fn bad_input() {
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    for args in [&["-d", "0"][..], &["-p", "x"], &["-u", "no-such-user-here"], &["--bogus"]] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
    }
}
