// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `corebpf-tools exporter`: eleven tools' metrics from one process on one port, scraped directly, and twelve
//! scraped by a real Prometheus server (Debian's package), with exact counts from a helper that calls a function N
//! times (funccount in the exporter, filtered by the helper's PID); SIGHUP reloads a config file without dropping the port, and a
//! bad new file is refused while the old tools keep serving; `--check`; bad input is one line and a status.

use std::io::Write;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::prom::{free_addr, now, promtool_accepts, sample, Prometheus};
use corebpf_tests::*;

const BANNER: &str = "Serving Prometheus metrics of ";
const HELPER: &str = include_str!("metrics_tick.c");
const CALLS: u64 = 37;

/// The tools of the big test, each with a family of its own that the exposition must declare.
const ELEVEN: &[(&str, &str)] = &[
    ("biolatency -D", "# TYPE corebpf_biolatency_io_latency_seconds histogram"),
    ("bitesize", "# TYPE corebpf_bitesize_io_size_bytes histogram"),
    ("cpudist", "# TYPE corebpf_cpudist_oncpu_time_seconds histogram"),
    ("hardirqs", "# TYPE corebpf_hardirqs_handler_seconds histogram"),
    ("pidpersec", "# TYPE corebpf_pidpersec_new_tasks_total counter"),
    ("runqlat", "# TYPE corebpf_runqlat_run_queue_latency_seconds histogram"),
    ("runqlen", "# TYPE corebpf_runqlen_run_queue_length histogram"),
    ("softirqs", "# TYPE corebpf_softirqs_handler_seconds histogram"),
    ("syscount", "# TYPE corebpf_syscount_syscalls_total counter"),
    ("vfsstat", "# TYPE corebpf_vfsstat_calls_total counter"),
    ("wqlat", "# TYPE corebpf_wqlat_latency_seconds histogram"),
];

/// Starts the exporter on a free port with `args` and waits for its banner; returns it and its address.
fn exporter(args: &[&str]) -> (Running, String) {
    let addr = free_addr();
    let mut all = vec!["exporter", "--listen", &addr];
    all.extend(args);
    let mut run = Running::start("corebpf-tools", &all);
    run.wait_for_line(BANNER, Duration::from_secs(90));
    (run, addr)
}

fn stop(run: Running) -> Finished {
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done
}

/// The tool names of `tool_up` samples equal to `value` in an exposition.
fn tools_up(text: &str, value: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("corebpf_exporter_tool_up{tool=\""))
        .filter(|rest| rest.ends_with(&format!("\"}} {value}")))
        .filter_map(|rest| rest.split('"').next().map(str::to_string))
        .collect()
}

#[test]
fn one_process_serves_eleven_tools_on_one_port() {
    let commands: Vec<&str> = ELEVEN.iter().map(|(c, _)| *c).collect();
    let (mut run, addr) = exporter(&commands);
    run.note_programs();
    let (status, text) = http_get(&addr, "/metrics", None);
    assert_eq!(status, 200, "{text}");
    for (command, family) in ELEVEN {
        let tool = command.split(' ').next().unwrap();
        assert!(text.contains(family), "{tool}: no '{family}' in:\n{text}");
        assert!(text.contains(&format!("corebpf_build_info{{tool=\"{tool}\",version=")), "{tool}:\n{text}");
        assert!(text.contains(&format!("corebpf_attach_info{{tool=\"{tool}\",mechanism=")), "{tool}:\n{text}");
    }
    let mut up = tools_up(&text, "1");
    up.sort();
    let mut want: Vec<String> = commands.iter().map(|c| c.split(' ').next().unwrap().to_string()).collect();
    want.sort();
    assert_eq!(up, want, "{text}");
    // Each self-metric family is declared once, whatever the number of tools.
    assert_eq!(text.matches("# TYPE corebpf_build_info gauge").count(), 1, "{text}");
    promtool_accepts(&text);
    let (status, open) = http_get(&addr, "/metrics", Some("application/openmetrics-text; version=1.0.0"));
    assert_eq!(status, 200);
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert_eq!(http_get(&addr, "/healthz", None), (200, "ok\n".to_string()));
    // One process: every tool's programs are this PID's.
    assert!(prog_ids_of(run.pid()).len() >= ELEVEN.len(), "fewer programs than tools");
    let done = stop(run);
    done.assert_no_programs_left();
}

#[test]
fn a_real_prometheus_counts_every_call_through_the_exporter() {
    let exe = build_c_helper("metrics-helper", HELPER, &["-O0"]);
    let helper = Command::new(&exe).arg(CALLS.to_string()).stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let mut helper = KillOnDrop(helper);
    let pid = helper.0.id().to_string();
    let funccount = format!("funccount -p {pid} {}:metrics_tick", exe.display());
    let mut commands: Vec<&str> = ELEVEN.iter().map(|(c, _)| *c).collect();
    commands.push(&funccount);
    let (run, addr) = exporter(&commands);
    let series = "corebpf_funccount_calls_total{function=\"metrics_tick\"}";
    assert_eq!(sample(&http_get(&addr, "/metrics", None).1, series), Some(0.0));

    let prom = Prometheus::start(&addr);
    prom.wait_scraped_after(series, now());
    let mut stdin = helper.0.stdin.take().unwrap();
    stdin.write_all(b"g").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while sample(&http_get(&addr, "/metrics", None).1, series) != Some(CALLS as f64) {
        assert!(Instant::now() < deadline, "funccount never reached {CALLS} calls");
        thread::sleep(Duration::from_millis(100));
    }
    prom.wait_scraped_after(series, now());
    let (total, _) = prom.query(series).unwrap();
    let (tools, _) = prom.query("count(corebpf_build_info)").unwrap();
    let (up, _) = prom.query("sum(corebpf_exporter_tool_up)").unwrap();
    drop(stdin);
    assert!(helper.0.wait().unwrap().success());
    stop(run).assert_no_programs_left();
    assert_eq!(total as u64, CALLS, "funccount's counter in Prometheus");
    assert_eq!(tools as usize, ELEVEN.len() + 1, "build_info series (one per tool)");
    assert_eq!(up as usize, ELEVEN.len() + 1, "tools up");
}

#[test]
fn sighup_reloads_the_config_and_keeps_the_port() {
    let config = ScratchFile::new("exporter.conf");
    std::fs::write(&config.0, "# first\nvfsstat\n").unwrap();
    let path = config.0.display().to_string();
    let (mut run, addr) = exporter(&["--config", &path]);
    run.note_programs();
    let text = http_get(&addr, "/metrics", None).1;
    assert_eq!(tools_up(&text, "1"), ["vfsstat"], "{text}");

    // A tool added: served after the reload, on the same port.
    std::fs::write(&config.0, "vfsstat\npidpersec   # new\n").unwrap();
    run.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, text) = http_get(&addr, "/metrics", None);
        assert_eq!(status, 200, "the port answers during the reload: {text}");
        let mut up = tools_up(&text, "1");
        up.sort();
        if up == ["pidpersec", "vfsstat"] {
            break;
        }
        assert!(Instant::now() < deadline, "pidpersec not served after SIGHUP:\n{text}");
        thread::sleep(Duration::from_millis(200));
    }
    run.note_programs();

    // A broken file is refused: the tools before it keep serving.
    std::fs::write(&config.0, "vfsstat\nnosuchtool -x\n").unwrap();
    run.signal(libc::SIGHUP);
    thread::sleep(Duration::from_secs(3));
    let (status, text) = http_get(&addr, "/metrics", None);
    assert_eq!(status, 200);
    let mut up = tools_up(&text, "1");
    up.sort();
    assert_eq!(up, ["pidpersec", "vfsstat"], "{text}");
    let done = stop(run);
    assert!(done.stderr.contains("reload refused"), "{}", done.stderr);
    assert!(done.stderr.contains("nosuchtool"), "{}", done.stderr);
    done.assert_no_programs_left();
}

#[test]
fn check_attaches_every_tool_and_says_how() {
    let done = run_tool("corebpf-tools", &["exporter", "--check", "runqlat", "vfsstat -p 1"]);
    done.assert_success();
    for tool in ["runqlat", "vfsstat"] {
        assert!(done.stdout.contains(&format!("{tool}: attached with ")), "{}", done.stdout);
    }
    assert_eq!(done.stdout.lines().count(), 2, "{}", done.stdout);
}

#[test]
fn bad_input_is_one_line_and_a_status() {
    for (args, code, says) in [
        (&["exporter"][..], 2, "name at least one tool"),
        (&["exporter", "nosuchtool"][..], 2, "no tool named 'nosuchtool'"),
        (&["exporter", "runqlat", "runqlat -m"][..], 2, "named twice"),
        (&["exporter", "execsnoop"][..], 2, "no histograms or counters"),
        (&["exporter", "runqlat --prometheus 1"][..], 2, "gives each tool its --prometheus"),
        (&["exporter", "runqlat -Q"][..], 2, "runqlat: "),
        (&["exporter", "--listen", "nowhere", "runqlat"][..], 2, "--listen"),
        (&["exporter", "--listen", "192.0.2.1:9436", "runqlat"][..], 1, "192.0.2.1"),
        (&["exporter", "--config", "/nonexistent/exporter.conf"][..], 1, "/nonexistent/exporter.conf"),
    ] {
        let done = run_tool("corebpf-tools", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.trim().lines().count(), 1, "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(says), "{args:?}: {}", done.stderr);
        assert!(done.stdout.is_empty(), "{args:?}: {}", done.stdout);
    }
}

#[test]
fn a_busy_port_fails_before_any_tool_loads() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let done = run_tool("corebpf-tools", &["exporter", "--listen", &addr, "runqlat"]);
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    assert_eq!(done.stderr.trim().lines().count(), 1, "{}", done.stderr);
    assert!(done.prog_ids.is_empty(), "programs were loaded: {:?}", done.prog_ids);
}

/// packaging/exporter/, relative to this test crate.
fn packaging(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/exporter").join(file)
}

#[test]
fn the_example_config_attaches_every_tool() {
    let config = packaging("exporter.conf").display().to_string();
    let done = run_tool("corebpf-tools", &["exporter", "--check", "--config", &config]);
    done.assert_success();
    assert_eq!(done.stdout.matches(": attached with ").count(), ELEVEN.len(), "{}", done.stdout);
}

#[test]
fn the_systemd_unit_verifies() {
    let unit = std::fs::read_to_string(packaging("corebpf-exporter.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/sbin/corebpf-tools exporter "), "{unit}");
    // The unit as installed, with this build's binary in the place of /usr/sbin/corebpf-tools.
    let dir = std::env::temp_dir().join(format!("corebpf-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("corebpf-exporter.service");
    std::fs::write(&path, unit.replace("/usr/sbin/corebpf-tools", &bin("corebpf-tools").display().to_string()))
        .unwrap();
    let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "systemd-analyze verify: {said}");
}

/// kubernetes-validate, installed by scripts/deps.sh: Kubernetes' schemas, offline.
const KUBERNETES_VALIDATE: &str = "/opt/corebpf-tools-venv/bin/kubernetes-validate";

#[test]
fn the_daemonset_passes_the_kubernetes_schema() {
    let manifest = packaging("daemonset.yaml");
    let out = Command::new(KUBERNETES_VALIDATE).arg("--strict").arg(&manifest).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("passed for resource daemonset/corebpf-exporter"), "{said}");
    assert!(said.contains("passed for resource configmap/corebpf-exporter"), "{said}");
    // The check can fail: the same manifest with a misspelt field does not pass.
    let text = std::fs::read_to_string(&manifest).unwrap().replace("hostPID: true", "hostPid: true");
    let broken = std::env::temp_dir().join(format!("corebpf-daemonset-{}.yaml", std::process::id()));
    std::fs::write(&broken, text).unwrap();
    let out = Command::new(KUBERNETES_VALIDATE).arg("--strict").arg(&broken).output().unwrap();
    let _ = std::fs::remove_file(&broken);
    assert!(!out.status.success(), "a misspelt field passed: {}", String::from_utf8_lossy(&out.stdout));
}
