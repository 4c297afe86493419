// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Build helper shared by every tool's `build.rs`.
//!
//! A tool crate keeps its BPF program in `src/<crate name>.bpf.c` (or, in a freshly copied folder, the one
//! `src/*.bpf.c` there is); `build_skeleton()` compiles it with clang (`-Wall -Werror`) against the shared
//! headers in `bpf/include/` and the kernel types in `vmlinux/<arch>/` (`-D__TARGET_ARCH_<arch>`: x86 or arm64,
//! from Cargo's target architecture), and writes two files to `$OUT_DIR`:
//! - `bpf.skel.rs`, the libbpf-cargo skeleton, always named `bpf` (`BpfSkelBuilder`, `BpfSkel`, `types`), so no
//!   tool's Rust code names its own crate and a copied folder builds with only its package name changed;
//! - `consts.rs`, every `#define NAME <integer>` of the tool's `src/*.h` as `pub const NAME: usize`, so a
//!   constant shared by C and Rust (slot counts, table sizes) has one home, the C header;
//! - `main.rs`, the tool's own `main` (`fn main() { <crate>::TOOL.run_from_env() }`), so the tool's
//!   `src/main.rs` is one `include!` line that never names the crate;
//! - `examples.txt`, the `## --help` part of the tool's documentation source `doc.md` (the text of its one
//!   ``` fence), which the tool's `lib.rs` includes as clap's `after_help`.
//!
//! The tool's `src/bpf.rs` includes the first two, its `src/main.rs` the third, its `src/lib.rs` the fourth.

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// The folder of this crate (`bpf/`), which holds the shared BPF headers.
fn bpf_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The kernel's name (`x86`, `arm64`) of the architecture being built for (Cargo's target, not the build host):
/// it names the `vmlinux/<arch>` folder and libbpf's `__TARGET_ARCH_<arch>` (the `pt_regs` layout of
/// `PT_REGS_PARM1()` and friends, and the `__<arch>_sys_` prefix of syscall wrappers).
fn kernel_arch() -> String {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    match arch.as_str() {
        "x86_64" => "x86".into(),
        "aarch64" => "arm64".into(),
        other => panic!("no BPF build for the target architecture {other}: x86_64 and aarch64 are supported"),
    }
}

/// Writes libbpf's own BPF headers (`bpf/bpf_helpers.h`, `bpf/usdt.bpf.h`, ...) under `out_dir` and returns the
/// folder to put on the include path. libbpf-cargo writes them too, but to a randomly named temporary folder,
/// whose name would end up in the BPF object's line info wherever a header function is inlined (usdt.bpf.h's
/// are), so two builds would differ; ours comes first on the include path and is mapped to a fixed name.
fn libbpf_headers(out_dir: &Path) -> PathBuf {
    let root = out_dir.join("libbpf-headers");
    let dir = root.join("bpf");
    std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("creating {}: {err}", dir.display()));
    for (name, contents) in libbpf_rs::libbpf_sys::API_HEADERS {
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
    }
    root
}

/// Fails the build if a program of the object uses an atomic instruction other than a plain add (an add with
/// fetch, or/and/xor, exchanges): kernels before 5.12 refuse those ("BPF_STX uses reserved fields"), and clang
/// makes them from innocent C, e.g. `__sync_fetch_and_add(p, 0)` becomes an atomic OR of 0 (ucalls -S on 5.10).
fn refuse_new_atomics(open: &libbpf_rs::OpenObject, tool: &str) {
    const BPF_STX: u8 = 0x03;
    const BPF_ATOMIC: u8 = 0xc0;
    for prog in open.progs() {
        for (i, insn) in prog.insns().iter().enumerate() {
            if insn.code & 0x07 == BPF_STX && insn.code & 0xe0 == BPF_ATOMIC && insn.imm != 0 {
                panic!(
                    "{tool}: program {:?}, instruction {i}: an atomic operation ({:#x}) that kernels before 5.12 \
                     refuse; only atomic adds whose result is unused (and never of a constant 0) load there",
                    prog.name(),
                    insn.imm
                );
            }
        }
    }
}

/// Fails the build if a program has a loop closed by falling through into its head rather than by a jump: kernels
/// before the fallthrough rule was relaxed (5.10 and 6.1 of the matrix) refuse it at load ("back-edge from insn X
/// to Y"), and clang makes it from an ordinary bounded loop whose latch it places just above the head (wqlat -w's
/// walk did). The walk is the kernel's own check_cfg(): a depth-first search from the first instruction, each
/// conditional jump's fallthrough edge before its branch; an edge to an instruction still on the search's path is a
/// back-edge, allowed only from a jump. Calls to subprograms are not followed (they are linked in at load).
fn refuse_fallthrough_back_edges(open: &libbpf_rs::OpenObject, tool: &str) {
    const BPF_JMP: u8 = 0x05;
    const BPF_JMP32: u8 = 0x06;
    const BPF_JA: u8 = 0x00;
    const BPF_CALL: u8 = 0x80;
    const BPF_EXIT: u8 = 0x90;
    for prog in open.progs() {
        let insns = prog.insns();
        // The edges out of instruction t: (target, whether a back-edge there is allowed).
        let edges = |t: usize| -> Vec<(usize, bool)> {
            let code = insns[t].code;
            let (class, op) = (code & 0x07, code & 0xf0);
            if class != BPF_JMP && class != BPF_JMP32 {
                return vec![(t + 1, false)];
            }
            let target = (t as i64 + 1 + i64::from(insns[t].off)) as usize;
            match op {
                BPF_EXIT => vec![],
                BPF_CALL => vec![(t + 1, false)],
                BPF_JA if class == BPF_JMP => vec![(target, true)],
                _ => vec![(t + 1, true), (target, true)],
            }
        };
        // 0: not seen; 1: on the path; 2: done.
        let mut state = vec![0u8; insns.len()];
        let mut path: Vec<(usize, usize)> = vec![(0, 0)];
        state[0] = 1;
        while let Some((t, next)) = path.last_mut() {
            let (t, out) = (*t, edges(*t));
            let Some(&(w, loop_ok)) = out.get(*next) else {
                state[t] = 2;
                path.pop();
                continue;
            };
            *next += 1;
            if w >= insns.len() {
                continue;
            }
            match state[w] {
                0 => {
                    state[w] = 1;
                    path.push((w, 0));
                }
                1 if !loop_ok => panic!(
                    "{tool}: program {:?}: instruction {t} falls through into {w}, the head of a loop, a back-edge \
                     that older kernels (5.10, 6.1) refuse; make the loop's body smaller (a __noinline step function) so \
                     that it ends in a jump back",
                    prog.name()
                ),
                _ => {}
            }
        }
    }
}

/// Compiles `src/<crate name>.bpf.c` of the calling crate into `$OUT_DIR/<crate name>.skel.rs`.
///
/// Panics (failing the build with clang's message) if the source does not compile: a build script has no better
/// way to report it.
pub fn build_skeleton() {
    let name = env::var("CARGO_PKG_NAME").expect("CARGO_PKG_NAME is set by cargo");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set by cargo"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let source = bpf_source(&manifest.join("src"), &name);
    // The object's file name names the skeleton's types: `bpf` gives BpfSkel, BpfSkelBuilder, OpenBpfProgs...
    let object = out_dir.join("bpf.o");
    let skeleton = out_dir.join("bpf.skel.rs");

    let bpf = bpf_dir();
    let workspace = bpf.parent().expect("bpf/ lives in the workspace").to_path_buf();
    let include = bpf.join("include");
    let arch = kernel_arch();
    let vmlinux = workspace.join("vmlinux").join(&arch);
    let libbpf = libbpf_headers(&out_dir);

    SkeletonBuilder::new()
        .source(&source)
        .obj(&object)
        .clang_args([
            format!("-D__TARGET_ARCH_{arch}"),
            format!("-I{}", include.display()),
            format!("-I{}", vmlinux.display()),
            format!("-I{}", manifest.join("src").display()),
            format!("-I{}", libbpf.display()),
            // Keep build-machine paths out of the embedded object (reproducible builds).
            format!("-fdebug-prefix-map={}=.", workspace.display()),
            format!("-fdebug-prefix-map={}=libbpf", libbpf.display()),
            "-Wall".into(),
            "-Werror".into(),
            "-Wno-unused-function".into(),
        ])
        .build_and_generate(&skeleton)
        .unwrap_or_else(|err| panic!("building the BPF skeleton from {}: {err:#}", source.display()));
    // What older kernels refuse at load, refused here (the object opened once for both checks).
    let open = libbpf_rs::ObjectBuilder::default()
        .open_file(&object)
        .unwrap_or_else(|err| panic!("opening {}: {err:#}", object.display()));
    refuse_new_atomics(&open, &name);
    refuse_fallthrough_back_edges(&open, &name);

    write_consts(&manifest.join("src"), &out_dir.join("consts.rs"));
    write_main(&name, &out_dir.join("main.rs"));
    // Every tool (a crate in tools/) documents itself in doc.md; the multicall's crate, which builds its
    // features program here too, has none.
    let doc = manifest.join("doc.md");
    if doc.exists() || manifest.parent().and_then(Path::file_name).is_some_and(|d| d == "tools") {
        write_help_examples(&doc, &out_dir.join("examples.txt"));
        println!("cargo:rerun-if-changed={}", doc.display());
    }

    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-changed={}", manifest.join("src").display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed={}", vmlinux.display());
}

/// `src/<name>.bpf.c`, else the only `src/*.bpf.c` (a copied tool folder before its files are renamed).
fn bpf_source(src: &Path, name: &str) -> PathBuf {
    let by_name = src.join(format!("{name}.bpf.c"));
    if by_name.exists() {
        return by_name;
    }
    let found = files_ending(src, ".bpf.c");
    match found.as_slice() {
        [one] => one.clone(),
        [] => panic!("no BPF program: expected {}", by_name.display()),
        _ => panic!("several src/*.bpf.c and none named {}: which is the tool's?", by_name.display()),
    }
}

/// The files of `dir` whose names end with `suffix`, sorted.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)))
        .collect();
    found.sort();
    found
}

/// Writes `pub const NAME: usize = VALUE;` for every `#define NAME VALUE` with an integer VALUE in `src/*.h`.
fn write_consts(src: &Path, out: &Path) {
    let mut text =
        String::from("// Generated by corebpf-build from the tool's src/*.h: the C header is the one home.\n");
    for header in files_ending(src, ".h") {
        let content = std::fs::read_to_string(&header).unwrap_or_else(|e| panic!("reading {}: {e}", header.display()));
        for (name, value) in integer_defines(&content) {
            text.push_str(&format!("#[allow(dead_code)]\npub const {name}: usize = {value};\n"));
        }
    }
    std::fs::write(out, text).unwrap_or_else(|err| panic!("writing {}: {err}", out.display()));
}

/// Writes the binary's `main`, which runs the library's `TOOL` (the crate is named after the package).
fn write_main(package: &str, out: &Path) {
    let krate = package.replace('-', "_");
    let text = format!(
        "// Generated by corebpf-build: the tool run on its own, as the multicall binary runs it.\n\
         fn main() -> std::process::ExitCode {{\n    {krate}::TOOL.run_from_env()\n}}\n"
    );
    std::fs::write(out, text).unwrap_or_else(|err| panic!("writing {}: {err}", out.display()));
}

/// Writes the text of the ``` fence under `## --help` in the tool's `doc.md`, without a final newline.
fn write_help_examples(doc: &Path, out: &Path) {
    let text = std::fs::read_to_string(doc)
        .unwrap_or_else(|e| panic!("reading {}: {e} (every tool documents itself there)", doc.display()));
    let examples = help_examples(&text)
        .unwrap_or_else(|| panic!("{}: no ``` fence under `## --help` (the examples --help prints)", doc.display()));
    std::fs::write(out, examples).unwrap_or_else(|err| panic!("writing {}: {err}", out.display()));
}

/// The lines inside the first ``` fence after the `## --help` title, joined by newlines.
fn help_examples(doc: &str) -> Option<String> {
    let mut lines = doc.lines().skip_while(|l| l.trim_end() != "## --help").skip(1);
    lines.find(|l| l.starts_with("```"))?;
    let mut body = Vec::new();
    for line in lines {
        if line.starts_with("```") {
            return Some(body.join("\n"));
        }
        body.push(line);
    }
    None
}

/// `(NAME, value)` of each `#define NAME value` line whose value is a decimal or hex integer.
fn integer_defines(header: &str) -> Vec<(String, u64)> {
    header
        .lines()
        .filter_map(|line| {
            let mut words = line.trim().strip_prefix("#define")?.split_whitespace();
            let (name, value) = (words.next()?, words.next()?);
            let value = value.trim_end_matches(['u', 'U', 'l', 'L']);
            let value = match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok()?,
                None => value.parse().ok()?,
            };
            Some((name.to_owned(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn integer_defines_are_found() {
        let found =
            super::integer_defines("#define MAX_SLOTS 27\n#define GUARD_H\n#define X 0x10UL\n#define S \"s\"\n");
        assert_eq!(found, vec![("MAX_SLOTS".to_owned(), 27), ("X".to_owned(), 16)]);
    }

    #[test]
    fn help_examples_are_the_fence_under_help() {
        let doc = "# t\n\n## EXAMPLES\n\n```\nnot this\n```\n\n## --help\n\n```text\nexamples:\n    t -x  # x\n```\n";
        assert_eq!(super::help_examples(doc).as_deref(), Some("examples:\n    t -x  # x"));
        assert_eq!(super::help_examples("## --help\n\n```text\nunclosed\n"), None);
        assert_eq!(super::help_examples("## EXAMPLES\n"), None);
    }
}
