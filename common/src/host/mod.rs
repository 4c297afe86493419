// SPDX-License-Identifier: Apache-2.0 OR MIT
//! How a tool runs: on its own, or given to the exporter; and the rooms that serve its metrics.
//!
//! A tool is handed a [`Host`] with its command line (`fn main(argv, host)`, [`crate::tool::Tool`]), and that is
//! the only place it learns how it runs; there is no process-wide mode flag. A standalone tool stops on SIGINT,
//! SIGTERM and SIGHUP and binds its own `--prometheus` port. Under `corebpf-tools exporter` several tools share
//! one process: each runs on a thread of its own, SIGHUP is the exporter's reload (not a stop), a tool that
//! keeps no metrics is refused, and its metrics are served by the exporter's one server through the [`hub`] it
//! registers with, until the exporter stops its generation.
//!
//! The rooms: [`entry`] runs a tool's body and turns its result into an exit status ([`Host::main`],
//! [`Host::bpf_main`]); [`endpoint`] is a tool's `--prometheus` side, bound before anything loads and served
//! once attached; [`http`] the bounded HTTP server behind it; [`hub`] the exporter's registry of serving tools.

pub mod endpoint;
pub mod entry;
pub mod http;
pub mod hub;

use std::sync::Arc;

use anyhow::Result;

use crate::run::Signals;
use hub::Hub;

/// How one tool runs: its name, and the exporter it is given to, if any.
#[derive(Clone)]
pub struct Host {
    tool: &'static str,
    exporter: Option<Exported>,
}

/// A tool under the exporter: the hub that serves it and the generation it was started in (a tool still
/// loading when its generation is stopped never serves in the next one).
#[derive(Clone)]
pub(crate) struct Exported {
    pub(crate) hub: Arc<Hub>,
    pub(crate) generation: u64,
}

impl Host {
    /// A tool run on its own (from its link, or `corebpf-tools TOOL`).
    pub fn standalone(tool: &'static str) -> Host {
        Host { tool, exporter: None }
    }

    /// A tool run by the exporter, served by `hub` until `generation` is stopped.
    pub fn exported(tool: &'static str, hub: Arc<Hub>, generation: u64) -> Host {
        Host { tool, exporter: Some(Exported { hub, generation }) }
    }

    /// The tool's name (its crate's, as BCC names it): the prefix of its metrics.
    pub fn tool(&self) -> &'static str {
        self.tool
    }

    /// True under the exporter.
    pub fn is_exported(&self) -> bool {
        self.exporter.is_some()
    }

    /// The exporter this tool is given to, if any.
    pub(crate) fn exporter(&self) -> Option<&Exported> {
        self.exporter.as_ref()
    }

    /// The signals that stop the tool, caught from now on: SIGINT and SIGTERM, and SIGHUP unless the exporter
    /// owns it (its reload).
    pub fn signals(&self) -> Result<Signals> {
        Signals::install(!self.is_exported())
    }
}
