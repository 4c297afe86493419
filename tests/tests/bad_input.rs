// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Bad input, every tool, every option: a table of hostile values (empty, very long, negative, beyond 64 bits,
//! unknown names) for each option that takes a value and each positional argument, read from the tool's own
//! `--help`, so a new tool and a new flag are covered with no change here. Each run must end one of two ways:
//! - refused: exit 2 (usage) or 1 (run time) with exactly one line on stderr that names the tool, and no BPF
//!   program left loaded;
//! - accepted (the value was fine, the tool is tracing): it ends cleanly on SIGINT, exit 0.
//!
//! Never a panic, an abort, a hang, or a second line of explanation. Every case runs through the tool's own
//! name; the cases that test the dispatch also through the multicall binary (`corebpf-tools TOOL ...`).

use std::fs;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corebpf_tests::{bin, check_all, prog_ids_of, prog_loaded, tool_names};

/// What a tool's `--help` says it takes: options with a value (as `-x` or `--long`) and positional arguments.
#[derive(Debug, Default)]
struct Cli {
    valued: Vec<String>,
    positionals: usize,
    required_positional: bool,
}

fn cli_of(tool: &str) -> Cli {
    let out = Command::new(bin(tool)).arg("--help").env("COLUMNS", "200").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let mut cli = Cli::default();
    let mut section = "";
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        let trimmed = line.trim_start();
        match section {
            "Arguments:" if trimmed.starts_with('[') || trimmed.starts_with('<') => {
                cli.positionals += 1;
                if trimmed.starts_with('<') && cli.positionals == 1 {
                    cli.required_positional = true;
                }
            }
            "Options:" if trimmed.starts_with('-') => {
                // "-d, --disk <DISK>   Trace ..." or "--stack-storage-size <N>  ..."
                let spec: &str = trimmed.split("  ").next().unwrap_or("");
                if !spec.contains('<') {
                    continue;
                }
                let name =
                    spec.split([',', ' ']).find(|w| w.starts_with("--")).or_else(|| spec.split([',', ' ']).next());
                if let Some(name) = name {
                    if name != "--help" && name != "--version" {
                        cli.valued.push(name.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    cli
}

/// The hostile values every option and positional gets.
fn bad_values() -> Vec<String> {
    vec![
        String::new(),
        "x".repeat(5000),
        "-1".into(),
        "0".into(),
        "18446744073709551616".into(),
        "9223372036854775807".into(),
        "no_such_thing_at_all".into(),
        "1,,2".into(),
        // A fraction, and whole numbers just beyond 32 bits and far beyond: each refused by what is allowed.
        "0.5".into(),
        "4294967296".into(),
        "99999999999".into(),
        // Non-ASCII: two-, three- and four-byte characters, and a right-to-left override.
        "é".into(),
        "日本".into(),
        "\u{202e}".into(),
        "🦀".into(),
        "1é".into(),
    ]
}

/// Every non-ASCII value of [`bad_values`] inside the parts of a probe spec that are parsed by hand (a field, a
/// filter, a signature, a label, a format), for the tools that take one: refused or accepted, never a panic.
/// Issue 31 item 2: `trace 't:syscalls:sys_enter_write (args->é == 1) "x"'` aborted (exit 134).
fn probe_spec_cases() -> Vec<Case> {
    // A no-break space: whitespace to Rust's `char::is_whitespace`, two bytes in UTF-8.
    const NBSP: char = '\u{a0}';
    let mut cases = Vec::new();
    for v in bad_values().into_iter().filter(|v| !v.is_ascii()) {
        let trace = [
            format!(r#"t:syscalls:sys_enter_write (args->{v} == 1) "x""#),
            format!(r#"t:syscalls:sys_enter_write ({v}>1) "x""#),
            format!(r#"t:syscalls:sys_enter_write "%d {v}", args->{v}"#),
            format!(r#"c:getppid{v} "x""#),
            format!(r#"p:c:write(int{v}fd) (fd{v} == 1) "%d", fd"#),
            format!(r#"p:c:write(int{NBSP}{v}) "x""#),
        ];
        let argdist = [
            format!("t:syscalls:sys_enter_write():u64:args->count:args->{v}==1"),
            format!("t:syscalls:sys_enter_write():u64:args->{v}"),
            format!("p:c:write(int{NBSP}fd{v}):int:fd"),
            format!("p:c:write(int{NBSP}fd):int:fd:fd{v}>1#{v}"),
            format!("p:c:{v}():int:$PID"),
        ];
        for spec in trace {
            cases.push(Case { tool: "trace".into(), multicall: false, args: vec![spec] });
        }
        for spec in argdist {
            cases.push(Case { tool: "argdist".into(), multicall: false, args: vec!["-C".into(), spec] });
        }
    }
    cases
}

/// One case: the arguments after the tool's name, and a label for the failure message.
struct Case {
    tool: String,
    multicall: bool,
    args: Vec<String>,
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for tool in tool_names() {
        let cli = cli_of(&tool);
        let mut arg_sets: Vec<Vec<String>> =
            vec![vec!["--no-such-flag".into()], vec!["-Z9".into()], vec!["--é".into()], vec!["-日".into()]];
        // A required positional (a pattern) gets a harmless-looking value when options are tried.
        let base: Vec<String> =
            if cli.required_positional { vec!["t:syscalls:sys_enter_getppid".into()] } else { vec![] };
        for opt in &cli.valued {
            for v in bad_values() {
                let mut args = vec![opt.clone(), v];
                args.extend(base.iter().cloned());
                arg_sets.push(args);
            }
        }
        for pos in 0..cli.positionals {
            for v in bad_values() {
                let mut args: Vec<String> = (0..pos).map(|_| "1".to_string()).collect();
                if cli.required_positional && pos > 0 {
                    args[0] = base[0].clone();
                }
                args.push(v);
                arg_sets.push(args);
            }
        }
        if cli.positionals > 0 {
            // One argument too many.
            let mut args: Vec<String> = vec!["1".into(); cli.positionals + 1];
            if cli.required_positional {
                args[0] = base[0].clone();
            }
            arg_sets.push(args);
        }
        // Every case through the tool's own name; through the multicall binary (`corebpf-tools TOOL ...`, the
        // same parser after the dispatch) the cases that reach the dispatch's own handling of the arguments: an
        // unknown flag, and each option and argument once with an empty value.
        for args in arg_sets {
            let dispatch = args.len() == 1 && args[0].starts_with('-') || args.iter().any(|a| a.is_empty());
            if dispatch {
                cases.push(Case { tool: tool.clone(), multicall: true, args: args.clone() });
            }
            cases.push(Case { tool: tool.clone(), multicall: false, args });
        }
    }
    cases.extend(probe_spec_cases());
    cases
}

/// Messages of Rust's standard library that say nothing about the flag or what it allows (issue 31 item 16:
/// `biosnoop -m 0.5` said "invalid digit found in string", `tcpdrop --netns-id 99999999999` "out of range
/// integral type conversion").
const RUST_SPEAK: &[&str] = &[
    "invalid digit found in string",
    "number too large to fit in target type",
    "number too small to fit in target type",
    "cannot parse integer from empty string",
    "out of range integral type conversion",
    "invalid float literal",
    "cannot parse float from empty string",
];

/// Runs one case; returns a description of what went wrong, if anything.
fn check(case: &Case) -> Option<String> {
    let mut cmd = if case.multicall {
        let mut c = Command::new(bin("corebpf-tools"));
        c.arg(&case.tool);
        c
    } else {
        Command::new(bin(&case.tool))
    };
    // In a scratch folder: a value taken as an output file name (`--flamegraph 0`) lands there.
    let scratch = std::env::temp_dir().join(format!("corebpf-bad-input-{}", std::process::id()));
    fs::create_dir_all(&scratch).unwrap();
    cmd.current_dir(&scratch);
    cmd.args(&case.args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let shown: Vec<String> =
        case.args.iter().map(|a| if a.len() > 40 { format!("<{} chars>", a.len()) } else { a.clone() }).collect();
    let what = format!("{}{} {:?}", if case.multicall { "corebpf-tools " } else { "" }, case.tool, shown);
    let mut child = cmd.spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let pid = child.id();
    let mut progs = Vec::new();
    let started = Instant::now();
    let mut interrupted = false;
    let (mut seen_progs, mut last_new_prog) = (0, Duration::ZERO);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        for id in prog_ids_of(pid) {
            if !progs.contains(&id) {
                progs.push(id);
            }
        }
        let waited = started.elapsed();
        if progs.len() > seen_progs {
            seen_progs = progs.len();
            last_new_prog = waited;
        }
        // Accepted and tracing (its programs loaded, none added for 150 ms, or 2.5 s gone): it must stop cleanly.
        let settled = seen_progs > 0 && waited > last_new_prog + Duration::from_millis(150);
        if !interrupted && (settled || waited > Duration::from_millis(2500)) {
            unsafe { libc::kill(pid as i32, libc::SIGINT) };
            interrupted = true;
        }
        if waited > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            return Some(format!("{what}: still running 27 s after SIGINT"));
        }
        // Most cases are refused within a few milliseconds: look often at first.
        thread::sleep(Duration::from_millis(if waited < Duration::from_millis(100) { 2 } else { 20 }));
    };
    let stderr = reader.join().unwrap_or_default();
    if stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE") {
        return Some(format!("{what}: panicked:\n{stderr}"));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while progs.iter().any(|&id| prog_loaded(id)) {
        if Instant::now() > deadline {
            return Some(format!("{what}: BPF programs left loaded after exit"));
        }
        thread::sleep(Duration::from_millis(50));
    }
    match status.code() {
        Some(0) if interrupted => None,
        Some(0) => None,
        Some(1) | Some(2) => {
            let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            let named = lines.first().is_some_and(|l| l.starts_with(&format!("{}: ", case.tool)));
            if let Some(rust) = lines.iter().find_map(|l| RUST_SPEAK.iter().find(|r| l.contains(*r))) {
                Some(format!("{what}: the message speaks Rust ({rust:?}), not the tool:\n{stderr}"))
            } else if lines.len() == 1 && named {
                None
            } else {
                Some(format!(
                    "{what}: exit {:?} with {} stderr lines (want one naming the tool):\n{stderr}",
                    status.code(),
                    lines.len()
                ))
            }
        }
        other => Some(format!("{what}: ended with {other:?} / {status}:\n{stderr}")),
    }
}

#[test]
fn every_option_survives_hostile_values() {
    let cases = cases();
    let total = cases.len();
    let failures = check_all(cases, 6, check);
    let _ = fs::remove_dir_all(std::env::temp_dir().join(format!("corebpf-bad-input-{}", std::process::id())));
    assert!(total > 100, "only {total} cases: is --help parsed?");
    assert!(failures.is_empty(), "{} of {total} cases failed:\n{}", failures.len(), failures.join("\n---\n"));
}

#[test]
fn the_help_parser_finds_options_and_arguments() {
    let cli = cli_of("biolatency");
    assert!(cli.valued.contains(&"--disk".to_string()), "{cli:?}");
    assert!(cli.valued.contains(&"--cgroup".to_string()), "{cli:?}");
    assert_eq!(cli.positionals, 2, "{cli:?}");
    assert!(!cli.required_positional);
    let cli = cli_of("funccount");
    assert!(cli.required_positional, "{cli:?}");
}

/// Issue 53 item 9: a tool run without an argument it requires (a pattern, a PID, a device; `javagc`'s
/// `--pid`) names what is missing, in one line, exit 2 (it said "the following required arguments were not
/// provided:" with the list left out). Every tool whose usage line has a required argument, read from its `--help`.
#[test]
fn a_missing_required_argument_is_named() {
    let mut checked = Vec::new();
    let tools = tool_names();
    for tool in tools.iter().cloned() {
        let out = Command::new(bin(&tool)).arg("--help").env("COLUMNS", "300").output().unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        let usage = help.lines().find(|l| l.starts_with("Usage: ")).unwrap_or_default();
        // The usage line without its optional parts: `[OPTIONS] <PID> [INTERVAL]` keeps `<PID>`.
        let mut required = String::new();
        let mut depth = 0;
        for c in usage.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ if depth == 0 => required.push(c),
                _ => {}
            }
        }
        let Some(start) = required.find('<') else { continue };
        let end = start + required[start..].find('>').unwrap() + 1;
        let missing = &required[start..end];
        let done = corebpf_tests::run_tool(&tool, &[]);
        let line = done.stderr.trim_end();
        assert_eq!(done.status.code(), Some(2), "{tool}: {line}");
        assert_eq!(line.lines().count(), 1, "{tool}: {line}");
        assert!(line.starts_with(&format!("{tool}: ")), "{tool}: {line}");
        assert!(line.contains(missing), "{tool}: {missing} is not named: {line}");
        assert!(done.prog_ids.is_empty(), "{tool}: programs were loaded");
        checked.push(tool);
    }
    for tool in [
        "ucalls",
        "ttysnoop",
        "uflow",
        "ugc",
        "uobjnew",
        "uthreads",
        "javagc",
        "funclatency",
        "funccount",
        "funcslower",
        "funcinterval",
        "trace",
    ]
    .into_iter()
    .filter(|t| tools.iter().any(|o| o == t))
    {
        assert!(checked.iter().any(|t| t == tool), "{tool} has no required argument in its usage line: {checked:?}");
    }
}

/// Issue 31 item 16: a number out of its range, or not a whole number, is refused as a usage error in one line
/// that names the flag, repeats the value and says what is allowed.
#[test]
fn bad_numbers_name_the_flag_the_value_and_what_is_allowed() {
    let cases: [(&str, &[&str], &str, &str); 4] = [
        ("tcpdrop", &["--netns-id", "99999999999"], "--netns-id", "from 1 to 4294967295"),
        ("biosnoop", &["-m", "0.5"], "--min", "a whole number from 0 to"),
        ("execsnoop", &["-u", "4294967296"], "--uid", "from 0 to 4294967294"),
        ("tcptop", &["--max-connections", "4294967295"], "--max-connections", "from 1 to"),
    ];
    for (tool, args, flag, allowed) in cases {
        let done = corebpf_tests::run_tool(tool, args);
        let line = done.stderr.trim_end();
        assert_eq!(done.status.code(), Some(2), "{tool} {args:?}: {line}");
        assert_eq!(line.lines().count(), 1, "{tool} {args:?}: {line}");
        assert!(line.starts_with(&format!("{tool}: ")), "{line}");
        assert!(line.contains(flag), "{tool} {args:?}: the flag is not named: {line}");
        assert!(line.contains(args[1]), "{tool} {args:?}: the value is not repeated: {line}");
        assert!(line.contains(allowed), "{tool} {args:?}: want {allowed:?} in: {line}");
    }
}

/// Issue 31 item 15: limits and output paths are checked before anything is loaded: a usage error (exit 2) in
/// one line naming the flag, with no BPF program ever loaded, instead of a failure after a trace (or none).
#[test]
fn limits_and_output_paths_are_refused_before_loading() {
    let cases: [(&str, &[&str], &str); 5] = [
        ("tcptop", &["--max-connections", "4294967295", "1", "1"], "--max-connections"),
        ("tcptop", &["--max-connections", "100000000", "1", "1"], "--max-connections"),
        ("biolatency", &["--prometheus", "127.0.0.1:0", "--max-series", "0"], "--max-series"),
        ("biolatency", &["--heatmap", "/nonexistent/corebpf/x.svg", "1", "1"], "--heatmap"),
        ("biolatency", &["--heatmap", "/", "1", "1"], "--heatmap"),
    ];
    for (tool, args, flag) in cases {
        let done = corebpf_tests::run_tool(tool, args);
        let line = done.stderr.trim_end();
        assert_eq!(done.status.code(), Some(2), "{tool} {args:?}: {line}");
        assert_eq!(line.lines().count(), 1, "{tool} {args:?}: {line}");
        assert!(line.starts_with(&format!("{tool}: ")) && line.contains(flag), "{tool} {args:?}: {line}");
        assert!(done.prog_ids.is_empty(), "{tool} {args:?}: programs were loaded");
    }
}
