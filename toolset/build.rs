// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Generates the multicall binary's list of tools from the workspace: every `tools/NAME` folder with a
//! Cargo.toml is a tool, and must be a dependency of this crate (one line in Cargo.toml, which `make docs` writes);
//! the build fails with that advice if one is missing, so the list can never go stale. A tool's `aliases` file
//! names the other names it answers to (fsslower: ext4slower, ...). `COREBPF_TOOLSET_WITHOUT=a,b` leaves
//! tools out of the list (their code is then dropped by the linker): `make bench` uses it to measure the size
//! each tool adds. Also builds the trial programs of `corebpf-tools features` (src/features.bpf.c), and records the
//! git commit built (`COREBPF_COMMIT`, for `features`' report; "unknown" outside a git checkout).

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
        panic!("tools/{t} is not in toolset/Cargo.toml: run `make docs` (it lists every tools/* folder there)");
    }

    let mut text = String::from(
        "/// Every tool of the workspace (the `tools/*` folders), by name.\npub const TOOLS: &[Tool] = &[\n",
    );
    for t in tools.iter().filter(|t| !without.contains(&t.as_str())) {
        text.push_str(&format!("    {}::TOOL,\n", t.replace('-', "_")));
    }
    text.push_str("];\n");
    text.push_str(
        "/// The other names tools are installed under (`tools/TOOL/aliases`): (alias, tool).\npub const ALIASES: &[(&str, &str)] = &[\n",
    );
    for t in tools.iter().filter(|t| !without.contains(&t.as_str())) {
        for alias in aliases(&tools_dir.join(t)) {
            text.push_str(&format!("    ({alias:?}, {t:?}),\n"));
        }
    }
    text.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("tools.rs");
    std::fs::write(&out, text).expect("writing tools.rs");

    println!("cargo:rerun-if-changed={}", tools_dir.display());
    println!("cargo:rerun-if-changed={}", manifest.join("Cargo.toml").display());
    println!("cargo:rerun-if-env-changed=COREBPF_TOOLSET_WITHOUT");
    record_commit(&manifest);
}

/// Sets `COREBPF_COMMIT` to the checkout's commit (12 hex digits), and asks for a rerun when HEAD or the branch
/// it names moves.
fn record_commit(manifest: &Path) {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(manifest).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=COREBPF_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=COREBPF_COMMIT");
    // A commit moves the branch's loose ref, which may be new (the branch was only in packed-refs): its folder is
    // watched, not the file. Only paths that exist: cargo reruns the script every time for one that does not (a
    // checkout without packed-refs relinked the shipped binary, a minute of LTO, on every `make static`).
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        let loose = git(&["rev-parse", "--git-path", &branch]);
        watched.push(loose.and_then(|f| Some(Path::new(&f).parent()?.to_string_lossy().into_owned())));
        watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    }
    for path in watched.into_iter().flatten() {
        let path = manifest.join(path);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
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

/// The names in a tool folder's `aliases` file (one per line, `#` comments), if it has one.
fn aliases(folder: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(folder.join("aliases")).unwrap_or_default();
    text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()).map(String::from).collect()
}

/// True if `manifest` has a dependency line for tool `name` (`name = { path = "../tools/name", ... }`).
fn is_dependency(manifest: &str, name: &str) -> bool {
    let path = format!("\"../tools/{name}\"");
    manifest.lines().any(|l| l.trim_start().starts_with(&format!("{name} ")) && l.contains(&path))
}
