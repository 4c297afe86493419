// SPDX-License-Identifier: Apache-2.0 OR MIT
//! What tools print: [`name`] (a name from the traced system, escaped in text and plain in JSON), [`stdout`]
//! (buffered, flushed per record, a closed pipe a quiet end, JSON lines, clocks) and [`hist`] (BCC's log2 and
//! linear histograms, differenced from cumulative kernel maps).
//! [`schema`] is the JSON a tool's documentation declares (docs/json.md), which the man page lists and the tests
//! check its lines against.
//! [`irqtime`] is the run and report of the IRQ time tools (hardirqs, softirqs).
//! [`namedhist`] is the run and report of tools with a histogram per name (bitesize).
//! [`taskhist`] is the run and report of the scheduler latency histogram tools (cpudist, runqlat).
//! [`metrics`] is the Prometheus exposition of a tool's maps (served by [`crate::host::endpoint`]).
//! [`topscreen`] is the top of BCC's top-style screens (cleared screen, loadavg line); [`taskrows`] turns those
//! tools' per-task rows into counters that outlive the tasks.
//! [`sockevents`] is what the socket event tools (tcpaccept, tcpconnect, tcpdrop, tcpretrans, tcplife) share.

pub mod heatmap;
pub mod hist;
pub mod irqtime;
pub mod metrics;
pub mod metrics_self;
pub mod name;
pub mod namedhist;
pub mod schema;
pub mod sockevents;
pub mod stackseries;
pub mod stdout;
pub mod taskhist;
pub mod taskrows;
pub mod topscreen;
