// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Conformance: what every tool in tools/* must do, with nothing written here per tool, so a new tool is covered
//! with no change to this file. For each tool:
//! - signals: started with `-v`, once tracing (its programs loaded and attached, [`wait_attached`]), SIGINT,
//!   SIGTERM and SIGHUP each end it with exit 0 within a few seconds, and no BPF program it held stays loaded;
//! - every attach-ladder step this host offers: for each mechanism of the tool's ladder (`corebpf-tools features
//!   --json`, `ladders`) that the host has, `COREBPF_ATTACH=<mech> TOOL -v` says `attached with <mech>` on stderr
//!   and stops cleanly (the steps this host lacks are the kernel matrix's); these runs are the signal runs, each
//!   ended by the next of the three signals, with unforced runs added until each signal has ended the tool once;
//! - a closed pipe: once the tool traces, its stdout's reader (`head -c 1`) reads one byte and exits; the tool
//!   then ends by itself, exit 0 (no death by SIGPIPE), nothing on stderr, no program left loaded;
//! - a tool whose ladder is only kernel functions, on a host that has none of them: it refuses in one line on
//!   stderr, exit 1 (the kernel matrix checks the rest); so does a tool whose tracepoints this kernel was built
//!   without ([`NEEDS_TRACEPOINT`]: criticalstat), and a tool whose events can never happen on this machine
//!   ([`nothing_to_trace_here`]: mdflush without md, numamove on one node). Tools that count what a virtual machine lacks run with their
//!   documented test substitute ([`HOST_ENV`]: llcstat, cpufreq).
//!
//! What a tool is given on its command line comes from its `--help` and from [`PATTERNS`]: a tool that requires
//! a pattern (funccount, stackcount, trace, ...) gets a harmless one of the family being tested; [`OVERRIDES`]
//! holds the few tools whose syntax differs, and [`PIPE_ARGS`] those that print nothing until an interval ends.
//! Tools run side by side, six at a time.

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::{bin, check_all, tool_names, wait_attached, Finished, KillOnDrop, Running};

/// Tools run at once.
const WORKERS: usize = 6;
/// How long a tool gets to attach (under load, beside other test binaries).
const ATTACH: Duration = Duration::from_secs(20);
/// How long a tool gets to end after a signal or its pipe's reader going away.
const END: Duration = Duration::from_secs(5);

/// What a mechanism attaches to; a tool's arguments depend on it (a tracepoint or a user function to count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Tracepoints,
    KernelFunctions,
    UserFunctions,
    PerfEvents,
}

fn family(mech: &str) -> Family {
    match mech {
        "tp_btf" | "raw_tp" | "tracepoint" => Family::Tracepoints,
        "fentry" | "kprobe_multi" | "kprobe" => Family::KernelFunctions,
        "uprobe_multi" | "uprobe" => Family::UserFunctions,
        "perf_event" => Family::PerfEvents,
        other => panic!("unknown attach mechanism {other} in `features --json`: add it to family()"),
    }
}

/// The harmless pattern, per family, of a tool whose `--help` shows a required positional argument (funccount,
/// funclatency, stackcount and trace share this syntax): a system call nobody here makes often, libc's getppid,
/// a kernel function every kernel has.
const PATTERNS: [(Family, &str); 3] = [
    (Family::Tracepoints, "t:syscalls:sys_enter_getppid"),
    (Family::UserFunctions, "c:getppid"),
    (Family::KernelFunctions, "vfs_read"),
];

/// Tools that take their target another way than a required positional pattern.
/// memleak traces the kernel's allocations with no process, a process's with one (`-c` starts it: a sleep, which
/// memleak ends when it stops); ttysnoop's positional argument is a terminal, and the console is one everywhere.
/// The runtime tools trace a Python or Java process: `{python_pid}` and `{java_pid}` are idle ones the test starts
/// ([`RUNTIME_PIDS`]); the JVM fires its method and allocation probes (`-XX:+ExtendedDTraceProbes`), which
/// ucalls, uflow and uobjnew need.
/// ksnoop's positional arguments are kernel functions, whatever the family asked for.
const OVERRIDES: [(&str, Family, &[&str]); 19] = [
    ("ugc", Family::UserFunctions, &["-l", "python", "{python_pid}"]),
    ("javagc", Family::UserFunctions, &["-p", "{java_pid}"]),
    ("uthreads", Family::UserFunctions, &["-l", "java", "{java_pid}"]),
    ("ucalls", Family::UserFunctions, &["-l", "java", "{java_pid}"]),
    ("uflow", Family::UserFunctions, &["-l", "java", "{java_pid}"]),
    ("uobjnew", Family::UserFunctions, &["-l", "java", "{java_pid}"]),
    ("fsdist", Family::Tracepoints, &["-t", "ext4"]),
    ("fsdist", Family::KernelFunctions, &["-t", "ext4"]),
    ("fsslower", Family::Tracepoints, &["-t", "ext4"]),
    ("fsslower", Family::KernelFunctions, &["-t", "ext4"]),
    ("argdist", Family::Tracepoints, &["-C", "t:syscalls:sys_enter_getppid()"]),
    ("argdist", Family::UserFunctions, &["-C", "p:c:getppid()"]),
    ("argdist", Family::KernelFunctions, &["-C", "p::vfs_read()"]),
    ("memleak", Family::Tracepoints, &[]),
    ("memleak", Family::UserFunctions, &["-c", "sleep 60"]),
    ("ttysnoop", Family::Tracepoints, &["/dev/console"]),
    ("ttysnoop", Family::KernelFunctions, &["/dev/console"]),
    ("ksnoop", Family::Tracepoints, &["vfs_read"]),
    ("ksnoop", Family::KernelFunctions, &["vfs_read"]),
];

/// Lines a tool prints on stderr about the host, which the closed-pipe case allows: kvmexit on a PVM host, whose
/// KVM never reports VM exits to the tracepoint.
const HOST_NOTICES: [&str; 1] = ["does not report VM exits to kvm:kvm_exit"];

/// Tools that count what a virtual machine lacks (a PMU's cache counters, a cpufreq driver): every run here gets
/// the test-only substitute each documents (software page faults; declared starting frequencies), so that its
/// signals, pipe and attach steps are checked on the same programs. Their own tests check the refusal without it.
const HOST_ENV: [(&str, &str, &str); 2] =
    [("llcstat", "COREBPF_LLCSTAT_EVENTS", "page-faults"), ("cpufreq", "COREBPF_CPUFREQ_KHZ", "2000000")];

/// Tools on tracepoints only some kernels are built with: where the kernel's BTF lacks the tracepoint
/// (`btf_trace_<name>`), what the tool must do is refuse in one line, exit 1, as a kernel-function tool does on a
/// host without kernel-function tracing.
const NEEDS_TRACEPOINT: [(&str, &str); 1] = [("criticalstat", "irq_disable")];

/// Tools that refuse where what they trace can never happen on this machine: mdflush where the kernel has no md
/// driver (none built in or loaded, no module to load), numamove where only one NUMA node is possible. There too,
/// what the tool must do is refuse in one line, exit 1.
fn nothing_to_trace_here(tool: &str) -> bool {
    match tool {
        "mdflush" => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            !std::path::Path::new("/sys/module/md_mod").exists()
                && !std::path::Path::new(&format!("/lib/modules/{}/kernel/drivers/md", release.trim())).exists()
        }
        "numamove" => std::fs::read_to_string("/sys/devices/system/node/possible")
            .map_or(true, |nodes| !nodes.trim().contains(['-', ','])),
        _ => false,
    }
}

/// Whether the running kernel's BTF has raw tracepoint `name`.
fn kernel_has_tracepoint(name: &str) -> bool {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap_or_default();
    let needle = format!("\0btf_trace_{name}\0");
    btf.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The substitute environment of [`HOST_ENV`] for `tool`, if any.
fn host_env(tool: &str) -> Vec<(&'static str, &'static str)> {
    HOST_ENV.iter().filter(|(t, _, _)| *t == tool).map(|&(_, k, v)| (k, v)).collect()
}

/// Extra arguments for the closed-pipe case, for a tool that prints nothing until an interval ends (an interval
/// of 1 s, say). None today: every tool prints its banner as it starts tracing.
const PIPE_ARGS: [(&str, &[&str]); 0] = [];

/// One tool, as this test sees it.
#[derive(Debug, Clone)]
struct Tool {
    name: String,
    verbose: bool,
    required_positional: bool,
    /// Its ladder, from `features --json` (empty: the tool keeps its own list, and only its default is tested).
    ladder: Vec<String>,
}

/// The PIDs of the idle Python and Java processes (`{python_pid}`, `{java_pid}` in [`OVERRIDES`]), set by the
/// test that runs the tools, which holds the processes (killed when it ends, also by a panic).
static RUNTIME_PIDS: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();

fn with_runtime_pids(arg: &str) -> String {
    match RUNTIME_PIDS.get() {
        Some((python, java)) => {
            arg.replace("{python_pid}", &python.to_string()).replace("{java_pid}", &java.to_string())
        }
        None => arg.to_string(),
    }
}

impl Tool {
    /// The arguments that give the tool something harmless to trace through `family` (None: it cannot).
    fn args(&self, family: Family) -> Option<Vec<String>> {
        if let Some((_, _, args)) = OVERRIDES.iter().find(|(t, f, _)| *t == self.name && *f == family) {
            return Some(args.iter().map(|a| with_runtime_pids(a)).collect());
        }
        if OVERRIDES.iter().any(|(t, _, _)| *t == self.name) {
            return None;
        }
        if !self.required_positional {
            return Some(Vec::new());
        }
        PATTERNS.iter().find(|(f, _)| *f == family).map(|(_, p)| vec![p.to_string()])
    }

    /// The arguments of an unforced run: those of the first family of its ladder that this host offers.
    fn default_args(&self, host: &[String]) -> Vec<String> {
        let offered = self.ladder.iter().filter(|m| host.contains(m));
        offered.filter_map(|m| self.args(family(m))).next().unwrap_or_else(|| self.args(Family::Tracepoints).unwrap())
    }

    fn with_verbose(&self, args: Vec<String>) -> Vec<String> {
        // The long form: kvmexit's -v is BCC's vCPU filter.
        let mut all = if self.verbose { vec!["--verbose".to_string()] } else { Vec::new() };
        all.extend(args);
        all
    }
}

/// `features --json`: the mechanisms this host offers, and each tool's ladder.
fn features() -> (Vec<String>, serde_json::Value) {
    let out = Command::new(bin("corebpf-tools")).args(["features", "--json"]).output().unwrap();
    assert!(out.status.success(), "corebpf-tools features --json: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let host = v["features"]
        .as_array()
        .expect("features --json has a features array")
        .iter()
        .filter(|f| f["available"].as_bool() == Some(true))
        .filter_map(|f| f["name"].as_str().map(str::to_owned))
        .collect();
    (host, v["ladders"].clone())
}

fn tools() -> (Vec<Tool>, Vec<String>) {
    let (host, ladders) = features();
    let tools = tool_names()
        .into_iter()
        .map(|name| {
            let out = Command::new(bin(&name)).arg("--help").env("COLUMNS", "200").output().unwrap();
            let help = String::from_utf8_lossy(&out.stdout).into_owned();
            let ladder = ladders[&name]
                .as_array()
                .unwrap_or_else(|| panic!("`features --json` has no ladder for {name}: {ladders}"))
                .iter()
                .map(|m| m.as_str().unwrap().to_owned())
                .collect();
            let arguments = help.split("\nArguments:\n").nth(1).unwrap_or("");
            let required_positional = arguments.lines().next().is_some_and(|l| l.trim_start().starts_with('<'));
            let verbose = help.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with("-v, --verbose") || l.starts_with("--verbose")
            });
            Tool { name, verbose, required_positional, ladder }
        })
        .collect();
    (tools, host)
}

/// One run of a tool.
#[derive(Debug)]
enum Case {
    /// Ended by `signal` once tracing; with `forced`, run with COREBPF_ATTACH=forced and checked to say so.
    Signal { tool: Tool, args: Vec<String>, forced: Option<String>, signal: i32 },
    /// Its stdout's reader goes away once it traces.
    ClosedPipe { tool: Tool, args: Vec<String> },
    /// A kernel-function tool on a host without kernel-function tracing: one line on stderr, exit 1.
    Unavailable { tool: Tool, args: Vec<String> },
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

fn cases(tools: &[Tool], host: &[String]) -> Vec<Case> {
    const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    let mut cases = Vec::new();
    for tool in tools {
        let mut runs: Vec<(Vec<String>, Option<String>)> = Vec::new();
        for mech in tool.ladder.iter().filter(|m| host.contains(m)) {
            if let Some(args) = tool.args(family(mech)) {
                runs.push((args, Some(mech.clone())));
            }
        }
        if NEEDS_TRACEPOINT.iter().any(|&(t, tp)| t == tool.name && !kernel_has_tracepoint(tp))
            || nothing_to_trace_here(&tool.name)
        {
            cases.push(Case::Unavailable { tool: tool.clone(), args: Vec::new() });
            continue;
        }
        // A tool that only traces kernel functions (tcpsynbl) cannot run on a host without them: what it must do
        // there is refuse in one line, exit 1; the kernel matrix checks its signals and pipes.
        if !tool.ladder.is_empty()
            && tool.ladder.iter().all(|m| family(m) == Family::KernelFunctions)
            && runs.is_empty()
        {
            cases.push(Case::Unavailable {
                tool: tool.clone(),
                args: tool.args(Family::KernelFunctions).unwrap_or_default(),
            });
            continue;
        }
        assert!(
            tool.ladder.is_empty() || !runs.is_empty(),
            "{}: none of its ladder {:?} is usable on this host (it offers {host:?}), or no arguments are known for \
             its families: add them to PATTERNS or OVERRIDES",
            tool.name,
            tool.ladder
        );
        while runs.len() < SIGNALS.len() {
            runs.push((tool.default_args(host), None));
        }
        for (i, (args, forced)) in runs.into_iter().enumerate() {
            let signal = SIGNALS[i % SIGNALS.len()];
            cases.push(Case::Signal { tool: tool.clone(), args, forced, signal });
        }
        let mut args = tool.default_args(host);
        if let Some((_, extra)) = PIPE_ARGS.iter().find(|(t, _)| *t == tool.name) {
            args.extend(extra.iter().map(|a| a.to_string()));
        }
        cases.push(Case::ClosedPipe { tool: tool.clone(), args });
    }
    cases
}

fn check_signal(tool: &Tool, args: &[String], forced: Option<&str>, signal: i32) {
    let args = tool.with_verbose(args.to_vec());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut env: Vec<(&str, &str)> = forced.map(|m| ("COREBPF_ATTACH", m)).into_iter().collect();
    env.extend(host_env(&tool.name));
    let mut run = Running::start_with_env(&tool.name, &argv, &env);
    run.wait_attached(ATTACH);
    run.signal(signal);
    let sent = Instant::now();
    let done = run.finish(ATTACH);
    let took = sent.elapsed();
    let sig = signal_name(signal);
    assert!(done.status.success(), "{sig} ended it with {:?}\nstderr:\n{}", done.status, done.stderr);
    assert!(!done.stderr.contains("panicked"), "panicked on {sig}:\n{}", done.stderr);
    assert!(took <= END, "took {took:?} to end after {sig} (at most {END:?})\nstderr:\n{}", done.stderr);
    if let Some(mech) = forced {
        let said = format!("attached with {mech}");
        assert!(done.stderr.contains(&said), "stderr does not say '{said}':\n{}", done.stderr);
    }
    done.assert_no_programs_left();
}

fn check_closed_pipe(tool: &Tool, args: &[String]) {
    let mut child = KillOnDrop(
        Command::new(bin(&tool.name))
            .args(args)
            .envs(host_env(&tool.name))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let mut stderr = child.0.stderr.take().unwrap();
    let stderr = thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    // Until it traces, the pipe's only reader is this process, which reads nothing: the tool's first write waits
    // in the pipe for `head`, so the reader that goes away is there before anything is written.
    let ids = match wait_attached(child.0.id(), ATTACH) {
        Ok(ids) => ids,
        Err(why) => {
            let _ = child.0.kill();
            panic!("{why}\nstderr:\n{}", stderr.join().unwrap_or_default())
        }
    };
    let mut head =
        KillOnDrop(Command::new("head").args(["-c", "1"]).stdin(stdout).stdout(Stdio::null()).spawn().expect("head"));
    let head = exit_within(&mut head, ATTACH, "printed nothing in time: give it an interval in PIPE_ARGS");
    assert!(head.success(), "head ended with {head:?}");
    let status = exit_within(&mut child, END, "still running after its reader went away");
    let stderr = stderr.join().unwrap_or_default();
    assert!(status.success(), "ended with {status:?} after its reader went away\nstderr:\n{stderr}");
    let unexpected = stderr.lines().any(|l| !HOST_NOTICES.iter().any(|n| l.contains(n)));
    assert!(!unexpected, "printed on stderr:\n{stderr}");
    Finished { status, stdout: String::new(), stderr, prog_ids: ids }.assert_no_programs_left();
}

fn check_unavailable(tool: &Tool, args: &[String]) {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let done = corebpf_tests::run_tool(&tool.name, &argv);
    assert_eq!(done.status.code(), Some(1), "stderr:\n{}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "not one line on stderr:\n{}", done.stderr);
    assert!(done.stdout.is_empty(), "printed on stdout:\n{}", done.stdout);
}

/// Runs `case`, turning a failed assertion into a line of the report that names the run.
fn check(case: &Case) -> Option<String> {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match case {
        Case::Signal { tool, args, forced, signal } => check_signal(tool, args, forced.as_deref(), *signal),
        Case::ClosedPipe { tool, args } => check_closed_pipe(tool, args),
        Case::Unavailable { tool, args } => check_unavailable(tool, args),
    }));
    let err = result.err()?;
    let why = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".into());
    let what = match case {
        Case::Signal { tool, args, forced, signal } => {
            let env = forced.as_ref().map(|m| format!("COREBPF_ATTACH={m} ")).unwrap_or_default();
            let args = tool.with_verbose(args.clone());
            format!("{env}{} {args:?}, ended by {}", tool.name, signal_name(*signal))
        }
        Case::ClosedPipe { tool, args } => format!("{} {args:?} | head -c 1", tool.name),
        Case::Unavailable { tool, args } => format!("{} {args:?} (what it traces is not in this kernel)", tool.name),
    };
    Some(format!("{what}: {why}"))
}

#[test]
fn every_tool_ends_cleanly_on_signals_a_closed_pipe_and_each_attach_step() {
    let (tools, host) = tools();
    // (COREBPF_TEST_TOOLS picks a few on purpose.)
    let picked = std::env::var_os("COREBPF_TEST_TOOLS").is_some();
    assert!(picked || tools.len() >= 27, "only {} tools found", tools.len());
    // The runtime tools' targets: idle until the test ends (they wait for a go that never comes).
    let python = corebpf_tests::runtimes::Workload::python(0);
    // (The JVM fires its method and allocation probes too, for the tools that need them.)
    let java = corebpf_tests::runtimes::Workload::java_extended_idle();
    RUNTIME_PIDS.set((python.pid(), java.pid())).unwrap();
    let cases = cases(&tools, &host);
    let total = cases.len();
    let failures = check_all(cases, WORKERS, check);
    drop((python, java));
    assert!(failures.is_empty(), "{} of {total} runs failed:\n{}", failures.len(), failures.join("\n---\n"));
}

/// The table's arguments follow each family: a pattern tool gets a tracepoint, a user function or a kernel
/// function; a tool with no positional argument none; argdist its `-C` spec.
#[test]
fn arguments_follow_the_family() {
    let tool = |name: &str, required_positional: bool| Tool {
        name: name.into(),
        verbose: true,
        required_positional,
        ladder: vec!["tp_btf".into(), "raw_tp".into(), "uprobe_multi".into()],
    };
    let host: Vec<String> = vec!["raw_tp".into(), "uprobe_multi".into()];
    let funccount = tool("funccount", true);
    assert_eq!(funccount.args(Family::UserFunctions).unwrap(), ["c:getppid"]);
    assert_eq!(funccount.default_args(&host), ["t:syscalls:sys_enter_getppid"]);
    assert_eq!(tool("biolatency", false).args(Family::Tracepoints).unwrap(), Vec::<String>::new());
    assert_eq!(tool("argdist", false).args(Family::UserFunctions).unwrap(), ["-C", "p:c:getppid()"]);
    assert!(tool("argdist", false).args(Family::PerfEvents).is_none());
    let cases = cases(&[funccount], &host);
    // raw_tp and uprobe_multi forced, one unforced run for the third signal, and the closed pipe.
    assert_eq!(cases.len(), 4, "{cases:#?}");
}

/// Waits for `child` to exit, failing with `why` if it is still running after `within`.
fn exit_within(child: &mut KillOnDrop, within: Duration, why: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status;
        }
        assert!(started.elapsed() <= within, "{why} ({within:?})");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Where tracefs is not mounted (a fresh mount namespace, a chroot), a tool that needs it mounts it in a mount
/// namespace of its own, so that nothing is left mounted when it exits (issue 31 item 5). Run in a private mount
/// namespace without tracefs: funccount on a syscall tracepoint (found through tracefs) counts, exits 0, and the
/// namespace has no tracefs afterwards.
#[test]
fn tracefs_a_tool_mounts_is_not_left_behind() {
    let script = format!(
        "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug 2>/dev/null; \
         echo before=$(grep -c ' tracefs ' /proc/self/mounts); \
         {} -d 1 t:syscalls:sys_enter_getpid >/dev/null; echo rc=$?; \
         echo after=$(grep -c ' tracefs ' /proc/self/mounts)",
        bin("funccount").display()
    );
    // `output` waits for the end, and `timeout` bounds it: nothing outlives the test.
    let out = Command::new("timeout")
        .args(["60", "unshare", "-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text, "before=0\nrc=0\nafter=0\n", "stderr: {}", String::from_utf8_lossy(&out.stderr));
}

/// With CAP_BPF and CAP_PERFMON but not root, a tool on classic tracepoints cannot read tracefs (mode 0700): it
/// says so in one line with what would fix it, and with that fix (CAP_DAC_READ_SEARCH) it runs (issue 31 item 4).
#[test]
fn tracefs_without_root_is_explained_and_the_fix_works() {
    use std::os::unix::fs::PermissionsExt;
    let tracefs = std::fs::metadata("/sys/kernel/tracing").expect("tracefs at /sys/kernel/tracing");
    assert_eq!(
        tracefs.permissions().mode() & 0o077,
        0,
        "this test needs a tracefs that only root can read (the usual mode 0700)"
    );
    let caps = |extra: &str| {
        let list = format!("+bpf,+perfmon{extra}");
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            .into_iter()
            .map(String::from)
            .chain([format!("--inh-caps={list}"), format!("--ambient-caps={list}")])
            .collect::<Vec<String>>()
    };
    let without = caps("");
    let without: Vec<&str> = without.iter().map(String::as_str).collect();
    let done = Running::start_wrapped(&without, "execsnoop", &[]).finish(Duration::from_secs(30));
    assert_eq!(done.status.code(), Some(1), "stderr: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "stderr: {}", done.stderr);
    for needed in ["tracefs is readable by root only", "CAP_DAC_READ_SEARCH", "mode=0755"] {
        assert!(done.stderr.contains(needed), "no {needed:?} in: {}", done.stderr);
    }

    let with = caps(",+dac_read_search");
    let with: Vec<&str> = with.iter().map(String::as_str).collect();
    let mut run = Running::start_wrapped(&with, "execsnoop", &[]);
    run.wait_for_line("PCOMM", Duration::from_secs(30));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    assert!(done.status.success(), "stderr: {}", done.stderr);
}

/// Run in a PID namespace of its own (as in a container), every tool with a PID filter refuses `-p` in one line
/// that says why (the kernel's events carry the host's PIDs) and what fixes it, with exit status 1, instead of
/// tracing nothing (issue 31 item 10).
#[test]
fn pid_filters_in_a_pid_namespace_of_its_own_are_refused_with_the_reason() {
    let (tools, host) = tools();
    let with_pid: Vec<Tool> = tools
        .into_iter()
        .filter(|t| {
            let out = Command::new(bin(&t.name)).arg("--help").env("COLUMNS", "200").output().unwrap();
            String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim_start().starts_with("-p, --pid"))
        })
        .collect();
    let picked = std::env::var_os("COREBPF_TEST_TOOLS").is_some();
    assert!(
        picked || with_pid.len() >= 10,
        "only {} tools with -p, --pid: is --help's layout as expected?",
        with_pid.len()
    );
    let mut failures = Vec::new();
    for tool in with_pid {
        let mut args = vec!["-p".to_string(), "1".to_string()];
        // The tracepoint family's arguments where the tool has them: memleak's user-function family starts a
        // command (-c), which -p excludes.
        // A tool whose own arguments are a PID (javagc's -p) gets none.
        let own = tool.args(Family::Tracepoints).unwrap_or_else(|| tool.default_args(&host));
        if !own.iter().any(|a| a == "-p") {
            args.extend(own);
        }
        // `output` waits for the end and `timeout` bounds it: nothing outlives the test.
        let out = Command::new("timeout")
            .args(["30", "unshare", "--pid", "--fork", "--mount-proc"])
            .arg(bin(&tool.name))
            .args(&args)
            .output()
            .expect("unshare");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(1) || stderr.lines().count() != 1 || !stderr.contains("--pid=host") {
            failures.push(format!("{} {}: {:?}, stderr: {stderr}", tool.name, args.join(" "), out.status));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
