//! Name patterns as BCC's tools take them: shell-style globs by default, regular expressions on request.
//!
//! A [`Pattern`] is built once from the user's text ([`Pattern::glob`] or [`Pattern::regex`]) and then tested
//! against many names (kernel functions, ELF symbols, tracepoints, USDT probes). A glob matches the whole name,
//! with `*` for any run of characters and `?` for one; every other character is literal (BCC turns `.` into a
//! regex wildcard by accident; here `foo.cold` means just that). A regular expression matches anywhere in the
//! name unless anchored, as in BCC's `funccount -r '^vfs.*'`.

use anyhow::{bail, Context, Result};
use regex_lite::Regex;

/// A compiled glob or regular expression.
#[derive(Debug, Clone)]
pub struct Pattern {
    text: String,
    regex: Regex,
    literal: bool,
}

impl Pattern {
    /// A shell-style glob (`vfs_*`, `sys_enter_?ead`) matching whole names.
    pub fn glob(text: &str) -> Result<Self> {
        if text.is_empty() {
            bail!("empty pattern");
        }
        let mut re = String::from("^");
        let mut literal = true;
        for c in text.chars() {
            match c {
                '*' => {
                    re.push_str(".*");
                    literal = false;
                }
                '?' => {
                    re.push('.');
                    literal = false;
                }
                c => re.push_str(&regex_lite::escape(c.encode_utf8(&mut [0; 4]))),
            }
        }
        re.push('$');
        let regex = Regex::new(&re).with_context(|| format!("bad pattern '{text}'"))?;
        Ok(Pattern { text: text.to_string(), regex, literal })
    }

    /// A regular expression, matching anywhere in a name unless anchored with `^`/`$`.
    pub fn regex(text: &str) -> Result<Self> {
        if text.is_empty() {
            bail!("empty pattern");
        }
        let regex = Regex::new(text).with_context(|| format!("bad regular expression '{text}'"))?;
        Ok(Pattern { text: text.to_string(), regex, literal: false })
    }

    /// The glob or regex as typed.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The one name this pattern can match, if it is a glob without wildcards.
    pub fn literal(&self) -> Option<&str> {
        self.literal.then_some(self.text.as_str())
    }

    /// True if `name` matches.
    pub fn is_match(&self, name: &str) -> bool {
        self.regex.is_match(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        let p = Pattern::glob("vfs_*").unwrap();
        assert!(p.is_match("vfs_read"));
        assert!(!p.is_match("xvfs_read"));
        assert!(p.literal().is_none());
        let p = Pattern::glob("a.b?").unwrap();
        assert!(p.is_match("a.bc"));
        assert!(!p.is_match("axbc"));
        let p = Pattern::glob("getpid").unwrap();
        assert_eq!(p.literal(), Some("getpid"));
        assert!(!p.is_match("getpid2"));
        assert!(Pattern::glob("").is_err());
    }

    #[test]
    fn regexes_search_unless_anchored() {
        let p = Pattern::regex("^(hot|cold)_fn$").unwrap();
        assert!(p.is_match("hot_fn"));
        assert!(!p.is_match("hot_fn2"));
        assert!(Pattern::regex("read").unwrap().is_match("vfs_read"));
        assert!(Pattern::regex("(").is_err());
    }
}
