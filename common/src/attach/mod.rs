// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Attaching to the kernel, and what the kernel offers.
//!
//! [`features`] answers questions from BTF, capabilities and trial loads (never the version string);
//! [`loader`] opens and loads a tool's skeleton over its attach ladder (`tp_btf` > `raw_tp` > tracepoint, ...);
//! [`links`] holds a tool's links and detaches them in parallel; [`perf`] opens perf events; [`events`] is the
//! event stream of the event tools (the one ring-buffer poll loop, and its lost records); [`skipped`] counts the
//! probe runs the kernel skipped; [`maps`] reads maps into Rust values; [`kernel_functions`] lists the kernel
//! functions that can be traced; [`uprobe`] probes one known user function.

pub mod btf_enums;
pub mod events;
pub mod features;
pub mod kernel_functions;
pub mod links;
pub mod loader;
pub mod maps;
pub mod perf;
pub mod skipped;
pub mod uprobe;
