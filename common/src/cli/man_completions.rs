//! Man pages and shell completions generated from a tool's own clap definition, for packaging.
//!
//! `cli::parse()` calls [`from_env`] before parsing: when `COREBPF_GENERATE` is `man`, `bash`, `zsh` or `fish`,
//! the tool writes that file to stdout and exits 0 instead of running, so `--help`, the man page and the
//! completions can never disagree. `COREBPF_GENERATE_NAME` gives the installed command name (the Makefile's
//! `APP_PREFIX` applied, e.g. `bpf-biolatency`); `COREBPF_MAN_SECTIONS` names the tool's documentation source
//! (tools/<tool>/doc.md), whose sections in capitals replace clap's DESCRIPTION and follow OPTIONS. The man
//! page is dated from `SOURCE_DATE_EPOCH` (or undated), so the same commit always gives the same bytes.

use std::io::Write;
use std::process::exit;

use clap::{Command, CommandFactory};
use clap_complete::shells::{Bash, Fish, Zsh};
use clap_mangen::roff::{bold, roman, Roff};
use clap_mangen::Man;

/// Environment variable selecting what to generate.
pub const GENERATE_VAR: &str = "COREBPF_GENERATE";
/// Environment variable with the installed command name.
pub const NAME_VAR: &str = "COREBPF_GENERATE_NAME";
/// Environment variable with the path of the tool's documentation source (`tools/<tool>/doc.md`).
pub const SECTIONS_VAR: &str = "COREBPF_MAN_SECTIONS";

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
            let sections = match std::env::var_os(SECTIONS_VAR) {
                Some(path) => {
                    let path = std::path::PathBuf::from(path);
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| format!("reading man page sections {}: {e}", path.display()))?;
                    let mut sections = parse_sections(&text)?;
                    rename_examples(&mut sections, &tool, name);
                    sections
                }
                None => Vec::new(),
            };
            let date = std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|s| date_of_epoch(&s)).unwrap_or_default();
            return man_page(cmd, &sections, &date).map_err(|e| format!("rendering the man page: {e}"));
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
/// of lines starting with `- ` is a bullet list; anything else is a paragraph. Text needs no escaping.
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
    use clap::{Arg, ArgAction};

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
    fn dates_from_epoch() {
        assert_eq!(date_of_epoch("0").as_deref(), Some("1970-01-01"));
        assert_eq!(date_of_epoch("1767225600").as_deref(), Some("2026-01-01"));
        assert_eq!(date_of_epoch("soon"), None);
    }
}
