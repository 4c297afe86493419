// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--prometheus`: the sessions of each service as three histograms, read from the BPF side's `services` map
//! (per-session records are not sent in this mode). A service is a server's port and family, and the side of
//! it an end is on: `role="server"` for the ends a listener accepted (their local port), `role="client"` for
//! the ends that connected to it (their remote port). Client ports are ephemeral and are never a label.
//!
//! - `corebpf_tcplife_session_duration_seconds`: from the last state before FIN_WAIT1 to close (BCC's MS);
//! - `corebpf_tcplife_session_received_bytes` and `corebpf_tcplife_session_sent_bytes`: payload bytes per
//!   session, received and sent-and-acked (the JSON output's exact bytes, SYN and FIN left out).

use common::domain::net::Family;
use common::output::metrics::{HistogramValue, Snapshot};

use crate::bpf::types::{service_hists, service_key};

// SAFETY: #[repr(C)] structs of integers and integer arrays; the BPF side writes whole keys (padding zeroed).
unsafe impl plain::Plain for service_key {}
unsafe impl plain::Plain for service_hists {}

const LABELS: &[&str] = &["port", "role", "family"];
const DURATION: (&str, &str) = ("session_duration", "TCP sessions by duration, per service port and side");
const RECEIVED: (&str, &str) =
    ("session_received", "TCP sessions by payload bytes received, per service port and side");
const SENT: (&str, &str) = ("session_sent", "TCP sessions by payload bytes sent and acked, per service port and side");

/// Adds the services' histograms to the scrape's snapshot (declared even before the first session).
pub fn write(s: &mut Snapshot, services: &[(service_key, service_hists)]) {
    s.declare_histogram_seconds(DURATION.0, DURATION.1, LABELS);
    s.declare_histogram_bytes(RECEIVED.0, RECEIVED.1, LABELS);
    s.declare_histogram_bytes(SENT.0, SENT.1, LABELS);
    for (key, h) in services {
        let role = if key.client != 0 { "client" } else { "server" };
        let Some(family) = Family::from_af(key.family) else { continue };
        let labels = || vec![key.port.to_string(), role.to_string(), family.name().to_string()];
        let span = HistogramValue::from_log2_slots(&h.span.slots, h.span.sum_ns, 1000);
        s.histogram_seconds(DURATION.0, DURATION.1, LABELS, labels(), span);
        let rx = HistogramValue::from_log2_slots_bytes(&h.rx.slots, h.rx.sum_ns, 1);
        s.histogram_bytes(RECEIVED.0, RECEIVED.1, LABELS, labels(), rx);
        let tx = HistogramValue::from_log2_slots_bytes(&h.tx.slots, h.tx.sum_ns, 1);
        s.histogram_bytes(SENT.0, SENT.1, LABELS, labels(), tx);
    }
}
