// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `corebpf-tools`: every tool of the kit in one binary, like busybox.
//!
//! Invoked through a link named after a tool (`biolatency`, or `bpf-biolatency` with an install prefix), it runs
//! that tool; invoked as itself, its first argument names the tool (`corebpf-tools biolatency -m 1 1`), or one of
//! its own commands: `--list` (or `list`), `features` and `exporter` (several tools' Prometheus metrics from one
//! process). The list of tools is generated from the workspace's
//! `tools/*` folders by build.rs.

mod exporter;
mod features;
mod list;
mod system;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use common::tool::Tool;

include!(concat!(env!("OUT_DIR"), "/tools.rs"));

const NAME: &str = "corebpf-tools";
/// The one line of the man page's NAME section.
const ABOUT: &str = "CO-RE BPF tracing tools in one binary, with BCC's options and output";

const USAGE: &str = "\
Usage: corebpf-tools TOOL [ARGS]...
       corebpf-tools --list | list
       corebpf-tools features [--json]
       corebpf-tools exporter [--listen ADDR:PORT] [--config FILE] [--check] [TOOL_COMMAND]...
       TOOL [ARGS]...            (through a link named after the tool, optionally with a prefix: bpf-TOOL)

Prebuilt CO-RE BPF tracing tools, BCC's tools rebuilt in Rust. `corebpf-tools TOOL --help` shows a tool's
options.";

fn main() -> ExitCode {
    common::identity::set_build_commit(env!("COREBPF_COMMIT"));
    // A tool's man page names the pages installed beside it with their prefix (SEE ALSO).
    common::cli::man_completions::set_package_tools(TOOLS.iter().map(|t| t.name).collect());
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    let invoked = argv.first().and_then(|a| Path::new(a).file_name()).map(|n| n.to_string_lossy().into_owned());
    if let Some(tool) = invoked.as_deref().and_then(tool_for_link) {
        return tool.run(argv);
    }
    argv.remove(0);
    if argv.is_empty() {
        // COREBPF_GENERATE=man: this binary's own page, corebpf-tools(8) (packaging/install-tools.sh).
        let tools: Vec<(&'static str, &'static str)> = TOOLS.iter().map(|t| (t.name, t.about)).collect();
        common::cli::man_completions::multicall_from_env(NAME, &common::identity::version_line(), ABOUT, &tools);
    }
    let Some(first) = argv.first().map(|a| a.to_string_lossy().into_owned()) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match first.as_str() {
        "--list" | "list" => list::print(TOOLS),
        "features" => features::main(TOOLS, &argv[1..]),
        "exporter" => exporter::main(TOOLS, argv),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        "-V" | "--version" => {
            println!("{NAME} {}", common::identity::version_line());
            ExitCode::SUCCESS
        }
        given => match tool_named(common::identity::without_debian_suffix(given)) {
            Some(tool) => tool.run(argv),
            None => {
                let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
                eprintln!("{NAME}: no tool named '{given}' (tools: {})", names.join(", "));
                ExitCode::from(2)
            }
        },
    }
}

/// The tool called `name`, or that `name` is an alias of.
fn tool_named(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name).or_else(|| tool_for_alias(name))
}

/// The tool `name` is an alias of (`corebpf-tools ext4slower` runs fsslower, which reads the name it was given).
fn tool_for_alias(name: &str) -> Option<&'static Tool> {
    let (_, tool) = ALIASES.iter().find(|(alias, _)| *alias == name)?;
    TOOLS.iter().find(|t| t.name == *tool)
}

/// The tool a link is named after: its exact name or alias (`ext4slower` runs fsslower), else the longest tool
/// name or alias that ends the link's name after an install prefix (`bpf-biolatency`, `corebpf-ext4slower`);
/// never a part of a name inside another. Debian's names for BCC's tools (`biolatency-bpfcc`) are found too.
fn tool_for_link(invoked: &str) -> Option<&'static Tool> {
    let invoked = common::identity::without_debian_suffix(invoked);
    let names = TOOLS.iter().map(|t| (t.name, t.name)).chain(ALIASES.iter().copied());
    let (_, tool) = names
        .filter(|(name, _)| invoked == *name || invoked.ends_with(name))
        .max_by_key(|(name, _)| (invoked == *name, name.len()))?;
    TOOLS.iter().find(|t| t.name == tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_find_their_tool() {
        assert_eq!(tool_for_link("biolatency").map(|t| t.name), Some("biolatency"));
        assert_eq!(tool_for_link("bpf-biolatency").map(|t| t.name), Some("biolatency"));
        assert!(tool_for_link("corebpf-tools").is_none());
        assert!(tool_for_link("biolatency-x").is_none());
        assert_eq!(tool_for_link("ext4slower").map(|t| t.name), Some("fsslower"));
        assert_eq!(tool_for_link("bpf-xfsdist").map(|t| t.name), Some("fsdist"));
        assert_eq!(tool_for_alias("btrfsslower").map(|t| t.name), Some("fsslower"));
        assert_eq!(tool_for_link("biolatency-bpfcc").map(|t| t.name), Some("biolatency"));
        assert_eq!(tool_for_link("ext4slower-bpfcc").map(|t| t.name), Some("fsslower"));
        assert_eq!(tool_named("execsnoop").map(|t| t.name), Some("execsnoop"));
        assert!(tool_for_link("-bpfcc").is_none());
    }

    #[test]
    fn tools_are_sorted_and_unique() {
        let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    /// `TOOL.attach` is the one list of mechanisms a tool tries (and `features` reports): none may be empty.
    #[test]
    fn every_tool_declares_its_attach_ladder() {
        let empty: Vec<&str> = TOOLS.iter().filter(|t| t.attach.is_empty()).map(|t| t.name).collect();
        assert!(empty.is_empty(), "tools with an empty attach ladder in TOOL: {empty:?}");
    }
}
