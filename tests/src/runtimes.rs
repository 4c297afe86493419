// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Language-runtime workloads for the tests of the tools over runtimes' USDT probes (ugc, javagc, uthreads,
//! ucalls, ...): Java programs (GcLoop.java, CorebpfCalls.java, run by the JDK's source launcher) and a Python
//! script (gc_loop.py) that start, say "ready", wait for the test's go, then make a known number of collections,
//! Java thread starts, method calls or allocations, print what they did and exit at once. The process is killed
//! if the test ends first.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::{run_tool, wait_sleeping, Finished, KillOnDrop, Running};

/// The JDK's launcher and CPython 3.11 of the test machines (Debian's packages).
pub const JAVA: &str = "/usr/bin/java";
pub const PYTHON: &str = "/usr/bin/python3.11";
/// The JVM flag that makes HotSpot fire its method__entry/return and object__alloc probes.
pub const JAVA_EXTENDED_PROBES: &[&str] = &["-XX:+ExtendedDTraceProbes"];

/// A running workload, stopped at its go line.
pub struct Workload {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    source: Option<PathBuf>,
}

impl Workload {
    /// The Java workload: `gcs` calls of System.gc() (G1, the JDK's default here, named so it stays so), then
    /// `threads` threads started and joined one after another.
    pub fn java(gcs: u32, threads: u32) -> Workload {
        let source = std::env::temp_dir().join(format!("corebpf-GcLoop-{}.java", std::process::id()));
        std::fs::write(&source, include_str!("GcLoop.java")).unwrap();
        let mut cmd = Command::new(JAVA);
        cmd.args(["-XX:+UseG1GC", "-Xmx256m"]).arg(&source).args([gcs.to_string(), threads.to_string()]);
        Self::start(cmd, Some(source))
    }

    /// The Java workload of known calls (CorebpfCalls.java), with HotSpot's method and allocation probes on
    /// (`-XX:+ExtendedDTraceProbes`) and its own classes kept out of the JIT, so that every call and allocation
    /// is one probe hit: `outer` calls of `CorebpfCalls.outer`, each making `middle` calls of `middle`, each
    /// making `inner` calls of `inner`; then `allocs` objects of class `CorebpfThing`.
    pub fn java_calls(outer: u32, middle: u32, inner: u32, allocs: u32) -> Workload {
        let source = std::env::temp_dir().join(format!("corebpf-CorebpfCalls-{}.java", std::process::id()));
        std::fs::write(&source, include_str!("CorebpfCalls.java")).unwrap();
        let mut cmd = Command::new(JAVA);
        cmd.args(JAVA_EXTENDED_PROBES).args([
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=exclude,CorebpfCalls::*",
            "-XX:CompileCommand=exclude,CorebpfThing::*",
        ]);
        cmd.arg(&source).args([outer, middle, inner, allocs].map(|n| n.to_string()));
        Self::start(cmd, Some(source))
    }

    /// An idle Java process with HotSpot's method and allocation probes on, for the tools that need them (the
    /// conformance test's target): GcLoop making nothing.
    pub fn java_extended_idle() -> Workload {
        let source = std::env::temp_dir().join(format!("corebpf-GcLoopX-{}.java", std::process::id()));
        std::fs::write(&source, include_str!("GcLoop.java")).unwrap();
        let mut cmd = Command::new(JAVA);
        cmd.args(JAVA_EXTENDED_PROBES).arg(&source).args(["0", "0"]);
        Self::start(cmd, Some(source))
    }

    /// The Python workload: `gcs` calls of gc.collect(), the i-th (from 0) finding i unreachable objects.
    pub fn python(gcs: u32) -> Workload {
        let mut cmd = Command::new(PYTHON);
        cmd.args(["-c", include_str!("gc_loop.py"), &gcs.to_string()]);
        Self::start(cmd, None)
    }

    /// A Python script of the test's own (`python3 -c SCRIPT ARGS...`) that prints "ready", waits for "go" on its
    /// stdin, does its work and prints "done".
    pub fn python_script(script: &str, args: &[&str]) -> Workload {
        let mut cmd = Command::new(PYTHON);
        cmd.arg("-c").arg(script).args(args);
        Self::start(cmd, None)
    }

    fn start(mut cmd: Command, source: Option<PathBuf>) -> Workload {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = KillOnDrop(cmd.spawn().expect("start the workload"));
        let stdin = child.0.stdin.take();
        let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n", "the workload did not start");
        wait_sleeping(child.0.id(), Duration::from_secs(30));
        Workload { child, stdin, stdout, source }
    }

    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Lets the workload run; returns the lines it printed before "done", once it has exited.
    pub fn go(&mut self) -> Vec<String> {
        let mut stdin = self.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        drop(stdin);
        let mut said = Vec::new();
        for line in (&mut self.stdout).lines() {
            let line = line.unwrap();
            if line == "done" {
                break;
            }
            said.push(line);
        }
        let status = self.child.0.wait().unwrap();
        assert!(status.success(), "the workload failed: {status}");
        said
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        if let Some(source) = &self.source {
            let _ = std::fs::remove_file(source);
        }
    }
}

/// Traces `workload` with `tool`: starts the tool with the workload's PID followed by `args` (the PID first, so an
/// interval among `args` stays the second positional), lets the workload run once the tool has attached, then
/// stops the tool with SIGINT. Returns the tool's run and the workload's PID.
pub fn trace_workload(tool: &str, mut workload: Workload, args: &[&str]) -> (Finished, u32) {
    let pid = workload.pid();
    let pid_arg = pid.to_string();
    let all: Vec<&str> = std::iter::once(pid_arg.as_str()).chain(args.iter().copied()).collect();
    let mut run = Running::start(tool, &all);
    run.wait_attached(Duration::from_secs(60));
    workload.go();
    run.signal(libc::SIGINT);
    (run.finish(Duration::from_secs(30)), pid)
}

/// Runs a native test helper `exe` (it waits for a byte on stdin, makes its known calls, prints "done" and exits)
/// under `tool`, with the helper's PID followed by `args`; stops the tool with SIGINT once the helper has exited.
pub fn trace_native_helper(tool: &str, exe: &Path, args: &[&str]) -> Finished {
    let child = Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start helper");
    let mut helper = KillOnDrop(child);
    wait_sleeping(helper.0.id(), Duration::from_secs(10));
    let pid = helper.0.id().to_string();
    let all: Vec<&str> = std::iter::once(pid.as_str()).chain(args.iter().copied()).collect();
    let mut run = Running::start(tool, &all);
    run.wait_attached(Duration::from_secs(60));
    helper.0.stdin.take().unwrap().write_all(b"g").unwrap();
    let mut line = String::new();
    BufReader::new(helper.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    assert!(helper.0.wait().unwrap().success());
    run.signal(libc::SIGINT);
    run.finish(Duration::from_secs(30))
}

/// The one-line refusals of a method-call tool (ucalls, uflow) for runtimes whose call probes would fire nothing:
/// a JVM without -XX:+ExtendedDTraceProbes, and CPython 3.11, whose function probes ordinary calls do not fire.
pub fn assert_call_probes_refused(tool: &str) {
    let java = Workload::java(0, 0);
    let done = run_tool(tool, &["-l", "java", &java.pid().to_string()]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    assert!(done.stderr.contains("-XX:+ExtendedDTraceProbes"), "stderr: {}", done.stderr);
    drop(java);
    let python = Workload::python(0);
    let done = run_tool(tool, &[&python.pid().to_string()]);
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    assert!(done.stderr.contains("CPython 3.11"), "stderr: {}", done.stderr);
}
