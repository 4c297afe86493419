// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Name patterns exactly as BCC's tools take them: globs by default, regular expressions on request.
//!
//! A [`Pattern`] is built once from the user's text ([`Pattern::glob`] or [`Pattern::regex`]) and then tested
//! against many names (kernel functions, ELF symbols, tracepoints, USDT probes). As in BCC's `funccount.py`, a
//! glob is a regular expression in which only `*` is rewritten (to `.*`), anchored at both ends: `[...]`, `?`,
//! `.` and the rest keep their regex meaning (`sched_[sw]*` is a character class, `.` any character). How a
//! pattern meets a name follows BCC's `__init__.py` too: user functions, tracepoints and USDT probes are matched
//! from the start of the name (`re.match`, [`Pattern::is_match`]), kernel functions as a whole name
//! (`re.fullmatch`, [`Pattern::is_full_match`]); so `-r 'dup'` matches `dup` and `dup2` but not `__dup2`.

use anyhow::{bail, Context, Result};
use regex_lite::Regex;

/// A compiled glob or regular expression.
#[derive(Debug, Clone)]
pub struct Pattern {
    text: String,
    /// Anchored at the start (Python's `re.match`).
    start: Regex,
    /// Anchored at both ends (Python's `re.fullmatch`).
    whole: Regex,
    literal: bool,
}

impl Pattern {
    /// BCC's glob: `*` is any run of characters, everything else regex syntax, matching whole names.
    pub fn glob(text: &str) -> Result<Self> {
        if text.is_empty() {
            bail!("empty pattern");
        }
        let source = format!("^{}$", text.replace('*', ".*"));
        let literal = text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        Self::compile(text, &source, literal).with_context(|| format!("bad pattern '{text}'"))
    }

    /// A regular expression, used as BCC uses it (matched from the start of a name, or as the whole name).
    pub fn regex(text: &str) -> Result<Self> {
        if text.is_empty() {
            bail!("empty pattern");
        }
        Self::compile(text, text, false).with_context(|| format!("bad regular expression '{text}'"))
    }

    fn compile(text: &str, source: &str, literal: bool) -> Result<Self> {
        let start = Regex::new(&format!("^(?:{source})"))?;
        let whole = Regex::new(&format!("^(?:{source})$"))?;
        Ok(Pattern { text: text.to_string(), start, whole, literal })
    }

    /// The glob or regex as typed.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The one name this pattern can match, if it is a glob of plain name characters.
    pub fn literal(&self) -> Option<&str> {
        self.literal.then_some(self.text.as_str())
    }

    /// True if the pattern matches at the start of `name` (BCC's `re.match`: user functions, tracepoints, USDT).
    pub fn is_match(&self, name: &str) -> bool {
        self.start.is_match(name)
    }

    /// True if the pattern matches all of `name` (BCC's `re.fullmatch`: kernel functions).
    pub fn is_full_match(&self, name: &str) -> bool {
        self.whole.is_match(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_rewrite_only_the_star() {
        let p = Pattern::glob("vfs_*").unwrap();
        assert!(p.is_match("vfs_read"));
        assert!(!p.is_match("xvfs_read"));
        assert!(p.literal().is_none());
        // `.` and `?` keep their regex meaning, as in BCC.
        let p = Pattern::glob("a.b?").unwrap();
        assert!(p.is_match("a.b") && p.is_match("axb") && p.is_match("ax"));
        assert!(!p.is_match("axbc"));
        let p = Pattern::glob("sched:sched_[sw]*").unwrap();
        assert!(p.is_match("sched:sched_switch") && p.is_match("sched:sched_wakeup"));
        assert!(!p.is_match("sched:sched_fork"));
        let p = Pattern::glob("getpid").unwrap();
        assert_eq!(p.literal(), Some("getpid"));
        assert!(!p.is_match("getpid2"));
        assert!(Pattern::glob("").is_err());
        assert!(Pattern::glob("a[").is_err());
    }

    #[test]
    fn regexes_match_from_the_start_or_whole() {
        let p = Pattern::regex("dup").unwrap();
        assert!(p.is_match("dup") && p.is_match("dup2"));
        assert!(!p.is_match("__dup2") && !p.is_match("wcsdup"));
        assert!(p.is_full_match("dup") && !p.is_full_match("dup2"));
        let p = Pattern::regex("vfs_(read|write)").unwrap();
        assert!(p.is_full_match("vfs_read") && !p.is_full_match("vfs_readv"));
        let p = Pattern::regex("a|ab").unwrap();
        assert!(p.is_full_match("ab"));
        assert!(Pattern::regex("(").is_err());
    }
}
