// SPDX-License-Identifier: Apache-2.0 OR MIT
//! uobjnew against processes whose allocations are known: a Java program (HotSpot's extended probes on) making
//! 1000 objects of class CorebpfThing (exact counts; HotSpot's sizes are not trusted, see doc.md), and a native
//! helper calling malloc(4243) 100 times (C; the kernel matrix's test, whose guests have no Java): exact counts
//! and bytes. Text and JSON; -C and -S; the refusal of a JVM that would fire nothing; bad input.

use std::process::Command;

use corebpf_tests::runtimes::{trace_native_helper, trace_workload, Workload};
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const OBJECTS: u64 = 1000;
const BLOCKS: u64 = 100;
const SIZE: u64 = 4243;

/// Runs uobjnew with `args` (after the Java workload's PID) while the workload allocates.
fn trace_java(args: &[&str]) -> (Finished, u32) {
    trace_workload(TOOL, Workload::java_calls(0, 0, 0, OBJECTS as u32), args)
}

/// The rows of every text table: (name, allocations, bytes).
fn table_rows(stdout: &str) -> Vec<(String, u64, u64)> {
    stdout
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("Tracing ") && !l.starts_with("NAME/TYPE "))
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let n = cols.len();
            (cols[..n - 2].join(" "), cols[n - 2].parse().unwrap(), cols[n - 1].parse().unwrap())
        })
        .collect()
}

#[test]
fn java_objects_are_counted_exactly() {
    let (done, pid) = trace_java(&["-l", "java"]);
    done.assert_success();
    let mut lines = done.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("Tracing allocations in process {pid} (language: java)... Ctrl-C to quit.").as_str())
    );
    assert_eq!(lines.next(), Some(""));
    assert_eq!(lines.next(), Some(format!("{:<30} {:>8} {:>12}", "NAME/TYPE", "# ALLOCS", "# BYTES").as_str()));
    let rows = table_rows(&done.stdout);
    let thing: Vec<_> = rows.iter().filter(|r| r.0 == "CorebpfThing").collect();
    assert_eq!(thing.len(), 1, "output:\n{}", done.stdout);
    assert_eq!(thing[0].1, OBJECTS, "output:\n{}", done.stdout);
    // (Its bytes are what HotSpot says, which its interpreter's fast path does not: see doc.md.)
    done.assert_no_programs_left();
}

#[test]
fn json_and_top_count() {
    // No -l: the language is found from the executable.
    let (done, _) = trace_java(&["-j", "-C", "1000000"]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    let thing: Vec<_> = lines.iter().filter(|l| l["name"] == "CorebpfThing").collect();
    assert_eq!(thing.len(), 1, "output:\n{}", done.stdout);
    assert_eq!(thing[0]["allocs"], OBJECTS);
    assert!(lines.iter().all(|l| l["time"] == lines[0]["time"]), "one report:\n{}", done.stdout);
    // -C keeps the most allocated types, least first: the last line is the top one.
    let counts: Vec<u64> = lines.iter().map(|l| l["allocs"].as_u64().unwrap()).collect();
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "output:\n{}", done.stdout);
}

/// Runs the malloc helper under uobjnew with `args` (after its PID); returns uobjnew's output.
fn trace_malloc(args: &[&str]) -> Finished {
    let flags = ["-O1", "-fno-builtin", &format!("-DBLOCKS={BLOCKS}"), &format!("-DSIZE={SIZE}")];
    let exe = build_c_helper("uobjnew_malloc", include_str!("malloc_loop.c"), &flags);
    trace_native_helper(TOOL, &exe, args)
}

/// C: malloc sizes (the kernel matrix's test).
#[test]
fn malloc_blocks_are_counted_exactly() {
    let done = trace_malloc(&["-l", "c", "-S", "1"]);
    done.assert_success();
    let rows = table_rows(&done.stdout);
    assert_eq!(rows, vec![(format!("block size {SIZE}"), BLOCKS, BLOCKS * SIZE)], "output:\n{}", done.stdout);

    let done = trace_malloc(&["-l", "c", "-j"]);
    done.assert_success();
    let lines = json_lines(&done.stdout);
    let ours: Vec<_> = lines.iter().filter(|l| l["block_size"] == SIZE).collect();
    assert_eq!(ours.len(), 1, "output:\n{}", done.stdout);
    assert_eq!(ours[0]["allocs"], BLOCKS);
    assert_eq!(ours[0]["bytes"], BLOCKS * SIZE);
}

#[test]
fn bad_input_is_one_line() {
    // A JVM without -XX:+ExtendedDTraceProbes fires no allocation probes.
    let java = Workload::java(0, 0);
    let done = run_tool(TOOL, &["-l", "java", &java.pid().to_string()]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    assert!(done.stderr.contains("-XX:+ExtendedDTraceProbes"), "stderr: {}", done.stderr);
    drop(java);

    let done = run_tool(TOOL, &["-l", "java", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    let mut sleeper = KillOnDrop(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = sleeper.0.id().to_string();
    let done = run_tool(TOOL, &["-l", "java", &pid]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    let _ = sleeper.0.kill();

    for args in
        [vec![], vec!["-l", "cobol", "1"], vec!["notapid"], vec!["1", "-C", "0"], vec!["1", "-C", "1", "-S", "1"]]
    {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: stderr: {}", done.stderr);
    }
}

/// `--prometheus` on the C helper: its 100 blocks of 4243 bytes are the counters of type `block size 4243`,
/// exactly; promtool accepts the exposition.
#[test]
fn prometheus_counts_the_c_blocks_exactly() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    use std::io::{BufRead, BufReader, Write};
    let flags = ["-O1", "-fno-builtin", &format!("-DBLOCKS={BLOCKS}"), &format!("-DSIZE={SIZE}")];
    let exe = build_c_helper("uobjnew_malloc", include_str!("malloc_loop.c"), &flags);
    let child = Command::new(&exe).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn();
    let mut helper = KillOnDrop(child.unwrap());
    wait_sleeping(helper.0.id(), std::time::Duration::from_secs(10));
    let (tool, addr) = serving(TOOL, &[&helper.0.id().to_string(), "-l", "c"]);
    helper.0.stdin.take().unwrap().write_all(b"g").unwrap();
    let mut line = String::new();
    BufReader::new(helper.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    assert!(helper.0.wait().unwrap().success());
    let text = scrape(&addr);
    promtool_accepts(&text);
    let series = |family: &str| format!("corebpf_uobjnew_{family}{{type=\"block size {SIZE}\"}}");
    assert_eq!(sample(&text, &series("allocations_total")), Some(BLOCKS as f64), "{text}");
    assert_eq!(sample(&text, &series("allocated_bytes_total")), Some((BLOCKS * SIZE) as f64), "{text}");
    tool.signal(libc::SIGTERM);
    let done = tool.finish(std::time::Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
}
