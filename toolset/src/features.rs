//! `corebpf-tools features`: what this kernel offers the tools.

use std::ffi::OsString;
use std::process::ExitCode;

use common::tool::Tool;

/// Prints the feature table (or JSON with `--json`).
pub fn main(_tools: &[Tool], _args: &[OsString]) -> ExitCode {
    eprintln!("corebpf-tools features: not yet");
    ExitCode::FAILURE
}
