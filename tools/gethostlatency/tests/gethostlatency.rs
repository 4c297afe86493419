// SPDX-License-Identifier: Apache-2.0 OR MIT
//! gethostlatency against real resolver calls: a C helper resolves known names N times each through getaddrinfo
//! and gethostbyname, and the tool must report exactly those calls, with the helper's PID, COMM and host.
//!
//! The helper runs in private mount and network namespaces: its own /etc/hosts holds a test name, its own
//! resolv.conf points at 127.0.0.1 on a loopback that is down, so the failing name fails at once and nothing
//! leaves the machine. Before its workload the helper resolves two warm-up names in a loop until the test sends it
//! a go byte on stdin; the test sends it once the tool has reported both, so the tool is known to be attached. The
//! workload ends with a sentinel name, after which every workload line has been printed.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::*;

const TOOL: &str = "gethostlatency";
/// BCC's columns: `%-9s %-7s %-16s %10s %s` (PID 7 wide).
const HEADER: &str = "TIME      PID     COMM                  LATms HOST";
const WARMUP_GAI: &str = "corebpf-warmup-gai.invalid";
const WARMUP_GHBN: &str = "corebpf-warmup-ghbn.invalid";
/// The helper's last call is on `corebpf-done-<its PID>.invalid`.
fn done_host(pid: u32) -> String {
    format!("corebpf-done-{pid}.invalid")
}
/// A name only the helper's private /etc/hosts knows.
const HOSTS_NAME: &str = "corebpf-hosts-entry";
const FAILING: &str = "nonexistent.invalid";
const COUNT: usize = 5;
const WAIT: Duration = Duration::from_secs(30);

const HELPER: &str = include_str!("resolver.c");

/// The helper built for the host; with `rpath`, it looks for its libc there first.
fn helper(rpath: Option<&str>) -> PathBuf {
    match rpath {
        None => build_c_helper("ghl-helper", HELPER, &["-O1"]),
        Some(dir) => build_c_helper("ghl-ownlibc", HELPER, &["-O1", &format!("-Wl,-rpath,{dir}")]),
    }
}

/// A scratch folder under /var/tmp, removed (with what is in it) when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(tag: &str) -> Self {
        let file = ScratchFile::new(tag);
        let dir = file.0.clone();
        drop(file);
        fs::create_dir_all(&dir).unwrap();
        ScratchDir(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The resolver configuration every helper gets: the test name in hosts, an unreachable name server.
fn write_resolver_files(etc: &Path) {
    fs::create_dir_all(etc).unwrap();
    fs::write(etc.join("hosts"), format!("127.0.0.1 localhost\n127.0.0.2 {HOSTS_NAME}\n")).unwrap();
    fs::write(etc.join("resolv.conf"), "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n").unwrap();
    fs::write(etc.join("nsswitch.conf"), "hosts: files dns\n").unwrap();
}

/// A helper process waiting for its go byte.
struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    _scratch: ScratchDir,
}

impl Helper {
    /// Starts `exe` in private mount and network namespaces with the test's hosts and resolv.conf.
    fn start(exe: &Path, names: &[&str]) -> Helper {
        Self::start_in_namespaces(exe, names, None)
    }

    /// As [`Helper::start`]; with `libdir`, a copy of libc is put there on a tmpfs that only the helper's mount
    /// namespace has.
    fn start_in_namespaces(exe: &Path, names: &[&str], libdir: Option<&str>) -> Helper {
        let scratch = ScratchDir::new("ghl-etc");
        write_resolver_files(&scratch.0);
        let mut script = String::new();
        if let Some(dir) = libdir {
            fs::create_dir_all(dir).unwrap();
            fs::copy(host_libc(), scratch.0.join("libc.so.6")).unwrap();
            script = format!("mount -t tmpfs corebpf-test {dir} && cp \"$1/libc.so.6\" {dir}/ && ");
        }
        script.push_str(
            "mount --bind \"$1/hosts\" /etc/hosts && mount --bind \"$1/resolv.conf\" /etc/resolv.conf \
             && mount --bind \"$1/nsswitch.conf\" /etc/nsswitch.conf && shift && exec \"$@\"",
        );
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--net", "sh", "-c", &script, "sh"]).arg(&scratch.0).arg(exe).arg(COUNT.to_string());
        Self::spawn(cmd, names, scratch)
    }

    /// Starts `/helper` chrooted into `root`, in private mount and network namespaces.
    fn start_chrooted(root: ScratchDir, names: &[&str]) -> Helper {
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--net", "chroot"]).arg(&root.0).args(["/helper", &COUNT.to_string()]);
        Self::spawn(cmd, names, root)
    }

    fn spawn(mut cmd: Command, names: &[&str], scratch: ScratchDir) -> Helper {
        cmd.args(names).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("starting the helper with unshare");
        let stdin = child.stdin.take();
        Helper { child, stdin, _scratch: scratch }
    }

    /// The helper's PID (unshare and chroot exec, so it is the PID of the child we started).
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The helper's COMM, once it has exec'd (it loops on its warm-up names by then).
    fn comm(&self, exe_name: &str) -> String {
        let want: String = exe_name.chars().take(15).collect();
        let deadline = Instant::now() + WAIT;
        loop {
            let comm = fs::read_to_string(format!("/proc/{}/comm", self.pid())).unwrap_or_default();
            if comm.trim() == want {
                return want;
            }
            assert!(Instant::now() < deadline, "helper never became {want} (comm {comm:?})");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The helper's `/proc/PID/maps` once it maps `needle`, or as it is after WAIT: its loader maps libc only
    /// after the exec that changes its COMM, so reading the maps at once can race the loader.
    fn maps_once_mapped(&self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let maps = fs::read_to_string(format!("/proc/{}/maps", self.pid())).unwrap_or_default();
            if maps.contains(needle) || Instant::now() >= deadline {
                return maps;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends the go byte, waits for the helper to finish, and returns what it printed: its own account of which
    /// names resolved.
    fn go_and_wait(mut self) -> String {
        self.stdin.take().unwrap().write_all(b"g").unwrap();
        let mut out = String::new();
        self.child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        let mut err = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "helper failed ({status}):\n{out}\n{err}");
        out
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One call as the tool reported it.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    pid: u32,
    comm: String,
    host: String,
    latency: String,
    function: Option<String>,
    truncated: bool,
}

/// Parses BCC's text line `TIME PID COMM LATms HOST` (COMM and HOST without spaces here).
fn parse_text(line: &str) -> Option<Call> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 5 || f[0] == "TIME" {
        return None;
    }
    Some(Call {
        pid: f[1].parse().ok()?,
        comm: f[2].to_string(),
        latency: f[3].to_string(),
        host: f[4].to_string(),
        function: None,
        truncated: false,
    })
}

/// One JSON line as a call (checked against the doc's JSON part by `json_lines`); None for the lost-events line.
fn parse_json(line: &str) -> Option<Call> {
    let v = corebpf_tests::json_lines(line).pop()?;
    Some(Call {
        pid: v["pid"].as_u64()? as u32,
        comm: v["comm"].as_str()?.to_string(),
        host: v["host"].as_str()?.to_string(),
        latency: v["latency_ns"].as_u64()?.to_string(),
        function: Some(v["function"].as_str()?.to_string()),
        truncated: v["truncated"].as_bool()?,
    })
}

/// A tool started with its stdout read line by line, so the test can wait for particular calls.
struct Tracer {
    run: Running,
    json: bool,
}

impl Tracer {
    fn start(bin_name: &str, args: &[&str]) -> Tracer {
        let json = args.contains(&"--json");
        Tracer { run: Running::start(bin_name, args), json }
    }

    /// Waits until the tool is attached: it has printed its header (after attaching), or, in JSON, reported a
    /// warm-up gethostbyname call by that function (whose entry probe is attached last of those the helper uses).
    fn wait_attached(&mut self) -> &mut Self {
        let needle = if self.json {
            format!("\"function\":\"gethostbyname\",\"host\":\"{WARMUP_GHBN}\"")
        } else {
            "LATms".to_string()
        };
        self.run.wait_for_line(&needle, WAIT);
        self
    }

    /// Waits for the last call of helper `pid`: all its workload has been printed by then.
    fn wait_done(&mut self, pid: u32) -> &mut Self {
        let host = done_host(pid);
        let needle = if self.json { format!("\"host\":\"{host}\"") } else { format!(" {host}") };
        self.run.wait_for_line(&needle, WAIT);
        self
    }

    fn stop_with(self, signal: i32) -> (Vec<Call>, Finished) {
        self.run.signal(signal);
        let done = self.run.finish(WAIT);
        done.assert_success();
        let parse = if self.json { parse_json } else { parse_text };
        let calls = done.stdout.lines().filter_map(parse).collect();
        (calls, done)
    }

    fn stop(self) -> (Vec<Call>, Finished) {
        self.stop_with(libc::SIGINT)
    }
}

/// The workload calls of process `pid`, warm-up calls left out.
fn workload(calls: &[Call], pid: u32) -> Vec<Call> {
    calls.iter().filter(|c| c.pid == pid && c.host != WARMUP_GAI && c.host != WARMUP_GHBN).cloned().collect()
}

/// The hosts the helper resolves, in order: each name COUNT times, by getaddrinfo then gethostbyname; then the
/// sentinel (by getaddrinfo).
fn expected_hosts(names: &[&str], pid: u32) -> Vec<(String, &'static str)> {
    let mut hosts = Vec::new();
    for _ in 0..COUNT {
        for name in names {
            hosts.push((name.to_string(), "getaddrinfo"));
            hosts.push((name.to_string(), "gethostbyname"));
        }
    }
    hosts.push((done_host(pid), "getaddrinfo"));
    hosts
}

/// Asserts the helper's calls are exactly the expected ones, in order, with its PID and COMM.
fn assert_calls(calls: &[Call], names: &[&str], pid: u32, comm: &str, stdout: &str) {
    let got = workload(calls, pid);
    let want = expected_hosts(names, pid);
    let hosts: Vec<&str> = got.iter().map(|c| c.host.as_str()).collect();
    let want_hosts: Vec<&str> = want.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(hosts, want_hosts, "calls of PID {pid}:\n{stdout}");
    for (call, (_, function)) in got.iter().zip(&want) {
        assert_eq!(call.comm, comm, "{call:?}");
        if let Some(f) = &call.function {
            // gethostbyname calls gethostbyname_r inside: only the outer call is reported.
            assert_eq!(f, function, "{call:?}");
            assert!(call.latency.parse::<u64>().unwrap() > 0, "{call:?}");
        } else {
            let ms: f64 = call.latency.parse().unwrap_or_else(|_| panic!("LATms of {call:?}"));
            assert!(ms >= 0.0 && call.latency.split_once('.').is_some_and(|(_, d)| d.len() == 2), "{call:?}");
        }
    }
}

/// The helper's own account: the names it was given resolved (or failed) as the test arranged.
fn assert_resolved_as_arranged(helper_out: &str, names: &[&str]) {
    for name in names {
        let expect = if *name == "localhost" || *name == HOSTS_NAME { "ok" } else { "fail" };
        for func in ["getaddrinfo", "gethostbyname"] {
            let line = format!("{func} {name} {expect}");
            assert_eq!(helper_out.lines().filter(|l| *l == line).count(), COUNT, "'{line}' in:\n{helper_out}");
        }
    }
}

fn exe_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn reports_each_call_once_with_pid_comm_and_host() {
    let exe = helper(None);
    let names = ["localhost", HOSTS_NAME, FAILING];
    let helper = Helper::start(&exe, &names);
    let comm = helper.comm(&exe_name(&exe));
    let pid = helper.pid();
    let mut tracer = Tracer::start(TOOL, &[]);
    tracer.wait_attached();
    let helper_out = helper.go_and_wait();
    tracer.wait_done(pid);
    let (calls, done) = tracer.stop();

    assert_resolved_as_arranged(&helper_out, &names);
    assert_eq!(done.stdout.lines().next(), Some(HEADER), "{}", done.stdout);
    assert_calls(&calls, &names, pid, &comm, &done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn json_names_the_outer_function_and_marks_long_hosts_truncated() {
    let exe = helper(None);
    let long = "a".repeat(300);
    let names = ["localhost", FAILING, long.as_str()];
    let helper = Helper::start(&exe, &names);
    let comm = helper.comm(&exe_name(&exe));
    let pid = helper.pid().to_string();
    let mut tracer = Tracer::start(TOOL, &["--json", "-p", &pid]);
    tracer.wait_attached();
    let helper_out = helper.go_and_wait();
    let pid: u32 = pid.parse().unwrap();
    tracer.wait_done(pid);
    let (calls, done) = tracer.stop();

    assert_resolved_as_arranged(&helper_out, &names);
    // 255 characters are captured; the rest is marked.
    let shown = format!("{}...", &long[..255]);
    let calls: Vec<Call> = calls
        .into_iter()
        .map(|mut c| {
            if c.host == shown {
                assert!(c.truncated, "{c:?}");
                c.host = long.clone();
            } else {
                assert!(!c.truncated, "{c:?}");
            }
            c
        })
        .collect();
    assert!(calls.iter().all(|c| c.pid == pid), "-p {pid} reported other processes:\n{}", done.stdout);
    assert_calls(&calls, &names, pid, &comm, &done.stdout);
}

#[test]
fn pid_filter_reports_only_that_process() {
    let exe = helper(None);
    let names = ["localhost", FAILING];
    let traced = Helper::start(&exe, &names);
    let other = Helper::start(&exe, &names);
    let comm = traced.comm(&exe_name(&exe));
    other.comm(&exe_name(&exe));
    let (pid, other_pid) = (traced.pid(), other.pid());
    let mut tracer = Tracer::start(TOOL, &["-p", &pid.to_string()]);
    tracer.wait_attached();
    // Both resolve while the tool is attached; the other one first, and to its end.
    other.go_and_wait();
    traced.go_and_wait();
    tracer.wait_done(pid);
    let (calls, done) = tracer.stop_with(libc::SIGTERM);

    assert!(calls.iter().all(|c| c.pid == pid), "PID {other_pid} (or another) reported:\n{}", done.stdout);
    assert_calls(&calls, &names, pid, &comm, &done.stdout);
}

/// The ELF interpreter (PT_INTERP) of a 64-bit executable, e.g. `/lib64/ld-linux-x86-64.so.2`.
fn interpreter(exe: &Path) -> String {
    let elf = fs::read(exe).unwrap();
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap()) == 3 {
            let (off, size) = (u64_at(ph + 8), u64_at(ph + 32));
            return String::from_utf8_lossy(&elf[off..off + size]).trim_end_matches('\0').to_string();
        }
    }
    panic!("{} has no PT_INTERP", exe.display());
}

/// A root file system for the helper: the helper, copies of the loader and of libc (at /opt/altlib, a path the
/// host does not have), and the resolver files.
fn chroot_tree(exe: &Path) -> ScratchDir {
    let root = ScratchDir::new("ghl-root");
    let copy = |from: &Path, to: &str| {
        let dest = root.0.join(to.trim_start_matches('/'));
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::copy(from, &dest).unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), dest.display()));
    };
    let host_libc = host_libc();
    copy(exe, "/helper");
    copy(&host_libc, "/opt/altlib/libc.so.6");
    let interp = interpreter(exe);
    copy(Path::new(&interp), &interp);
    write_resolver_files(&root.0.join("etc"));
    root
}

/// The libc this test process uses (the helpers are built against the same one).
fn host_libc() -> PathBuf {
    let maps = fs::read_to_string("/proc/self/maps").unwrap();
    let path = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| Path::new(p).file_name().is_some_and(|n| n.to_string_lossy().starts_with("libc.so")))
        .expect("libc in /proc/self/maps");
    PathBuf::from(path)
}

#[test]
fn traces_a_chrooted_process_through_its_own_libc() {
    let exe = helper(Some("/opt/altlib"));
    let root = chroot_tree(&exe);
    let root_path = root.0.clone();
    let names = ["localhost", HOSTS_NAME, FAILING];
    let helper = Helper::start_chrooted(root, &names);
    let comm = helper.comm("helper");
    let pid = helper.pid();
    let libc_seen = helper.maps_once_mapped("/opt/altlib/libc.so.6");
    assert!(libc_seen.contains("/opt/altlib/libc.so.6"), "the helper did not load its own libc copy:\n{libc_seen}");
    let mut tracer = Tracer::start(TOOL, &["-v", "-p", &pid.to_string()]);
    tracer.wait_attached();
    let helper_out = helper.go_and_wait();
    tracer.wait_done(pid);
    let (calls, done) = tracer.stop();

    // The kernel shows a chrooted process's files with our root's paths: the copy's own path is probed.
    let probed = format!("in {}", root_path.join("opt/altlib/libc.so.6").display());
    assert!(done.stderr.contains(&probed), "expected '{probed}' on stderr:\n{}", done.stderr);
    assert_resolved_as_arranged(&helper_out, &names);
    assert_calls(&calls, &names, pid, &comm, &done.stdout);
}

/// Where the mount-namespace helper looks for its libc first: a tmpfs mounted in its own namespace, so the host
/// sees an empty folder there.
const NS_LIBDIR: &str = "/var/tmp/corebpf-tests/ghl-nslib";

#[test]
fn traces_a_process_in_its_own_mount_namespace_through_proc_root() {
    let exe = helper(Some(NS_LIBDIR));
    let names = ["localhost", HOSTS_NAME, FAILING];
    let helper = Helper::start_in_namespaces(&exe, &names, Some(NS_LIBDIR));
    let comm = helper.comm(&exe_name(&exe));
    let pid = helper.pid();
    let ns_libc = format!("{NS_LIBDIR}/libc.so.6");
    let maps = helper.maps_once_mapped(&ns_libc);
    assert!(maps.contains(&ns_libc), "the helper did not load the libc in its namespace:\n{maps}");
    assert!(!Path::new(&ns_libc).exists(), "{ns_libc} should exist only in the helper's mount namespace");
    let mut tracer = Tracer::start(TOOL, &["-v", "-p", &pid.to_string()]);
    tracer.wait_attached();
    let helper_out = helper.go_and_wait();
    tracer.wait_done(pid);
    let (calls, done) = tracer.stop();

    let probed = format!("in /proc/{pid}/root{ns_libc}");
    assert!(done.stderr.contains(&probed), "expected '{probed}' on stderr:\n{}", done.stderr);
    assert_resolved_as_arranged(&helper_out, &names);
    assert_calls(&calls, &names, pid, &comm, &done.stdout);
}

/// Done-when check: libbpf-tools' gethostlatency, run on the same workload at the same time, reports no call that
/// ours does not.
#[test]
fn reports_every_call_libbpf_tools_reports() {
    let exe = helper(None);
    let names = ["localhost", HOSTS_NAME, FAILING];
    let helper = Helper::start(&exe, &names);
    let comm = helper.comm(&exe_name(&exe));
    let pid = helper.pid();
    assert!(Path::new("/usr/sbin/gethostlatency").exists(), "libbpf-tools is not installed (scripts/deps.sh does)");
    let mut ours = Tracer::start(TOOL, &["-p", &pid.to_string()]);
    // stdbuf makes the C tool's piped output line-buffered, so the test can wait for its lines; `bin` takes an
    // absolute path as it is.
    let anchor_args = ["-oL", "/usr/sbin/gethostlatency", "-p", &pid.to_string()];
    let mut anchor = Tracer::start("/usr/bin/stdbuf", &anchor_args);
    ours.wait_attached();
    anchor.wait_attached();
    let helper_out = helper.go_and_wait();
    ours.wait_done(pid);
    anchor.wait_done(pid);
    let (our_calls, our_done) = ours.stop();
    let (anchor_calls, anchor_done) = anchor.stop();

    assert_resolved_as_arranged(&helper_out, &names);
    assert_calls(&our_calls, &names, pid, &comm, &our_done.stdout);
    let theirs = workload(&anchor_calls, pid);
    assert!(theirs.len() >= COUNT * names.len(), "libbpf-tools saw too little:\n{}", anchor_done.stdout);
    let mut ours_left = workload(&our_calls, pid);
    for call in &theirs {
        let at = ours_left.iter().position(|c| c.host == call.host && c.comm == call.comm);
        assert!(at.is_some(), "libbpf-tools reported {call:?}, we did not:\nours:\n{}", our_done.stdout);
        ours_left.remove(at.unwrap());
    }
}

/// Bad input: one line on stderr naming what was wrong, a non-zero exit, nothing attached.
#[test]
fn bad_pid_and_libc_paths_are_one_clear_error() {
    let no_resolver = build_c_helper("ghl-noresolver", include_str!("noresolver.c"), &[]);
    let not_elf = ScratchFile::new("ghl-not-elf");
    fs::write(&not_elf.0, "not a library\n").unwrap();

    // An unknown PID is one line and exit 1 (as every tool says it); a malformed one a usage error (exit 2).
    let done = run_tool(TOOL, &["-p", "999999999"]);
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert_eq!(done.stderr, "gethostlatency: no process with PID 999999999\n");
    let done = run_tool(TOOL, &["-p", "12x"]);
    assert_eq!(done.status.code(), Some(2), "{done:?}");
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);

    let cases = [
        ("/nonexistent/libc.so.6".to_string(), "-l: /nonexistent/libc.so.6: no such file"),
        // Issue 23 item 2: a bare name that is neither here nor on the loader's path says so.
        ("libnosuch-corebpf.so".to_string(), "no such file in"),
        (not_elf.0.display().to_string(), "is not an ELF file"),
        (no_resolver.display().to_string(), "has none of the functions getaddrinfo, gethostbyname"),
    ];
    for (path, message) in cases {
        let done = run_tool(TOOL, &["-l", &path]);
        assert_eq!(done.status.code(), Some(1), "-l {path}: {done:?}");
        assert_eq!(done.stderr.lines().count(), 1, "-l {path}: {}", done.stderr);
        assert!(done.stderr.starts_with("gethostlatency: "), "-l {path}: {}", done.stderr);
        assert!(done.stderr.contains(message) && done.stderr.contains(&path), "-l {path}: {}", done.stderr);
        assert!(done.stdout.is_empty(), "-l {path}: {}", done.stdout);
    }
}

/// `gethostlatency | head -1`: the reader going away ends the tool at once, quietly, with status 0, although no
/// call comes after it (the helper never gets its go byte): stdout is watched, not just written to.
#[test]
fn closed_pipe_ends_quietly() {
    // A process that makes no resolver call: nothing is ever written after the header. bash waiting on its
    // stdin, not sleep(1): in the kernel matrix's guest sleep is busybox's, linked statically, with no libc.
    let mut idle = Command::new("bash").args(["-c", "read -r _"]).stdin(Stdio::piped()).spawn().unwrap();
    let idle_pid = idle.id().to_string();
    let deadline = Instant::now() + WAIT;
    while !fs::read_to_string(format!("/proc/{idle_pid}/maps")).unwrap_or_default().contains("libc") {
        assert!(Instant::now() < deadline, "sleep never mapped libc");
        thread::sleep(Duration::from_millis(10));
    }
    let mut tool = Command::new(bin(TOOL))
        .args(["-p", &idle_pid])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(tool.stdout.take().unwrap());
    let mut header = String::new();
    reader.read_line(&mut header).unwrap();
    assert_eq!(header.trim_end(), HEADER);
    drop(reader);

    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = tool.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = tool.kill();
            let _ = idle.kill();
            panic!("gethostlatency kept running after its stdout was closed");
        }
        thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    tool.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let _ = idle.kill();
    let _ = idle.wait();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

const FIRST_CALL: &str = include_str!("first_call.c");

/// Issue 21: the host of a process's very first lookup is named, for every resolver function (the entry probe
/// cannot read the name's page, so it is read again when the call returns).
#[test]
fn first_call_of_a_fresh_process_is_named_for_every_function() {
    let exe = build_c_helper("ghl-first-call", FIRST_CALL, &["-O1"]);
    let scratch = ScratchDir::new("ghl-first-etc");
    write_resolver_files(&scratch.0);
    let mut tracer = Tracer::start(TOOL, &[]);
    tracer.wait_attached();
    let script = "mount --bind \"$1/hosts\" /etc/hosts && mount --bind \"$1/resolv.conf\" /etc/resolv.conf \
                  && mount --bind \"$1/nsswitch.conf\" /etc/nsswitch.conf && shift && exec \"$@\"";
    let hosts = ["getaddrinfo", "gethostbyname", "gethostbyname2", "gethostbyname-r", "gethostbyname2-r"];
    let mut wanted = Vec::new();
    for (which, name) in hosts.iter().enumerate() {
        let mut child = Command::new("unshare")
            .args(["--mount", "--net", "sh", "-c", script, "sh"])
            .arg(&scratch.0)
            .arg(&exe)
            .arg(which.to_string())
            .spawn()
            .unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let host = format!("corebpf-first-{name}.invalid");
        // An unnamed call would print no host: the wait fails, showing what was printed.
        tracer.run.wait_for_line(&format!(" {host}"), WAIT);
        wanted.push((pid, host));
    }
    let (calls, done) = tracer.stop();
    for (pid, host) in wanted {
        let got: Vec<&Call> = calls.iter().filter(|c| c.pid == pid).collect();
        assert_eq!(got.len(), 1, "calls of PID {pid} ({host}):\n{}", done.stdout);
        assert_eq!(got[0].host, host, "PID {pid}:\n{}", done.stdout);
    }
}

/// Where the `-l` test's helper finds its libc first (its rpath): a private copy, named by the tool with `-l`.
const COPY_LIBDIR: &str = "/var/tmp/corebpf-tests/ghl-lcopy";

/// Issue 21 and issue 23 item 2: `-l libc.so.6`, a bare file name, is the file in the current directory (a
/// private copy the helper loads), not the system's library of that name; `-v` names the file probed.
#[test]
fn libc_flag_takes_a_file_in_the_current_directory() {
    let exe = helper(Some(COPY_LIBDIR));
    fs::create_dir_all(COPY_LIBDIR).unwrap();
    let copy = Path::new(COPY_LIBDIR).join("libc.so.6");
    if !copy.exists() {
        let tmp = Path::new(COPY_LIBDIR).join(format!("libc.so.6.{}", std::process::id()));
        fs::copy(host_libc(), &tmp).unwrap();
        fs::rename(&tmp, &copy).unwrap();
    }
    let names = ["localhost", HOSTS_NAME];
    let helper = Helper::start(&exe, &names);
    let comm = helper.comm(&exe_name(&exe));
    let pid = helper.pid();
    let maps = helper.maps_once_mapped(&copy.display().to_string());
    assert!(maps.contains(&copy.display().to_string()), "the helper did not load the copy:\n{maps}");
    let script = format!("cd {COPY_LIBDIR} && exec {} -v -l libc.so.6 -p {pid}", bin(TOOL).display());
    let mut tracer = Tracer::start("/bin/sh", &["-c", &script]);
    tracer.wait_attached();
    let helper_out = helper.go_and_wait();
    tracer.wait_done(pid);
    let (calls, done) = tracer.stop();

    let probed = format!("in {}", copy.display());
    assert!(done.stderr.contains(&probed), "expected '{probed}' on stderr:\n{}", done.stderr);
    assert_resolved_as_arranged(&helper_out, &names);
    assert_calls(&calls, &names, pid, &comm, &done.stdout);
}

/// Issue 21: a musl program (Alpine's C library) is traced through musl's resolver functions in its loader.
#[test]
fn traces_a_musl_program() {
    let specs = "/usr/lib/x86_64-linux-musl/musl-gcc.specs";
    assert!(Path::new(specs).exists(), "musl's toolchain is needed: apt-get install musl-tools (scripts/deps.sh)");
    let exe = build_c_helper("ghl-musl", HELPER, &["-O1", "-specs", specs]);
    let names = ["localhost", HOSTS_NAME];
    let helper = Helper::start(&exe, &names);
    let comm = helper.comm(&exe_name(&exe));
    let pid = helper.pid();
    helper.maps_once_mapped("musl");
    let mut tracer = Tracer::start(TOOL, &["-v", "-p", &pid.to_string()]);
    tracer.wait_attached();
    let helper_out = helper.go_and_wait();
    tracer.wait_done(pid);
    let (calls, done) = tracer.stop();

    assert!(done.stderr.contains("musl"), "musl's library not probed:\n{}", done.stderr);
    assert_resolved_as_arranged(&helper_out, &names);
    assert_calls(&calls, &names, pid, &comm, &done.stdout);
}

/// Issue 21: a statically linked program has no C library to probe: one line says so and names the flag.
#[test]
fn a_static_program_gets_one_line_naming_the_flag() {
    let exe = build_c_helper("ghl-static", include_str!("static_pause.c"), &["-static"]);
    // Killed when dropped, also when an assertion fails first.
    struct KillOnDrop(Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = KillOnDrop(Command::new(&exe).spawn().unwrap());
    let pid = child.0.id();
    let deadline = Instant::now() + WAIT;
    while !fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default().contains("ghl-static") {
        assert!(Instant::now() < deadline, "the static helper never started");
        thread::sleep(Duration::from_millis(10));
    }
    let done = run_tool(TOOL, &["-p", &pid.to_string()]);
    drop(child);
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert!(done.stderr.contains("no shared C library to probe"), "{}", done.stderr);
    assert!(done.stderr.contains(&format!("-l /proc/{pid}/exe")), "{}", done.stderr);
}
