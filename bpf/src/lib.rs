//! Build helper shared by every tool's `build.rs`.
//!
//! A tool crate named `foo` keeps its BPF program in `src/foo.bpf.c`; `build_skeleton()` compiles it with clang
//! against the shared headers in `bpf/include/` and the kernel types in `vmlinux/<arch>/`, and writes the
//! libbpf-cargo skeleton to `$OUT_DIR/foo.skel.rs`, where the tool includes it with
//! `include!(concat!(env!("OUT_DIR"), "/foo.skel.rs"))`. Because the file name comes from the crate name, copying
//! a tool's folder and renaming it is enough to get a new tool that builds.

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// The folder of this crate (`bpf/`), which holds the shared BPF headers.
fn bpf_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `vmlinux/<arch>` for the architecture being built for.
fn vmlinux_dir(workspace: &Path) -> PathBuf {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let dir = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => other,
    };
    workspace.join("vmlinux").join(dir)
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

/// Compiles `src/<crate name>.bpf.c` of the calling crate into `$OUT_DIR/<crate name>.skel.rs`.
///
/// Panics (failing the build with clang's message) if the source does not compile: a build script has no better
/// way to report it.
pub fn build_skeleton() {
    let name = env::var("CARGO_PKG_NAME").expect("CARGO_PKG_NAME is set by cargo");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set by cargo"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let source = manifest.join("src").join(format!("{name}.bpf.c"));
    let skeleton = out_dir.join(format!("{}.skel.rs", name.replace('-', "_")));

    let bpf = bpf_dir();
    let workspace = bpf.parent().expect("bpf/ lives in the workspace").to_path_buf();
    let include = bpf.join("include");
    let vmlinux = vmlinux_dir(&workspace);
    let libbpf = libbpf_headers(&out_dir);

    SkeletonBuilder::new()
        .source(&source)
        .clang_args([
            format!("-I{}", include.display()),
            format!("-I{}", vmlinux.display()),
            format!("-I{}", manifest.join("src").display()),
            format!("-I{}", libbpf.display()),
            // Keep build-machine paths out of the embedded object (reproducible builds).
            format!("-fdebug-prefix-map={}=.", workspace.display()),
            format!("-fdebug-prefix-map={}=libbpf", libbpf.display()),
            "-Wall".into(),
            "-Wno-unused-function".into(),
        ])
        .build_and_generate(&skeleton)
        .unwrap_or_else(|err| panic!("building the BPF skeleton from {}: {err:#}", source.display()));

    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-changed={}", manifest.join("src").display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed={}", vmlinux.display());
}
