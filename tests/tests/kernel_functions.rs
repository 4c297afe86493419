// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Kernel-function tracing, which this host cannot do (no kprobes; fentry loads are refused): built only with
//! `--features vm` and run by the VM kernel matrix (vm/vmtest.sh) on kernels that have both, once with each
//! mechanism forced through COREBPF_ATTACH by the tools' scenario files (tools/*/scenarios) and once with the tool's own choice.

use corebpf_tests::scenario::funccount_counts_vfs_read_exactly;

/// Reads made by the child: exact counts, and different from any count of background noise.
const READS: u32 = 1237;

#[test]
fn funccount_counts_every_vfs_read_of_one_process() {
    // The mechanism is the one the scenario forces (COREBPF_ATTACH in the environment), or the tool's choice.
    let forced = std::env::var("COREBPF_ATTACH").ok();
    funccount_counts_vfs_read_exactly(forced.as_deref(), READS);
}

/// funclatency times every vfs_read of one process: exactly READS calls in its histogram.
#[test]
fn funclatency_times_every_vfs_read_of_one_process() {
    use corebpf_tests::scenario::Reader;
    use corebpf_tests::{hist_total, Running};
    use std::time::Duration;

    let forced = std::env::var("COREBPF_ATTACH").ok();
    let mut reader = Reader::spawn(READS);
    let pid = reader.pid().to_string();
    let mut run = Running::start("funclatency", &["-v", "-p", &pid, "vfs_read"]);
    run.wait_for_line("Tracing", Duration::from_secs(120));
    reader.go();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();
    if let Some(mech) = forced {
        assert!(done.stderr.contains(&format!("attached with {mech}")), "not attached with {mech}:\n{}", done.stderr);
    }
    assert_eq!(hist_total(&done.stdout), READS as u64, "{}\nstderr:\n{}", done.stdout, done.stderr);
    assert!(done.stdout.contains(&format!("count: {READS}")), "{}", done.stdout);
    done.assert_no_programs_left();
}

/// stackcount counts every vfs_read of one process by kernel stack: exactly READS in all, through read(2).
#[test]
fn stackcount_counts_every_vfs_read_of_one_process() {
    use corebpf_tests::scenario::Reader;
    use corebpf_tests::Running;
    use std::time::Duration;

    let forced = std::env::var("COREBPF_ATTACH").ok();
    let mut reader = Reader::spawn(READS);
    let pid = reader.pid().to_string();
    let mut run = Running::start("stackcount", &["-v", "-K", "-p", &pid, "vfs_read"]);
    run.wait_for_line("Tracing", Duration::from_secs(120));
    reader.go();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();
    if let Some(mech) = forced {
        assert!(done.stderr.contains(&format!("attached with {mech}")), "not attached with {mech}:\n{}", done.stderr);
    }
    // Each stack ends with its count; the counts add up to the reads.
    let total: u64 = done
        .stdout
        .split("\n\n")
        .filter_map(|block| block.lines().rfind(|l| !l.trim().is_empty())?.trim().parse::<u64>().ok())
        .sum();
    assert_eq!(total, READS as u64, "{}\nstderr:\n{}", done.stdout, done.stderr);
    // Through read(2): ksys_read, or the architecture's system call entry where that is inlined.
    let through_read = ["ksys_read", "__x64_sys_read", "__arm64_sys_read"].iter().any(|f| done.stdout.contains(f));
    assert!(through_read, "{}", done.stdout);
    done.assert_no_programs_left();
}

/// funcinterval times the gaps between the vfs_read calls of one process: READS calls, READS - 1 gaps.
#[test]
fn funcinterval_times_every_gap_between_vfs_reads_of_one_process() {
    use corebpf_tests::scenario::Reader;
    use corebpf_tests::{hist_total, Running};
    use std::time::Duration;

    let forced = std::env::var("COREBPF_ATTACH").ok();
    let mut reader = Reader::spawn(READS);
    let pid = reader.pid().to_string();
    let mut run = Running::start("funcinterval", &["-v", "-p", &pid, "vfs_read"]);
    run.wait_for_line("Tracing", Duration::from_secs(120));
    reader.go();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();
    if let Some(mech) = forced {
        assert!(done.stderr.contains(&format!("attached with {mech}")), "not attached with {mech}:\n{}", done.stderr);
    }
    assert!(done.stdout.starts_with("Tracing 1 functions for \"vfs_read\"..."), "{}", done.stdout);
    assert_eq!(hist_total(&done.stdout), READS as u64 - 1, "{}\nstderr:\n{}", done.stdout, done.stderr);
    done.assert_no_programs_left();
}

/// funcslower with a threshold of 0 shows every vfs_read of one process: exactly READS lines, each with the
/// process's PID, the function's name, its return value (one byte read) and its first three arguments.
#[test]
fn funcslower_shows_every_vfs_read_of_one_process() {
    use corebpf_tests::scenario::Reader;
    use corebpf_tests::Running;
    use std::time::Duration;

    let forced = std::env::var("COREBPF_ATTACH").ok();
    let mut reader = Reader::spawn(READS);
    let pid = reader.pid().to_string();
    let mut run = Running::start("funcslower", &["-v", "-u", "0", "-a", "3", "-p", &pid, "vfs_read"]);
    run.wait_for_line("Tracing", Duration::from_secs(120));
    reader.go();
    std::thread::sleep(Duration::from_secs(1));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();
    if let Some(mech) = forced {
        assert!(done.stderr.contains(&format!("attached with {mech}")), "not attached with {mech}:\n{}", done.stderr);
    }
    let rows: Vec<Vec<&str>> = done.stdout.lines().skip(2).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), READS as usize, "{}\nstderr:\n{}", done.stdout, done.stderr);
    for row in &rows {
        assert_eq!(row[1], pid, "{row:?}");
        assert_eq!((row[3], row[4]), ("1", "vfs_read"), "a one-byte read: {row:?}");
        assert_eq!(row.len(), 8, "three arguments: {row:?}");
    }
    done.assert_no_programs_left();
}
