// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `corebpf-tools --list`: every tool with its one-line description, as a table.

use std::io::Write;
use std::process::ExitCode;

use common::tool::Tool;
use tabled::builder::Builder;
use tabled::settings::Style;

/// Prints the table of tools; a closed pipe ends quietly.
pub fn print(tools: &[Tool]) -> ExitCode {
    let mut table = Builder::default();
    table.push_record(["TOOL", "DESCRIPTION"]);
    for tool in tools {
        table.push_record([tool.name, tool.about]);
    }
    let text = table.build().with(Style::blank()).to_string();
    let _ = writeln!(std::io::stdout(), "{}", text.lines().map(str::trim_end).collect::<Vec<_>>().join("\n"));
    ExitCode::SUCCESS
}
