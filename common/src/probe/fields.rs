// SPDX-License-Identifier: Apache-2.0 OR MIT
//! What the names of an expression refer to: tracepoint fields (from the tracefs `format` file: offset, size,
//! signedness, and whether it is a string), function parameters by position, and the special values.

use std::path::Path;

use super::ctype::CType;
use super::spec::{ProbeType, Spec};
use super::SpecResult;

/// How a string is reached from a fetched value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrKind {
    /// The value is a user-space pointer.
    User,
    /// The value is a kernel pointer.
    Kernel,
    /// A `__data_loc` field: the string lies in the record, at the value's low 16 bits.
    DataLoc,
    /// A `char name[N]` field: the string is the field itself.
    Inline,
}

/// Where a fetched value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Tracepoint record at this offset.
    Record(u32),
    /// Function argument by position (0-based).
    Arg(u32),
    Retval,
    Latency,
    Pid,
    Tid,
    Uid,
}

/// One value to read on each event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetch {
    pub source: Source,
    /// Bytes read (1, 2, 4, 8), extended to 64 bits by `signed`.
    pub size: u32,
    pub signed: bool,
    pub string: Option<StrKind>,
}

/// A field of a tracepoint's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ctype: String,
    pub offset: u32,
    pub size: u32,
    pub signed: bool,
}

impl Field {
    fn fetch(&self, user_strings: bool) -> Fetch {
        let t = self.ctype.replace(' ', "");
        let string = if t.starts_with("__data_loc") && t.contains("char") {
            Some(StrKind::DataLoc)
        } else if t.contains("char*") && !t.contains("char**") {
            Some(if user_strings { StrKind::User } else { StrKind::Kernel })
        } else if t.contains("char") && self.ctype.contains('[') {
            Some(StrKind::Inline)
        } else {
            None
        };
        let size = if string == Some(StrKind::Inline) { 0 } else { self.size.min(8) };
        Fetch { source: Source::Record(self.offset), size, signed: self.signed, string }
    }
}

/// The fields of tracepoint `category:event` from tracefs (common_* fields included).
pub fn tracepoint_fields(tracefs: &Path, category: &str, event: &str) -> SpecResult<Vec<Field>> {
    let bad = |s: &str| s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if bad(category) || bad(event) {
        spec_bail!("unknown tracepoint {category}:{event}");
    }
    let path = tracefs.join("events").join(category).join(event).join("format");
    let Ok(text) = std::fs::read_to_string(&path) else {
        spec_bail!("unknown tracepoint {category}:{event} (no {})", path.display());
    };
    Ok(parse_format(&text))
}

/// Parses the `field:TYPE NAME; offset:N; size:N; signed:N;` lines of a tracefs format file.
pub fn parse_format(text: &str) -> Vec<Field> {
    let mut fields = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("field:") else { continue };
        let parts: Vec<&str> = rest.split(';').map(str::trim).collect();
        let Some(decl) = parts.first() else { continue };
        let num = |key: &str| parts.iter().find_map(|p| p.strip_prefix(key)).and_then(|v| v.trim().parse::<u32>().ok());
        let (Some(offset), Some(size)) = (num("offset:"), num("size:")) else { continue };
        let signed = num("signed:") == Some(1);
        // The name is the last identifier outside brackets (`char comm[16]`, `__data_loc char[] name`).
        let mut plain = String::new();
        let mut depth = 0;
        for c in decl.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ if depth == 0 => plain.push(c),
                _ => {}
            }
        }
        let plain = plain.trim_end();
        let at = plain.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
        let name = plain[at..].to_owned();
        let ctype = match decl.rfind(name.as_str()) {
            Some(i) => format!("{}{}", &decl[..i], &decl[i + name.len()..]).trim().to_owned(),
            None => decl.to_string(),
        };
        fields.push(Field { name, ctype, offset, size, signed });
    }
    fields
}

/// Resolves the names of one spec's expressions.
pub struct Resolver<'a> {
    spec: &'a Spec,
    fields: Vec<Field>,
    /// The type `$retval` is read as (the type of an expression that is exactly `$retval`, else int).
    retval: CType,
    /// A kernel function's parameters from BTF, for names the signature does not give.
    btf_params: Vec<(String, CType)>,
}

impl<'a> Resolver<'a> {
    /// For `spec`, reading a tracepoint's fields from `tracefs` when it is one.
    pub fn new(spec: &'a Spec, tracefs: Option<&Path>) -> SpecResult<Self> {
        let fields = match (spec.probe, tracefs) {
            (ProbeType::Tracepoint, Some(dir)) => tracepoint_fields(dir, &spec.library, &spec.function)?,
            _ => Vec::new(),
        };
        let retval = spec
            .exprs
            .iter()
            .find(|(e, _)| matches!(strip_cast(e), "$retval" | "retval"))
            .map(|(_, t)| *t)
            .unwrap_or(CType::INT);
        let kernel_entry = spec.probe == ProbeType::Entry && !spec.is_user();
        let btf_params =
            if kernel_entry { super::kfunc::kernel_params(&spec.function).unwrap_or_default() } else { Vec::new() };
        Ok(Resolver { spec, fields, retval, btf_params })
    }

    /// The tracepoint's fields (empty for a function).
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// What the expression `text` reads: one name, with an optional leading cast such as `(char*)`.
    pub fn resolve(&self, text: &str) -> SpecResult<Fetch> {
        let raw = &self.spec.raw;
        let name = strip_cast(text);
        let special = |source, size, signed| Ok(Fetch { source, size, signed, string: None });
        let ret = self.spec.probe == ProbeType::Return;
        match name {
            "$PID" => return special(Source::Pid, 4, false),
            "$TID" => return special(Source::Tid, 4, false),
            "$UID" => return special(Source::Uid, 4, false),
            "$retval" | "retval" if ret => {
                let r = self.retval;
                let string = r.string.then_some(if self.spec.is_user() { StrKind::User } else { StrKind::Kernel });
                return Ok(Fetch { source: Source::Retval, size: r.size, signed: r.signed, string });
            }
            "$latency" if ret => return special(Source::Latency, 8, false),
            "$retval" | "$latency" => {
                spec_bail!("in '{raw}': {name} is only available in return probes ('r')")
            }
            _ => {}
        }
        if name.starts_with('$') {
            spec_bail!("in '{raw}': '{name}' is not supported (only $retval, $latency, $PID, $TID, $UID)");
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '>' || c == '.') {
            spec_bail!(
                "in '{raw}': cannot take the expression '{text}': only a field or parameter name is supported, \
                 no arithmetic or calls"
            );
        }
        match self.spec.probe {
            ProbeType::Tracepoint => {
                let Some(field_name) = name.strip_prefix("args->").or(Some(name)).filter(|n| !n.contains("->")) else {
                    spec_bail!("in '{raw}': cannot take '{text}': only args->FIELD of the tracepoint");
                };
                let Some(field) = self.fields.iter().find(|f| f.name == field_name) else {
                    let names: Vec<&str> = self
                        .fields
                        .iter()
                        .filter(|f| !f.name.starts_with("common_"))
                        .map(|f| f.name.as_str())
                        .collect();
                    spec_bail!(
                        "in '{raw}': tracepoint {}:{} has no field '{field_name}' (fields: {})",
                        self.spec.library,
                        self.spec.function,
                        names.join(", ")
                    );
                };
                Ok(field.fetch(self.spec.library == "syscalls"))
            }
            ProbeType::Entry => {
                let found = match self.spec.params.iter().position(|(n, _)| n == name) {
                    Some(pos) => Some((pos, self.spec.params[pos].1)),
                    None => self.btf_params.iter().position(|(n, _)| n == name).map(|p| (p, self.btf_params[p].1)),
                };
                let Some((pos, ct)) = found else {
                    if name.contains("->") || name.contains('.') {
                        spec_bail!("in '{raw}': cannot take '{text}': struct members are not supported");
                    }
                    if !self.btf_params.is_empty() {
                        let names: Vec<&str> = self.btf_params.iter().map(|(n, _)| n.as_str()).collect();
                        spec_bail!(
                            "in '{raw}': '{name}' is not a parameter of {} (its parameters: {})",
                            self.spec.function,
                            names.join(", ")
                        );
                    }
                    spec_bail!("in '{raw}': '{name}' is not a parameter of the signature");
                };
                if pos >= 6 {
                    spec_bail!("in '{raw}': '{name}' is parameter {}: only the first 6 can be read", pos + 1);
                }
                let string = ct.string.then_some(if self.spec.is_user() { StrKind::User } else { StrKind::Kernel });
                Ok(Fetch { source: Source::Arg(pos as u32), size: ct.size, signed: ct.signed, string })
            }
            ProbeType::Return => {
                spec_bail!("in '{raw}': cannot take '{text}' in a return probe: only $retval, $latency ($entry is not supported)")
            }
        }
    }
}

/// `(char*)$retval` -> `$retval`.
fn strip_cast(text: &str) -> &str {
    let t = text.trim();
    if t.starts_with('(') {
        if let Some(end) = t.find(')') {
            return t[end + 1..].trim();
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_lines() {
        let f = parse_format(
            "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
             \tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n\
             \tfield:__data_loc char[] name;\toffset:8;\tsize:4;\tsigned:0;\n\
             \tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;\n\
             \tfield:int ret;\toffset:40;\tsize:8;\tsigned:1;\n",
        );
        assert_eq!(f[1].name, "filename");
        assert_eq!(f[1].fetch(true).string, Some(StrKind::User));
        assert_eq!(f[2].name, "name");
        assert_eq!(f[2].fetch(false).string, Some(StrKind::DataLoc));
        assert_eq!(f[3].name, "comm");
        assert_eq!(f[3].fetch(false).string, Some(StrKind::Inline));
        assert!(f[4].signed);
        assert_eq!(f[4].offset, 40);
    }
}
