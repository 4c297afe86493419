// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ustat against processes whose events are known, summed per PID over its JSON reports: native stand-ins for a
//! JVM and for CPython firing each counted probe a known number of times (exact in every column; one started
//! before ustat, one after it, both ending while it runs); two real JVMs, one with HotSpot's extended probes
//! (its method calls and allocations, at least those the program made) and one without (exactly its
//! System.gc() calls, at least its thread starts, no method call or allocation at all); a Python script's
//! gc.collect() calls, exact, in JSON and in BCC's screen; bad input.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use corebpf_tests::runtimes::Workload;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// The columns, as the JSON output names them.
const COLUMNS: [&str; 6] = ["method", "gc", "objnew", "cload", "excp", "thread"];
/// What the native stand-ins do (tests/sdt_runtime.c): method entries, collections, allocations, class loads,
/// exceptions, thread starts; the Python one only the first two.
const NATIVE_JAVA: [u64; 6] = [41, 7, 13, 5, 3, 2];
const NATIVE_PYTHON: [u64; 6] = [41, 7, 0, 0, 0, 0];

/// The sums of each column over the JSON reports of process `pid`, and how many of its rows say it exited.
fn sums(stdout: &str, pid: u32) -> ([u64; 6], usize) {
    let mut total = [0; 6];
    let mut exited = 0;
    for line in json_lines(stdout).iter().filter(|l| l["pid"] == pid) {
        for (sum, column) in total.iter_mut().zip(COLUMNS) {
            *sum += line[column].as_u64().unwrap_or_else(|| panic!("no {column}: {line}"));
        }
        exited += usize::from(line["exited"] == true);
    }
    (total, exited)
}

/// The JSON row of process `pid` in a report, before or after it exited: the text to wait for.
fn row_of(pid: u32, exited: bool) -> String {
    format!("\"pid\":{pid},\"exited\":{exited},")
}

/// A native stand-in, built for `language` ("java" or "python"), started and waiting for its go byte.
fn native(language: &str) -> KillOnDrop {
    native_named(language, "ustat-sdt")
}

/// [`native`] with its file name (and so its process name) `<language>-<suffix>`.
fn native_named(language: &str, suffix: &str) -> KillOnDrop {
    let exe = native_exe(language, suffix);
    let child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start helper");
    let helper = KillOnDrop(child);
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    helper
}

/// The executable of a native stand-in, built if need be. The file name tells ustat the language, as a runtime's
/// executable does.
fn native_exe(language: &str, suffix: &str) -> std::path::PathBuf {
    let flags: &[&str] = if language == "java" { &["-O1", "-DJAVA"] } else { &["-O1"] };
    build_c_helper(&format!("{language}-{suffix}"), include_str!("sdt_runtime.c"), flags)
}

/// Lets a native stand-in fire its probes and waits for it to end.
fn run_native(helper: &mut Child) {
    helper.stdin.take().unwrap().write_all(b"g").unwrap();
    let mut line = String::new();
    BufReader::new(helper.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    assert!(helper.wait().unwrap().success());
}

/// The test the kernel matrix runs (its guests have no runtime): the JVM stand-in is running when ustat starts;
/// the Python one starts after ustat's first report and is traced from the next scan on. Both end while ustat
/// runs, which keeps going; their rows add up to exactly what they did.
#[test]
fn native_runtimes_counted_exactly() {
    let mut java = native("java");
    let java_pid = java.0.id();
    // The Python stand-in starts later, but is built now: the kernel matrix prebuilds a test's helpers by running
    // it up to its first tool start.
    native_exe("python", "ustat-sdt");
    let mut run = Running::start(TOOL, &["-j", "1"]);
    run.wait_for_line(&row_of(java_pid, false), Duration::from_secs(60));
    let mut python = native("python");
    let python_pid = python.0.id();
    run.wait_for_line(&row_of(python_pid, false), Duration::from_secs(60));
    run_native(&mut java.0);
    run_native(&mut python.0);
    run.wait_for_line(&row_of(java_pid, true), Duration::from_secs(60));
    run.wait_for_line(&row_of(python_pid, true), Duration::from_secs(60));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    assert_eq!(sums(&done.stdout, java_pid), (NATIVE_JAVA, 1), "output:\n{}", done.stdout);
    assert_eq!(sums(&done.stdout, python_pid), (NATIVE_PYTHON, 1), "output:\n{}", done.stdout);
    let lines = json_lines(&done.stdout);
    let java_row = lines.iter().find(|l| l["pid"] == java_pid).unwrap();
    assert_eq!(java_row["language"], "java");
    assert!(java_row["cmdline"].as_str().unwrap().contains("java-ustat-sdt"), "{java_row}");
    assert_eq!(java_row["interval_ns"], 1_000_000_000u64);
    let python_row = lines.iter().find(|l| l["pid"] == python_pid).unwrap();
    assert_eq!(python_row["language"], "python");
    done.assert_no_programs_left();
}

/// Two JVMs at once, told apart by PID. With -XX:+ExtendedDTraceProbes, the calls and allocations of
/// CorebpfCalls are among those counted (the JDK's own code adds more); without it, HotSpot fires no method or
/// allocation probe at all, and each System.gc() is one collection (GcLoop's heap is far from full, so G1
/// starts none of its own).
#[test]
fn java_programs_with_and_without_extended_probes() {
    let (outer, middle, inner, allocs) = (3, 4, 5, 50);
    let calls = Workload::java_calls(outer, middle, inner, allocs);
    let (gcs, threads) = (5, 4);
    let plain = Workload::java(gcs, threads);
    let (calls_pid, plain_pid) = (calls.pid(), plain.pid());
    let mut run = Running::start(TOOL, &["-l", "java", "--json", "1"]);
    run.wait_for_line(&row_of(calls_pid, false), Duration::from_secs(120));
    run.wait_for_line(&row_of(plain_pid, false), Duration::from_secs(120));
    for mut workload in [calls, plain] {
        workload.go();
    }
    run.wait_for_line(&row_of(calls_pid, true), Duration::from_secs(120));
    run.wait_for_line(&row_of(plain_pid, true), Duration::from_secs(120));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();

    let (got, exited) = sums(&done.stdout, calls_pid);
    assert_eq!(exited, 1);
    let own_calls = u64::from(outer * (1 + middle * (1 + inner)));
    assert!(got[0] >= own_calls, "{} method calls, fewer than the program's {own_calls}", got[0]);
    assert!(got[2] >= u64::from(allocs), "{} allocations, fewer than the program's {allocs}", got[2]);

    let (got, exited) = sums(&done.stdout, plain_pid);
    assert_eq!(exited, 1);
    assert_eq!((got[0], got[1], got[2]), (0, u64::from(gcs), 0), "output:\n{}", done.stdout);
    assert!(got[5] >= u64::from(threads), "{} thread starts, fewer than the program's {threads}", got[5]);
}

/// A Python script's gc.collect() calls, each one collection, in JSON.
#[test]
fn python_collections_exact_in_json() {
    let gcs = 7;
    let mut workload = Workload::python(gcs);
    let pid = workload.pid();
    let mut run = Running::start(TOOL, &["-l", "python", "-j", "1"]);
    run.wait_for_line(&row_of(pid, false), Duration::from_secs(60));
    workload.go();
    run.wait_for_line(&row_of(pid, true), Duration::from_secs(60));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    let (got, exited) = sums(&done.stdout, pid);
    assert_eq!((got[1], exited), (u64::from(gcs), 1), "output:\n{}", done.stdout);
    let row = json_lines(&done.stdout).into_iter().find(|l| l["pid"] == pid).unwrap();
    assert_eq!(row["language"], "python");
    assert_eq!(row["cmdline"].as_str().map(|c| c.starts_with("/usr/bin/python3.11 -c ")), Some(true), "{row}");
}

/// BCC's screen: the banner, then per report a blank line (-C), the time and load average, a blank line, the
/// header and a row per process; "Detaching..." at the end. Every report is a whole second (the tool stops after
/// its count), so the GC/s of the Python process add up to its collections.
#[test]
fn screen_rows_rates_and_sort() {
    let gcs = 7;
    let mut workload = Workload::python(gcs);
    let pid = workload.pid();
    let reports = 10;
    let mut run = Running::start(TOOL, &["-C", "-l", "python", "-S", "gc", "-r", "50", "1", &reports.to_string()]);
    run.wait_for_line("PID    CMDLINE", Duration::from_secs(60));
    workload.go();
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines[0], "Tracing... Output every 1 secs. Hit Ctrl-C to end");
    let header = "PID    CMDLINE              METHOD/s   GC/s   OBJNEW/s   CLOAD/s  EXC/s  THR/s ";
    assert_eq!(lines.iter().filter(|l| **l == header).count(), reports, "output:\n{}", done.stdout);
    assert_eq!(lines.iter().filter(|l| l.contains(" loadavg: ")).count(), reports);
    assert_eq!(lines.last(), Some(&"Detaching..."));
    let rows: Vec<Vec<&str>> =
        lines.iter().filter(|l| l.starts_with(&format!("{pid} "))).map(|l| l.split_whitespace().collect()).collect();
    assert!(!rows.is_empty(), "no row for {pid}:\n{}", done.stdout);
    for row in &rows {
        assert_eq!(row[1], "/usr/bin/python3.11", "the command line, cut to 20 characters");
        assert_eq!(row.len(), 8, "{row:?}");
    }
    let gc_rates: u64 = rows.iter().map(|r| r[r.len() - 5].parse::<u64>().unwrap()).sum();
    assert_eq!(gc_rates, u64::from(gcs), "output:\n{}", done.stdout);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        vec!["-l", "cobol"],
        vec!["-S", "bytes"],
        vec!["-r", "0"],
        vec!["0"],
        vec!["1", "0"],
        vec!["1", "2", "3"],
        vec!["-p", "1"],
    ] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: stderr: {}", done.stderr);
        assert!(!done.stderr.is_empty(), "{args:?}");
    }
}

/// `--prometheus`: the two native stand-ins (process names of their own, so that no other test's processes share
/// their series) run while ustat serves and end; the first scrape after that folds their ended rows into the
/// tool's totals, and both scrapes read exactly what each did, per language and process name.
#[test]
fn prometheus_counts_per_language_and_process_name() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    const FAMILIES: [&str; 6] =
        ["method_calls", "garbage_collections", "object_allocations", "class_loads", "exceptions", "thread_starts"];
    let mut java = native_named("java", "ustat-prom");
    let mut python = native_named("python", "ustat-prom");
    let comm =
        |h: &KillOnDrop| std::fs::read_to_string(format!("/proc/{}/comm", h.0.id())).unwrap().trim_end().to_string();
    let (java_comm, python_comm) = (comm(&java), comm(&python));
    let (tool, addr) = serving(TOOL, &[]);
    run_native(&mut java.0);
    run_native(&mut python.0);
    let check = |text: &str| {
        for (language, comm, want) in [("java", &java_comm, NATIVE_JAVA), ("python", &python_comm, NATIVE_PYTHON)] {
            for (family, n) in FAMILIES.iter().zip(want) {
                let series = format!("corebpf_ustat_{family}_total{{language=\"{language}\",comm=\"{comm}\"}}");
                assert_eq!(sample(text, &series), Some(n as f64), "{series}: {text}");
            }
        }
    };
    let first = scrape(&addr);
    promtool_accepts(&first);
    check(&first);
    check(&scrape(&addr));
    tool.signal(libc::SIGTERM);
    let done = tool.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    let refused = run_tool(TOOL, &["--prometheus", "127.0.0.1:0", "1"]);
    assert_eq!(refused.status.code(), Some(2), "an interval too: {}", refused.stderr);
}
