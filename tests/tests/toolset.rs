// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The multicall binary `corebpf-tools`: dispatch by link name (with an install prefix) and by first argument,
//! `--list`, unknown names, and `features` agreeing with what the tools themselves manage on this kernel (the
//! kernel matrix runs `features_agree_with_the_tools` on 5.10, 6.1 and 6.12, where fentry and kprobes work), and
//! every command line of BCC's examples and every flag of BCC's (and libbpf-tools') versions taken by the tool's
//! parser.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use corebpf_tests::{bin, Running, ScratchFile};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Every tool of the workspace with the description of its Cargo.toml.
fn workspace_tools() -> Vec<(String, String)> {
    let mut tools: Vec<(String, String)> = fs::read_dir(root().join("tools"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let manifest = fs::read_to_string(e.path().join("Cargo.toml")).ok()?;
            let field = |key: &str| {
                manifest.lines().find_map(|l| l.strip_prefix(key)?.trim().strip_prefix("= \"")?.strip_suffix('"'))
            };
            Some((field("name")?.to_owned(), field("description")?.to_owned()))
        })
        .collect();
    tools.sort();
    tools
}

fn output(cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"), "{cmd:?} panicked: {out:?}");
    out
}

/// A scratch folder with links to corebpf-tools, removed when dropped.
struct Links(PathBuf);

impl Links {
    fn new(names: &[String]) -> Links {
        let dir = ScratchFile::new("links").0.clone();
        fs::create_dir_all(&dir).unwrap();
        for name in names {
            symlink(bin("corebpf-tools"), dir.join(name)).unwrap();
        }
        Links(dir)
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn list_shows_exactly_the_workspace_tools() {
    for flag in ["--list", "list"] {
        let out = output(Command::new(bin("corebpf-tools")).arg(flag));
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let rows: Vec<(String, String)> = text
            .lines()
            .skip(1)
            .map(|l| {
                let l = l.trim();
                let (name, about) = l.split_once(' ').unwrap_or((l, ""));
                (name.to_owned(), about.trim().to_owned())
            })
            .collect();
        assert_eq!(rows, workspace_tools(), "corebpf-tools {flag}:\n{text}");
    }
}

#[test]
fn an_unknown_tool_is_a_usage_error_naming_the_tools() {
    let out = output(Command::new(bin("corebpf-tools")).arg("nosuchtool"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("corebpf-tools: no tool named 'nosuchtool'"), "{stderr}");
    for (tool, _) in workspace_tools() {
        assert!(stderr.contains(&tool), "{stderr} does not name {tool}");
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn every_tool_runs_through_its_link_and_as_a_subcommand() {
    let tools: Vec<String> = workspace_tools().into_iter().map(|(t, _)| t).collect();
    let mut names = tools.clone();
    names.extend(tools.iter().map(|t| format!("bpf-{t}")));
    let links = Links::new(&names);
    for tool in &tools {
        for name in [tool.clone(), format!("bpf-{tool}")] {
            let out = output(Command::new(links.0.join(&name)).arg("--version"));
            corebpf_tests::assert_version_line(&String::from_utf8_lossy(&out.stdout), &name);
            // Usage errors name the tool as it was invoked, on one line.
            let out = output(Command::new(links.0.join(&name)).arg("--no-such-option"));
            assert_eq!(out.status.code(), Some(2), "{out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.starts_with(&format!("{name}: ")) && stderr.lines().count() == 1, "{stderr}");
        }
        let out = output(Command::new(bin("corebpf-tools")).args([tool.as_str(), "--help"]));
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("Usage: {tool} ")), "{out:?}");
    }
}

/// Debian's and Ubuntu's names for BCC's tools (`execsnoop-bpfcc`): as a link and as the multicall binary's first
/// argument, each runs the tool, and an alias keeps what it selects (ext4slower-bpfcc is fsslower on ext4).
#[test]
fn debian_bpfcc_names_run_their_tools() {
    let links = Links::new(&["execsnoop-bpfcc".to_owned(), "ext4slower-bpfcc".to_owned()]);
    let out = output(Command::new(links.0.join("execsnoop-bpfcc")).arg("--help"));
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: execsnoop-bpfcc "), "{out:?}");
    let out = output(Command::new(bin("corebpf-tools")).args(["biolatency-bpfcc", "--version"]));
    corebpf_tests::assert_version_line(&String::from_utf8_lossy(&out.stdout), "biolatency-bpfcc");
    // The root file system here is ext4 (so is the matrix guests' test disk).
    let out = output(Command::new(links.0.join("ext4slower-bpfcc")).args(["-v", "-d", "1"]));
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ext4slower-bpfcc: tracing ext4 "), "{out:?}");
}

#[test]
fn a_prefixed_link_traces_for_real() {
    let links = Links::new(&["bpf-biolatency".to_owned()]);
    let out = output(Command::new(links.0.join("bpf-biolatency")).args(["1", "1"]));
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("Tracing block device I/O... Hit Ctrl-C to end."), "{stdout}");
    // A runtime error names the tool as invoked, too.
    let out = output(Command::new(links.0.join("bpf-biolatency")).args(["-d", "nosuchdisk"]));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("bpf-biolatency: "), "{out:?}");
}

/// `features --json` as (name, available).
fn features() -> Vec<(String, bool)> {
    let out = output(Command::new(bin("corebpf-tools")).args(["features", "--json"]));
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_owned(), f["available"].as_bool().unwrap()))
        .collect()
}

/// Every tool's line of `features` names the mechanism it would attach with here (from its `TOOL.attach`
/// ladder), never `-` (an empty ladder): per family, a mechanism name or what the family lacks, and at least one
/// family that this kernel serves (unless the tool has only kernel functions, which a kernel may lack).
#[test]
fn features_names_a_mechanism_for_every_tool() {
    const MECHANISMS: [&str; 9] =
        ["tp_btf", "raw_tp", "tracepoint", "fentry", "kprobe_multi", "kprobe", "uprobe_multi", "uprobe", "perf_event"];
    let out = output(Command::new(bin("corebpf-tools")).args(["features", "--json"]));
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (tool, _) in workspace_tools() {
        let path = v["tools"][&tool].as_str().unwrap_or_else(|| panic!("no attach path for {tool}: {v}"));
        let steps: Vec<&str> = path.split("; ").map(|p| p.split_once(": ").map_or(p, |(_, m)| m)).collect();
        assert!(
            steps.iter().all(|s| MECHANISMS.contains(s) || s.starts_with("none (")),
            "{tool}: attach path {path:?}"
        );
        // A tool of kernel functions only (tcpsynbl) has none on a kernel without them; it says so when run.
        let kernel_only = v["ladders"][&tool]
            .as_array()
            .is_some_and(|l| l.iter().all(|m| matches!(m.as_str(), Some("fentry" | "kprobe_multi" | "kprobe"))));
        assert!(kernel_only || steps.iter().any(|s| MECHANISMS.contains(s)), "{tool} has no mechanism here: {path:?}");
    }
    // The text table says the same.
    let out = output(Command::new(bin("corebpf-tools")).arg("features"));
    let text = String::from_utf8_lossy(&out.stdout);
    let tools_table = text.split("ATTACH PATH HERE").nth(1).expect("a table of tools");
    for line in tools_table.lines().filter(|l| !l.trim().is_empty()) {
        assert!(!line.trim_end().ends_with(" -"), "a tool without a mechanism: {line:?}");
    }
}

/// True if `tool args` attaches with exactly `mech` when forced to it (COREBPF_ATTACH), false if it fails.
fn tool_attaches(tool: &str, args: &[&str], mech: &str) -> bool {
    attaches_with(tool, args, mech, mech)
}

/// True if `tool args`, run with `COREBPF_ATTACH=forced`, attaches with exactly `mech`, false if it fails.
fn attaches_with(tool: &str, args: &[&str], forced: &str, mech: &str) -> bool {
    let mut args: Vec<&str> = args.to_vec();
    args.push("-v");
    let run = Running::start_with_env(tool, &args, &[("COREBPF_ATTACH", forced)]);
    // The tool either attaches (and says so on stderr) or exits with its one-line reason.
    std::thread::sleep(Duration::from_millis(200));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let status = fs::read_to_string(format!("/proc/{}/stat", run.pid())).unwrap_or_default();
        let exited = status.is_empty() || status.split_whitespace().nth(2) == Some("Z");
        if exited || !corebpf_tests::prog_ids_of(run.pid()).is_empty() || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    let attached = done.stderr.contains(&format!("attached with {mech}"));
    assert!(attached == done.status.success(), "{tool} {args:?} ({mech}): {done:?}");
    attached
}

/// COREBPF_ATTACH set but empty restricts nothing: the tool takes the first mechanism of its ladder, as unset.
#[test]
fn an_empty_attach_setting_restricts_nothing() {
    assert!(attaches_with("biolatency", &[], "", "tp_btf"));
    assert!(attaches_with("biolatency", &[], " , ", "tp_btf"));
}

#[test]
fn features_agree_with_the_tools() {
    let features = features();
    let has = |name: &str| {
        features.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no feature {name} in {features:?}")).1
    };
    for name in ["privileges", "btf", "tp_btf", "raw_tp", "perf_event", "ring_buffer", "uprobe"] {
        assert!(has(name), "{name} is unavailable: {features:?}");
    }
    let checks: [(&str, &str, Vec<&str>); 6] = [
        ("tp_btf", "biolatency", vec![]),
        ("raw_tp", "biolatency", vec![]),
        ("fentry", "funccount", vec!["vfs_read"]),
        ("kprobe", "funccount", vec!["vfs_read"]),
        ("kprobe_multi", "funccount", vec!["vfs_read"]),
        ("uprobe_multi", "funccount", vec!["c:getpid"]),
    ];
    for (mech, tool, args) in checks {
        assert_eq!(has(mech), tool_attaches(tool, &args, mech), "features says {mech}: {}", has(mech));
    }
}

/// Issue 31 item 3: `features` starts with what a support ticket needs (this build's version and commit, the
/// kernel release, the architecture, lockdown and the sysctls that restrict BPF and perf events), each as the
/// system has it; and run without BPF privileges it says the ring buffer's trial was refused, not that the
/// kernel lacks one.
#[test]
fn features_report_the_system_and_tell_a_refusal_from_an_absence() {
    let read = |path: &str| fs::read_to_string(path).unwrap().trim().to_string();
    let out = output(Command::new(bin("corebpf-tools")).args(["features", "--json"]));
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sys = &v["system"];
    assert_eq!(sys["version"], VERSION, "{sys}");
    let commit = sys["commit"].as_str().unwrap_or_else(|| panic!("{sys}"));
    assert!(commit == "unknown" || commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit()), "{sys}");
    assert_eq!(sys["kernel"], read("/proc/sys/kernel/osrelease"), "{sys}");
    assert_eq!(sys["arch"], std::env::consts::ARCH, "{sys}");
    // The architecture it names for itself is the one of its ELF header (e_machine: 62 x86-64, 183 AArch64).
    let elf = fs::read(bin("corebpf-tools")).unwrap();
    let machine = u16::from_le_bytes([elf[18], elf[19]]);
    let named = match machine {
        62 => "x86_64",
        183 => "aarch64",
        other => panic!("corebpf-tools is an ELF file for machine {other}"),
    };
    assert_eq!(sys["built_for"], named, "{sys}");
    assert_eq!(sys["unprivileged_bpf_disabled"], read("/proc/sys/kernel/unprivileged_bpf_disabled"), "{sys}");
    assert_eq!(sys["perf_event_paranoid"], read("/proc/sys/kernel/perf_event_paranoid"), "{sys}");
    match fs::read_to_string("/sys/kernel/security/lockdown") {
        Ok(modes) => assert!(modes.contains(&format!("[{}]", sys["lockdown"].as_str().unwrap())), "{sys}"),
        Err(_) => assert!(sys["lockdown"].as_str().unwrap().starts_with("unknown"), "{sys}"),
    }
    let text = output(Command::new(bin("corebpf-tools")).arg("features"));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.trim_start().starts_with("SYSTEM"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["kernel", &read("/proc/sys/kernel/osrelease")]),
        "{text}"
    );

    // As user nobody (no capabilities): every trial is refused, and the ring buffer's says why.
    let out = output(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
            .arg(bin("corebpf-tools"))
            .args(["features", "--json"]),
    );
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ring = v["features"].as_array().unwrap().iter().find(|f| f["name"] == "ring_buffer").unwrap().clone();
    assert_eq!(ring["available"], false, "{ring}");
    let detail = ring["detail"].as_str().unwrap();
    assert!(detail.contains("privileges") && !detail.contains("has no"), "{ring}");
}

/// The doc.md of the tool called `name` (a tool, or an alias in a tool's `aliases`).
fn doc_of(name: &str) -> String {
    let dir = fs::read_dir(root().join("tools"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|dir| {
            dir.file_name().is_some_and(|n| n == name)
                || fs::read_to_string(dir.join("aliases")).is_ok_and(|a| a.lines().any(|l| l.trim() == name))
        })
        .unwrap_or_else(|| panic!("no tool named {name}"));
    fs::read_to_string(dir.join("doc.md")).unwrap()
}

/// True if the tool's doc.md names `refused` (a flag, a word of a command line) beside "BCC" (on its line or the
/// one before): a difference from BCC, said.
fn doc_says(tool: &str, refused: &str) -> bool {
    let doc = doc_of(tool);
    let doc: Vec<&str> = doc.lines().collect();
    let near = |j: usize| doc.get(j).is_some_and(|l| l.contains("BCC"));
    doc.iter().enumerate().any(|(i, l)| {
        l.split(|c: char| c.is_whitespace() || "`,;()/".contains(c)).any(|w| w == refused)
            && (near(i) || i.checked_sub(1).is_some_and(near))
    })
}

/// The entries of one of the lists the scripts write from BCC's sources (at least `least` of them).
fn upstream_list(json: &str, least: usize) -> Vec<serde_json::Value> {
    let list: serde_json::Value = serde_json::from_str(json).unwrap();
    let list = list.as_array().unwrap().clone();
    assert!(list.len() >= least, "{} entries", list.len());
    list
}

/// What `tool args` says with nothing loaded: it only parses its command line (`COREBPF_PARSE_ONLY`).
fn parse_only(tool: &str, args: &[&str]) -> Output {
    output(Command::new(bin("corebpf-tools")).arg(tool).args(args).env("COREBPF_PARSE_ONLY", "1"))
}

/// Every flag of BCC's version of each tool (libbpf-tools' for the tools BCC lacks), listed in
/// tests/upstream-flags.json by scripts/upstream-flags.py from their argparse and argp definitions, is taken by
/// the tool's parser (`COREBPF_PARSE_ONLY`; with a value `1` where it takes one): a flag refused as unknown must
/// be a difference the tool's doc.md states.
#[test]
fn upstream_flags_are_taken() {
    let mut unexplained = Vec::new();
    for f in upstream_list(include_str!("upstream-flags.json"), 801) {
        let (tool, flag) = (f["tool"].as_str().unwrap(), f["flag"].as_str().unwrap());
        let with_value = [flag, "1"];
        let out = parse_only(tool, &with_value[..if f["value"] == true { 2 } else { 1 }]);
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains(&format!("unexpected argument '{flag}'")) && !doc_says(tool, flag) {
            unexplained.push(format!("{tool} {flag} ({})", f["from"]));
        }
    }
    assert!(unexplained.is_empty(), "refused, with no word of it in the doc.md:\n{}", unexplained.join("\n"));
}

/// Every command line of BCC's examples and smoke test (tests/bcc-command-lines.json, written by
/// scripts/bcc-command-lines.py from a BCC checkout) is taken by the tool's own parser, with nothing loaded
/// (`COREBPF_PARSE_ONLY`); a refusal is one usage line (exit 2) and passes only if it names a file this machine
/// lacks, or the argument it names is a difference from BCC that the tool's doc.md states (beside "BCC").
#[test]
fn bcc_command_lines_parse() {
    let mut unexplained = Vec::new();
    for line in upstream_list(include_str!("bcc-command-lines.json"), 301) {
        let tool = line["tool"].as_str().unwrap();
        let args: Vec<&str> = line["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let out = parse_only(tool, &args);
        if out.status.success() {
            continue;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let shown = format!("{tool} {} ({}): {err}", args.join(" "), line["from"]);
        assert_eq!((out.status.code(), err.lines().count()), (Some(2), 1), "{shown}");
        if err.contains(": no such file") {
            continue;
        }
        let refused = err.split('\'').nth(1).unwrap_or_default();
        if !doc_says(tool, refused) {
            unexplained.push(shown);
        }
    }
    assert!(unexplained.is_empty(), "refused, with no word of it in the doc.md:\n{}", unexplained.join(""));
}

/// Each tool's JSON, as its doc.md declares it (`## JSON`, in docs/json.md's format): it parses, and
/// `docs/json/<tool>.schema.json` (which `make docs` writes with scripts/json_schema.py) is the JSON Schema the
/// Rust reading of the same part gives (`common/src/output/schema.rs`, which the man page and the tests use), so
/// the three never tell a consumer different things; a shared field has the same type and meaning in every tool
/// that has it (by construction: a tool can only name it, docs/json.md defines it).
#[test]
fn json_schemas_are_one_vocabulary_and_match_the_docs() {
    use corebpf_tests::schema::Schema;
    let mut meanings: std::collections::BTreeMap<String, (String, String)> = Default::default();
    let mut problems = Vec::new();
    for tool in corebpf_tests::all_tool_names() {
        let doc = fs::read_to_string(root().join("tools").join(&tool).join("doc.md")).unwrap();
        let schema = match Schema::from_doc(&doc) {
            Ok(Some(schema)) => schema,
            Ok(None) => {
                problems.push(format!("{tool}: doc.md has no ## JSON part"));
                continue;
            }
            Err(e) => {
                problems.push(format!("{tool}: ## JSON: {e}"));
                continue;
            }
        };
        let file = root().join("docs/json").join(format!("{tool}.schema.json"));
        match fs::read_to_string(&file).map(|t| serde_json::from_str::<serde_json::Value>(&t)) {
            Ok(Ok(written)) if written == schema.json_schema(&tool) => {}
            Ok(Ok(_)) => problems.push(format!("{}: not what doc.md declares (run make docs)", file.display())),
            Ok(Err(e)) => problems.push(format!("{}: not JSON: {e}", file.display())),
            Err(e) => problems.push(format!("{}: {e} (run make docs)", file.display())),
        }
        let shared = schema.kinds.iter().flat_map(|k| &k.fields).filter(|f| f.shared);
        for field in shared.filter(|f| !f.path.contains('.')) {
            let meaning = format!("{}: {}", field.ty.text(), field.description.join(" "));
            let seen = meanings.entry(field.path.clone()).or_insert_with(|| (meaning.clone(), tool.clone()));
            if seen.0 != meaning {
                problems.push(format!("{tool}: the shared {} differs from {}'s", field.path, seen.1));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A man page's JSON section lists every field, a shared one with its meaning from docs/json.md.
#[test]
fn the_man_page_lists_the_json_fields_with_the_shared_meanings() {
    let out = output(
        Command::new(bin("execsnoop"))
            .env("COREBPF_GENERATE", "man")
            .env("COREBPF_MAN_SECTIONS", root().join("tools/execsnoop/doc.md")),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = String::from_utf8_lossy(&out.stdout);
    let json = page.split(".SH JSON").nth(1).expect("a JSON section");
    for wanted in ["RFC 3339", "ts (number)", "args (array of string)"] {
        assert!(json.contains(wanted), "{wanted:?} not in the JSON section:\n{json}");
    }
}
