// SPDX-License-Identifier: Apache-2.0 OR MIT
//! A tool's entry: its body run in its host, its result turned into an exit status.
//!
//! Every tool's `main` is two lines: parse the command line ([`crate::cli::parse`], usage errors exit 2 there),
//! then `host.bpf_main(args.verbose, |signals| body(args, signals))`. [`Host::bpf_main`] does what every tool
//! must do before its body (the preflight checks of privileges and kernel BTF, libbpf's messages at the tool's
//! `-v` level, the stop signals caught before anything loads) and [`Host::main`] what it must do after: an error
//! is one line `tool: message` on stderr with exit status 1, and a closed stdout pipe is a normal, quiet end
//! (exit 0).

use std::process::ExitCode;

use anyhow::Result;

use super::Host;
use crate::output::stdout::is_closed_pipe;
use crate::run::Signals;

impl Host {
    /// Runs a tool's body and turns its result into an exit status: 0 on success or on a closed stdout pipe,
    /// 1 with `tool: error` on stderr otherwise (the tool named as it was invoked). For a body that loads no BPF
    /// program (a listing).
    pub fn main(&self, body: impl FnOnce() -> Result<()>) -> ExitCode {
        let tool = crate::identity::invoked_name();
        match body() {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) if is_closed_pipe(&err) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("{tool}: {}", one_line(&err));
                ExitCode::FAILURE
            }
        }
    }

    /// [`Host::main`] for a tool that loads BPF programs: the preflight checks (privileges, kernel BTF) come
    /// first, libbpf's own messages are shown at the tool's `-v` level, and the body is given the signals that
    /// stop it, already caught ([`Host::signals`]), so no tool can forget any of them.
    pub fn bpf_main(&self, verbose: crate::cli::Verbose, body: impl FnOnce(Signals) -> Result<()>) -> ExitCode {
        self.main(|| {
            crate::attach::features::preflight()?;
            crate::attach::loader::init_libbpf_log(verbose.level);
            body(self.signals()?)
        })
    }
}

/// The error and its causes on one line, without repeating a cause the message already contains.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_causes_without_repeats() {
        let err = anyhow::anyhow!("disk not found").context("resolving -d sdz");
        assert_eq!(one_line(&err), "resolving -d sdz: disk not found");
        let err = anyhow::anyhow!("x").context("x failed: x");
        assert_eq!(one_line(&err), "x failed: x");
    }
}
