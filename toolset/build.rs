//! Generates the multicall binary's list of tools from the workspace: every `tools/NAME` folder with a
//! Cargo.toml is a tool, and must be a dependency of this crate (one line in Cargo.toml); the build fails with
//! the line to add if one is missing, so the list can never go stale. `COREBPF_TOOLSET_WITHOUT=a,b` leaves
//! tools out of the list (their code is then dropped by the linker): `make bench` uses it to measure the size
//! each tool adds. Also builds the trial programs of `corebpf-tools features` (src/features.bpf.c).

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let tools_dir = manifest.join("../tools");
    let own = std::fs::read_to_string(manifest.join("Cargo.toml")).expect("reading toolset/Cargo.toml");

    corebpf_build::build_skeleton();
    let without = std::env::var("COREBPF_TOOLSET_WITHOUT").unwrap_or_default();
    let without: Vec<&str> = without.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let tools = tool_folders(&tools_dir);
    let missing: Vec<&String> = tools.iter().filter(|t| !is_dependency(&own, t)).collect();
    if let Some(t) = missing.first() {
        panic!(
            "tools/{t} is not in toolset/Cargo.toml: add the line\n    {t} = {{ path = \"../tools/{t}\", package = \"{t}\" }}"
        );
    }

    let mut text = String::from(
        "/// Every tool of the workspace (the `tools/*` folders), by name.\npub const TOOLS: &[Tool] = &[\n",
    );
    for t in tools.iter().filter(|t| !without.contains(&t.as_str())) {
        text.push_str(&format!("    {}::TOOL,\n", t.replace('-', "_")));
    }
    text.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("tools.rs");
    std::fs::write(&out, text).expect("writing tools.rs");

    println!("cargo:rerun-if-changed={}", tools_dir.display());
    println!("cargo:rerun-if-changed={}", manifest.join("Cargo.toml").display());
    println!("cargo:rerun-if-env-changed=COREBPF_TOOLSET_WITHOUT");
}

/// Names of the `tools/*` folders that hold a Cargo.toml, sorted.
fn tool_folders(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("reading tools/")
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// True if `manifest` has a dependency line for tool `name` (`name = { path = "../tools/name", ... }`).
fn is_dependency(manifest: &str, name: &str) -> bool {
    let path = format!("\"../tools/{name}\"");
    manifest.lines().any(|l| l.trim_start().starts_with(&format!("{name} ")) && l.contains(&path))
}
