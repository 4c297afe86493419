//! Shared code of the corebpf-tools.
//!
//! Each tool is a thin `main.rs` over these modules: command-line pieces ([`cli`]), feature probes and
//! preflight checks ([`probe`]), skeleton loading with attach fallbacks ([`loader`]), the signal-aware interval
//! loop ([`run`]) and ring-buffer event loop ([`events`]), BCC-compatible histograms ([`hist`]), map reading
//! ([`maps`]), output that survives pipes ([`output`]), block-device and cgroup helpers ([`blockdev`],
//! [`cgroup`]), and socket addresses from BPF records ([`net`]).

pub mod blockdev;
pub mod cgroup;
pub mod cli;
pub mod events;
pub mod hist;
pub mod loader;
pub mod maps;
pub mod net;
pub mod output;
pub mod probe;
pub mod run;
