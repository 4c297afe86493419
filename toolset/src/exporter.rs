// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `corebpf-tools exporter`: the Prometheus metrics of several tools from one process, on one port.
//!
//! Each tool command (`biolatency -D`, `runqlat`, from the command line or a file with one per line) runs the
//! tool's own entry point on a thread of its own, as `TOOL ARGS --prometheus`, given this exporter's hub
//! ([`common::host::hub`]) as its host: the tool loads, attaches and then answers this process's scrapes
//! instead of binding a port. One HTTP server (bound before anything loads) serves `/metrics`, every tool's
//! families merged into one exposition with the shared self metrics and `corebpf_exporter_tool_up`, and
//! `/healthz`, 200 while every configured tool serves. SIGHUP re-reads the file: the new list is first checked
//! in a child process (`exporter --check`), and only if every tool in it attaches are the tools restarted; the
//! port stays bound throughout. `--check` loads and attaches every tool, says how, and exits.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use common::host::http::{Listener, Request, Response};
use common::host::hub::Hub;
use common::host::Host;
use common::output::metrics::{encode_merged, Format, Snapshot};
use common::run::Signals;
use common::tool::Tool;

/// The default port: the next one after ebpf_exporter's 9435, so both can run on one host.
const DEFAULT_LISTEN: &str = "127.0.0.1:9436";
/// How long the tools have to load and attach (emulated or busy machines are slow).
const ATTACH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a scrape waits for the tools' answers.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

const EXAMPLES: &str = "\
Examples:
  corebpf-tools exporter 'biolatency -D' runqlat syscount
      three tools' metrics on http://127.0.0.1:9436/metrics
  corebpf-tools exporter --listen 0.0.0.0:9436 --config /etc/corebpf-tools/exporter.conf
      the tools listed in the file, one command per line, for a Prometheus on another host; SIGHUP re-reads it
  corebpf-tools exporter --check --config /etc/corebpf-tools/exporter.conf
      load and attach every tool of the file, say how each attached, and exit (0 if all did)";

/// Serve the Prometheus metrics of several tools from one process and one port
#[derive(Parser, Debug)]
#[command(name = "exporter", after_help = EXAMPLES)]
struct Args {
    /// Where to serve /metrics and /healthz: ADDR:PORT, :PORT or PORT (on 127.0.0.1)
    #[arg(short, long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN,
          value_parser = common::cli::parse_listen)]
    listen: SocketAddr,
    /// Also run the tool commands in FILE, one per line ('#' starts a comment); SIGHUP re-reads it
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Load and attach every tool, print the attach mechanism of each, stop them and exit (1 if one failed)
    #[arg(long)]
    check: bool,
    /// A tool and its options, one argument per tool: 'biolatency -D' (tools that take --prometheus)
    #[arg(value_name = "TOOL_COMMAND")]
    commands: Vec<String>,
}

/// One tool to run: the tool and its command line (argv[0] first, `--prometheus` added).
struct Job {
    tool: &'static Tool,
    argv: Vec<OsString>,
}

/// A tool running on its thread.
struct Started {
    name: &'static str,
    thread: JoinHandle<ExitCode>,
}

/// `corebpf-tools exporter ARGS` (argv[0] is `exporter`).
pub fn main(tools: &'static [Tool], argv: Vec<OsString>) -> ExitCode {
    let host = Host::standalone("exporter");
    let args: Args = common::cli::parse(argv, &host);
    host.main(|| {
        common::attach::features::preflight()?;
        // The tools started below register with this hub instead of binding ports.
        run(tools, &args, &Hub::new())
    })
}

fn run(tools: &'static [Tool], args: &Args, hub: &Arc<Hub>) -> Result<()> {
    // Bound first: a busy port is one line before anything loads.
    let listener = if args.check { None } else { Some(Listener::bind(args.listen)?) };
    let jobs = jobs(tools, args)?.unwrap_or_else(|BadCommand(why)| common::cli::usage_error(&why));
    if args.check {
        return check(hub, jobs);
    }
    let listener = listener.expect("bound unless --check");
    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("installing signal handlers")?;
    }
    signal_hook::flag::register(libc::SIGHUP, Arc::clone(&reload)).context("installing signal handlers")?;

    let configured: Arc<Mutex<Vec<&'static str>>> = Arc::new(Mutex::new(jobs.iter().map(|j| j.tool.name).collect()));
    let mut running = start(hub, jobs);
    let ready = wait_ready(hub, &running);
    let how: Vec<String> = ready.iter().filter_map(|(t, m)| Some(format!("{t}: {}", m.as_ref()?))).collect();
    {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(
            stdout,
            "Serving Prometheus metrics of {} tools ({}) on http://{}/metrics... Hit Ctrl-C to end.",
            how.len(),
            how.join(", "),
            listener.local_addr()
        );
        let _ = stdout.flush();
    }

    let server = {
        let configured = Arc::clone(&configured);
        let hub = Arc::clone(hub);
        // SIGINT and SIGTERM only (and a closed stdout pipe): SIGHUP is the reload, watched above.
        let signals = Signals::install(false)?;
        thread::Builder::new()
            .name("http".into())
            .spawn(move || common::host::http::run(&listener, &signals, |r| answer(&hub, r, &configured)))
            .context("starting the HTTP server")?
    };

    while !stop.load(Ordering::SeqCst) && !server.is_finished() {
        thread::sleep(Duration::from_millis(100));
        if reload.swap(false, Ordering::SeqCst) {
            match reloaded(tools, args) {
                Ok(jobs) => {
                    hub.stop_all();
                    join(std::mem::take(&mut running));
                    *configured.lock().unwrap_or_else(|e| e.into_inner()) = jobs.iter().map(|j| j.tool.name).collect();
                    running = start(hub, jobs);
                    let ready = wait_ready(hub, &running);
                    let up = ready.iter().filter(|(_, m)| m.is_some()).count();
                    eprintln!("exporter: reloaded: {up} tools serving, {} not", ready.len() - up);
                }
                Err(e) => eprintln!("exporter: reload refused, still serving the tools before it: {e:#}"),
            }
        }
    }
    hub.stop_all();
    join(running);
    match server.join() {
        Ok(result) => result,
        Err(_) => Err(anyhow!("the HTTP server stopped")),
    }
}

/// What is wrong with a tool command (a usage error at start, a refused reload later).
struct BadCommand(String);

/// The jobs of the command-line commands and the config file (an unreadable file is a run-time error).
fn jobs(tools: &'static [Tool], args: &Args) -> Result<std::result::Result<Vec<Job>, BadCommand>> {
    let mut lines: Vec<String> = args.commands.clone();
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        lines.extend(text.lines().map(|l| l.split('#').next().unwrap_or("").trim().to_string()));
    }
    let mut jobs: Vec<Job> = Vec::new();
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad = |why: String| Ok(Err(BadCommand(format!("'{line}': {why}"))));
        let Some(tool) = tools.iter().find(|t| t.name == words[0]) else {
            return bad(format!("no tool named '{}'", words[0]));
        };
        if jobs.iter().any(|j| j.tool.name == tool.name) {
            return bad(format!("{} is named twice (one command per tool)", tool.name));
        }
        if words.iter().any(|w| w.starts_with("--prometheus")) {
            return bad("the exporter gives each tool its --prometheus".to_string());
        }
        let mut argv: Vec<OsString> = words.iter().map(OsString::from).collect();
        argv.extend(["--prometheus".into(), "127.0.0.1:0".into()]);
        jobs.push(Job { tool, argv });
    }
    if jobs.is_empty() {
        return Ok(Err(BadCommand("name at least one tool, as an argument or in --config".to_string())));
    }
    Ok(Ok(jobs))
}

/// The jobs after a SIGHUP, once a child `exporter --check` has loaded and attached every one of them.
fn reloaded(tools: &'static [Tool], args: &Args) -> Result<Vec<Job>> {
    let Some(config) = &args.config else { bail!("there is no --config file to re-read") };
    let jobs = jobs(tools, args)?.map_err(|BadCommand(why)| anyhow!("{why}"))?;
    let exe = std::env::current_exe().context("finding this executable")?;
    let checked = Command::new(exe)
        .arg("exporter")
        .arg("--check")
        .arg("--config")
        .arg(config)
        .args(&args.commands)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("checking the new configuration")?;
    if !checked.status.success() {
        let why = String::from_utf8_lossy(&checked.stderr);
        bail!("{} failed its check: {}", config.display(), why.lines().collect::<Vec<_>>().join("; "));
    }
    Ok(jobs)
}

/// Starts each job's tool on a thread of its own, in the hub's current generation.
fn start(hub: &Arc<Hub>, jobs: Vec<Job>) -> Vec<Started> {
    let generation = hub.generation();
    jobs.into_iter()
        .filter_map(|Job { tool, argv }| {
            let hub = Arc::clone(hub);
            let spawned =
                thread::Builder::new().name(tool.name.into()).spawn(move || tool.run_exported(argv, hub, generation));
            match spawned {
                Ok(thread) => Some(Started { name: tool.name, thread }),
                Err(e) => {
                    eprintln!("exporter: {}: cannot start a thread: {e}", tool.name);
                    None
                }
            }
        })
        .collect()
}

/// Waits until every started tool serves or has ended (its own error line says why); returns each tool, in the
/// order started, with its attach mechanism if it serves.
fn wait_ready(hub: &Hub, running: &[Started]) -> Vec<(&'static str, Option<String>)> {
    let deadline = Instant::now() + ATTACH_TIMEOUT;
    loop {
        let up = hub.registered();
        let mechanism = |name: &str| up.iter().find(|(t, _)| t == name).map(|(_, m)| m.clone());
        let settled = running.iter().all(|s| mechanism(s.name).is_some() || s.thread.is_finished());
        if settled || Instant::now() > deadline {
            return running.iter().map(|s| (s.name, mechanism(s.name))).collect();
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the stopped tools' threads to end (each detaches its programs first).
fn join(running: Vec<Started>) {
    for started in running {
        if started.thread.join().is_err() {
            eprintln!("exporter: {}: its thread failed", started.name);
        }
    }
}

/// `--check`: start every tool, report how each attached, stop them all.
fn check(hub: &Arc<Hub>, jobs: Vec<Job>) -> Result<()> {
    let total = jobs.len();
    let running = start(hub, jobs);
    let ready = wait_ready(hub, &running);
    for (tool, mechanism) in &ready {
        match mechanism {
            Some(mechanism) => println!("{tool}: attached with {mechanism}"),
            None => println!("{tool}: not attached"),
        }
    }
    let down: Vec<&str> = ready.iter().filter(|(_, m)| m.is_none()).map(|(t, _)| *t).collect();
    hub.stop_all();
    join(running);
    match down.is_empty() {
        true => Ok(()),
        false => Err(anyhow!("{} of {total} tools did not attach: {}", down.len(), down.join(", "))),
    }
}

/// The answer to one HTTP request.
fn answer(hub: &Hub, request: &Request, configured: &Mutex<Vec<&'static str>>) -> (Response, Option<anyhow::Error>) {
    let configured = configured.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if !matches!(request.method.as_str(), "GET" | "HEAD") {
        return (Response::text(405, "use GET\n"), None);
    }
    match request.path.as_str() {
        "/metrics" => {
            let format = Format::from_accept(request.accept.as_deref());
            let mut snapshots = Vec::new();
            let mut answered = Vec::new();
            for (tool, result) in hub.scrape_all(SCRAPE_TIMEOUT) {
                match result {
                    Ok(snapshot) => {
                        answered.push(tool);
                        snapshots.push(snapshot);
                    }
                    Err(e) => eprintln!("exporter: {tool}: no metrics in this scrape: {e:#}"),
                }
            }
            let mut own = Snapshot::new("exporter");
            let help = "1 if the tool answered this scrape, 0 if it is configured but not serving";
            for tool in configured {
                let up = answered.iter().any(|t| t == tool);
                own.gauge("tool_up", help, &["tool"], vec![tool.to_string()], if up { 1.0 } else { 0.0 });
            }
            snapshots.push(own);
            match encode_merged(snapshots, format) {
                Ok(body) => (Response { status: 200, content_type: format.content_type(), body }, None),
                Err(e) => (Response::text(500, &format!("{e:#}\n")), None),
            }
        }
        "/healthz" => {
            let up = hub.registered();
            let down: Vec<&str> = configured.into_iter().filter(|t| !up.iter().any(|(u, _)| u == t)).collect();
            match down.is_empty() {
                true => (Response::text(200, "ok\n"), None),
                false => (Response::text(503, &format!("not serving: {}\n", down.join(", "))), None),
            }
        }
        "/" => {
            let body =
                "<html><body><a href=\"/metrics\">/metrics</a> <a href=\"/healthz\">/healthz</a></body></html>\n";
            (Response { status: 200, content_type: "text/html", body: body.to_string() }, None)
        }
        _ => (Response::text(404, "not found: try /metrics or /healthz\n"), None),
    }
}
