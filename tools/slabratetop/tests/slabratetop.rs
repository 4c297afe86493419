// SPDX-License-Identifier: Apache-2.0 OR MIT
//! slabratetop against allocations of known count made by a C helper: after "go" it opens and closes N4 UDP/IPv4
//! and N6 UDP/IPv6 sockets, so under -p its rows are exact: "UDP" N4, "UDPv6" N6 and "sock_inode_cache" N4+N6
//! allocations, each of the cache's object size (/sys/kernel/slab/NAME/slab_size). Without -p other processes
//! share the caches, so the helper's are a lower bound there. Checked: exact JSON counts and bytes on every attach
//! mechanism (tp_btf, raw_tp, tracepoint; the classic tracepoint's record names the cache only on recent kernels)
//! in the same run, the screen's header, rows, order and -r, the clear-screen
//! escape (absent with -C), the same exact counts from --prometheus, SIGTERM, a closed pipe and bad input.
//! libbpf-tools' slabratetop needs a kprobe on kmem_cache_alloc(), which this host lacks, so there is no
//! side-by-side comparison here.

use std::collections::HashMap;
use std::process::{Command, Stdio};

use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::sock::{start_attached, WAIT};
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const BANNER: &str = "Tracing... Output every";
const HELPER: &str = include_str!("sockets.c");
const N4: u64 = 37;
const N6: u64 = 23;

/// The helper, started and waiting for "go".
fn helper() -> KillOnDrop {
    let exe = build_c_helper("slabratetop-sockets", HELPER, &["-O1"]);
    let child = Command::new(exe)
        .args([N4.to_string(), N6.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("slabratetop-sockets");
    KillOnDrop(child)
}

/// The size of one object of slab cache `name`, as the kernel hands it out.
fn object_size(name: &str) -> u64 {
    let path = format!("/sys/kernel/slab/{name}/slab_size");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")).trim().parse().unwrap()
}

/// True if the classic tracepoint's record carries the cache's name (else the tool shows allocating functions there).
fn record_has_name() -> bool {
    let format = std::fs::read_to_string("/sys/kernel/tracing/events/kmem/kmem_cache_alloc/format")
        .or_else(|_| std::fs::read_to_string("/sys/kernel/debug/tracing/events/kmem/kmem_cache_alloc/format"))
        .expect("kmem_cache_alloc's format in tracefs");
    format.contains("char[] name;")
}

/// Starts slabratetop and waits until its program is attached.
fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    start_attached("slabratetop", args, env, 1)
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// (allocations, bytes) per cache, summed over the intervals of a JSON run.
fn json_totals(stdout: &str) -> HashMap<String, (u64, u64)> {
    let mut totals = HashMap::new();
    for r in json_lines(stdout) {
        let e = totals.entry(r["cache"].as_str().unwrap().to_string()).or_insert((0, 0));
        e.0 += r["allocs"].as_u64().unwrap();
        e.1 += r["bytes"].as_u64().unwrap();
    }
    totals
}

/// What the helper's sockets allocate, exactly: (cache, allocations), each cache under the name the kernel gives it.
fn expected() -> Vec<(String, u64)> {
    [("UDP", N4), ("UDPv6", N6), ("sock_inode_cache", N4 + N6)].into_iter().map(|(c, n)| (kernel_name(c), n)).collect()
}

/// The name under which cache `name`'s allocations are made: the kernel merges caches of one size and flags into
/// one, named after the first made (in the matrix's guests UDP's sockets come from `signal_cache`). Its aliases
/// link to the same directory in /sys/kernel/slab, and /proc/slabinfo lists it by that name only.
fn kernel_name(name: &str) -> String {
    let listed: Vec<String> = std::fs::read_to_string("/proc/slabinfo")
        .unwrap()
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    if listed.iter().any(|l| l == name) {
        return name.to_string();
    }
    let target = std::fs::canonicalize(format!("/sys/kernel/slab/{name}")).unwrap();
    listed
        .into_iter()
        .find(|l| std::fs::canonicalize(format!("/sys/kernel/slab/{l}")).is_ok_and(|t| t == target))
        .unwrap_or_else(|| panic!("no cache in /proc/slabinfo shares {name}'s {}", target.display()))
}

#[test]
fn json_exact_allocations_on_every_attach_mechanism() {
    let mut h = helper();
    let pid = h.0.id().to_string();
    let runs: Vec<(&str, Running)> = ["tp_btf", "raw_tp", "tracepoint"]
        .into_iter()
        .map(|mech| (mech, start(&["--json", "-p", &pid, "1"], &[("COREBPF_ATTACH", mech)])))
        .collect();
    let all = start(&["--json", "1"], &[]);
    go_and_wait(&mut h.0);
    for (mech, run) in runs {
        let totals = json_totals(&stop(run).stdout);
        if mech == "tracepoint" && !record_has_name() {
            // The record names no cache (6.1 up to the kernel that added `name`): rows are allocating functions.
            assert!(totals.keys().all(|k| k.ends_with("()") || k.starts_with("0x")), "{mech}: {totals:?}");
            let allocs: u64 = totals.values().map(|t| t.0).sum();
            assert!(allocs >= 2 * (N4 + N6), "{mech}: {totals:?}");
            continue;
        }
        for (cache, n) in expected() {
            let got = totals.get(&cache).copied().unwrap_or_else(|| panic!("{mech}: no {cache} row: {totals:?}"));
            assert_eq!(got, (n, n * object_size(&cache)), "{mech}: {cache}");
        }
    }
    // Unfiltered, the helper's allocations are among everyone's, each of the cache's size.
    let totals = json_totals(&stop(all).stdout);
    for (cache, n) in expected() {
        let (allocs, bytes) = totals[&cache];
        assert!(allocs >= n, "{cache}: {allocs} < {n}");
        assert_eq!(bytes, allocs * object_size(&cache), "{cache}");
    }
}

/// The rows of every screen of `stdout`: (cache, allocations, bytes), checking the header above them.
fn screens(stdout: &str) -> Vec<Vec<(String, u64, u64)>> {
    let mut all = Vec::new();
    let mut lines = stdout.lines().peekable();
    while let Some(line) = lines.next() {
        if line.contains(" loadavg: ") {
            assert_eq!(lines.next(), Some(""));
            assert_eq!(lines.next(), Some("CACHE                            ALLOCS      BYTES"));
            let mut rows = Vec::new();
            while let Some(row) = lines.next_if(|l| !l.is_empty() && !l.starts_with("Detaching")) {
                let f: Vec<&str> = row.split_whitespace().collect();
                assert_eq!(f.len(), 3, "{row:?}");
                assert_eq!(row.len(), 50, "BCC's widths: {row:?}");
                rows.push((f[0].to_string(), f[1].parse().unwrap(), f[2].parse().unwrap()));
            }
            all.push(rows);
        }
    }
    all
}

#[test]
fn screen_rows_order_and_row_limit() {
    let mut h = helper();
    let pid = h.0.id().to_string();
    // A long interval, ended by Ctrl-C: one screen with everything.
    let by_size = start(&["-C", "-p", &pid, "60"], &[]);
    let by_count = start(&["-C", "-p", &pid, "-s", "count", "60"], &[]);
    let by_name = start(&["-C", "-p", &pid, "--sort", "name", "-r", "2", "60"], &[]);
    go_and_wait(&mut h.0);
    let by_size = stop(by_size).stdout;
    assert!(by_size.starts_with(BANNER), "{by_size}");
    assert!(by_size.ends_with("Detaching...\n"), "{by_size}");
    let rows = &screens(&by_size)[..];
    let [rows] = rows else { panic!("one screen expected: {by_size}") };
    for (cache, n) in expected() {
        let line = format!("{cache:<32} {n:>6} {:>10}", n * object_size(&cache));
        assert!(by_size.lines().any(|l| l == line), "no {line:?} in\n{by_size}");
    }
    assert!(rows.windows(2).all(|w| w[0].2 >= w[1].2), "by bytes: {rows:?}");

    let count = stop(by_count).stdout;
    let rows = &screens(&count)[0];
    assert!(rows.windows(2).all(|w| w[0].1 >= w[1].1), "by count: {rows:?}");
    assert!(rows.iter().any(|r| r.0 == "UDPv6"), "{count}");

    let name = stop(by_name).stdout;
    let rows = &screens(&name)[0];
    assert_eq!(rows.len(), 2, "-r 2: {name}");
    assert!(rows[0].0.to_lowercase() <= rows[1].0.to_lowercase(), "by name: {rows:?}");
}

#[test]
fn screen_is_cleared_unless_c_and_count_ends_it() {
    for (args, escapes) in [(&["1", "2"][..], 2), (&["-C", "1", "2"][..], 0)] {
        let done = run_tool("slabratetop", args);
        done.assert_success();
        assert_eq!(done.stdout.matches("\x1b[H\x1b[2J").count(), escapes, "{args:?}: {:?}", done.stdout);
        assert_eq!(done.stdout.matches(" loadavg: ").count(), 2, "{args:?}: {:?}", done.stdout);
        assert!(done.stdout.starts_with(BANNER), "{:?}", done.stdout);
        assert!(done.stdout.ends_with("Detaching...\n"), "{:?}", done.stdout);
    }
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let mut run = Running::start("slabratetop", &["-C"]);
    run.wait_for_line(BANNER, WAIT);
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `slabratetop | head -1`: the banner is read, the pipe closes, the next screen ends the tool quietly.
    assert_ends_when_pipe_closes("slabratetop", &["-C"], BANNER, || {});
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&["-s", "bytes"][..], "invalid value", 2),
        (&["-r", "0"][..], "", 2),
        (&["0"][..], "not a number of seconds", 2),
        (&["1", "0"][..], "", 2),
        (&["1", "2", "3"][..], "unexpected argument", 2),
        (&["-p", "999999999"][..], "no process with PID", 1),
    ] {
        assert_refused("slabratetop", args, code, what);
    }
}

#[test]
fn prometheus_counts_exact_per_cache() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let mut h = helper();
    let pid = h.0.id().to_string();
    let (run, addr) = serving("slabratetop", &["-p", &pid]);
    go_and_wait(&mut h.0);
    let text = scrape(&addr);
    for (cache, n) in expected() {
        let allocs = sample(&text, &format!("corebpf_slabratetop_allocations_total{{cache=\"{cache}\"}}"));
        let bytes = sample(&text, &format!("corebpf_slabratetop_allocated_bytes_total{{cache=\"{cache}\"}}"));
        assert_eq!(allocs, Some(n as f64), "{cache}:\n{text}");
        assert_eq!(bytes, Some((n * object_size(&cache)) as f64), "{cache}:\n{text}");
    }
    promtool_accepts(&text);
    let done = stop(run);
    assert!(done.stderr.is_empty(), "{}", done.stderr);
}
