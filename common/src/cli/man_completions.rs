// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Man pages and shell completions generated from a tool's own clap definition, for packaging.
//!
//! `cli::parse()` calls [`from_env`] before parsing: when `COREBPF_GENERATE` is `man`, `bash`, `zsh` or `fish`,
//! the tool writes that file to stdout and exits 0 instead of running, so `--help`, the man page and the
//! completions can never disagree. `COREBPF_GENERATE_NAME` gives the installed command name (the Makefile's
//! `APP_PREFIX` applied, e.g. `bpf-biolatency`); `COREBPF_MAN_SECTIONS` names the tool's documentation source
//! (tools/<tool>/doc.md), whose sections in capitals replace clap's DESCRIPTION and follow OPTIONS. The man
//! page is dated from `SOURCE_DATE_EPOCH` (or undated), so the same commit always gives the same bytes.
//!
//! A page's SEE ALSO names the pages this package installs as they are installed: `biosnoop(8)` becomes
//! `bpf-biosnoop(8)` when the tool's installed name carries the prefix `bpf-`. Which names are this package's
//! is known to the binary that generates the page: the multicall binary records its list of tools
//! ([`set_package_tools`]) before running one, so a page names exactly the tools installed beside it; pages of
//! other packages (`perf(1)`, `bpftrace(8)`) and `corebpf-tools(8)` keep their names. The multicall binary's own
//! page, corebpf-tools(8), comes from [`multicall_from_env`].

use std::io::Write;
use std::process::exit;
use std::sync::OnceLock;

use clap::{Arg, ArgAction, Command, CommandFactory};
use clap_complete::shells::{Bash, Fish, Zsh};
use clap_mangen::roff::{bold, roman, Roff};
use clap_mangen::Man;

use crate::output::schema::{self, Schema};

/// Environment variable selecting what to generate.
pub const GENERATE_VAR: &str = "COREBPF_GENERATE";
/// Environment variable with the installed command name.
pub const NAME_VAR: &str = "COREBPF_GENERATE_NAME";
/// Environment variable with the path of the tool's documentation source (`tools/<tool>/doc.md`).
pub const SECTIONS_VAR: &str = "COREBPF_MAN_SECTIONS";
/// Environment variable with the install prefix of the tools' names (the Makefile's `APP_PREFIX`), read for the
/// multicall binary's own page, whose name carries no prefix.
pub const PREFIX_VAR: &str = "COREBPF_GENERATE_PREFIX";

static PACKAGE_TOOLS: OnceLock<Vec<&'static str>> = OnceLock::new();

/// Records the names of the tools this binary holds (the multicall binary calls it first): the pages of these
/// tools are installed with the same prefix as the page being generated, so SEE ALSO names them so.
pub fn set_package_tools(names: Vec<&'static str>) {
    let _ = PACKAGE_TOOLS.set(names);
}

/// The tools of this package; empty for a tool's own binary run alone (its SEE ALSO then stays as written).
fn package_tools() -> &'static [&'static str] {
    PACKAGE_TOOLS.get().map(Vec::as_slice).unwrap_or(&[])
}

/// The hand-written sections named by `COREBPF_MAN_SECTIONS`, or none.
fn sections_from_env() -> Result<Vec<Section>, String> {
    match std::env::var_os(SECTIONS_VAR) {
        Some(path) => {
            let path = std::path::PathBuf::from(path);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("reading man page sections {}: {e}", path.display()))?;
            parse_sections(&text)
        }
        None => Ok(Vec::new()),
    }
}

/// The man page's date: `SOURCE_DATE_EPOCH`'s day, or none.
fn date_from_env() -> String {
    std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|s| date_of_epoch(&s)).unwrap_or_default()
}

/// If `COREBPF_GENERATE=man` is set, writes the multicall binary's own page, corebpf-tools(8), to stdout and
/// exits: its usage, hand-written sections (`COREBPF_MAN_SECTIONS`, toolset/man.md) and a TOOLS section listing
/// `tools` (name, one-line description) under their installed names (`COREBPF_GENERATE_PREFIX`). Exits 1 with
/// one line on stderr for anything but `man`. Returns when the variable is not set.
pub fn multicall_from_env(name: &'static str, version: &str, about: &str, tools: &[(&'static str, &'static str)]) {
    let Some(what) = std::env::var_os(GENERATE_VAR) else {
        return;
    };
    let prefix = std::env::var(PREFIX_VAR).unwrap_or_default();
    let result = if what != "man" {
        Err(format!("{GENERATE_VAR}={:?}: {name} itself has a man page only (man)", what.to_string_lossy()))
    } else {
        sections_from_env().and_then(|sections| {
            let names: Vec<&str> = tools.iter().map(|(n, _)| *n).collect();
            let sections = multicall_sections(sections, &prefix, tools, &names);
            let cmd = multicall_command(name, version, about);
            man_page(cmd, &sections, &date_from_env()).map_err(|e| format!("rendering the man page: {e}"))
        })
    };
    let result = result.and_then(|bytes| {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&bytes).and_then(|()| stdout.flush()).map_err(|e| format!("writing to stdout: {e}"))
    });
    match result {
        Ok(()) => exit(0),
        Err(msg) => {
            eprintln!("{name}: {msg}");
            exit(1);
        }
    }
}

/// The multicall binary's command line as clap describes it, for the page's SYNOPSIS and OPTIONS.
fn multicall_command(name: &'static str, version: &str, about: &str) -> Command {
    let version: &'static str = Box::leak(version.to_owned().into_boxed_str());
    let about: &'static str = Box::leak(about.to_owned().into_boxed_str());
    Command::new(name)
        .version(version)
        .about(about)
        .arg(
            Arg::new("list")
                .long("list")
                .action(ArgAction::SetTrue)
                .help("Print the name and one-line description of every tool in this binary, then exit"),
        )
        .arg(Arg::new("TOOL").help("The tool to run (see TOOLS), or the command features"))
        .arg(
            Arg::new("ARGS")
                .num_args(0..)
                .trailing_var_arg(true)
                .allow_hyphen_values(true)
                .help("Passed to the tool: its own options and arguments, as its page describes them"),
        )
}

/// The hand-written sections with a generated TOOLS section after DESCRIPTION and SEE ALSO's tools prefixed.
fn multicall_sections(
    mut sections: Vec<Section>,
    prefix: &str,
    tools: &[(&str, &str)],
    names: &[&str],
) -> Vec<Section> {
    let list = Section {
        heading: "TOOLS".to_owned(),
        blocks: tools.iter().map(|(n, about)| vec![format!("{prefix}{n}"), format!("    {about}")]).collect(),
    };
    let at = sections.iter().position(|s| s.heading == "DESCRIPTION").map_or(0, |i| i + 1);
    sections.insert(at, list);
    prefix_see_also(&mut sections, prefix, names);
    sections
}

/// Writes `prefix` before every `name(8)` of SEE ALSO whose name is one of `tools` (this package's pages).
fn prefix_see_also(sections: &mut [Section], prefix: &str, tools: &[&str]) {
    if prefix.is_empty() {
        return;
    }
    for section in sections.iter_mut().filter(|s| s.heading == "SEE ALSO") {
        for line in section.blocks.iter_mut().flatten() {
            *line = prefix_line(line, prefix, tools);
        }
    }
}

fn prefix_line(line: &str, prefix: &str, tools: &[&str]) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut out = String::with_capacity(line.len() + 16);
    let mut rest = line;
    while let Some(at) = rest.find("(8)") {
        let head = &rest[..at];
        let start = head.rfind(|c: char| !is_name(c)).map_or(0, |i| i + 1);
        out.push_str(&head[..start]);
        if tools.contains(&&head[start..]) {
            out.push_str(prefix);
        }
        out.push_str(&head[start..]);
        out.push_str("(8)");
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    out
}

/// If `COREBPF_GENERATE` is set, writes the man page or completion script of `T` to stdout and exits: 0 on
/// success, 1 with one line on stderr on a bad value or unreadable sections file. Returns when it is not set.
pub fn from_env<T: CommandFactory>() {
    let Some(what) = std::env::var_os(GENERATE_VAR) else {
        return;
    };
    let cmd = T::command();
    let tool = cmd.get_name().to_owned();
    let name = std::env::var(NAME_VAR).unwrap_or_else(|_| tool.clone());
    let result = generate(cmd, &name, &what.to_string_lossy()).and_then(|bytes| {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&bytes).and_then(|()| stdout.flush()).map_err(|e| format!("writing to stdout: {e}"))
    });
    match result {
        Ok(()) => exit(0),
        Err(msg) => {
            eprintln!("{tool}: {msg}");
            exit(1);
        }
    }
}

/// The bytes of one generated file: `what` is `man`, `bash`, `zsh` or `fish`.
fn generate(cmd: Command, name: &str, what: &str) -> Result<Vec<u8>, String> {
    // clap takes a `&'static str` name (without its `string` feature); this process exits right after.
    let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
    let tool = cmd.get_name().to_owned();
    let mut cmd = cmd.name(name).bin_name(name).display_name(name);
    let mut out = Vec::new();
    // The shells' own types rather than `Shell`, which would link the elvish and PowerShell generators too.
    match what {
        "man" => {
            let mut sections = sections_from_env()?;
            rename_examples(&mut sections, &tool, name);
            prefix_see_also(&mut sections, name.strip_suffix(tool.as_str()).unwrap_or(""), package_tools());
            return man_page(cmd, &sections, &date_from_env()).map_err(|e| format!("rendering the man page: {e}"));
        }
        "bash" => clap_complete::generate(Bash, &mut cmd, name, &mut out),
        "zsh" => clap_complete::generate(Zsh, &mut cmd, name, &mut out),
        "fish" => clap_complete::generate(Fish, &mut cmd, name, &mut out),
        other => return Err(format!("{GENERATE_VAR}={other:?}: expected man, bash, zsh or fish")),
    }
    Ok(out)
}

/// `YYYY-MM-DD` of a Unix time given as decimal seconds.
fn date_of_epoch(secs: &str) -> Option<String> {
    let secs: i64 = secs.trim().parse().ok()?;
    Some(chrono::DateTime::from_timestamp(secs, 0)?.format("%Y-%m-%d").to_string())
}

/// One hand-written man page section: its heading and its blocks (paragraphs separated by blank lines).
#[derive(Debug, PartialEq)]
pub struct Section {
    pub heading: String,
    pub blocks: Vec<Vec<String>>,
}

/// Parses the man page sections of a tool's documentation source (`tools/<tool>/doc.md`).
///
/// A `## ` line whose title is in capitals (`## DESCRIPTION`, `## EXAMPLES`, `## SEE ALSO`) starts a man page
/// section; any other `## ` title (`## Usage`, `## --help`) starts a part for the web page only, skipped here, and
/// so is what comes before the first `## ` (the title and summary). `## ` inside a ``` fence starts nothing.
/// Blank lines separate blocks. A block whose first line is not indented and whose next lines are is a tagged
/// paragraph: the first line (an example command, a variable name) in bold, the rest as its explanation. A block
/// of lines starting with `- ` is a bullet list; anything else is a paragraph. Text needs no escaping. The JSON
/// section is the tool's [`Schema`], each field a tagged paragraph.
pub fn parse_sections(text: &str) -> Result<Vec<Section>, String> {
    let mut sections: Vec<Section> = Vec::new();
    let mut block: Vec<String> = Vec::new();
    // Whether the lines belong to a man page section, and whether they are inside a ``` fence.
    let (mut in_man, mut in_fence) = (false, false);
    for line in text.lines() {
        let line = line.trim_end();
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
        let title = if in_fence { None } else { line.strip_prefix("## ") };
        if let Some(title) = title {
            if let (Some(section), false) = (sections.last_mut(), block.is_empty()) {
                section.blocks.push(std::mem::take(&mut block));
            }
            block.clear();
            in_man = is_heading(title.trim());
            if in_man {
                sections.push(Section { heading: title.trim().to_owned(), blocks: Vec::new() });
            }
        } else if !in_man {
            continue;
        } else if line.is_empty() {
            if let (Some(section), false) = (sections.last_mut(), block.is_empty()) {
                section.blocks.push(std::mem::take(&mut block));
            }
        } else {
            block.push(line.to_owned());
        }
    }
    if let (true, Some(section), false) = (in_man, sections.last_mut(), block.is_empty()) {
        section.blocks.push(block);
    }
    if sections.is_empty() {
        return Err("no man page section (a `## ` title in capitals, such as `## DESCRIPTION`)".to_owned());
    }
    // The JSON section lists every field, the shared ones with their meaning from docs/json.md.
    if let Some(schema) = Schema::from_doc(text).map_err(|e| format!("## {}: {e}", schema::HEADING))? {
        if let Some(section) = sections.iter_mut().find(|s| s.heading == schema::HEADING) {
            section.blocks = schema.man_blocks();
        }
    }
    Ok(sections)
}

fn is_heading(line: &str) -> bool {
    !line.starts_with(char::is_whitespace)
        && line.chars().any(|c| c.is_ascii_uppercase())
        && line.chars().all(|c| c.is_ascii_uppercase() || c == ' ')
}

/// Writes the installed name (`bpf-biolatency`) for the tool's name at the start of tagged paragraphs, the
/// example commands.
fn rename_examples(sections: &mut [Section], tool: &str, name: &str) {
    for block in sections.iter_mut().flat_map(|s| s.blocks.iter_mut()) {
        let first = &mut block[0];
        if first == tool || first.starts_with(&format!("{tool} ")) {
            first.replace_range(..tool.len(), name);
        }
    }
}

/// Renders one hand-written section.
fn render_section(section: &Section) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", [section.heading.as_str()]);
    for block in &section.blocks {
        let indented = |l: &String| l.starts_with(char::is_whitespace);
        if block[0].starts_with("- ") && block.iter().all(|l| l.starts_with("- ") || indented(l)) {
            let mut items: Vec<Vec<String>> = Vec::new();
            for line in block {
                match line.strip_prefix("- ") {
                    Some(first) => items.push(vec![first.to_owned()]),
                    None => items.last_mut().expect("block starts with a bullet").push(line.clone()),
                }
            }
            for item in items {
                roff.control("IP", ["\\(bu", "2"]);
                roff.text([roman(join(&item))]);
            }
        } else if block.len() > 1 && !indented(&block[0]) && block[1..].iter().all(indented) {
            roff.control("TP", []);
            roff.text([bold(block[0].as_str())]);
            // A tag narrower than the indent (`trace`, `tcptop`) would share its line with the text.
            roff.control("br", []);
            roff.text([roman(join(&block[1..]))]);
        } else {
            roff.control("PP", []);
            roff.text([roman(join(block))]);
        }
    }
    roff
}

/// The lines of a block as one line of text, as groff would fill them anyway.
fn join(lines: &[String]) -> String {
    lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ")
}

/// The man page (section 8): NAME, SYNOPSIS, DESCRIPTION, OPTIONS, then the other hand-written sections (EXAMPLES,
/// SEE ALSO...), then VERSION. Without a hand-written DESCRIPTION, clap's about text and after-help are used.
pub fn man_page(cmd: Command, sections: &[Section], date: &str) -> std::io::Result<Vec<u8>> {
    let version = cmd.get_version().unwrap_or_default().to_owned();
    let title = cmd.get_name().to_uppercase();
    let man = Man::new(cmd)
        .title(title)
        .section("8")
        .date(date)
        .source(format!("corebpf-tools {version}"))
        .manual("System Manager's Manual");
    let description = sections.iter().find(|s| s.heading == "DESCRIPTION");

    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut part = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| -> std::io::Result<()> {
        let mut buf = Vec::new();
        render(&mut buf)?;
        parts.push(buf);
        Ok(())
    };
    part(&|w| man.render_title(w))?;
    part(&|w| man.render_name_section(w))?;
    part(&|w| man.render_synopsis_section(w))?;
    match description {
        Some(d) => part(&|w| render_section(d).to_writer(w))?,
        None => part(&|w| man.render_description_section(w))?,
    }
    part(&|w| man.render_options_section(w))?;
    if description.is_none() {
        part(&|w| man.render_extra_section(w))?;
    }
    for section in sections.iter().filter(|s| s.heading != "DESCRIPTION") {
        part(&|w| render_section(section).to_writer(w))?;
    }
    part(&|w| man.render_version_section(w))?;

    // Each piece starts with the same preamble (a string definition); keep only the first.
    let preamble = Roff::new().render().into_bytes();
    let mut page = Vec::new();
    for (i, bytes) in parts.into_iter().enumerate() {
        let body = if i > 0 && bytes.starts_with(&preamble) { &bytes[preamble.len()..] } else { &bytes[..] };
        page.extend_from_slice(body);
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> Command {
        Command::new("demo")
            .version("1.2.3")
            .about("Demonstrate things")
            .after_help("examples:\n    demo -x")
            .arg(Arg::new("extra").short('x').long("extra").help("Do extra things").action(ArgAction::SetTrue))
    }

    const SECTIONS: &str = "# demo\n\n- Shows: things\n\n## DESCRIPTION\nFirst paragraph\ncontinued.\n\n\
                            .Second starts with a dot.\n\n## Usage\n\n```\n## not a title\n# demo\n```\n\
                            Web page only.\n\n## EXAMPLES\ndemo -x\n    Does extra things.\n\
                            ## SEE ALSO\n- biolatency(8)\n- two\n  lines\n\n- one\n  item\n\n## --help\n\n\
                            ```text\nexamples:\n```\n";

    #[test]
    fn parses_sections_and_blocks() {
        let s = parse_sections(SECTIONS).unwrap();
        assert_eq!(s.iter().map(|s| s.heading.as_str()).collect::<Vec<_>>(), ["DESCRIPTION", "EXAMPLES", "SEE ALSO"]);
        assert_eq!(s[0].blocks, [vec!["First paragraph", "continued."], vec![".Second starts with a dot."]]);
        assert_eq!(s[1].blocks, [vec!["demo -x", "    Does extra things."]]);
        assert_eq!(s[2].blocks.len(), 2);
        assert!(parse_sections("# demo\n\nDESCRIPTION\ntext\n").unwrap_err().contains("no man page section"));
    }

    #[test]
    fn man_page_orders_sections_and_escapes_text() {
        let sections = parse_sections(SECTIONS).unwrap();
        let page = String::from_utf8(man_page(cmd(), &sections, "2026-01-02").unwrap()).unwrap();
        let headings: Vec<&str> = page.lines().filter(|l| l.starts_with(".SH")).collect();
        assert_eq!(
            headings,
            [
                ".SH NAME",
                ".SH SYNOPSIS",
                ".SH DESCRIPTION",
                ".SH OPTIONS",
                ".SH EXAMPLES",
                ".SH \"SEE ALSO\"",
                ".SH VERSION"
            ]
        );
        assert!(page.contains(".TH DEMO 8 2026-01-02 \"corebpf-tools 1.2.3\""), "{page}");
        assert!(page.contains("First paragraph continued."));
        assert!(page.contains("\\&.Second starts with a dot."), "a leading dot must be escaped:\n{page}");
        assert!(page.contains("\\fBdemo \\-x\\fR"), "{page}");
        assert!(page.contains("two lines"));
        assert!(page.contains(".IP \\(bu 2\none item"), "a one-item list is a list:\n{page}");
        assert_eq!(page.matches(".ds Aq").count(), 2, "one preamble (.ie/.el pair):\n{page}");
        assert!(!page.contains("EXTRA"));
    }

    #[test]
    fn man_page_without_sections_uses_clap_text() {
        let page = String::from_utf8(man_page(cmd(), &[], "").unwrap()).unwrap();
        assert!(page.contains(".SH DESCRIPTION"));
        assert!(page.contains(".SH EXTRA"));
    }

    #[test]
    fn completions_use_the_installed_name() {
        for shell in ["bash", "zsh", "fish"] {
            let text = String::from_utf8(generate(cmd(), "bpf-demo", shell).unwrap()).unwrap();
            assert!(text.contains("bpf-demo"), "{shell}:\n{text}");
            assert!(text.contains("extra"), "{shell}:\n{text}");
        }
        assert!(generate(cmd(), "demo", "tcsh").unwrap_err().contains("expected man, bash, zsh or fish"));
    }

    #[test]
    fn examples_use_the_installed_name() {
        let mut sections = parse_sections("## EXAMPLES\ndemo -x\n    Extra.\n\ndemox\n    Not the tool.\n").unwrap();
        rename_examples(&mut sections, "demo", "bpf-demo");
        assert_eq!(sections[0].blocks[0][0], "bpf-demo -x");
        assert_eq!(sections[0].blocks[1][0], "demox");
    }

    #[test]
    fn see_also_names_this_packages_pages_with_the_prefix() {
        let mut sections =
            parse_sections("## SEE ALSO\nbiosnoop(8), corebpf-tools(8), perf(1), xbiosnoop(8)\n\n- biotop(8)\n")
                .unwrap();
        prefix_see_also(&mut sections, "bpf-", &["biosnoop", "biotop"]);
        assert_eq!(sections[0].blocks[0][0], "bpf-biosnoop(8), corebpf-tools(8), perf(1), xbiosnoop(8)");
        assert_eq!(sections[0].blocks[1][0], "- bpf-biotop(8)");
        let mut plain = parse_sections("## SEE ALSO\nbiosnoop(8)\n").unwrap();
        prefix_see_also(&mut plain, "", &["biosnoop"]);
        assert_eq!(plain[0].blocks[0][0], "biosnoop(8)");
    }

    #[test]
    fn the_multicall_page_lists_the_tools_after_its_description() {
        let sections = parse_sections("## DESCRIPTION\nAll tools.\n\n## SEE ALSO\nbiosnoop(8)\n").unwrap();
        let tools = [("biosnoop", "Block I/O, one line each"), ("runqlat", "Run queue waits")];
        let sections = multicall_sections(sections, "bpf-", &tools, &["biosnoop", "runqlat"]);
        let cmd = multicall_command("corebpf-tools", "1.2.3", "Tools");
        let page = String::from_utf8(man_page(cmd, &sections, "").unwrap()).unwrap();
        let headings: Vec<&str> = page.lines().filter(|l| l.starts_with(".SH")).collect();
        assert_eq!(
            headings,
            [
                ".SH NAME",
                ".SH SYNOPSIS",
                ".SH DESCRIPTION",
                ".SH OPTIONS",
                ".SH TOOLS",
                ".SH \"SEE ALSO\"",
                ".SH VERSION"
            ]
        );
        assert!(page.contains("\\fBbpf\\-biosnoop\\fR"), "{page}");
        assert!(page.contains("Run queue waits"), "{page}");
        assert!(page.contains("bpf\\-biosnoop(8)"), "{page}");
        assert!(page.contains("\\-\\-list"), "{page}");
    }

    #[test]
    fn dates_from_epoch() {
        assert_eq!(date_of_epoch("0").as_deref(), Some("1970-01-01"));
        assert_eq!(date_of_epoch("1767225600").as_deref(), Some("2026-01-01"));
        assert_eq!(date_of_epoch("soon"), None);
    }
}
