// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Packaging: `--help` snapshots and `--version` of every tool, the static multicall binary (`make static`),
//! `make install`/`uninstall` into a temporary DESTDIR (one binary, a link per tool), the man pages (rendered with
//! `man -l`) and completions, and the .deb (`make deb`): its control fields and contents, and a real `dpkg -i`
//! into a scratch root.
//!
//! Every test iterates over `tools/*`, so a new tool is covered with no change here. The static binaries and the
//! .deb are built by `make test` before the test run (building them here would take minutes and fight cargo's
//! lock); a missing or stale one fails with the command that makes it.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use corebpf_tests::{all_tool_names, bin};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"))
}

/// Every tool: each `tools/NAME` with a Cargo.toml, sorted, as the package holds them (COREBPF_TEST_TOOLS, which
/// narrows the sweeps, does not apply); `COREBPF_TOOLS=a,b` checks only those (pass the same list to make as
/// `PKG_TOOLS="a b"`).
fn tools() -> Vec<String> {
    let only: Option<Vec<String>> =
        std::env::var("COREBPF_TOOLS").ok().map(|s| s.split(',').map(|t| t.trim().to_owned()).collect());
    let tools: Vec<String> =
        all_tool_names().into_iter().filter(|t| only.as_ref().is_none_or(|only| only.contains(t))).collect();
    assert!(!tools.is_empty(), "no tools found in tools/*");
    tools
}

/// Where `make static` puts the shipped binary, corebpf-tools.
fn static_bin() -> PathBuf {
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let path = target_dir().join(triple).join("dist").join("corebpf-tools");
    assert!(path.exists(), "{} is not built: run `make static`", path.display());
    path
}

/// Runs a command to completion with no terminal attached (stdin /dev/null) and a fixed help width.
fn run(cmd: &mut Command) -> Output {
    let out =
        cmd.env("COLUMNS", "100").stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"), "{cmd:?} panicked: {out:?}");
    out
}

fn run_ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `make -s TARGET VAR=VALUE...` in the workspace, for the tools under test.
fn make(args: &[&str]) -> String {
    let tools = format!("PKG_TOOLS={}", tools().join(" "));
    run_ok(Command::new("make").arg("-s").arg("-C").arg(root()).args(args).arg(tools))
}

/// A scratch folder under /var/tmp, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let path = PathBuf::from(format!("/var/tmp/corebpf-tests/{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Every regular file under `dir`, as paths relative to it.
fn files_under(dir: &Path) -> BTreeSet<String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                walk(base, &path, out);
            } else {
                out.insert(path.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// The files `make install` must install, under `prefix` (no leading slash): corebpf-tools and its man page, and
/// for every tool its link, man page and completions.
fn expected_install(prefix: &str, app_prefix: &str, zsh_dir: &str) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    files.insert(format!("{prefix}/sbin/corebpf-tools"));
    files.insert(format!("{prefix}/share/man/man8/corebpf-tools.8.gz"));
    for tool in tools() {
        let name = format!("{app_prefix}{tool}");
        files.insert(format!("{prefix}/sbin/{name}"));
        files.insert(format!("{prefix}/share/man/man8/{name}.8.gz"));
        files.insert(format!("{prefix}/share/bash-completion/completions/{name}"));
        files.insert(format!("{prefix}/share/{zsh_dir}/_{name}"));
        files.insert(format!("{prefix}/share/fish/vendor_completions.d/{name}.fish"));
        // The JSON Schema of its --json lines, under the tool's own name (docs/json.md).
        files.insert(format!("{prefix}/share/corebpf-tools/json/{tool}.schema.json"));
        // The tool's other names (tools/TOOL/aliases): a link each, and a link to its man page.
        let aliases =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools").join(&tool).join("aliases"));
        for alias in
            aliases.unwrap_or_default().lines().map(|l| l.split('#').next().unwrap().trim()).filter(|l| !l.is_empty())
        {
            files.insert(format!("{prefix}/sbin/{app_prefix}{alias}"));
            files.insert(format!("{prefix}/share/man/man8/{app_prefix}{alias}.8.gz"));
        }
    }
    files
}

/// The long options (`--name`) a tool's `--help` lists.
fn long_options(help: &str) -> BTreeSet<String> {
    help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2 && !w[2..].starts_with('-'))
        .map(str::to_owned)
        .collect()
}

fn sha256(path: &Path) -> String {
    run_ok(Command::new("sha256sum").arg(path)).split_whitespace().next().unwrap().to_owned()
}

#[test]
fn help_matches_the_snapshots() {
    let mut stale = Vec::new();
    for tool in tools() {
        let help = run_ok(Command::new(bin(&tool)).arg("--help"));
        let snapshot = root().join("tools").join(&tool).join("tests").join(format!("{tool}.help"));
        match fs::read_to_string(&snapshot) {
            Err(_) => stale.push(format!("{}: missing", snapshot.display())),
            Ok(expected) if expected != help => {
                let (n, (want, got)) = expected
                    .lines()
                    .chain(std::iter::repeat("<end>"))
                    .zip(help.lines().chain(std::iter::repeat("<end>")))
                    .enumerate()
                    .find(|(_, (a, b))| a != b)
                    .unwrap();
                stale.push(format!(
                    "{}: differs from `{tool} --help` at line {}:\n  snapshot: {want}\n  now:      {got}",
                    snapshot.display(),
                    n + 1
                ));
            }
            Ok(_) => {}
        }
    }
    assert!(
        stale.is_empty(),
        "--help changed; if that is deliberate, run `make snapshots` and commit tools/*/tests/*.help:\n{}",
        stale.join("\n")
    );
}

#[test]
fn version_is_the_workspace_version() {
    for tool in tools() {
        corebpf_tests::assert_version_line(&run_ok(Command::new(bin(&tool)).arg("--version")), &tool);
        corebpf_tests::assert_version_line(&run_ok(Command::new(bin(&tool)).arg("-V")), &tool);
    }
}

#[test]
fn the_static_binary_has_no_shared_libraries_and_runs_every_tool() {
    let path = static_bin();
    let out = run(Command::new("ldd").arg(&path));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("statically linked") || text.contains("not a dynamic executable"),
        "ldd {}: {text}",
        path.display()
    );
    assert!(!text.contains(".so"), "ldd {}: {text}", path.display());
    for tool in tools() {
        corebpf_tests::assert_version_line(&run_ok(Command::new(&path).arg(&tool).arg("--version")), &tool);
    }
}

#[test]
fn generate_mode_refuses_unknown_formats() {
    for tool in tools() {
        let out = run(Command::new(bin(&tool)).env("COREBPF_GENERATE", "tcsh"));
        assert_eq!(out.status.code(), Some(1), "{tool}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("{tool}: COREBPF_GENERATE=\"tcsh\": expected man, bash, zsh or fish\n")
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn install_and_uninstall_into_a_destdir() {
    for (prefix, app_prefix) in [(None, ""), (Some("/usr"), "bpf-")] {
        let dest = TempDir::new("install");
        let mut vars = vec![format!("DESTDIR={}", dest.0.display()), format!("APP_PREFIX={app_prefix}")];
        if let Some(prefix) = prefix {
            vars.push(format!("PREFIX={prefix}"));
        }
        let vars: Vec<&str> = vars.iter().map(String::as_str).collect();
        make(&[&["install-files"], &vars[..]].concat());

        let prefix = prefix.unwrap_or("/usr/local").trim_start_matches('/');
        assert_eq!(files_under(&dest.0), expected_install(prefix, app_prefix, "zsh/site-functions"));
        let schema = dest.0.join(prefix).join("share/corebpf-tools/json/execsnoop.schema.json");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/json/execsnoop.schema.json");
        assert_eq!(fs::read(&schema).unwrap(), fs::read(source).unwrap(), "{} is not docs/json's", schema.display());
        let multicall = dest.0.join(prefix).join("sbin/corebpf-tools");
        assert_eq!(fs::metadata(&multicall).unwrap().permissions().mode() & 0o7777, 0o755);
        assert_eq!(sha256(&multicall), sha256(&static_bin()), "corebpf-tools is not the static build");
        for tool in tools() {
            let name = format!("{app_prefix}{tool}");
            let installed = dest.0.join(prefix).join("sbin").join(&name);
            // A relative symbolic link, so that packages hold one binary, never a copy per name.
            assert_eq!(fs::read_link(&installed).unwrap(), Path::new("corebpf-tools"), "{name}");
            // Help, --version and errors name the tool as it was invoked.
            corebpf_tests::assert_version_line(&run_ok(Command::new(&installed).arg("--version")), &name);
            // The examples at the end of --help run this tool when pasted: they use the installed name.
            let installed_help = run_ok(Command::new(&installed).arg("--help"));
            let examples = installed_help.to_lowercase().rfind("examples:").map_or("", |at| &installed_help[at..]);
            if !app_prefix.is_empty() {
                let ours = format!("{name} ");
                assert!(
                    examples.lines().any(|l| l.trim_start().starts_with(&ours)),
                    "{name} --help: examples without {name}:\n{examples}"
                );
                let plain = format!("{tool} ");
                assert!(
                    !examples.lines().any(|l| l.trim_start().starts_with(&plain)),
                    "{name} --help: an example runs {tool}, not {name}:\n{examples}"
                );
            }

            // Completions are for the installed name and know every long option.
            let help = run_ok(Command::new(bin(&tool)).arg("--help"));
            let share = dest.0.join(prefix).join("share");
            for (shell, file) in [
                ("bash", share.join("bash-completion/completions").join(&name)),
                ("zsh", share.join("zsh/site-functions").join(format!("_{name}"))),
                ("fish", share.join("fish/vendor_completions.d").join(format!("{name}.fish"))),
            ] {
                let text = fs::read_to_string(&file).unwrap();
                assert!(text.contains(&name), "{shell} completion {} does not name {name}", file.display());
                for opt in long_options(&help) {
                    let bare = opt.trim_start_matches('-');
                    assert!(text.contains(bare), "{shell} completion {} lacks {opt}", file.display());
                }
            }
        }
        let out = make(&[&["uninstall"], &vars[..]].concat());
        assert_eq!(out.lines().count(), expected_install(prefix, app_prefix, "").len(), "{out}");
        assert_eq!(files_under(&dest.0), BTreeSet::new(), "files left after make uninstall");
    }
}

/// `man -l` of an installed page, at a fixed width: its text, after checking that it rendered without a warning.
fn render_man(page: &Path) -> String {
    let out =
        run(Command::new("man").args(["--warnings", "-l"]).arg(page).env("MANWIDTH", "100").env("LC_ALL", "C.UTF-8"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "man -l {}: {}\n{stderr}", page.display(), out.status);
    String::from_utf8(out.stdout).unwrap()
}

/// The text of a rendered page's section (the lines after its heading, up to the next heading).
fn man_section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    text.lines().skip_while(|l| *l != heading).skip(1).take_while(|l| l.is_empty() || l.starts_with(' ')).collect()
}

/// Text with the line breaks man may put after a hyphen (`bpf-` at a line's end) taken out.
fn unbroken(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("-\n") {
        out.push_str(&rest[..=at]);
        rest = rest[at + 2..].trim_start_matches(' ');
    }
    out.push_str(rest);
    out
}

/// The `name(8)` references of a text whose name is one of this package's tools, with any prefix before it.
fn tool_references(text: &str) -> Vec<String> {
    let tools = tools();
    let mut found = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || c == ',' || c == ';') {
        if let Some(name) = word.strip_suffix("(8)") {
            if tools.iter().any(|t| name == t || name.ends_with(&format!("-{t}"))) {
                found.push(name.to_owned());
            }
        }
    }
    found
}

#[test]
fn man_pages_render_with_every_option_and_the_hand_written_sections() {
    let dest = TempDir::new("man");
    make(&["install-files", &format!("DESTDIR={}", dest.0.display()), "PREFIX=/usr", "APP_PREFIX=bpf-"]);
    for tool in tools() {
        let sections = root().join("tools").join(&tool).join("doc.md");
        let hand = fs::read_to_string(&sections)
            .unwrap_or_else(|_| panic!("{} is missing: write {tool}'s DESCRIPTION and EXAMPLES", sections.display()));
        let page = dest.0.join(format!("usr/share/man/man8/bpf-{tool}.8.gz"));
        let text = render_man(&page);
        let headings: Vec<&str> = text.lines().filter(|l| !l.is_empty() && !l.starts_with(' ')).collect();
        for want in
            ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "FIELDS", "OVERHEAD", "SEE ALSO", "VERSION"]
        {
            assert!(headings.contains(&want), "{}: no {want} section; headings {headings:?}", page.display());
        }
        assert!(headings[0].starts_with(&format!("BPF-{}(8)", tool.to_uppercase())), "{}", headings[0]);
        // The hand-written text is there: its first example command, with the installed name.
        let examples = hand.split("\n## EXAMPLES\n").nth(1).unwrap_or_default();
        let example = examples
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_else(|| panic!("{}: EXAMPLES section must start with an example command", sections.display()));
        let example = format!("bpf-{example}");
        assert!(text.contains(&format!("       {example}\n")), "{}: example {example:?} not rendered", page.display());
        // SEE ALSO names the multicall page, and this package's pages as they are installed: bpf-biosnoop(8).
        let see_also = unbroken(&man_section(&text, "SEE ALSO").join("\n"));
        assert!(
            see_also.contains("corebpf-tools(8)"),
            "{}: SEE ALSO lacks corebpf-tools(8): {see_also}",
            page.display()
        );
        for name in tool_references(&see_also) {
            assert!(name.starts_with("bpf-"), "{}: SEE ALSO names {name}(8), not its installed name", page.display());
        }
        // The clap definition is there: every long option of --help.
        let help = run_ok(Command::new(bin(&tool)).arg("--help"));
        for opt in long_options(&help) {
            assert!(text.contains(&opt), "{}: option {opt} of --help missing:\n{text}", page.display());
        }
        assert!(text.contains(&format!("v{VERSION}")), "{}: no version", page.display());
    }

    // corebpf-tools(8): usage, its commands, every tool under its installed name with its description, and the
    // environment.
    let text = unbroken(&render_man(&dest.0.join("usr/share/man/man8/corebpf-tools.8.gz")));
    let headings: Vec<&str> = text.lines().filter(|l| !l.is_empty() && !l.starts_with(' ')).collect();
    assert!(headings[0].starts_with("COREBPF-TOOLS(8)"), "{}", headings[0]);
    for want in ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "TOOLS", "COMMANDS", "ENVIRONMENT", "SEE ALSO"] {
        assert!(headings.contains(&want), "corebpf-tools(8): no {want} section; headings {headings:?}");
    }
    let listed = man_section(&text, "TOOLS").join("\n");
    // man justifies lines (more than one space between words): compare the words.
    let words = listed.split_whitespace().collect::<Vec<_>>().join(" ");
    let list = run_ok(Command::new(static_bin()).arg("--list"));
    for tool in tools() {
        assert!(
            listed.contains(&format!("       bpf-{tool}\n")),
            "corebpf-tools(8): TOOLS lacks bpf-{tool}:\n{listed}"
        );
        let about = list.lines().find_map(|l| l.trim().strip_prefix(&format!("{tool} "))).unwrap().trim();
        let first = about.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
        assert!(words.contains(&first), "corebpf-tools(8): TOOLS lacks {tool}'s description {about:?}");
    }
    for want in ["--list", "features", "COREBPF_ATTACH", "bpf-biolatency(8)"] {
        assert!(text.contains(want), "corebpf-tools(8) does not mention {want}:\n{text}");
    }
}

/// The .deb that `make deb` made for this version.
fn deb() -> PathBuf {
    let arch = run_ok(Command::new("dpkg").arg("--print-architecture"));
    let path = target_dir().join("debian").join(format!("corebpf-tools_{VERSION}_{}.deb", arch.trim()));
    assert!(path.exists(), "{} is missing: run `make deb`", path.display());
    path
}

#[test]
fn deb_control_fields_and_contents() {
    let deb = deb();
    let field = |name: &str| run_ok(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(name)).trim_end().to_owned();
    assert_eq!(field("Package"), "corebpf-tools");
    assert_eq!(field("Version"), VERSION);
    assert_eq!(field("Architecture"), run_ok(Command::new("dpkg").arg("--print-architecture")).trim());
    assert!(field("Maintainer").contains('<'), "Maintainer needs an address: {}", field("Maintainer"));
    for none in ["Depends", "Pre-Depends", "Recommends"] {
        assert_eq!(field(none), "", "static binaries need no {none}");
    }
    let description = field("Description");
    for tool in tools() {
        assert!(description.contains(&tool), "Description does not list {tool}:\n{description}");
    }
    // `dpkg-deb -I` parses the whole control file.
    run_ok(Command::new("dpkg-deb").arg("-I").arg(&deb));

    // Contents: exactly the tools (bpf- prefixed), man pages, completions, the copyright file, the changelog, NOTICE
    // (the credits the Apache licence asks to ship), the exporter's example config and unit, and the lintian overrides.
    let listing = run_ok(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let mut files = BTreeSet::new();
    let mut kib = 0u64;
    for line in listing.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (mode, size, path) = (cols[0], cols[2].parse::<u64>().unwrap(), cols[5]);
        assert!(cols[1] == "root/root", "{line}");
        let path = path.trim_start_matches("./");
        if mode.starts_with('d') {
            kib += u64::from(!path.is_empty());
        } else {
            kib += size.div_ceil(1024);
            files.insert(path.to_owned());
        }
    }
    let mut expected = expected_install("usr", "bpf-", "zsh/vendor-completions");
    expected.insert("usr/share/doc/corebpf-tools/copyright".into());
    expected.insert("usr/share/doc/corebpf-tools/changelog.gz".into());
    expected.insert("usr/share/doc/corebpf-tools/NOTICE".into());
    expected.insert("usr/share/doc/corebpf-tools/examples/exporter.conf".into());
    expected.insert("usr/share/doc/corebpf-tools/examples/corebpf-exporter.service".into());
    expected.insert("usr/share/lintian/overrides/corebpf-tools".into());
    assert_eq!(files, expected);
    assert_eq!(field("Installed-Size"), kib.to_string(), "Installed-Size must be the contents' size in KiB");
}

#[test]
fn deb_installs_with_dpkg_and_every_tool_runs() {
    let deb = deb();
    let root = TempDir::new("dpkg-root");
    let admin = root.0.join("var/lib/dpkg");
    fs::create_dir_all(admin.join("info")).unwrap();
    fs::create_dir_all(admin.join("updates")).unwrap();
    fs::write(admin.join("status"), "").unwrap();
    run_ok(Command::new("dpkg").arg(format!("--root={}", root.0.display())).arg("-i").arg(&deb));
    let status = run_ok(Command::new("dpkg-query").arg(format!("--root={}", root.0.display())).args([
        "-W",
        "-f",
        "${Status} ${Version}",
        "corebpf-tools",
    ]));
    assert_eq!(status, format!("install ok installed {VERSION}"));
    let multicall = root.0.join("usr/sbin/corebpf-tools");
    assert_eq!(
        sha256(&multicall),
        sha256(&static_bin()),
        "{} differs from the static build: run `make deb`",
        multicall.display()
    );
    for tool in tools() {
        let installed = root.0.join("usr/sbin").join(format!("bpf-{tool}"));
        assert_eq!(fs::read_link(&installed).unwrap(), Path::new("corebpf-tools"), "{}", installed.display());
        corebpf_tests::assert_version_line(&run_ok(Command::new(&installed).arg("--version")), &format!("bpf-{tool}"));
        let out = run(Command::new(&installed).arg("--no-such-option"));
        assert_eq!(out.status.code(), Some(2), "{}: a usage error exits 2: {out:?}", installed.display());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with(&format!("bpf-{tool}: ")) && stderr.lines().count() == 1, "{stderr}");
    }
    run_ok(Command::new("dpkg").arg(format!("--root={}", root.0.display())).args(["-r", "corebpf-tools"]));
    let left: Vec<String> = files_under(&root.0).into_iter().filter(|f| !f.starts_with("var/lib/dpkg")).collect();
    assert!(left.is_empty(), "files left after dpkg -r: {left:?}");
}

/// Issue 31 item 8: a tool without its doc.md is refused in one line whose every path exists, wherever the script
/// is run from (it named docs/tool-doc.md relative to the repository, which is no file from another folder).
#[test]
fn install_names_only_files_that_exist() {
    let out = run(Command::new(root().join("packaging/install-tools.sh"))
        .args(["install", "no-such-tool"])
        .env("BIN_SRC", static_bin().parent().unwrap())
        .env("DESTDIR", std::env::temp_dir().join(format!("corebpf-install-{}", std::process::id())))
        .current_dir("/"));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let named: Vec<&str> = stderr.split_whitespace().filter(|w| w.ends_with(".md") || w.ends_with(".md)")).collect();
    assert_eq!(named.len(), 2, "{stderr}");
    let guide = named[1].trim_end_matches(')');
    assert!(Path::new(guide).is_file(), "{guide} does not exist: {stderr}");
}

/// A packager's `make install DESTDIR=... PREFIX=/usr` must not reach cargo's build scripts: libbpf-sys builds
/// libbpf with its own `make install`, which would read DESTDIR and PREFIX from MAKEFLAGS or the environment and
/// install libbpf into the package (issue 33 item 1). Every cargo the Makefile runs gets neither: a stand-in
/// cargo records what it was given, for the targets that build.
#[test]
fn the_packagers_variables_do_not_reach_cargo() {
    let dir = TempDir::new("fake-cargo");
    let log = dir.0.join("env");
    let fake = dir.0.join("cargo");
    fs::write(&fake, format!("#!/bin/sh\nenv >> {}\necho ---- >> {}\n", log.display(), log.display())).unwrap();
    fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let dest = dir.0.join("dest");
    for target in ["build", "static", "test-build"] {
        make(&[target, &format!("CARGO={}", fake.display()), &format!("DESTDIR={}", dest.display()), "PREFIX=/usr"]);
    }
    let env = fs::read_to_string(&log).expect("the stand-in cargo ran");
    assert_eq!(env.matches("----").count(), 3, "one cargo run per target:\n{env}");
    for line in env.lines() {
        assert!(
            !line.starts_with("DESTDIR=") && !line.starts_with("PREFIX=") && !line.starts_with("MAKEFLAGS="),
            "cargo was given {line}"
        );
    }
    assert!(!dest.exists(), "something was installed into DESTDIR");
}

/// A `cargo metadata` document for the licence check: corebpf-tools depending on crates with these licences.
fn metadata_with(licences: &[&str]) -> String {
    let mut packages = vec![serde_json::json!({
        "id": "root", "name": "corebpf-tools", "version": VERSION, "license": "Apache-2.0 OR MIT", "source": null,
    })];
    let mut deps = Vec::new();
    for (n, licence) in licences.iter().enumerate() {
        let id = format!("dep{n}");
        packages.push(serde_json::json!({
            "id": id, "name": format!("dep{n}"), "version": "1.0.0", "license": licence,
            "source": "registry+https://github.com/rust-lang/crates.io-index", "authors": [],
        }));
        deps.push(serde_json::json!({ "pkg": id, "dep_kinds": [{ "kind": null }] }));
    }
    // A build dependency is not shipped, whatever its licence.
    packages.push(serde_json::json!({
        "id": "builder", "name": "builder", "version": "1.0.0", "license": "GPL-3.0-only", "source": "registry+x",
    }));
    deps.push(serde_json::json!({ "pkg": "builder", "dep_kinds": [{ "kind": "build" }] }));
    let mut nodes = vec![serde_json::json!({ "id": "root", "deps": deps })];
    nodes.extend(packages.iter().skip(1).map(|p| serde_json::json!({ "id": p["id"], "deps": [] })));
    serde_json::json!({ "packages": packages, "resolve": { "nodes": nodes } }).to_string()
}

#[test]
fn the_licence_check_fails_on_a_dependency_that_cannot_ship() {
    let dir = TempDir::new("licences");
    let check = |licences: &[&str]| {
        let file = dir.0.join("metadata.json");
        fs::write(&file, metadata_with(licences)).unwrap();
        run(Command::new("python3")
            .arg(root().join("scripts/license-check.py"))
            .arg("deps")
            .arg("--metadata")
            .arg(&file))
    };
    let good = check(&[
        "MIT OR Apache-2.0",
        "Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT",
        "MIT/Apache-2.0",
        "(MIT OR Apache-2.0) AND Unicode-3.0",
        "Zlib",
        "BSD-3-Clause",
        "LGPL-2.1-only OR BSD-2-Clause",
    ]);
    assert!(good.status.success(), "{}", String::from_utf8_lossy(&good.stderr));
    let bad = check(&["MIT", "CDDL-1.0", "Apache-2.0", "MIT AND GPL-3.0-only"]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1), "{stderr}");
    let named: Vec<&str> = stderr.lines().collect();
    assert_eq!(named.len(), 3, "{stderr}");
    for (dep, licence) in [("dep1", "CDDL-1.0"), ("dep2", "Apache-2.0"), ("dep3", "MIT AND GPL-3.0-only")] {
        assert!(stderr.contains(&format!("crate {dep} 1.0.0: licence {licence} is not allowed")), "{stderr}");
    }
}

#[test]
fn lintian_finds_no_error_in_the_deb() {
    // Deliberate choices (a static binary) are overridden in debian/corebpf-tools.lintian-overrides with a reason.
    let out = run(Command::new("lintian").arg("--fail-on").arg("error").arg(deb()));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !report.lines().any(|l| l.starts_with("E:")), "lintian:\n{report}{out:?}");
}
