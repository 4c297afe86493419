// SPDX-License-Identifier: Apache-2.0 OR MIT
//! A tool's output into a pipe that closes early: `tool ARGS | head -1`.

use crate::bin;

/// Runs `tool args | head -1` in a shell and checks that the line read starts with `prefix` and that the
/// pipeline (the tool, SIGPIPE or EPIPE on its next write) ended successfully.
pub fn assert_head_1_ends_cleanly(tool: &str, args: &str, prefix: &str) {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{} {args} | head -1", bin(tool).display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with(prefix), "{tool} {args} | head -1: {stdout}");
    assert!(out.status.success(), "{tool} {args} | head -1: {:?}", out.status);
}

/// `tool args | head -1` with the pipe read here: reads the first line (which must start with `prefix`), closes
/// the pipe, then calls `poke` (something for the tool to write about, or nothing) every 50 ms until the tool
/// exits, within 20 s. The tool must succeed, say nothing on stderr and leave no BPF program loaded.
pub fn assert_ends_when_pipe_closes(tool: &str, args: &[&str], prefix: &str, mut poke: impl FnMut()) {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let mut child = Command::new(bin(tool)).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    let ids = crate::prog_ids_of(child.id());
    drop(reader);
    if !first.starts_with(prefix) {
        let _ = child.kill();
        panic!("{tool} {args:?}: first line {first:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        poke();
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("{tool} kept running after its pipe closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(status.success(), "{status:?} {stderr}");
    assert!(stderr.is_empty(), "stderr: {stderr}");
    crate::Finished { status, stdout: first, stderr, prog_ids: ids }.assert_no_programs_left();
}

/// The two ways a stream tool is stopped besides Ctrl-C, in one check: `tool args` (narrowed to something quiet,
/// e.g. `-p` of this test's own PID) is stopped with SIGTERM once it printed a line starting with `ready`, and
/// must succeed with an empty stderr and no BPF program left; then `tool | head -1`, whose first line starts with
/// `first`, as in [`assert_ends_when_pipe_closes`], with `poke` making events.
pub fn assert_sigterm_and_closed_pipe_end_cleanly(
    tool: &str,
    args: &[&str],
    ready: &str,
    first: &str,
    poke: impl FnMut(),
) {
    let mut run = crate::Running::start(tool, args);
    run.wait_for_line(ready, std::time::Duration::from_secs(20));
    run.signal(libc::SIGTERM);
    let done = run.finish(std::time::Duration::from_secs(20));
    done.assert_success();
    assert!(done.stderr.is_empty(), "{tool} {args:?}: {}", done.stderr);
    done.assert_no_programs_left();
    assert_ends_when_pipe_closes(tool, &[], first, poke);
}
