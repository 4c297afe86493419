// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The hub of `corebpf-tools exporter`: several tools' metrics served by one process on one port.
//!
//! The exporter makes one [`Hub`] and runs each configured tool's own entry point on a thread of its own, with
//! `--prometheus`, given a [`super::Host`] that names the hub and the generation it starts in
//! ([`crate::tool::Tool::run_exported`]). Such a tool's [`super::endpoint::Endpoint`] binds no port: once its
//! programs are attached, its `serve` registers the tool here and answers scrape requests on the tool's own
//! thread (where its skeleton and maps live), until the tool is stopped by a signal or by the exporter
//! ([`Hub::stop_all`], a new generation). The exporter's one HTTP server asks every registered tool for a
//! [`Snapshot`] at once ([`Hub::scrape_all`]) and encodes them together
//! ([`crate::output::metrics::encode_merged`]), so each family is declared once and the self metrics of all
//! tools share their families, told apart by their `tool` label.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use crate::output::metrics::{with_overflow, SeriesCap, Snapshot};
use crate::output::metrics_self::SelfMetrics;
use crate::run::Signals;

/// How often a serving tool looks for a stop (signal or new generation) while no scrape comes.
const IDLE_CHECK: Duration = Duration::from_millis(200);

/// A scrape request: where the tool sends its snapshot (or why it has none).
type Reply = mpsc::Sender<Result<Snapshot>>;

/// A tool serving its metrics through the hub.
struct Registration {
    tool: String,
    mechanism: String,
    generation: u64,
    requests: mpsc::Sender<Reply>,
}

/// The tools serving through one exporter, by generation: a reload stops one generation and starts the next.
#[derive(Default)]
pub struct Hub {
    generation: AtomicU64,
    tools: Mutex<Vec<Registration>>,
}

impl Hub {
    /// A hub with no tool yet, shared by the exporter and the tools it starts.
    pub fn new() -> Arc<Hub> {
        Arc::new(Hub::default())
    }

    /// The tools started from now on belong to this generation.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Stops every tool of the current generation (each leaves its serve loop within [`IDLE_CHECK`], detaches
    /// and returns; one still loading stops as soon as it would serve) and returns the next generation.
    pub fn stop_all(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn registrations(&self) -> std::sync::MutexGuard<'_, Vec<Registration>> {
        self.tools.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tools serving in the current generation, with the attach mechanism each chose.
    pub fn registered(&self) -> Vec<(String, String)> {
        let now = self.generation();
        let tools = self.registrations();
        tools.iter().filter(|r| r.generation == now).map(|r| (r.tool.clone(), r.mechanism.clone())).collect()
    }

    /// Asks every tool serving now for its snapshot, all at once, and waits up to `timeout` for the answers: a
    /// tool that does not answer in time, or whose maps could not be read, is named with the error.
    pub fn scrape_all(&self, timeout: Duration) -> Vec<(String, Result<Snapshot>)> {
        let now = self.generation();
        let pending: Vec<(String, Option<mpsc::Receiver<Result<Snapshot>>>)> = self
            .registrations()
            .iter()
            .filter(|r| r.generation == now)
            .map(|r| {
                let (reply, answer) = mpsc::channel();
                (r.tool.clone(), r.requests.send(reply).ok().map(|()| answer))
            })
            .collect();
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

    /// A tool's serve loop under the exporter ([`super::endpoint::Endpoint::serve`]): registers `tool` in
    /// `generation`, then answers each scrape with what `collect` reads, capped at `max_series` label sets per
    /// metric, with its self metrics, until a stop signal or a new generation.
    pub(crate) fn serve_tool(
        &self,
        tool: &str,
        generation: u64,
        signals: &Signals,
        own: &SelfMetrics,
        max_series: usize,
        mut collect: impl FnMut(&mut Snapshot) -> Result<()>,
    ) -> Result<()> {
        let (requests, incoming) = mpsc::channel::<Reply>();
        {
            let mechanism = own.mechanism().unwrap_or("unknown").to_string();
            self.registrations().push(Registration { tool: tool.to_string(), mechanism, generation, requests });
        }
        let mut cap = SeriesCap::new(max_series);
        while !signals.stopped() && self.generation() == generation {
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
        self.registrations().retain(|r| !(r.tool == tool && r.generation == generation));
        Ok(())
    }
}
