// SPDX-License-Identifier: Apache-2.0 OR MIT
//! BCC's probe specifier, as argdist takes it:
//! `{p,r,t}:{[library],category}:function(signature)[:type[,type...]:expr[,expr...][:filter]][#label]`.

use super::ctype::{self, CType};
use super::SpecResult;

/// Where the probe fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeType {
    /// `p`: a function's entry.
    Entry,
    /// `r`: a function's return.
    Return,
    /// `t`: a kernel tracepoint.
    Tracepoint,
    /// `u`: a USDT probe of a program or library (its arguments are arg1, arg2, ...).
    Usdt,
}

/// A parsed argdist spec (names not yet resolved: see [`super::plan`]).
#[derive(Debug, Clone)]
pub struct Spec {
    /// The spec as given, label included (BCC prints it as the probe's title).
    pub raw: String,
    pub label: Option<String>,
    pub probe: ProbeType,
    /// The library or program of a user function; empty for the kernel. For a tracepoint, its category.
    pub library: String,
    /// The function, the tracepoint's event, or the USDT probe's name.
    pub function: String,
    /// A USDT probe's provider when the spec names it (`u:pthread:libpthread:pthread_create`).
    pub provider: Option<String>,
    /// Bytes into the function where an entry probe goes (trace's `kfree_skb+0x12`); 0 for its first instruction.
    pub offset: u64,
    /// The signature's parameters in order, with their C types.
    pub params: Vec<(String, CType)>,
    /// The signature's parameter types as written (a `struct timespec *` names the struct its members are in).
    pub param_texts: Vec<String>,
    /// The expressions with their types; empty when the spec has none (BCC's default: count calls, or `$retval`).
    pub exprs: Vec<(String, CType)>,
    /// The filter text, empty for none.
    pub filter: String,
    /// The spec names no expression: BCC's default (count calls, or `$retval` of a return probe).
    pub default_expr: bool,
    /// The expressions' types are declared (argdist's `:type:expr`), so an expression that is exactly `$retval`
    /// gives a user function's return value its type; trace's come from its format, which types nothing.
    pub declared_types: bool,
}

impl Spec {
    /// A user function (a library or program is named).
    pub fn is_user(&self) -> bool {
        self.probe != ProbeType::Tracepoint && !self.library.is_empty()
    }

    /// A USDT probe.
    pub fn is_usdt(&self) -> bool {
        self.probe == ProbeType::Usdt
    }

    /// What argdist shows for the spec: its label, else the spec without the label.
    pub fn title(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.raw)
    }
}

/// Parses an argdist spec; `-H` specs (`hist`) need an expression, except on a return probe (`$retval`).
pub fn parse_argdist(raw: &str, hist: bool) -> SpecResult<Spec> {
    let (body, label) = match raw.split_once('#') {
        Some((body, label)) => (body, Some(label.to_owned())),
        None => (raw, None),
    };
    let parts: Vec<&str> = body.trim().split(':').collect();
    if parts.len() < 3 {
        spec_bail!(
            "error parsing probe '{raw}': at least the probe type, library, and function signature must be specified"
        );
    }
    if parts.len() > 6 {
        spec_bail!("error parsing probe '{raw}': extraneous ':'-separated parts detected");
    }
    let probe = match parts[0] {
        "p" => ProbeType::Entry,
        "r" => ProbeType::Return,
        "t" => ProbeType::Tracepoint,
        "u" => ProbeType::Usdt,
        other => spec_bail!("error parsing probe '{raw}': probe type must be 'p', 'r', 't', or 'u' but got '{other}'"),
    };
    let (function, signature) = parse_signature_part(raw, parts[2])?;
    // A return probe keeps its signature too: its parameters are read at entry for it (`$entry(size)`).
    let (params, param_texts) = parse_params(raw, signature)?;
    if probe == ProbeType::Tracepoint && !signature.trim().is_empty() {
        spec_bail!("error parsing probe '{raw}': a tracepoint takes no signature: write '{function}()'");
    }
    let mut spec = Spec {
        raw: raw.to_owned(),
        label,
        probe,
        library: parts[1].trim().to_owned(),
        function: function.to_owned(),
        provider: None,
        offset: 0,
        params,
        param_texts,
        exprs: Vec::new(),
        filter: parts.get(5).map(|f| f.trim().to_owned()).unwrap_or_default(),
        default_expr: parts.len() == 3,
        declared_types: parts.len() > 3,
    };
    if probe == ProbeType::Tracepoint && spec.library.is_empty() {
        spec_bail!("error parsing probe '{raw}': a tracepoint needs its category: t:CATEGORY:EVENT()");
    }
    match parts.len() {
        3 => {
            if probe != ProbeType::Return && hist {
                spec_bail!("error parsing probe '{raw}': histograms must have expr");
            }
            if probe == ProbeType::Return {
                spec.exprs.push(("$retval".into(), CType::INT));
            }
        }
        4 => spec_bail!("error parsing probe '{raw}': a type '{}' without an expression", parts[3]),
        _ => {
            if parts[3].trim().is_empty() {
                spec_bail!("error parsing probe '{raw}': no expr types specified");
            }
            if parts[4].trim().is_empty() {
                spec_bail!("error parsing probe '{raw}': no exprs specified");
            }
            let types: Vec<&str> = parts[3].split(',').collect();
            let exprs: Vec<&str> = parts[4].split(',').collect();
            if types.len() != exprs.len() {
                spec_bail!("error parsing probe '{raw}': mismatched # of exprs and types");
            }
            if hist && exprs.len() > 1 {
                spec_bail!("error parsing probe '{raw}': histograms can only have 1 expr");
            }
            for (t, e) in types.iter().zip(&exprs) {
                let ty = ctype::parse(t.trim()).map_err(|e| super::SpecError(format!("in '{raw}': {e}")))?;
                if hist && ty.string {
                    spec_bail!("in '{raw}': a histogram needs an integer expression, not '{}'", t.trim());
                }
                spec.exprs.push((e.trim().to_owned(), ty));
            }
        }
    }
    Ok(spec)
}

/// `function(signature)` into its two parts.
fn parse_signature_part<'a>(raw: &str, part: &'a str) -> SpecResult<(&'a str, &'a str)> {
    let part = part.trim();
    let Some((function, rest)) = part.split_once('(') else {
        spec_bail!("error parsing probe '{raw}': function signature '{part}' has an invalid format");
    };
    let Some(signature) = rest.strip_suffix(')') else {
        spec_bail!("error parsing probe '{raw}': function signature '{part}' has an invalid format");
    };
    if function.trim().is_empty() {
        spec_bail!("error parsing probe '{raw}': function signature '{part}' has an invalid format");
    }
    Ok((function.trim(), signature))
}

/// A signature's parameters (names and C types) and their types as written.
pub type Params = (Vec<(String, CType)>, Vec<String>);

/// `int fd, const char *buf, size_t count` into named, typed parameters, by position, and their types as written.
pub fn parse_params(raw: &str, signature: &str) -> SpecResult<Params> {
    let signature = signature.trim();
    if signature.is_empty() || signature == "void" {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut params = Vec::new();
    let mut texts = Vec::new();
    for param in signature.split(',') {
        let param = param.trim();
        // The name is the last identifier; the type is what precedes it (a '*' may touch the name).
        // The separator may be a multi-byte space (U+00A0, U+3000): split after its last byte, not its first.
        let split = param.char_indices().rev().find(|&(_, c)| c == '*' || c.is_whitespace());
        let Some((at, sep)) = split else {
            spec_bail!("in '{raw}': parameter '{param}' needs a type and a name");
        };
        let end = at + sep.len_utf8();
        let (ty, name) = (param[..end].trim(), param[end..].trim());
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            spec_bail!("in '{raw}': parameter '{param}' needs a type and a name");
        }
        let ctype = ctype::parse(ty).map_err(|e| super::SpecError(format!("in '{raw}': parameter '{name}': {e}")))?;
        params.push((name.to_owned(), ctype));
        texts.push(ty.to_owned());
    }
    if params.len() > 6 {
        spec_bail!("in '{raw}': only the first 6 parameters can be read (registers)");
    }
    Ok((params, texts))
}

/// A parsed trace probe: the spec (its expressions are the format's arguments, typed by their conversions) and
/// the format, if any.
#[derive(Debug, Clone)]
pub struct TraceSpec {
    pub spec: Spec,
    pub format: Option<super::printf::Format>,
}

/// Parses a trace probe: `[{p,r}]:[library]:function[(signature)] [(predicate)] ["format"[, arguments]]`, or
/// `t:category:event [(predicate)] ["format"[, arguments]]`. Arguments are `arg1`..`arg6` (or the signature's
/// names), `retval`, `args->FIELD`, `$pid` (thread), `$tgid`, `$uid`.
pub fn parse_trace(raw: &str) -> SpecResult<TraceSpec> {
    let text = raw.trim();
    let bail =
        |why: String| -> SpecResult<TraceSpec> { Err(super::SpecError(format!("error in probe '{raw}': {why}"))) };
    let end = text.find([' ', '\t', '(']).unwrap_or(text.len());
    let (token, mut rest) = text.split_at(end);
    let mut signature = None;
    if rest.starts_with('(') {
        let Some(close) = rest.find(')') else { return bail("unmatched '(' after the function".into()) };
        if rest[1..close].contains('(') {
            return bail("unmatched '(' after the function".into());
        }
        signature = Some(&rest[1..close]);
        rest = &rest[close + 1..];
    }
    let parts: Vec<&str> = token.split(':').collect();
    let (kind, library, provider, function) = match parts.as_slice() {
        [f] => ("p", "", None, *f),
        [lib, f] => ("p", *lib, None, *f),
        [k, lib, f] => (*k, *lib, None, *f),
        ["u", lib, provider, f] => ("u", *lib, Some(provider.to_string()), *f),
        _ => return bail("too many ':'-separated parts".into()),
    };
    let probe = match kind {
        "" | "p" => ProbeType::Entry,
        "r" => ProbeType::Return,
        "t" => ProbeType::Tracepoint,
        "u" => ProbeType::Usdt,
        other => return bail(format!("probe type must be '', 'p', 't', 'r', or 'u', but got '{other}'")),
    };
    if function.is_empty() {
        return bail("no function or event named".into());
    }
    // `function+OFFSET`: an entry probe that many bytes into the function (BCC's `kfree_skb+0x12`).
    let (function, offset) = match function.split_once('+') {
        Some((name, off)) => {
            let value = match off.strip_prefix("0x").or_else(|| off.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => off.parse::<u64>().ok(),
            };
            let Some(value) = value else { return bail(format!("'{off}' is not an offset (write 0x12 or 18)")) };
            if probe != ProbeType::Entry {
                return bail(format!("an offset ('{function}') is for entry probes (p) only"));
            }
            (name, value)
        }
        None => (function, 0),
    };
    if probe == ProbeType::Tracepoint && (signature.is_some() || library.is_empty()) {
        return bail("a tracepoint is t:CATEGORY:EVENT, without a signature (use args->FIELD)".into());
    }
    if probe == ProbeType::Usdt && (signature.is_some() || library.is_empty()) {
        return bail("a USDT probe is u:LIBRARY:[PROVIDER:]PROBE, without a signature (use arg1, arg2, ...)".into());
    }
    // The predicate, in balanced parentheses.
    let mut rest = rest.trim_start();
    let mut filter = String::new();
    if rest.starts_with('(') {
        let mut depth = 0;
        let mut close = None;
        for (i, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { return bail("unmatched end of predicate".into()) };
        filter = rest[1..close].trim().to_owned();
        rest = rest[close + 1..].trim_start();
    }
    // The action: "format", arguments.
    let mut format = None;
    let mut args: Vec<String> = Vec::new();
    if !rest.is_empty() {
        let Some(body) = rest.strip_prefix('"') else {
            return bail(format!("expected a format string in \"s, got '{rest}'"));
        };
        let Some(close) = body.find('"') else { return bail("unterminated format string".into()) };
        format = Some(
            super::printf::Format::parse(&body[..close]).map_err(|e| super::SpecError(format!("in '{raw}': {e}")))?,
        );
        let tail = body[close + 1..].trim();
        let tail = tail.strip_prefix(',').unwrap_or(tail);
        args = super::expr::split_top_level(tail).iter().map(|a| trace_alias(a)).filter(|a| !a.is_empty()).collect();
    }
    let types = format.as_ref().map(|f| f.types()).unwrap_or_default();
    if types.len() != args.len() {
        return bail(format!("the format has {} conversions but {} arguments follow it", types.len(), args.len()));
    }
    let (params, param_texts) = match signature {
        Some(sig) => parse_params(raw, sig)?,
        // Without a signature, arg1..arg6 are read as signed 64-bit values (what `< 0` of an error return
        // needs), or as strings where the format prints them with %s.
        None if !matches!(probe, ProbeType::Tracepoint | ProbeType::Usdt) => (1..=6)
            .map(|n| {
                let name = format!("arg{n}");
                let string = args.iter().zip(&types).any(|(a, t)| a.trim_end_matches("@user") == name && t.string);
                ((name, if string { CType::STRING } else { CType::S64 }), String::new())
            })
            .unzip(),
        None => (Vec::new(), Vec::new()),
    };
    let spec = Spec {
        raw: raw.to_owned(),
        label: None,
        probe,
        library: library.to_owned(),
        function: function.to_owned(),
        provider,
        offset,
        params,
        param_texts,
        exprs: args.into_iter().zip(types).collect(),
        filter: trace_alias(&filter),
        default_expr: format.is_none(),
        declared_types: false,
    };
    Ok(TraceSpec { spec, format })
}

/// trace's names of the special values, as the resolver knows them (`$pid` is the thread's id in BCC's trace).
fn trace_alias(text: &str) -> String {
    text.replace("$tgid", "$PID").replace("$pid", "$TID").replace("$uid", "$UID")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracepoint_spec() {
        let s = parse_argdist("t:syscalls:sys_enter_write():u64:args->count:args->count > 100#big", true).unwrap();
        assert_eq!(s.probe, ProbeType::Tracepoint);
        assert_eq!(s.library, "syscalls");
        assert_eq!(s.function, "sys_enter_write");
        assert_eq!(s.exprs, vec![("args->count".to_owned(), CType::U64)]);
        assert_eq!(s.filter, "args->count > 100");
        assert_eq!(s.title(), "big");
    }

    #[test]
    fn user_spec() {
        let s = parse_argdist("p:c:write(int fd, const void *buf, size_t count):size_t:count:fd==1", false).unwrap();
        assert!(s.is_user());
        assert_eq!(s.params.len(), 3);
        assert_eq!(s.params[1], ("buf".to_owned(), CType::U64));
        let r = parse_argdist("r:c:read()", true).unwrap();
        assert_eq!(r.exprs[0].0, "$retval");
    }

    #[test]
    fn trace_specs() {
        let t = parse_trace(r#"t:syscalls:sys_enter_openat "%s", args->filename"#).unwrap();
        assert_eq!(t.spec.probe, ProbeType::Tracepoint);
        assert_eq!(t.spec.exprs, vec![("args->filename".to_owned(), CType::STRING)]);
        let r = parse_trace(r#"r::do_sys_openat2 (retval < 0) "ret=%d", retval"#).unwrap();
        assert_eq!(r.spec.filter, "retval < 0");
        assert_eq!(r.spec.function, "do_sys_openat2");
        let p = parse_trace(r#"p:c:malloc "size=%d", arg1"#).unwrap();
        assert!(p.spec.is_user());
        assert_eq!(p.spec.params.len(), 6);
        assert_eq!(p.spec.params[0].1, CType::S64);
        let s = parse_trace(r#"c:open (arg2 == 42) "%s %d", arg1, arg2"#).unwrap();
        assert_eq!(s.spec.params[0].1, CType::STRING);
        assert!(parse_trace(r#"c:open "%s %d", arg1"#).is_err());
        assert_eq!(parse_trace("do_sys_open+0x10").unwrap().spec.offset, 16);
        assert_eq!(parse_trace("c:malloc+4").unwrap().spec.function, "malloc");
        assert!(parse_trace("r::do_sys_open+0x10").is_err());
        assert!(parse_trace("do_sys_open+x").is_err());
        assert!(parse_trace("c:open (arg1 == 1").is_err());
    }

    #[test]
    fn bad_specs() {
        assert!(parse_argdist("x:c:f()", false).is_err());
        assert!(parse_argdist("p:c:f", false).is_err());
        assert!(parse_argdist("p:c:f():u64", false).is_err());
        assert!(parse_argdist("p:c:f():u64,u32:a", false).is_err());
        assert!(parse_argdist("p:c:f()", true).is_err());
        assert!(parse_argdist("p:c:f(struct x s):u64:s", false).is_err());
    }

    /// A multi-byte space (U+00A0, U+3000) before a parameter's name was sliced through its middle (a panic): it
    /// separates like any space; other non-ASCII is refused.
    #[test]
    fn non_ascii_signatures_do_not_panic() {
        for sig in ["int\u{a0}x", "int\u{3000}x", "char *s,\u{a0}int x"] {
            let (params, _) = parse_params("p:c:f", sig).unwrap();
            assert_eq!(params.last().unwrap().0, "x", "{sig}");
        }
        for sig in ["int é", "日本 x", "int \u{202e}x", "int 🦀", "é", "int\u{a0}"] {
            assert!(parse_params("p:c:f", sig).is_err(), "{sig}");
        }
    }
}
