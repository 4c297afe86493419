// SPDX-License-Identifier: Apache-2.0 OR MIT
//! oomkill against a real OOM kill: a helper (tests/oomhog.c) joins a memory cgroup of its own with a 32 MiB limit
//! and touches memory until the kernel's OOM killer, confined to that cgroup, kills it. Two runs of the tool, one
//! with text and one with JSON output, must each show exactly one kill for the helper: triggered by the helper
//! itself (the allocating process), of the helper, with its name, and (where the kernel reports the victim's
//! memory, 6.8+) a size within the cgroup's limit. Debian's libbpf-tools oomkill cannot run beside it here: it
//! needs a kprobe on oom_kill_process, and this kernel has no kprobes.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::memcg::MemCgroup;
use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
const LIMIT: u64 = 32 << 20;

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

/// Whether this kernel's oom:mark_victim reports the victim's memory (6.8+).
fn kernel_reports_memory() -> bool {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"].iter().any(|t| {
        std::fs::read_to_string(format!("{t}/events/oom/mark_victim/format")).is_ok_and(|f| f.contains("anon_rss"))
    })
}

#[test]
fn one_kill_of_the_helper_triggered_by_itself() {
    let exe = build_c_helper("oomhog", include_str!("oomhog.c"), &["-O1"]);
    let comm: String = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
    let cgroup = MemCgroup::new("oomkill", LIMIT);
    let json = start(&["--json"]);
    let text = start(&[]);
    let mut hog =
        KillOnDrop(Command::new(&exe).arg(cgroup.procs()).stdin(Stdio::piped()).spawn().expect("start the helper"));
    let pid = hog.0.id();
    hog.0.stdin.take().unwrap().write_all(b"g").unwrap();
    let status = hog.0.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "the helper was not killed: {status}");
    let json = stop(json);
    let text = stop(text);
    drop(hog);
    drop(cgroup);

    let recs = json_lines(&json.stdout);
    let mine: Vec<&Value> = recs.iter().filter(|r| r["killed_pid"] == pid || r["triggered_pid"] == pid).collect();
    assert_eq!(mine.len(), 1, "one kill of {pid}: {mine:?}");
    let r = mine[0];
    let ids = [&r["killed_pid"], &r["triggered_pid"], &r["triggered_tid"]].map(|v| v.as_u64());
    assert_eq!(ids, [Some(pid as u64); 3], "the helper killed itself: {r}");
    assert_eq!((r["killed_comm"].as_str(), r["triggered_comm"].as_str()), (Some(comm.as_str()), Some(comm.as_str())));
    let pages = r["pages"].as_u64().unwrap();
    let page = 4096;
    if kernel_reports_memory() {
        // The helper's anonymous memory is what the cgroup holds, at most its limit (the kernel's per-CPU RSS
        // counters may lag by a few pages each); its file-backed pages (libc) were charged where first read.
        let anon = r["anon_rss_kb"].as_u64().unwrap() * 1024;
        assert!((LIMIT / 2..=LIMIT + (1 << 20)).contains(&anon), "{anon} bytes of anonymous memory: {r}");
        let rss = r["anon_rss_kb"].as_u64().unwrap()
            + r["file_rss_kb"].as_u64().unwrap()
            + r["shmem_rss_kb"].as_u64().unwrap();
        assert_eq!(rss * 1024 / page, pages, "{r}");
        assert!(r["total_vm_kb"].as_u64().unwrap() >= rss, "{r}");
    } else {
        assert_eq!(pages, 0, "{r}");
    }
    let loadavg = r["loadavg"].as_str().unwrap();
    assert_eq!(loadavg.split_whitespace().count(), 5, "{r}");

    assert_eq!(text.stdout.lines().next(), Some("Tracing OOM kills... Ctrl-C to stop."));
    let needle =
        format!(" Triggered by PID {pid} (\"{comm}\"), OOM kill of PID {pid} (\"{comm}\"), {pages} pages, loadavg: ");
    let lines: Vec<&str> = text.stdout.lines().filter(|l| l.contains(&format!("PID {pid} "))).collect();
    assert_eq!(lines.len(), 1, "{}", text.stdout);
    let line = lines[0];
    assert_eq!(line.find(&needle), Some(8), "{line}\nwanted {needle}");
    assert!(line.as_bytes()[2] == b':' && line.as_bytes()[5] == b':', "{line}");
    assert_eq!(line[needle.len() + 8..].split_whitespace().count(), 5, "{line}");
}

#[test]
fn bad_flag_is_a_usage_error() {
    let done = run_tool(TOOL, &["--pages"]);
    assert_eq!(done.status.code(), Some(2), "stderr: {}", done.stderr);
    assert!(done.stdout.is_empty());
    let done = run_tool(TOOL, &["10"]);
    assert_eq!(done.status.code(), Some(2), "stderr: {}", done.stderr);
}
