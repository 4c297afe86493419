// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The hub of `corebpf-tools exporter`: several tools' metrics served by one process on one port.
//!
//! The exporter runs each configured tool's own entry point on a thread of its own, with `--prometheus`, after
//! [`activate`]. From then on a tool's [`super::metrics::Endpoint`] binds no port: its `serve` [`register`]s
//! the tool here once its programs are attached and answers scrape requests on the tool's own thread (where its
//! skeleton and maps live), until the tool is stopped by a signal or by the exporter ([`stop_all`], a new
//! generation). The exporter's one HTTP server asks every registered tool for a [`Snapshot`] at once
//! ([`scrape_all`]) and encodes them together ([`super::metrics::encode_merged`]), so each family is declared
//! once and the self metrics of all tools share their families, told apart by their `tool` label.
//!
//! In exporter mode SIGHUP is the exporter's reload, so tools do not stop on it ([`crate::run::Signals`]), and
//! each tool names itself in its own error lines ([`crate::tool::invoked_name`] is per thread).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use super::metrics::{with_overflow, SelfMetrics, SeriesCap, Snapshot};
use crate::run::Signals;

/// How often a serving tool looks for a stop (signal or new generation) while no scrape comes.
const IDLE_CHECK: Duration = Duration::from_millis(200);

static ACTIVE: AtomicBool = AtomicBool::new(false);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static TOOLS: Mutex<Vec<Registration>> = Mutex::new(Vec::new());

/// A scrape request: where the tool sends its snapshot (or why it has none).
type Reply = mpsc::Sender<Result<Snapshot>>;

/// A tool serving its metrics through the hub.
struct Registration {
    tool: String,
    mechanism: String,
    generation: u64,
    requests: mpsc::Sender<Reply>,
}

thread_local! {
    /// The generation the tool on this thread was started in ([`start_in`]).
    static THREAD_GENERATION: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Turns exporter mode on for this process (before any tool starts).
pub fn activate() {
    ACTIVE.store(true, Ordering::SeqCst);
}

/// True in the exporter: endpoints register here instead of binding a port.
pub fn active() -> bool {
    ACTIVE.load(Ordering::SeqCst)
}

/// The tools started from now on belong to this generation.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::SeqCst)
}

/// Marks the calling thread as a tool of generation `generation` (the exporter calls it first thing on each
/// tool's thread), so a tool still loading when its generation is stopped never serves in the next one.
pub fn start_in(generation: u64) {
    THREAD_GENERATION.with(|g| g.set(Some(generation)));
}

/// Stops every tool of the current generation (each leaves its serve loop within [`IDLE_CHECK`], detaches and
/// returns; one still loading stops as soon as it would serve) and returns the next generation.
pub fn stop_all() -> u64 {
    GENERATION.fetch_add(1, Ordering::SeqCst) + 1
}

/// The tools serving in the current generation, with the attach mechanism each chose.
pub fn registered() -> Vec<(String, String)> {
    let now = GENERATION.load(Ordering::SeqCst);
    let tools = TOOLS.lock().unwrap_or_else(|e| e.into_inner());
    tools.iter().filter(|r| r.generation == now).map(|r| (r.tool.clone(), r.mechanism.clone())).collect()
}

/// Asks every tool serving now for its snapshot, all at once, and waits up to `timeout` for the answers: a tool
/// that does not answer in time, or whose maps could not be read, is named with the error.
pub fn scrape_all(timeout: Duration) -> Vec<(String, Result<Snapshot>)> {
    let now = GENERATION.load(Ordering::SeqCst);
    let pending: Vec<(String, Option<mpsc::Receiver<Result<Snapshot>>>)> = {
        let tools = TOOLS.lock().unwrap_or_else(|e| e.into_inner());
        tools
            .iter()
            .filter(|r| r.generation == now)
            .map(|r| {
                let (reply, answer) = mpsc::channel();
                (r.tool.clone(), r.requests.send(reply).ok().map(|()| answer))
            })
            .collect()
    };
    let deadline = Instant::now() + timeout;
    pending
        .into_iter()
        .map(|(tool, answer)| {
            let left = deadline.saturating_duration_since(Instant::now());
            let got = match answer.map(|a| a.recv_timeout(left)) {
                Some(Ok(result)) => result,
                Some(Err(_)) => Err(anyhow!("no answer within {} s", timeout.as_secs())),
                None => Err(anyhow!("stopped")),
            };
            (tool, got)
        })
        .collect()
}

/// A tool's serve loop in exporter mode ([`super::metrics::Endpoint::serve`]): registers `tool`, then answers
/// each scrape with what `collect` reads, capped at `max_series` label sets per metric, with its self metrics,
/// until a stop signal or a new generation.
pub(crate) fn serve_tool(
    tool: &str,
    signals: &Signals,
    own: &SelfMetrics,
    max_series: usize,
    mut collect: impl FnMut(&mut Snapshot) -> Result<()>,
) -> Result<()> {
    let generation = THREAD_GENERATION.with(|g| g.get()).unwrap_or_else(generation);
    let (requests, incoming) = mpsc::channel::<Reply>();
    {
        let mut tools = TOOLS.lock().unwrap_or_else(|e| e.into_inner());
        let mechanism = own.mechanism().unwrap_or("unknown").to_string();
        tools.push(Registration { tool: tool.to_string(), mechanism, generation, requests });
    }
    let mut cap = SeriesCap::new(max_series);
    while !signals.stopped() && GENERATION.load(Ordering::SeqCst) == generation {
        let reply = match incoming.recv_timeout(IDLE_CHECK) {
            Ok(reply) => reply,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut snapshot = Snapshot::new(tool);
        let read = collect(&mut snapshot).map(|()| {
            let overflow = cap.apply(&mut snapshot);
            own.add_to(&mut snapshot);
            with_overflow(&mut snapshot, overflow);
            snapshot
        });
        let _ = reply.send(read);
    }
    let mut tools = TOOLS.lock().unwrap_or_else(|e| e.into_inner());
    tools.retain(|r| !(r.tool == tool && r.generation == generation));
    Ok(())
}
