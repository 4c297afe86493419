// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Helpers for the integration tests: run a real tool binary as root, wait until it has attached, make a known
//! workload, stop the tool and read what it printed.
//!
//! Tests run concurrently, so every helper here is safe to use from many tests at once: workloads use unique
//! files, and leak checks look only at the BPF programs of the tool process under test.

pub mod anchor;
pub mod cgroup;
pub mod fsmount;
pub mod irq;
pub mod loopdev;
pub mod memcg;
pub mod offwake;
pub mod pinned;
pub mod pipe;
pub mod prom;
pub mod runtimes;
pub mod scenario;
pub mod sock;
pub mod usage;

// The crates the tests use, re-exported so that a tool's tests (tools/TOOL/tests/) need only this one
// dev-dependency: `use corebpf_tests::*;` brings `serde_json::` and `libc::` into scope.
pub use libc;
pub use serde_json;

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Every tool of the workspace: each `tools/NAME` with a Cargo.toml, sorted (tests that cover every tool read it, so a
/// new tool is covered with no change to them). `COREBPF_TEST_TOOLS=a,b` keeps those only, to run the sweeps over
/// every tool (bad_input, conformance) for the tools one is working on.
pub fn tool_names() -> Vec<String> {
    let mut tools = all_tool_names();
    if let Ok(only) = std::env::var("COREBPF_TEST_TOOLS") {
        tools.retain(|t| only.split(',').any(|o| o == t));
    }
    tools
}

/// Every tool of the workspace, whatever COREBPF_TEST_TOOLS says: what the package holds.
pub fn all_tool_names() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools");
    let mut tools: Vec<String> = fs::read_dir(root)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    tools.sort();
    tools
}

/// Checks what `NAME --version` printed: `NAME VERSION (commit HEX12, libbpf X.Y)` for a build from a git
/// checkout (the tests' builds are), with the workspace's version.
pub fn assert_version_line(stdout: &str, name: &str) {
    let rest = stdout
        .strip_prefix(&format!("{name} {} (commit ", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("--version of {name}: {stdout:?}"));
    let (commit, libbpf) = rest.split_once(", libbpf ").unwrap_or_else(|| panic!("--version of {name}: {stdout:?}"));
    assert!(commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit()), "--version of {name}: {stdout:?}");
    let libbpf = libbpf.strip_suffix(")\n").unwrap_or_else(|| panic!("--version of {name}: {stdout:?}"));
    assert!(libbpf.split('.').all(|n| n.parse::<u32>().is_ok()), "--version of {name}: {stdout:?}");
}

/// Path of a built tool binary: `$COREBPF_BIN_DIR/<name>`, else `target/release/<name>` of this workspace.
pub fn bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("COREBPF_BIN_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
        target.join("release")
    });
    assert!(
        std::env::var_os(PREBUILD_HELPERS_ENV).is_none(),
        "{PREBUILD_HELPERS_ENV} is set: this run only builds test helpers, so it stops before running {name}"
    );
    let path = dir.join(name);
    assert!(path.exists(), "{} is not built: run `make build` (or set COREBPF_BIN_DIR)", path.display());
    path
}

/// A copy of tool `name`'s binary that any user can execute, for a test that runs it without privileges (as user
/// nobody): [`bin`]'s path may be in a checkout other users cannot reach (under `/root`, mode 0700), where their
/// exec is refused with EACCES. The copy is in a folder of its own (mode 0755) under `/tmp`, as a file of the
/// tool's name (the multicall binary picks the tool from it), and is removed when dropped.
pub struct BinForOthers {
    dir: PathBuf,
    path: PathBuf,
}

impl BinForOthers {
    pub fn new(name: &str) -> Self {
        use std::os::unix::fs::PermissionsExt;
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let original = bin(name);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        // /tmp itself, not $TMPDIR, which may be a private folder too.
        let dir = Path::new("/tmp").join(format!("corebpf-bin-for-others-{}-{n}", std::process::id()));
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.join(name);
        fs::copy(&original, &path)
            .unwrap_or_else(|e| panic!("copying {} to {}: {e}", original.display(), path.display()));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        BinForOthers { dir, path }
    }

    /// The copy's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for BinForOthers {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A unique scratch path on the root file system (not tmpfs), removed when dropped.
pub struct ScratchFile(pub PathBuf);

impl ScratchFile {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = Path::new("/var/tmp/corebpf-tests");
        fs::create_dir_all(dir).unwrap();
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        ScratchFile(dir.join(format!("{tag}-{}-{n}", std::process::id())))
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Output of a finished tool run.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// IDs of the BPF programs the tool held while it ran.
    pub prog_ids: Vec<u32>,
}

impl Finished {
    /// Asserts the tool exited 0 and printed nothing on stderr that looks like a failure.
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.status.success(),
            "tool failed: {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "tool panicked:\n{}", self.stderr);
        self
    }

    /// Asserts that none of the tool's BPF programs is still loaded.
    pub fn assert_no_programs_left(&self) {
        assert!(!self.prog_ids.is_empty(), "no BPF programs were seen in the tool's file descriptors");
        // Program IDs are allocated cyclically, so a freed ID is not reused soon.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let alive: Vec<u32> = self.prog_ids.iter().copied().filter(|&id| prog_loaded(id)).collect();
            if alive.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "BPF programs {alive:?} still loaded after the tool exited");
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// True if a BPF program with this ID is loaded (BPF_PROG_GET_FD_BY_ID; works without bpftool, as in the VM).
pub fn prog_loaded(id: u32) -> bool {
    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    // union bpf_attr for this command: { __u32 prog_id; __u32 next_id; __u32 open_flags; }
    let attr: [u32; 3] = [id, 0, 0];
    // SAFETY: bpf(2) reads `size` bytes of `attr`, which outlives the call.
    let fd = unsafe {
        libc::syscall(libc::SYS_bpf, BPF_PROG_GET_FD_BY_ID, attr.as_ptr(), std::mem::size_of_val(&attr) as u32)
    };
    if fd >= 0 {
        // SAFETY: the fd was just returned to us and is closed once.
        unsafe { libc::close(fd as i32) };
        return true;
    }
    let err = std::io::Error::last_os_error();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "BPF_PROG_GET_FD_BY_ID({id}) failed: {err}");
    false
}

/// BPF program IDs held by process `pid`, from `/proc/PID/fdinfo`.
pub fn prog_ids_of(pid: u32) -> Vec<u32> {
    let mut ids = Vec::new();
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return ids;
    };
    for entry in entries.flatten() {
        if let Ok(text) = fs::read_to_string(entry.path()) {
            for line in text.lines() {
                if let Some(id) = line.strip_prefix("prog_id:") {
                    if let Ok(id) = id.trim().parse() {
                        if !ids.contains(&id) {
                            ids.push(id);
                        }
                    }
                }
            }
        }
    }
    ids
}

/// The number of BPF links process `pid` holds (its attached programs).
pub fn links_of(pid: u32) -> usize {
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return 0 };
    entries.flatten().filter(|e| fs::read_to_string(e.path()).is_ok_and(|t| t.contains("link_type:"))).count()
}

/// Starts `tool args` forced onto each attach mechanism of `mechs` (`COREBPF_ATTACH`), waits for a stdout line
/// containing `ready`, checks that the tool holds exactly `links` BPF links, then stops it with SIGINT and checks
/// that it ended well with none of its programs left loaded.
pub fn assert_holds_links(tool: &str, args: &[&str], ready: &str, mechs: &[&str], links: usize) {
    for mech in mechs {
        let mut run = Running::start_with_env(tool, args, &[("COREBPF_ATTACH", mech)]);
        run.wait_for_line(ready, Duration::from_secs(20));
        assert_eq!(links_of(run.pid()), links, "{tool} {args:?} through {mech}");
        run.signal(libc::SIGINT);
        let done = run.finish(Duration::from_secs(20));
        done.assert_success();
        done.assert_no_programs_left();
    }
}

/// The number of perf event descriptors process `pid` holds: how kernels before 5.15 attach kprobes and classic
/// tracepoints (a perf event with the program set on it, no BPF link), and how profile samples.
pub fn perf_events_of(pid: u32) -> usize {
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    entries
        .flatten()
        .filter(|e| fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:[perf_event]"))
        .count()
}

/// How long a tool must hold its programs and links, with none added, to count as attached. (Shorter, 60 ms once
/// every loaded program had a link, made offcputime's tests miss a helper's first sleep now and then: 300 ms.)
const SETTLED: Duration = Duration::from_millis(300);

/// Waits until process `pid` is tracing: it holds BPF programs and links (or, before 5.15, the perf events its
/// kprobes and classic tracepoints are attached through), and has added none for 300 ms (a tool attaches one
/// program after another). Returns the IDs of its programs;
/// `Err` says why not: the process ended first, or `timeout` went by.
pub fn wait_attached(pid: u32, timeout: Duration) -> Result<Vec<u32>, String> {
    let started = Instant::now();
    let (mut progs, mut links, mut changed) = (Vec::new(), 0, started);
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command name, which is in parentheses and may hold spaces.
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        if matches!(state, None | Some("Z" | "X")) {
            // A tool that held programs and attachments and then ended (a `-d 1` run) was tracing.
            if !progs.is_empty() && links > 0 {
                return Ok(progs);
            }
            return Err(format!("it ended before attaching (programs seen: {progs:?})"));
        }
        let now_links = links_of(pid) + perf_events_of(pid);
        let mut grew = now_links > links;
        links = links.max(now_links);
        for id in prog_ids_of(pid) {
            if !progs.contains(&id) {
                progs.push(id);
                grew = true;
            }
        }
        if grew {
            changed = Instant::now();
        }
        // Fewer attachments than programs: more may come after a slow attach (a kprobe in an emulated guest takes
        // longer than SETTLED), so wait longer before calling it done.
        let settled = if links < progs.len() { SETTLED * 5 } else { SETTLED };
        if !progs.is_empty() && links > 0 && changed.elapsed() >= settled {
            return Ok(progs);
        }
        if started.elapsed() >= timeout {
            return Err(format!("not attached within {timeout:?} ({} programs, {links} links)", progs.len()));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// A running tool whose stdout is collected line by line in the background.
pub struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: Option<thread::JoinHandle<String>>,
    prog_ids: Vec<u32>,
}

impl Running {
    /// Starts `name` with `args` and environment `env`.
    pub fn start_with_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut cmd = Command::new(bin(name));
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self::spawn(name, cmd)
    }

    /// Starts `name` with `args` under `wrapper` (a command that runs the rest of its arguments, such as
    /// `setpriv --bounding-set=-all,+bpf,+perfmon --`).
    pub fn start_wrapped(wrapper: &[&str], name: &str, args: &[&str]) -> Running {
        let mut cmd = Command::new(wrapper[0]);
        cmd.args(&wrapper[1..]).arg(bin(name)).args(args);
        Self::spawn(name, cmd)
    }

    /// Starts a command made by the caller (`name` for messages): a binary other than [`bin`]'s, or one started
    /// under another argv[0].
    pub fn from_command(name: &str, cmd: Command) -> Running {
        Self::spawn(name, cmd)
    }

    fn spawn(name: &str, mut cmd: Command) -> Running {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Running { child, lines, seen: Vec::new(), stderr: Some(stderr), prog_ids: Vec::new() }
    }

    pub fn start(name: &str, args: &[&str]) -> Running {
        Self::start_with_env(name, args, &[])
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until a stdout line contains `needle` (the tool's "Tracing..." banner, say), and records the BPF
    /// programs the tool holds by then. Panics with everything printed so far on timeout or early exit.
    pub fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> &mut Self {
        let deadline = Instant::now() + timeout;
        loop {
            if self.seen.iter().any(|l| l.contains(needle)) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        self.fail(&format!("tool exited ({status}) before printing '{needle}'"));
                    }
                    if Instant::now() >= deadline {
                        self.fail(&format!("no line containing '{needle}' within {timeout:?}"));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.fail(&format!("stdout closed before a line containing '{needle}'"))
                }
            }
        }
        self.note_programs();
        self
    }

    /// Whether a line containing `needle` has been printed, waiting up to `timeout` for it; never panics (a test
    /// that makes an event until it is seen uses it).
    pub fn has_line_within(&mut self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.seen.iter().any(|l| l.contains(needle)) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            match self.lines.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// Waits until `n` more stdout lines have arrived than had been by the call (an interval tool's next rows, say).
    /// Panics with what the tool printed on timeout or early exit.
    pub fn wait_for_more_lines(&mut self, n: usize, timeout: Duration) -> &mut Self {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        let want = self.seen.len() + n;
        let deadline = Instant::now() + timeout;
        while self.seen.len() < want {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(_) => self.fail(&format!("fewer than {n} more lines within {timeout:?}")),
            }
        }
        self
    }

    /// Waits until the tool is tracing (see [`wait_attached`]) and records its BPF programs. Panics with what it
    /// printed if it ends first or takes longer than `timeout`.
    pub fn wait_attached(&mut self, timeout: Duration) -> &mut Self {
        match wait_attached(self.pid(), timeout) {
            Ok(ids) => {
                for id in ids {
                    if !self.prog_ids.contains(&id) {
                        self.prog_ids.push(id);
                    }
                }
                self
            }
            Err(why) => self.fail(&why),
        }
    }

    /// Remembers the BPF programs the tool holds now (for the leak check after it exits).
    pub fn note_programs(&mut self) {
        for id in prog_ids_of(self.pid()) {
            if !self.prog_ids.contains(&id) {
                self.prog_ids.push(id);
            }
        }
    }

    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        let stderr = self.stderr.take().and_then(|t| t.join().ok()).unwrap_or_default();
        panic!("{why}\nstdout so far:\n{}\nstderr:\n{stderr}", self.seen.join("\n"));
    }

    /// Sends `signal` (e.g. `libc::SIGINT`) to the tool.
    pub fn signal(&self, signal: i32) {
        // SAFETY: plain kill(2) on our own child.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// Waits for the tool to exit by itself (killing it after `timeout`, which fails the test).
    pub fn finish(mut self, timeout: Duration) -> Finished {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                self.fail(&format!("tool did not exit within {timeout:?}"));
            }
            self.note_programs();
            thread::sleep(Duration::from_millis(20));
        };
        let mut stdout_lines = std::mem::take(&mut self.seen);
        // The reader thread ends at EOF, after the child exits.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            stdout_lines.push(line);
        }
        let stderr = self.stderr.take().and_then(|t| t.join().ok()).unwrap_or_default();
        let mut stdout = stdout_lines.join("\n");
        if !stdout.is_empty() {
            stdout.push('\n');
        }
        Finished { status, stdout, stderr, prog_ids: std::mem::take(&mut self.prog_ids) }
    }
}

impl Drop for Running {
    /// A test that fails half-way must not leave its tool tracing: kill it if it is still running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A child process (an anchor tool, a workload) that is killed if the test ends before it does.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits until process `pid` sleeps (state S: a helper blocked reading its go byte has finished loading, and makes
/// no run of its own until woken). Panics after `timeout`, or as soon as the process has exited (a zombie, or
/// gone): a helper that could not start (the arm64 matrix's prebuild runs its tests where arm64 helpers cannot
/// run) fails at once.
pub fn wait_sleeping(pid: u32, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command name, which is in parentheses and may hold spaces.
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        match state {
            Some('S') => return,
            Some('Z' | 'X') | None => panic!("process {pid} exited before it went to sleep"),
            _ => {}
        }
        assert!(Instant::now() < deadline, "process {pid} did not go to sleep within {timeout:?}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// The number of times process `pid` (its main thread) has run on a CPU: /proc/PID/schedstat's third field.
pub fn schedstat_runs(pid: u32) -> u64 {
    let text = fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
    text.split_whitespace().nth(2).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("schedstat of {pid}: {text}"))
}

/// Runs `check` over `cases` on `workers` threads; returns what the failing ones said. For sweeps of many short
/// tool runs (bad_input, conformance), which mostly wait on the tools.
pub fn check_all<C: Send + 'static>(cases: Vec<C>, workers: usize, check: fn(&C) -> Option<String>) -> Vec<String> {
    let queue = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(cases)));
    let failures = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let (queue, failures) = (queue.clone(), failures.clone());
            thread::spawn(move || loop {
                let Some(case) = queue.lock().unwrap().pop_front() else { break };
                if let Some(failure) = check(&case) {
                    failures.lock().unwrap().push(failure);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let failures = failures.lock().unwrap().clone();
    failures
}

/// Runs a tool to completion with no workload (for argument errors and such).
pub fn run_tool(name: &str, args: &[&str]) -> Finished {
    Running::start(name, args).finish(Duration::from_secs(30))
}

/// Completed I/O requests of a disk so far: reads + writes + discards + flushes from `/proc/diskstats`.
pub fn disk_completed_ios(disk: &str) -> u64 {
    let stats = fs::read_to_string("/proc/diskstats").unwrap();
    for line in stats.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(2) == Some(&disk) {
            let n = |i: usize| fields.get(3 + i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            return n(0) + n(4) + n(11) + n(15);
        }
    }
    panic!("disk {disk} not in /proc/diskstats");
}

/// The whole disk that holds the root file system, e.g. `vda`.
pub fn root_disk() -> String {
    let stats = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dev = stats
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(4) == Some(&"/")).then(|| f[2].to_string())
        })
        .expect("root mount in mountinfo");
    let sys = fs::canonicalize(format!("/sys/dev/block/{dev}")).expect("root device in /sys/dev/block");
    let disk = if sys.join("partition").exists() { sys.parent().unwrap().to_path_buf() } else { sys };
    disk.file_name().unwrap().to_string_lossy().into_owned()
}

/// Writes `blocks` 4 KiB blocks to `path` with O_DIRECT (each reaching the block layer as its own request).
pub fn direct_writes(path: &Path, blocks: u32) {
    let status = Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", path.display()),
            "bs=4k",
            &format!("count={blocks}"),
            "oflag=direct",
            "status=none",
        ])
        .status()
        .expect("dd");
    assert!(status.success(), "dd failed");
}

/// Sum of the counts in every BCC-style histogram row (`   64 -> 127   : 12   |***|`) of `text`.
pub fn hist_total(text: &str) -> u64 {
    hist_rows(text).iter().map(|r| r.2).sum()
}

/// (low, high, count) of every histogram row of `text`.
pub fn hist_rows(text: &str) -> Vec<(u64, u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let (range, rest) = line.split_once(':')?;
            let (low, high) = range.split_once("->")?;
            let count = rest.split('|').next()?.trim();
            Some((low.trim().parse().ok()?, high.trim().parse().ok()?, count.parse().ok()?))
        })
        .collect()
}

/// The records a tool says it may have missed because the kernel skipped runs of its probes (its stderr line
/// `tool: lost N <what> (at most: the kernel skipped ...)`), 0 if it says none.
pub fn skipped_runs(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter(|l| l.contains("(at most: the kernel skipped"))
        .find_map(|l| l.split_once(": lost ")?.1.split_once(' ')?.0.parse().ok())
        .unwrap_or(0)
}

/// Parses every line of `text` as JSON, panicking with the line if one is not, or if it is not what the tool's
/// documentation declares ([`documented_json`]). The line a tool adds when the kernel skipped runs of its probes
/// (`{"lost":N,...,"why":"at most: the kernel skipped ..."}`) is left out: it may come from any run, on kernels
/// where other BPF programs share the CPU; [`skipped_runs`] reads its count.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    let tool = std::env::var("CARGO_PKG_NAME").ok();
    json_lines_of(tool.as_deref().unwrap_or_default(), text)
}

/// [`json_lines`] of another tool's output than the one under test (biosnoop's test reads biotop's too).
pub fn json_lines_of(tool: &str, text: &str) -> Vec<serde_json::Value> {
    let schema = documented_json(tool);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            if let Some((tool, schema)) = schema {
                if let Err(why) = schema.check(&value) {
                    panic!("{tool}'s JSON is not what tools/{tool}/doc.md declares ({why}): {l}");
                }
            }
            value
        })
        .filter(|v| !v["why"].as_str().is_some_and(|why| why.starts_with("at most: the kernel skipped")))
        .collect()
}

/// The schema of the module common uses (docs/json.md's format), compiled here from the same file so that the
/// tests need not link common.
#[path = "../../common/src/output/schema.rs"]
pub mod schema;

/// The JSON a tool declares in its doc.md (`## JSON`). [`json_lines`] asks for the tool under test, the package
/// of the running test binary (`CARGO_PKG_NAME`, which cargo and nextest set), so every tool's tests check every
/// JSON line they read. None for a name that is no tool (the tests of tests/tests/*.rs, or a guest of the kernel
/// matrix, which has no sources); a tool whose test reads JSON must declare it.
pub fn documented_json(tool: &str) -> Option<(&str, &'static schema::Schema)> {
    static SCHEMAS: std::sync::Mutex<BTreeMap<String, Option<&'static schema::Schema>>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut schemas = SCHEMAS.lock().unwrap_or_else(|e| e.into_inner());
    let found = *schemas.entry(tool.to_owned()).or_insert_with(|| {
        let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools").join(tool).join("doc.md");
        let text = fs::read_to_string(&doc).ok().filter(|_| !tool.is_empty())?;
        let schema = schema::Schema::from_doc(&text)
            .unwrap_or_else(|e| panic!("tools/{tool}/doc.md: ## JSON: {e}"))
            .unwrap_or_else(|| panic!("{tool}'s test reads its JSON, but tools/{tool}/doc.md has no ## JSON part"));
        Some(&*Box::leak(Box::new(schema)))
    });
    found.map(|schema| (tool, schema))
}

/// The helper of argdist's and trace's tests (see work.c): calls `work(n)` known times, opens missing files and
/// writes to /dev/null; built with `-DTAG="name" -DMISSING=n -DNULL_OPENS=n`.
pub const WORK_C: &str = include_str!("work.c");
/// The helper of trace's and argdist's expression tests (its calls are listed at its top).
pub const EXPRS_C: &str = include_str!("exprs.c");

/// Compiles a C test helper (`source` is the program text) with `cc` and returns the executable's path.
/// Builds are cached by content in `target/test-helpers/` (per architecture, see [`helper_cache`]), so concurrent
/// tests share one binary per source. With `$COREBPF_HELPER_CROSS` set, the cross compiler `$PREFIX-gcc` builds it.
pub fn build_c_helper(name: &str, source: &str, flags: &[&str]) -> PathBuf {
    build_helper(name, (source, flags), "c", source, |src, exe| {
        let mut cmd = match helper_cross() {
            // Headers the cross C library lacks (sys/sdt.h, whose Debian package is per architecture) come last,
            // from include/ in the helper cache, libraries (OpenSSL's) from lib/ there (vm/vmtest.sh links the
            // machine's sys/sdt.h, and the arm64 guests' OpenSSL headers and libraries, there).
            Some(prefix) => {
                let mut cmd = Command::new(format!("{prefix}-gcc"));
                cmd.arg("-idirafter").arg(helper_cache().join("include"));
                cmd.arg("-L").arg(helper_cache().join("lib"));
                cmd
            }
            None => Command::new("cc"),
        };
        cmd.args(flags).arg("-o").arg(exe).arg(src).output().expect("cc")
    })
}

/// Set by the arm64 column of the VM kernel matrix when it prebuilds the helpers on this x86_64 machine (running
/// the aarch64 test binaries under QEMU's user mode): the GNU triple of the cross toolchain (`aarch64-linux-gnu`),
/// whose `gcc` compiles the C helpers (headers it lacks taken from `include/` of the helper cache) and links the
/// Rust ones (`rustc --target aarch64-unknown-linux-gnu`).
pub const HELPER_CROSS_ENV: &str = "COREBPF_HELPER_CROSS";

fn helper_cross() -> Option<String> {
    std::env::var(HELPER_CROSS_ENV).ok().filter(|p| !p.is_empty())
}

/// Where built helpers are cached: `target/test-helpers/` for x86_64 test binaries, `target/test-helpers/ARCH/`
/// for another architecture's (the arm64 matrix's cross-built tests), so the two never share a file name.
fn helper_cache() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-helpers");
    if cfg!(target_arch = "x86_64") {
        dir
    } else {
        dir.join(std::env::consts::ARCH)
    }
}

/// The shared part of building a test helper: a content-hashed name, a prebuilt copy when the guest provides
/// one, else `compile(source file, executable)` under a unique name and a link into place.
fn build_helper(
    name: &str,
    key: impl std::hash::Hash,
    ext: &str,
    source: &str,
    compile: impl FnOnce(&Path, &Path) -> std::process::Output,
) -> PathBuf {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::Hasher;
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    let file = format!("{name}-{:016x}", hasher.finish());
    if let Some(prebuilt) = prebuilt_helper(&file) {
        return prebuilt;
    }
    let dir = helper_cache();
    fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(&file);
    if exe.exists() {
        return exe;
    }
    // Build under a unique name, then link into place: atomic for concurrent tests.
    let tmp_src = dir.join(format!("{name}-{}-{:?}.{ext}", std::process::id(), thread::current().id()));
    let tmp_exe = tmp_src.with_extension("out");
    fs::write(&tmp_src, source).unwrap();
    let out = compile(&tmp_src, &tmp_exe);
    let _ = fs::remove_file(&tmp_src);
    assert!(out.status.success(), "compiling {name} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    // First build wins: a link never replaces an existing file, so a helper already running from `exe` (and
    // the uprobes attached to its inode) stays the same file for every test.
    let linked = fs::hard_link(&tmp_exe, &exe);
    let _ = fs::remove_file(&tmp_exe);
    if let Err(err) = linked {
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "installing {name}: {err}");
    }
    exe
}

/// Set (to anything) by the VM kernel matrix on the host: every test builds its C helpers with [`build_c_helper`]
/// and stops at its first [`bin`] call, before running a tool. So tests build their helpers before starting tools.
pub const PREBUILD_HELPERS_ENV: &str = "COREBPF_PREBUILD_HELPERS";

/// Set in the VM guest, which has no compiler: the folder of helpers prebuilt on the host (named as in
/// `target/test-helpers/`), which [`build_c_helper`] returns instead of compiling.
pub const HELPER_DIR_ENV: &str = "COREBPF_HELPER_DIR";

/// The prebuilt helper `file` from `$COREBPF_HELPER_DIR`, if that is set (panicking if the helper is not there).
fn prebuilt_helper(file: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os(HELPER_DIR_ENV)?);
    let exe = dir.join(file);
    assert!(
        exe.exists(),
        "test helper {file} was not prebuilt into {}: the test must build its helpers before it starts a tool \
         (vm/vmtest.sh prebuilds them with {PREBUILD_HELPERS_ENV}=1)",
        dir.display()
    );
    Some(exe)
}

/// Compiles a Rust test helper (`source` is the program text) with `rustc` (or `$RUSTC`) and returns the
/// executable's path; cached by content beside the C helpers, and taken from `$COREBPF_HELPER_DIR` when set.
pub fn build_rust_helper(name: &str, source: &str, flags: &[&str]) -> PathBuf {
    build_helper(name, ("rust", source, flags), "rs", source, |src, exe| {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let mut cmd = Command::new(rustc);
        if let Some(prefix) = helper_cross() {
            let arch = prefix.split('-').next().unwrap_or_default();
            cmd.args(["--target", &format!("{arch}-unknown-linux-gnu"), "-C", &format!("linker={prefix}-gcc")]);
        }
        cmd.args(["--crate-name", name, "--edition", "2021"])
            .args(flags)
            .arg("-o")
            .arg(exe)
            .arg(src)
            .output()
            .expect("rustc")
    })
}

/// Every BPF program loaded on the system now, as (id, name), from BPF_PROG_GET_NEXT_ID and
/// BPF_OBJ_GET_INFO_BY_FD (no bpftool needed). For checking that a tool which failed left nothing behind.
pub fn loaded_programs() -> Vec<(u32, String)> {
    const BPF_PROG_GET_NEXT_ID: libc::c_long = 11;
    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    // SAFETY (all three calls): bpf(2) reads `size` bytes of an attr that outlives the call, and writes at most
    // `info_len` bytes to `info`, which is that long.
    let bpf = |cmd: libc::c_long, attr: &[u32]| unsafe {
        libc::syscall(libc::SYS_bpf, cmd, attr.as_ptr(), std::mem::size_of_val(attr) as u32)
    };
    let mut programs = Vec::new();
    let mut id = 0u32;
    loop {
        // { start_id, next_id, open_flags }
        let mut attr = [id, 0, 0];
        // SAFETY: as above; the kernel writes next_id into attr.
        if unsafe { libc::syscall(libc::SYS_bpf, BPF_PROG_GET_NEXT_ID, attr.as_mut_ptr(), 12u32) } != 0 {
            break; // ENOENT: no more programs
        }
        id = attr[1];
        let fd = bpf(BPF_PROG_GET_FD_BY_ID, &[id, 0, 0]);
        if fd < 0 {
            continue; // freed meanwhile
        }
        // struct bpf_prog_info up to its name (offset 64, 16 bytes).
        let mut info = [0u8; 80];
        let ptr = info.as_mut_ptr() as u64;
        // { bpf_fd, info_len, info (u64) }
        let attr = [fd as u32, info.len() as u32, ptr as u32, (ptr >> 32) as u32];
        let ok = bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) == 0;
        // SAFETY: the fd was just returned to us and is closed once.
        unsafe { libc::close(fd as i32) };
        if ok {
            let name = &info[64..80];
            let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            programs.push((id, String::from_utf8_lossy(&name[..len]).into_owned()));
        }
    }
    programs
}

/// A plain HTTP/1.0 GET to `addr` (`127.0.0.1:9435`): (status, body). For the tools' `--prometheus` endpoints.
pub fn http_get(addr: &str, path: &str, accept: Option<&str>) -> (u16, String) {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{accept}\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

/// The cells of a `--heatmap` SVG: (column, slot, count) from each cell's data attributes.
pub fn heatmap_cells(svg: &str) -> Vec<(usize, usize, u64)> {
    svg.match_indices("data-column=\"")
        .map(|(i, _)| {
            let attr = |name: &str| -> u64 {
                let rest = &svg[i..];
                let at = rest.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                rest[at..].split('"').next().unwrap().parse().unwrap()
            };
            (attr("data-column") as usize, attr("data-slot") as usize, attr("data-count"))
        })
        .collect()
}

/// The columns of a `--heatmap` SVG that hold any event, in order, each as its slots' counts up to the highest
/// non-empty one: what a tool's JSON lines show, which print nothing for an interval without events.
pub fn heatmap_non_empty_columns(svg: &str) -> Vec<Vec<u64>> {
    let cells = heatmap_cells(svg);
    let columns = cells.iter().map(|c| c.0 + 1).max().unwrap_or(0);
    let mut drawn: Vec<Vec<u64>> = vec![Vec::new(); columns];
    for (column, slot, count) in cells {
        let col = &mut drawn[column];
        if col.len() <= slot {
            col.resize(slot + 1, 0);
        }
        col[slot] = count;
    }
    drawn.into_iter().map(|c| trim_slots(&c)).filter(|c| !c.is_empty()).collect()
}

/// Slot counts up to the highest non-empty one (none if all are empty).
pub fn trim_slots(slots: &[u64]) -> Vec<u64> {
    slots[..slots.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1)].to_vec()
}

/// The slot counts of JSON lines' `buckets` arrays added up, one total per group of consecutive lines whose
/// `group` field is the same (a report's time): what each report of a tool adds to its heat map.
pub fn json_bucket_sums(lines: &[serde_json::Value], group: &str) -> Vec<Vec<u64>> {
    let mut reports: Vec<(String, Vec<u64>)> = Vec::new();
    for v in lines {
        let key = v[group].to_string();
        if reports.last().is_none_or(|r| r.0 != key) {
            reports.push((key, Vec::new()));
        }
        let slots = &mut reports.last_mut().unwrap().1;
        for (i, b) in v["buckets"].as_array().expect("buckets").iter().enumerate() {
            if slots.len() <= i {
                slots.resize(i + 1, 0);
            }
            slots[i] += b["count"].as_u64().unwrap();
        }
    }
    reports.into_iter().map(|r| trim_slots(&r.1)).collect()
}

/// Starts a C helper's work with a "go" byte on its stdin, waits for its "done" line, closes stdin and reaps it,
/// failing the test if it did not finish its work or exited with an error (the block tools' I/O helpers).
pub fn go_and_wait(helper: &mut Child) {
    use std::io::{BufRead, BufReader, Write};
    let mut stdin = helper.stdin.take().expect("the helper's stdin");
    stdin.write_all(b"g").unwrap();
    let mut line = String::new();
    BufReader::new(helper.stdout.take().expect("the helper's stdout")).read_line(&mut line).unwrap();
    assert_eq!(line, "done\n", "the helper failed");
    drop(stdin);
    assert!(helper.wait().unwrap().success(), "the helper failed");
}

/// Seconds since the Unix epoch of a time as the tools write JSON's `time` (RFC 3339 with its UTC offset:
/// `2026-12-03T15:04:05.123+01:00`), so that a test can place a line on the clock its workload read.
pub fn rfc3339_epoch_secs(text: &str) -> f64 {
    let num = |r: std::ops::Range<usize>| -> i64 {
        text.get(r).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("not RFC 3339: {text}"))
    };
    let (y, m, d) = (num(0..4), num(5..7), num(8..10));
    // Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let rest = &text[19..];
    let (fraction, zone) = match rest.strip_prefix('.') {
        Some(f) => {
            let n = f.bytes().take_while(u8::is_ascii_digit).count();
            (format!("0.{}", &f[..n]).parse::<f64>().unwrap(), &f[n..])
        }
        None => (0.0, rest),
    };
    let offset = match zone {
        "Z" => 0,
        z => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            sign * (z[1..3].parse::<i64>().unwrap() * 3600 + z[4..6].parse::<i64>().unwrap() * 60)
        }
    };
    let secs = days * 86_400 + num(11..13) * 3600 + num(14..16) * 60 + num(17..19) - offset;
    secs as f64 + fraction
}

/// CLOCK_REALTIME less CLOCK_MONOTONIC, in seconds, read together: added to a monotonic reading (a helper's), it
/// gives the wall-clock time to compare with JSON's `time` ([`rfc3339_epoch_secs`]).
pub fn realtime_minus_monotonic() -> f64 {
    let before = monotonic_secs();
    let real = clock_secs(libc::CLOCK_REALTIME);
    let after = monotonic_secs();
    real - (before + after) / 2.0
}

/// CLOCK_MONOTONIC now, in seconds: the clock of the BPF side's timestamps and of the C helpers' readings.
pub fn monotonic_secs() -> f64 {
    clock_secs(libc::CLOCK_MONOTONIC)
}

fn clock_secs(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}
