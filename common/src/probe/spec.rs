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
    /// The function, or the tracepoint's event.
    pub function: String,
    /// The signature's parameters in order, with their C types.
    pub params: Vec<(String, CType)>,
    /// The expressions with their types; empty when the spec has none (BCC's default: count calls, or `$retval`).
    pub exprs: Vec<(String, CType)>,
    /// The filter text, empty for none.
    pub filter: String,
    /// The spec names no expression: BCC's default (count calls, or `$retval` of a return probe).
    pub default_expr: bool,
}

impl Spec {
    /// A user function (a library or program is named).
    pub fn is_user(&self) -> bool {
        self.probe != ProbeType::Tracepoint && !self.library.is_empty()
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
        "u" => spec_bail!("error parsing probe '{raw}': USDT probes ('u') are not supported by this prebuilt argdist"),
        other => spec_bail!("error parsing probe '{raw}': probe type must be 'p', 'r', 't', or 'u' but got '{other}'"),
    };
    let (function, signature) = parse_signature_part(raw, parts[2])?;
    let params = if probe == ProbeType::Entry { parse_params(raw, signature)? } else { Vec::new() };
    if probe == ProbeType::Tracepoint && !signature.trim().is_empty() {
        spec_bail!("error parsing probe '{raw}': a tracepoint takes no signature: write '{function}()'");
    }
    let mut spec = Spec {
        raw: raw.to_owned(),
        label,
        probe,
        library: parts[1].trim().to_owned(),
        function: function.to_owned(),
        params,
        exprs: Vec::new(),
        filter: parts.get(5).map(|f| f.trim().to_owned()).unwrap_or_default(),
        default_expr: parts.len() == 3,
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

/// `int fd, const char *buf, size_t count` into named, typed parameters, by position.
pub fn parse_params(raw: &str, signature: &str) -> SpecResult<Vec<(String, CType)>> {
    let signature = signature.trim();
    if signature.is_empty() || signature == "void" {
        return Ok(Vec::new());
    }
    let mut params = Vec::new();
    for param in signature.split(',') {
        let param = param.trim();
        // The name is the last identifier; the type is what precedes it (a '*' may touch the name).
        let split = param.rfind(|c: char| c == '*' || c.is_whitespace());
        let Some(at) = split else {
            spec_bail!("in '{raw}': parameter '{param}' needs a type and a name");
        };
        let (ty, name) = (param[..=at].trim(), param[at + 1..].trim());
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            spec_bail!("in '{raw}': parameter '{param}' needs a type and a name");
        }
        let ctype = ctype::parse(ty).map_err(|e| super::SpecError(format!("in '{raw}': parameter '{name}': {e}")))?;
        params.push((name.to_owned(), ctype));
    }
    if params.len() > 6 {
        spec_bail!("in '{raw}': only the first 6 parameters can be read (registers)");
    }
    Ok(params)
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
    fn bad_specs() {
        assert!(parse_argdist("x:c:f()", false).is_err());
        assert!(parse_argdist("p:c:f", false).is_err());
        assert!(parse_argdist("p:c:f():u64", false).is_err());
        assert!(parse_argdist("p:c:f():u64,u32:a", false).is_err());
        assert!(parse_argdist("p:c:f()", true).is_err());
        assert!(parse_argdist("p:c:f(struct x s):u64:s", false).is_err());
    }
}
