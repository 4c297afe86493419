// SPDX-License-Identifier: Apache-2.0 OR MIT
//! What a tool is to the multicall binary `corebpf-tools`, to the exporter and to its own `main.rs`.
//!
//! Every tool crate's library exports `pub const TOOL: common::tool::Tool = common::tool!(main, [ladder]);` where
//! `main` takes the command line (argv[0] first) and the [`Host`] it runs in, and returns the exit status; the
//! ladder lists the attach mechanisms it tries, the one list its loader and `corebpf-tools features` read. The
//! tool's own `main.rs` is the same one line in every tool (`tool::TOOL.run_from_env()`); the multicall binary
//! runs it standalone with the command line it was given ([`Tool::run`]), the exporter on a thread of its own,
//! given the exporter's hub ([`Tool::run_exported`]).

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;

use crate::attach::features::Attach;
use crate::host::hub::Hub;
use crate::host::Host;

/// One tool: its name and one-line description (from its Cargo.toml) and its entry point.
#[derive(Clone, Copy)]
pub struct Tool {
    /// The tool's name, as BCC names it (`biolatency`): the crate's package name.
    pub name: &'static str,
    /// One line saying what it shows: the crate's `description`.
    pub about: &'static str,
    /// Runs the tool with a full command line (argv[0] first) in the host given, and returns its exit status.
    pub main: fn(Vec<OsString>, Host) -> ExitCode,
    /// The attach mechanisms the tool can use, cheapest first within each family (`corebpf-tools features`
    /// shows, per family, the first one this kernel offers).
    pub attach: &'static [Attach],
}

impl Tool {
    /// Runs the tool with this process's own command line (what a tool's `main.rs` does).
    pub fn run_from_env(&self) -> ExitCode {
        self.run(std::env::args_os().collect())
    }

    /// Runs the tool on its own, with command line `argv`.
    pub fn run(&self, argv: Vec<OsString>) -> ExitCode {
        (self.main)(argv, Host::standalone(self.name))
    }

    /// Runs the tool under the exporter: its metrics are served by `hub`, and it stops when `generation` ends.
    pub fn run_exported(&self, argv: Vec<OsString>, hub: Arc<Hub>, generation: u64) -> ExitCode {
        (self.main)(argv, Host::exported(self.name, hub, generation))
    }
}

/// The [`Tool`] of the calling crate: name and description from its Cargo.toml, `$main` its entry point, and
/// the attach mechanisms it tries, cheapest first: `tool!(main, [Attach::TpBtf, Attach::RawTp])`. There is no
/// form without a ladder; toolset's `every_tool_declares_its_attach_ladder` test refuses an empty one.
#[macro_export]
macro_rules! tool {
    ($main:path, [$($attach:expr),* $(,)?]) => {
        $crate::tool::Tool {
            name: env!("CARGO_PKG_NAME"),
            about: env!("CARGO_PKG_DESCRIPTION"),
            main: $main,
            attach: &[$($attach),*],
        }
    };
}
