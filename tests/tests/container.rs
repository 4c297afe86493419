// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The exporter as fleets run it: its image (packaging/exporter/Dockerfile, `FROM scratch` around the static
//! binary; no registry is needed) run by Docker with one added capability, never `--privileged`, serving the
//! metrics of a workload that runs in another container (a static helper alone in an image of its own, which
//! makes exactly N getppid calls, counted by `syscount -p` with the workload's host PID); and the same image
//! without the capability, which must say in one line what it lacks. And `--container NAME`: bindsnoop given one of
//! two containers by name shows exactly that one's binds and none of the other's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::prom::{free_addr, promtool_accepts, sample, scrape};
use corebpf_tests::*;

const CALLS: u64 = 53;
const WORKLOAD: &str = include_str!("container_calls.c");
const BINDS: &str = include_str!("container_binds.c");

fn docker(args: &[&str]) -> Output {
    Command::new("docker").args(args).stdin(Stdio::null()).output().expect("docker (the machine's engine)")
}

fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// An image built for this test from a folder of files, removed when dropped.
struct Image(String);

impl Image {
    /// Builds `tag` from a scratch folder holding `files` (source path, name in the folder) and `dockerfile`.
    fn build(tag: &str, files: &[(PathBuf, &str)], dockerfile: &str) -> Image {
        let dir = std::env::temp_dir().join(format!("corebpf-image-{tag}").replace(':', "-"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (from, name) in files {
            std::fs::copy(from, dir.join(name)).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        }
        std::fs::write(dir.join("Dockerfile"), dockerfile).unwrap();
        let out = docker(&["build", "-q", "-t", tag, &dir.display().to_string()]);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(out.status.success(), "docker build {tag}: {}", String::from_utf8_lossy(&out.stderr));
        Image(tag.to_string())
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = docker(&["rmi", "-f", &self.0]);
    }
}

/// A container by name, removed (killed first) when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.0]);
    }
}

/// packaging/exporter/, relative to this test crate.
fn packaging(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/exporter").join(file)
}

/// The exporter's image, as `make image` builds it, from the static binary the tests run.
fn exporter_image(tag: &str) -> Image {
    let binary = std::fs::canonicalize(bin("corebpf-tools")).unwrap();
    let ldd = Command::new("ldd").arg(&binary).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&ldd.stdout), String::from_utf8_lossy(&ldd.stderr));
    assert!(
        said.contains("not a dynamic executable") || said.contains("statically linked"),
        "{} is not static (make static): {said}",
        binary.display()
    );
    let dockerfile = std::fs::read_to_string(packaging("Dockerfile")).unwrap();
    Image::build(tag, &[(binary, "corebpf-tools"), (packaging("exporter.conf"), "exporter.conf")], &dockerfile)
}

#[test]
fn the_exporter_image_counts_a_workload_in_another_container() {
    let me = std::process::id();
    let calls = build_c_helper("container-calls", WORKLOAD, &["-static", "-O2"]);
    let image = exporter_image(&format!("corebpf-test-exporter:{me}"));
    let workload_image = Image::build(
        &format!("corebpf-test-workload:{me}"),
        &[(calls, "calls")],
        &format!("FROM scratch\nCOPY calls /calls\nENTRYPOINT [\"/calls\", \"{CALLS}\"]\n"),
    );

    // The workload, waiting for its go on stdin.
    let workload = Container(format!("corebpf-test-workload-{me}"));
    let child = Command::new("docker")
        .args(["run", "-i", "--rm", "--name", &workload.0, &workload_image.0])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        let out = docker(&["inspect", "-f", "{{.State.Pid}}", &workload.0]);
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && pid != "0" && !pid.is_empty() {
            break pid;
        }
        assert!(Instant::now() < deadline, "the workload container did not start");
        thread::sleep(Duration::from_millis(100));
    };

    // The exporter: the host's PID namespace (syscount -p takes a host PID), one capability.
    let addr = free_addr();
    let exporter = Container(format!("corebpf-test-exporter-{me}"));
    let syscount = format!("syscount -p {pid}");
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &exporter.0,
        "--pid",
        "host",
        "--network",
        "host",
        "--cap-add",
        "SYS_ADMIN",
        &image.0,
        "--listen",
        &addr,
        &syscount,
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(&addr).is_err() || http_get(&addr, "/healthz", None).0 != 200 {
        let logs = docker(&["logs", &exporter.0]);
        assert!(
            Instant::now() < deadline,
            "the exporter container is not healthy within 60 s: {}{}",
            String::from_utf8_lossy(&logs.stdout),
            String::from_utf8_lossy(&logs.stderr)
        );
        thread::sleep(Duration::from_millis(200));
    }
    let series = "corebpf_syscount_syscalls_total{syscall=\"getppid\"}";
    let before = http_get(&addr, "/metrics", None).1;
    assert_eq!(sample(&before, series), None, "no getppid before the go:\n{before}");

    child.0.stdin.as_mut().unwrap().write_all(b"g").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let (_, text) = http_get(&addr, "/metrics", None);
        if sample(&text, series).is_some_and(|n| n >= CALLS as f64) || Instant::now() > deadline {
            break text;
        }
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(sample(&text, series), Some(CALLS as f64), "{text}");
    assert!(text.contains("corebpf_exporter_tool_up{tool=\"syscount\"} 1"), "{text}");
    promtool_accepts(&text);

    drop(child.0.stdin.take());
    assert!(child.0.wait().unwrap().success(), "the workload failed");
    // `docker stop` sends SIGTERM: the exporter detaches and exits 0, its banner in the log.
    docker_ok(&["stop", "-t", "30", &exporter.0]);
    assert_eq!(docker_ok(&["inspect", "-f", "{{.State.ExitCode}}", &exporter.0]), "0");
    let logs = docker_ok(&["logs", &exporter.0]);
    assert!(logs.contains("Serving Prometheus metrics of 1 tools (syscount: "), "{logs}");
}

#[test]
fn without_a_capability_the_image_says_what_it_lacks() {
    let me = std::process::id();
    let image = exporter_image(&format!("corebpf-test-exporter-nocap:{me}"));
    let name = Container(format!("corebpf-test-nocap-{me}"));
    let addr = free_addr();
    let out = docker(&["run", "--name", &name.0, "--network", "host", &image.0, "--listen", &addr, "runqlat"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("CAP_BPF"), "{stderr}");
}

/// A workload container started with `docker run -i`, waiting for its go on stdin; killed and removed when dropped.
struct Started {
    container: Container,
    child: KillOnDrop,
    pid: u32,
}

impl Started {
    fn run(name: String, image: &str, args: &[&str]) -> Started {
        Started::run_with(name, &[], image, args)
    }

    /// [`Started::run`] with more options for `docker run` (`docker_args`, such as a volume).
    fn run_with(name: String, docker_args: &[&str], image: &str, args: &[&str]) -> Started {
        let container = Container(name);
        let child = Command::new("docker")
            .args(["run", "-i", "--rm", "--name", &container.0])
            .args(docker_args)
            .arg(image)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let child = KillOnDrop(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let pid = loop {
            let out = docker(&["inspect", "-f", "{{.State.Pid}}", &container.0]);
            let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
            if out.status.success() && pid != 0 {
                break pid;
            }
            assert!(Instant::now() < deadline, "container {} did not start", container.0);
            thread::sleep(Duration::from_millis(100));
        };
        Started { container, child, pid }
    }

    fn go(&mut self) {
        self.child.0.stdin.as_mut().unwrap().write_all(b"g").unwrap();
    }

    /// Reads the workload's next line.
    fn line(&mut self) -> String {
        read_line(self.child.0.stdout.as_mut().unwrap())
    }

    fn end(mut self) {
        drop(self.child.0.stdin.take());
        assert!(self.child.0.wait().unwrap().success(), "workload {} failed", self.container.0);
    }
}

#[test]
fn container_by_name_shows_that_containers_binds_only() {
    const N: usize = 7;
    let me = std::process::id();
    let binds = build_c_helper("container-binds", BINDS, &["-static", "-O2"]);
    let image = Image::build(
        &format!("corebpf-test-binds:{me}"),
        &[(binds, "binds")],
        "FROM scratch\nCOPY binds /binds\nENTRYPOINT [\"/binds\"]\n",
    );
    let mut a = Started::run(format!("corebpf-test-binds-a-{me}"), &image.0, &[&N.to_string(), "41000"]);
    let mut b = Started::run(format!("corebpf-test-binds-b-{me}"), &image.0, &[&N.to_string(), "42000"]);

    let mut tool = Running::start("bindsnoop", &["-j", "--container", &a.container.0]);
    tool.wait_attached(Duration::from_secs(30));
    let a_pid = a.pid;
    a.go();
    b.go();
    a.end();
    b.end();
    thread::sleep(Duration::from_millis(300));
    tool.signal(libc::SIGINT);
    let done = tool.finish(Duration::from_secs(10));
    let records: Vec<_> = json_lines(&done.stdout).into_iter().filter(|r| r.get("pid").is_some()).collect();
    let ports: Vec<u64> = records.iter().map(|r| r["port"].as_u64().unwrap()).collect();
    assert!(records.iter().all(|r| r["pid"] == a_pid), "only container a's process {a_pid}: {}", done.stdout);
    assert_eq!(ports, (41000..41000 + N as u64).collect::<Vec<_>>(), "{}", done.stdout);

    // A name that is no container's: one line, exit 1.
    let unknown = run_tool("bindsnoop", &["--container", &format!("corebpf-no-such-container-{me}")]);
    assert_eq!(unknown.status.code(), Some(1), "{}", unknown.stderr);
    assert_eq!(unknown.stderr.trim().lines().count(), 1, "{}", unknown.stderr);
    assert!(unknown.stderr.contains("no running container named"), "{}", unknown.stderr);
}

const EVENTS: &str = include_str!("container_events.c");

/// One line of a workload's output, byte by byte (no buffer keeps what follows).
fn read_line(from: &mut impl std::io::Read) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8];
    while line.last() != Some(&b'\n') && from.read(&mut byte).unwrap() == 1 {
        line.push(byte[0]);
    }
    String::from_utf8_lossy(&line).into_owned()
}

/// The series of `family` whose `pid` label is `pid`: its whole line.
fn series_of_pid<'a>(text: &'a str, family: &str, pid: u32) -> Option<&'a str> {
    text.lines().find(|l| l.starts_with(&format!("{family}{{pid=\"{pid}\",")))
}

/// The other direction of `--container`: events and metrics name the container a process runs in. One workload
/// runs in a named container (its own `FROM scratch` image) and the same program on the host; each makes known
/// getppid calls, then an exec, a bind (of a port of its own) and an exit with status 7. execsnoop's, exitsnoop's
/// and bindsnoop's JSON name the container for the container's child and have no `container` for the host's;
/// `syscount -P --container-label` and `cpudist -P --container-label` label the container's process with the
/// container's name and leave the host's process's label empty.
#[test]
fn events_and_metrics_name_the_container_of_a_process() {
    let me = std::process::id();
    let (in_port, host_port) = (43000 + (me % 1000) as u16, 44000 + (me % 1000) as u16);
    let exe = build_c_helper("container-events", EVENTS, &["-static", "-O2"]);
    let image = Image::build(
        &format!("corebpf-test-events:{me}"),
        &[(exe.clone(), "events")],
        "FROM scratch\nCOPY events /events\nENTRYPOINT [\"/events\"]\n",
    );
    let name = format!("corebpf-test-events-{me}");
    let mut boxed = Started::run(name.clone(), &image.0, &["/events", &in_port.to_string(), &CALLS.to_string()]);
    let host_exe = exe.display().to_string();
    let host = Command::new(&exe)
        .args([host_exe.as_str(), &host_port.to_string(), &CALLS.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut host = KillOnDrop(host);
    let host_pid = host.0.id();

    let mut tools: Vec<Running> = ["execsnoop", "exitsnoop", "bindsnoop"]
        .into_iter()
        .map(|tool| {
            let mut run = Running::start(tool, &["-j"]);
            run.wait_attached(Duration::from_secs(30));
            run
        })
        .collect();
    let (syscount, syscount_addr) = corebpf_tests::prom::serving("syscount", &["-P", "--container-label"]);
    let (cpudist, cpudist_addr) = corebpf_tests::prom::serving("cpudist", &["-P", "--container-label"]);

    let boxed_pid = boxed.pid;
    boxed.go();
    host.0.stdin.as_mut().unwrap().write_all(b"g").unwrap();
    // Each says "done" once its child has made its exec, bind and exit and been reaped.
    assert_eq!(boxed.line(), "done\n");
    assert_eq!(read_line(host.0.stdout.as_mut().unwrap()), "done\n");
    let calls = scrape(&syscount_addr);
    let slices = scrape(&cpudist_addr);
    promtool_accepts(&calls);
    for run in [syscount, cpudist] {
        run.signal(libc::SIGTERM);
        run.finish(Duration::from_secs(20)).assert_success();
    }
    thread::sleep(Duration::from_millis(300));
    let outputs: Vec<Finished> = tools
        .drain(..)
        .map(|run| {
            run.signal(libc::SIGINT);
            let done = run.finish(Duration::from_secs(20));
            done.assert_success();
            done
        })
        .collect();
    boxed.end();
    drop(host.0.stdin.take());
    assert!(host.0.wait().unwrap().success(), "the host workload failed");

    // execsnoop: the children's execs, told apart by their port argument; their PIDs for exitsnoop.
    let execs = json_lines(&outputs[0].stdout);
    let exec_of = |port: u16| {
        let found: Vec<_> =
            execs.iter().filter(|e| e["args"].as_array().unwrap().iter().any(|a| a == &port.to_string())).collect();
        assert_eq!(found.len(), 1, "one exec with port {port}: {}", outputs[0].stdout);
        found[0].clone()
    };
    let (in_exec, host_exec) = (exec_of(in_port), exec_of(host_port));
    assert_eq!(in_exec["container"], name.as_str(), "{in_exec}");
    assert!(host_exec.get("container").is_none(), "a host process has no container: {host_exec}");

    // exitsnoop: the children's exits with status 7.
    let exits = json_lines(&outputs[1].stdout);
    let exit_of = |pid: &serde_json::Value| {
        let found: Vec<_> = exits.iter().filter(|e| &e["pid"] == pid).collect();
        assert_eq!(found.len(), 1, "one exit of {pid}: {}", outputs[1].stdout);
        assert_eq!(found[0]["exit_code"], 7, "{}", found[0]);
        found[0].clone()
    };
    assert_eq!(exit_of(&in_exec["pid"])["container"], name.as_str());
    assert!(exit_of(&host_exec["pid"]).get("container").is_none());

    // bindsnoop: the children's binds, by port.
    let binds = json_lines(&outputs[2].stdout);
    let bind_of = |port: u16| {
        let found: Vec<_> = binds.iter().filter(|b| b["port"] == port).collect();
        assert_eq!(found.len(), 1, "one bind of port {port}: {}", outputs[2].stdout);
        found[0].clone()
    };
    assert_eq!(bind_of(in_port)["container"], name.as_str());
    assert!(bind_of(host_port).get("container").is_none());

    // syscount -P: the container's process counts its getppid calls (and more) under its container's name.
    let family = "corebpf_syscount_syscalls_total";
    let boxed_series = series_of_pid(&calls, family, boxed_pid).unwrap_or_else(|| panic!("{calls}"));
    assert!(boxed_series.contains(&format!("container=\"{name}\"")), "{boxed_series}");
    let count: f64 = boxed_series.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= CALLS as f64, "{boxed_series}");
    let host_series = series_of_pid(&calls, family, host_pid).unwrap_or_else(|| panic!("{calls}"));
    assert!(host_series.contains("container=\"\"") || !host_series.contains("container="), "{host_series}");
    // cpudist -P: the container's process ran, and its histogram carries the container.
    let cpu = "corebpf_cpudist_oncpu_time_seconds_count";
    let boxed_series = series_of_pid(&slices, cpu, boxed_pid).unwrap_or_else(|| panic!("{slices}"));
    assert!(boxed_series.contains(&format!("container=\"{name}\"")), "{boxed_series}");
}

/// `--container-label` labels series of processes or process names: without --prometheus, or (syscount, cpudist)
/// without -P, it is a usage error.
#[test]
fn container_label_needs_metrics_per_process() {
    for (tool, args) in [
        ("syscount", &["--container-label"][..]),
        ("syscount", &["--container-label", "--prometheus", "127.0.0.1:1"][..]),
        ("cpudist", &["-P", "--container-label"][..]),
        ("bitesize", &["--container-label"][..]),
        ("futexctn", &["--container-label"][..]),
    ] {
        let done = run_tool(tool, args);
        assert_eq!(done.status.code(), Some(2), "{tool} {args:?}: {}", done.stderr);
        assert_eq!(done.stderr.trim().lines().count(), 1, "{}", done.stderr);
        assert!(done.stderr.contains("--container-label"), "{}", done.stderr);
    }
}

const IO: &str = include_str!("container_io.c");

/// The 64 KiB O_DIRECT writes and the contended futex waits of the container_io workload, in its container and
/// on the host (different, so that a swap shows).
const IO_IN: (u32, u32) = (23, 19);
const IO_HOST: (u32, u32) = (17, 11);

/// A file of 2 MiB on the root file system, written and synced, so that the workload's writes are overwrites.
fn synced_file(tag: &str) -> ScratchFile {
    let file = ScratchFile::new(tag);
    let mut f = std::fs::File::create(&file.0).unwrap();
    f.write_all(&vec![b'a'; 2 << 20]).unwrap();
    f.sync_all().unwrap();
    file
}

/// The value of the sample of `family` whose labels are exactly `labels`.
fn sample_labelled(text: &str, family: &str, labels: &[(&str, &str)]) -> f64 {
    let want: std::collections::BTreeMap<String, String> =
        labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let found: Vec<f64> =
        corebpf_tests::prom::samples_of(text, family).into_iter().filter(|(l, _)| l == &want).map(|(_, v)| v).collect();
    assert_eq!(found.len(), 1, "one {family}{labels:?}:\n{text}");
    found[0]
}

/// bitesize and futexctn keep their series per process name, so with `--container-label` a name that runs in a
/// container and on the host has a series in each. One workload (its own comm) runs in a named container, writing
/// to a file of the host's root disk through a volume, and the same program with the same comm on the host; each
/// makes known 64 KiB O_DIRECT writes and known contended futex waits (different numbers). Each tool's series for
/// that name holds exactly the container's requests or waits under the container's name, and exactly the host's
/// under an empty container.
#[test]
fn series_per_name_are_split_by_container() {
    let me = std::process::id();
    let comm = format!("cbio-{}", me % 10_000_000);
    let exe = build_c_helper("container-io", IO, &["-static", "-O2", "-pthread"]);
    let image = Image::build(
        &format!("corebpf-test-io:{me}"),
        &[(exe.clone(), "io")],
        "FROM scratch\nCOPY io /io\nENTRYPOINT [\"/io\"]\n",
    );
    let (in_file, host_file) = (synced_file("container-io-in"), synced_file("container-io-host"));
    let (bitesize, bitesize_addr) = corebpf_tests::prom::serving("bitesize", &["--container-label"]);
    let (futexctn, futexctn_addr) = corebpf_tests::prom::serving("futexctn", &["--container-label"]);

    let name = format!("corebpf-test-io-{me}");
    let volume = format!("{}:/data", in_file.0.display());
    let counts = |(writes, waits): (u32, u32)| [writes.to_string(), waits.to_string()];
    let [in_writes, in_waits] = counts(IO_IN);
    let mut boxed =
        Started::run_with(name.clone(), &["-v", &volume], &image.0, &[&comm, "/data", &in_writes, &in_waits]);
    let [host_writes, host_waits] = counts(IO_HOST);
    let host_path = host_file.0.display().to_string();
    let host = Command::new(&exe)
        .args([comm.as_str(), &host_path, &host_writes, &host_waits])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut host = KillOnDrop(host);
    boxed.go();
    host.0.stdin.as_mut().unwrap().write_all(b"g").unwrap();
    assert_eq!(boxed.line(), "done\n");
    assert_eq!(read_line(host.0.stdout.as_mut().unwrap()), "done\n");
    let sizes = scrape(&bitesize_addr);
    let waits = scrape(&futexctn_addr);
    for run in [bitesize, futexctn] {
        run.signal(libc::SIGTERM);
        let done = run.finish(Duration::from_secs(20));
        done.assert_success();
        done.assert_no_programs_left();
    }
    boxed.end();
    drop(host.0.stdin.take());
    assert!(host.0.wait().unwrap().success(), "the host workload failed");
    promtool_accepts(&sizes);
    promtool_accepts(&waits);

    for (container, (writes, waits_made)) in [(name.as_str(), IO_IN), ("", IO_HOST)] {
        let labels = [("comm", comm.as_str()), ("container", container)];
        let family = "corebpf_bitesize_io_size_bytes";
        assert_eq!(sample_labelled(&sizes, &format!("{family}_count"), &labels), writes as f64, "{container:?}");
        assert_eq!(sample_labelled(&sizes, &format!("{family}_sum"), &labels), (writes * 65536) as f64);
        let family = "corebpf_futexctn_wait_seconds_count";
        assert_eq!(sample_labelled(&waits, family, &labels), waits_made as f64, "{container:?}");
    }
}

const KILLTCP: &str = include_str!("container_killtcp.c");

/// killsnoop's and tcplife's JSON name the container too. One workload runs in a named container (its own `FROM
/// scratch` image) and the same program on the host; each probes itself with kill(getpid(), 0) and makes one TCP
/// session with itself on a port of its own, both ends closed by itself. killsnoop's record of the container's
/// kill() (by its host PID) names the container and the host's has no `container`; tcplife's two records on the
/// container's port (the connecting and the accepting end, 100 bytes each way) name it and the host's two do not.
#[test]
fn signals_and_sessions_name_the_container_of_a_process() {
    let me = std::process::id();
    // Free ports of this host (the container's network namespace has none in use); two, so the records differ.
    let port = || free_addr().rsplit(':').next().unwrap().parse::<u16>().unwrap();
    let (in_port, host_port) = (port(), port());
    let exe = build_c_helper("container-killtcp", KILLTCP, &["-static", "-O2"]);
    let image = Image::build(
        &format!("corebpf-test-killtcp:{me}"),
        &[(exe.clone(), "killtcp")],
        "FROM scratch\nCOPY killtcp /killtcp\nENTRYPOINT [\"/killtcp\"]\n",
    );
    let name = format!("corebpf-test-killtcp-{me}");
    let mut boxed = Started::run(name.clone(), &image.0, &[&in_port.to_string()]);
    let host = Command::new(&exe).arg(host_port.to_string()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn();
    let mut host = KillOnDrop(host.unwrap());
    let host_pid = host.0.id();

    let mut killsnoop = Running::start("killsnoop", &["-j"]);
    killsnoop.wait_attached(Duration::from_secs(30));
    let mut tcplife = Running::start("tcplife", &["-j"]);
    tcplife.wait_attached(Duration::from_secs(30));

    let boxed_pid = boxed.pid;
    boxed.go();
    host.0.stdin.as_mut().unwrap().write_all(b"g").unwrap();
    assert_eq!(boxed.line(), "done\n");
    assert_eq!(read_line(host.0.stdout.as_mut().unwrap()), "done\n");
    // Each session ends when the last ACK of its close arrives: wait for both ends of both sessions.
    for port in [in_port, host_port] {
        tcplife.wait_for_line(&format!("\"lport\":{port},"), Duration::from_secs(30));
        tcplife.wait_for_line(&format!("\"rport\":{port},"), Duration::from_secs(30));
    }
    for pid in [boxed_pid, host_pid] {
        killsnoop.wait_for_line(&format!("\"pid\":{pid},"), Duration::from_secs(30));
    }
    let outputs: Vec<Finished> = [killsnoop, tcplife]
        .into_iter()
        .map(|run| {
            run.signal(libc::SIGINT);
            let done = run.finish(Duration::from_secs(20));
            done.assert_success();
            done
        })
        .collect();
    boxed.end();
    drop(host.0.stdin.take());
    assert!(host.0.wait().unwrap().success(), "the host workload failed");

    // killsnoop: one kill() from each workload, by its host PID.
    let kills = json_lines(&outputs[0].stdout);
    let kill_of = |pid: u32| {
        let found: Vec<_> = kills.iter().filter(|k| k["pid"] == pid).collect();
        assert_eq!(found.len(), 1, "one kill() from {pid}: {}", outputs[0].stdout);
        assert_eq!((&found[0]["sig"], &found[0]["result"]), (&0.into(), &0.into()), "{}", found[0]);
        found[0].clone()
    };
    assert_eq!(kill_of(boxed_pid)["container"], name.as_str());
    assert!(kill_of(host_pid).get("container").is_none(), "a host process has no container");

    // tcplife: both ends of each session, 100 payload bytes each way, by port.
    let sessions = json_lines(&outputs[1].stdout);
    let ends_of = |port: u16| {
        let found: Vec<_> = sessions.iter().filter(|s| s["lport"] == port || s["rport"] == port).collect();
        assert_eq!(found.len(), 2, "two ends on port {port}: {}", outputs[1].stdout);
        for end in &found {
            let bytes = (&end["tx_bytes"], &end["rx_bytes"]);
            assert!(bytes == (&100.into(), &0.into()) || bytes == (&0.into(), &100.into()), "{end}");
        }
        found.into_iter().cloned().collect::<Vec<_>>()
    };
    for end in ends_of(in_port) {
        assert_eq!(end["container"], name.as_str(), "{end}");
        assert_eq!(end["pid"], boxed_pid, "{end}");
    }
    for end in ends_of(host_port) {
        assert!(end.get("container").is_none(), "a host process has no container: {end}");
        assert_eq!(end["pid"], host_pid, "{end}");
    }
}
