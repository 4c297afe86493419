// SPDX-License-Identifier: Apache-2.0 OR MIT
//! A tool's `--prometheus` side: bound before anything loads, told what was attached, then served.
//!
//! A tool serves in a few lines: `let endpoint = args.export.endpoint(&host, interval_given)?` before loading
//! (a busy port is one line at once), `endpoint.attached(mech, skel.object())` after attaching, then
//! `endpoint.serve(&signals, |s| ...)` with a closure that reads its maps into a [`Snapshot`]
//! ([`crate::output::metrics`]) once per scrape, on the tool's own thread. Standalone, the endpoint answers on
//! its own port ([`super::http`]); under the exporter it binds nothing and serves through the exporter's hub
//! ([`super::hub`]).

use std::io::Write as _;
use std::net::SocketAddr;

use anyhow::Result;

use super::http::{Listener, Request, Response};
use super::{Exported, Host};
use crate::output::metrics::{encode, Format, SeriesCap, Snapshot};
use crate::output::metrics_self::SelfMetrics;
use crate::run::Signals;

/// A bound `--prometheus` endpoint: made before the BPF programs are loaded, then told what was attached, then
/// served.
pub struct Endpoint {
    tool: &'static str,
    /// Where scrapes come from: the tool's own port, or the exporter's hub.
    via: Via,
    max_series: usize,
    own: SelfMetrics,
}

/// How an endpoint is reached.
enum Via {
    Listener(Listener),
    Exporter(Exported),
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let via = match &self.via {
            Via::Listener(listener) => listener.local_addr().to_string(),
            Via::Exporter(exported) => format!("the exporter, generation {}", exported.generation),
        };
        f.debug_struct("Endpoint").field("tool", &self.tool).field("via", &via).finish()
    }
}

impl Endpoint {
    /// Binds `listen` for the metrics of `host`'s tool (a busy port or a foreign address fails here, before
    /// anything loads); under the exporter nothing is bound: the exporter's server serves the tool.
    pub fn bind(host: &Host, listen: SocketAddr, max_series: usize) -> Result<Endpoint> {
        let via = match host.exporter() {
            Some(exported) => Via::Exporter(exported.clone()),
            None => Via::Listener(Listener::bind(listen)?),
        };
        Ok(Endpoint { tool: host.tool(), via, max_series, own: SelfMetrics::new() })
    }

    /// Records how the programs were attached and which programs of `object` are loaded, for the self metrics
    /// (call once per BPF object a tool loads).
    pub fn attached(&mut self, mechanism: impl std::fmt::Display, object: &libbpf_rs::Object) {
        self.own.attached(&mechanism.to_string(), object);
    }

    /// Serves `/metrics` until a stop signal: prints where, then answers each scrape with what `collect` reads
    /// at that moment (on this thread), capped at `max_series` label sets per metric, with the self metrics.
    pub fn serve(self, signals: &Signals, mut collect: impl FnMut(&mut Snapshot) -> Result<()>) -> Result<()> {
        let listener = match &self.via {
            Via::Exporter(Exported { hub, generation }) => {
                return hub.serve_tool(self.tool, *generation, signals, &self.own, self.max_series, collect)
            }
            Via::Listener(listener) => listener,
        };
        let bound = listener.local_addr();
        {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "Serving Prometheus metrics on http://{bound}/metrics... Hit Ctrl-C to end.");
            let _ = stdout.flush();
        }
        let mut cap = SeriesCap::new(self.max_series);
        let (tool, own) = (self.tool, &self.own);
        super::http::run(listener, signals, |request: &Request| {
            let get = matches!(request.method.as_str(), "GET" | "HEAD");
            match (request.path.as_str(), get) {
                ("/metrics", true) => {
                    let format = Format::from_accept(request.accept.as_deref());
                    let mut snapshot = Snapshot::new(tool);
                    let read = collect(&mut snapshot).and_then(|()| {
                        let overflow = cap.apply(&mut snapshot);
                        own.add_to(&mut snapshot);
                        encode(tool, snapshot, overflow, format)
                    });
                    match read {
                        Ok(body) => (Response { status: 200, content_type: format.content_type(), body }, None),
                        Err(e) => (Response::text(500, &format!("{e:#}\n")), Some(e)),
                    }
                }
                ("/metrics", false) => (Response::text(405, "use GET\n"), None),
                ("/", true) => {
                    let body = "<html><body><a href=\"/metrics\">/metrics</a></body></html>\n".to_string();
                    (Response { status: 200, content_type: "text/html", body }, None)
                }
                _ => (Response::text(404, "not found: try /metrics\n"), None),
            }
        })
    }
}
