// SPDX-License-Identifier: Apache-2.0 OR MIT
//! What the names of an expression refer to: tracepoint fields (from the tracefs `format` file: offset, size,
//! signedness, and whether it is a string), function parameters by position, the special values, and struct
//! members reached from any of them through pointers (`args->rqtp->tv_nsec`, `file->f_path.dentry->d_iname`),
//! laid out by the kernel's BTF ([`super::members`]).

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
    /// The current task's command name (`$COMM`).
    Comm,
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
    /// A value the entry program saved (by its index among the plan's entry fetches).
    Entry(u32),
    /// A USDT probe's argument by position (0-based), as its note describes it (register, memory or constant).
    UsdtArg(u32),
    /// The current task (`$task`, a `struct task_struct *`).
    Task,
}

/// Pointers one value may be reached through (probe.h's MAX_DEREF; `probe_rodata!` checks they agree).
pub const MAX_DEREF: usize = 4;

/// The pointers followed from a source to the value: each step reads 8 bytes at the value plus its offset
/// (the last step reads the value's own size), in user or kernel memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deref {
    pub offsets: [i32; MAX_DEREF],
    pub len: u8,
    pub user: bool,
    /// The last step only adds its offset: the value is the address of an array member (a `char[]` string).
    pub address: bool,
}

/// One value to read on each event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetch {
    pub source: Source,
    /// Bytes read (1, 2, 4, 8), extended to 64 bits by `signed`.
    pub size: u32,
    pub signed: bool,
    pub string: Option<StrKind>,
    pub deref: Deref,
}

impl Fetch {
    /// A value read directly from `source`, with no pointers to follow.
    pub fn new(source: Source, size: u32, signed: bool, string: Option<StrKind>) -> Fetch {
        Fetch { source, size, signed, string, deref: Deref::default() }
    }
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
        Fetch::new(Source::Record(self.offset), size, self.signed, string)
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

/// What a name resolves to: a value read when the probe fires, or (in a return probe) a value the entry program
/// reads and saves for it (`$entry(count)`, or `count` itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    Now(Fetch),
    AtEntry(Fetch),
}

/// Resolves the names of one spec's expressions.
pub struct Resolver<'a> {
    spec: &'a Spec,
    fields: Vec<Field>,
    /// A kernel function's parameters from BTF, for names the signature does not give, and for members.
    btf_params: Vec<super::kfunc::Param>,
    /// The return value's type: a kernel function's from BTF; a user function's as argdist declares it for an
    /// expression that is exactly `$retval`, else a signed 64-bit value (`< 0` then means what it means for an
    /// error return).
    retval: CType,
    retval_btf: Option<libbpf_rs::btf::TypeId>,
}

impl<'a> Resolver<'a> {
    /// For `spec`, reading a tracepoint's fields from `tracefs` when it is one.
    pub fn new(spec: &'a Spec, tracefs: Option<&Path>) -> SpecResult<Self> {
        let fields = match (spec.probe, tracefs) {
            (ProbeType::Tracepoint, Some(dir)) => tracepoint_fields(dir, &spec.library, &spec.function)?,
            _ => Vec::new(),
        };
        let kernel_fn = spec.probe != ProbeType::Tracepoint && !spec.is_user();
        let btf_params =
            if kernel_fn { super::kfunc::kernel_params(&spec.function).unwrap_or_default() } else { Vec::new() };
        let declared = spec
            .exprs
            .iter()
            .find(|(e, _)| spec.declared_types && matches!(e.trim(), "$retval" | "retval"))
            .map(|(_, t)| *t);
        let (retval, retval_btf) = match kernel_fn.then(|| super::kfunc::kernel_return(&spec.function)).flatten() {
            Some((ct, id)) => (ct, Some(id)),
            None => (declared.unwrap_or(CType::S64), None),
        };
        Ok(Resolver { spec, fields, btf_params, retval, retval_btf })
    }

    /// The tracepoint's fields (empty for a function).
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The probe's kind.
    pub fn probe(&self) -> ProbeType {
        self.spec.probe
    }

    /// Whether the probe is on a user function.
    pub fn is_user(&self) -> bool {
        self.spec.is_user()
    }

    /// Strings of a function's pointers: user memory for a user function, kernel memory for a kernel one.
    fn string_kind(&self) -> StrKind {
        if self.spec.is_user() {
            StrKind::User
        } else {
            StrKind::Kernel
        }
    }

    /// What the name `text` reads (members through pointers included; a `@user` suffix reads a kernel function's
    /// `char *` argument as a user string, as BCC's trace).
    pub fn resolve(&self, text: &str) -> SpecResult<Resolved> {
        let raw = &self.spec.raw;
        let (name, at_user) = match text.strip_suffix("@user") {
            Some(n) => (n, true),
            None => (text, false),
        };
        let ret = self.spec.probe == ProbeType::Return;
        let special = |source, size, signed| Ok(Resolved::Now(Fetch::new(source, size, signed, None)));
        match name {
            "$PID" => return special(Source::Pid, 4, false),
            "$TID" => return special(Source::Tid, 4, false),
            "$UID" => return special(Source::Uid, 4, false),
            "$COMM" => return Ok(Resolved::Now(Fetch::new(Source::Pid, 0, false, Some(StrKind::Comm)))),
            "$latency" if ret => return special(Source::Latency, 8, false),
            "$retval" | "$latency" if !ret => {
                spec_bail!("in '{raw}': {name} is only available in return probes ('r')")
            }
            _ => {}
        }
        // The base name and the member steps after it.
        let (base, steps) = split_path(name, self.spec.probe == ProbeType::Tracepoint);
        if base.starts_with('$') && !matches!(base, "$retval" | "$task") {
            spec_bail!("in '{raw}': '{base}' is not supported (only $retval, $latency, $entry(...), $PID, $TID, $UID, $COMM, $task)");
        }
        if !base.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') || base.is_empty() {
            spec_bail!("in '{raw}': cannot take the name '{text}'");
        }
        let (mut fetch, start, user_mem, entry): (Fetch, Option<super::members::Start<'_>>, bool, bool) = match self
            .spec
            .probe
        {
            _ if base == "$task" => {
                let task = super::kfunc::named_pointer_type("task_struct").map(super::members::Start::Btf);
                (Fetch::new(Source::Task, 8, false, None), task, false, false)
            }
            ProbeType::Tracepoint => {
                let Some(field) = self.fields.iter().find(|f| f.name == base) else {
                    let names: Vec<&str> = self
                        .fields
                        .iter()
                        .filter(|f| !f.name.starts_with("common_"))
                        .map(|f| f.name.as_str())
                        .collect();
                    spec_bail!(
                        "in '{raw}': tracepoint {}:{} has no field '{base}' (fields: {})",
                        self.spec.library,
                        self.spec.function,
                        names.join(", ")
                    );
                };
                let syscall = self.spec.library == "syscalls";
                (field.fetch(syscall), Some(super::members::Start::C(&field.ctype)), syscall, false)
            }
            ProbeType::Usdt => {
                let n = base.strip_prefix("arg").and_then(|n| n.parse::<u32>().ok()).filter(|n| (1..=12).contains(n));
                let Some(n) = n else {
                    spec_bail!("in '{raw}': a USDT probe's values are arg1, arg2, ... (its arguments), not '{base}'");
                };
                (Fetch::new(Source::UsdtArg(n - 1), 8, true, None), None, true, false)
            }
            _ if ret && matches!(base, "$retval" | "retval") => {
                let r = self.retval;
                let string = r.string.then(|| self.string_kind());
                let start = self.retval_btf.map(super::members::Start::Btf);
                (Fetch::new(Source::Retval, r.size, r.signed, string), start, self.spec.is_user(), false)
            }
            _ => {
                let (pos, ct, start) = self.param(base)?;
                let string = ct.string.then(|| if at_user { StrKind::User } else { self.string_kind() });
                let fetch = Fetch::new(Source::Arg(pos as u32), ct.size, ct.signed, string);
                (fetch, start, self.spec.is_user(), ret)
            }
        };
        if at_user && fetch.string.is_none() {
            // `arg2@user` where the signature gave no type: a user string.
            fetch.string = Some(StrKind::User);
        }
        if !steps.is_empty() {
            let Some(start) = start else {
                spec_bail!("in '{raw}': '{text}': the type of '{base}' is not known, so it has no members (give it in the signature)");
            };
            let walked =
                super::members::walk(start, &steps, text).map_err(|e| super::SpecError(format!("in '{raw}': {e}")))?;
            if walked.offsets.len() > MAX_DEREF {
                spec_bail!("in '{raw}': '{text}' goes through more than {MAX_DEREF} pointers");
            }
            let mut deref = Deref { user: user_mem, address: walked.address, ..Deref::default() };
            for (slot, off) in deref.offsets.iter_mut().zip(&walked.offsets) {
                *slot = *off;
            }
            deref.len = walked.offsets.len() as u8;
            let ct = walked.ctype;
            let string = ct.string.then_some(if user_mem { StrKind::User } else { StrKind::Kernel });
            fetch = Fetch {
                source: fetch.source,
                size: if walked.address { 8 } else { ct.size },
                signed: ct.signed,
                string,
                deref,
            };
        }
        Ok(if entry { Resolved::AtEntry(fetch) } else { Resolved::Now(fetch) })
    }

    /// A function parameter by name: its position, C type and (for members) where its type is described.
    fn param(&self, name: &str) -> SpecResult<(usize, CType, Option<super::members::Start<'_>>)> {
        let raw = &self.spec.raw;
        let found = match self.spec.params.iter().position(|(n, _)| n == name) {
            Some(pos) => {
                let text = self.spec.param_texts.get(pos).map(String::as_str).filter(|t| !t.is_empty());
                let start = match self.btf_params.get(pos) {
                    Some(p) if text.is_none_or(|t| !t.contains("struct")) => Some(super::members::Start::Btf(p.btf)),
                    _ => text.map(super::members::Start::C),
                };
                Some((pos, self.spec.params[pos].1, start))
            }
            None => self.btf_params.iter().position(|p| p.name == name).map(|pos| {
                (pos, self.btf_params[pos].ctype, Some(super::members::Start::Btf(self.btf_params[pos].btf)))
            }),
        };
        let Some(found) = found else {
            if !self.btf_params.is_empty() {
                let names: Vec<&str> = self.btf_params.iter().map(|p| p.name.as_str()).collect();
                spec_bail!(
                    "in '{raw}': '{name}' is not a parameter of {} (its parameters: {})",
                    self.spec.function,
                    names.join(", ")
                );
            }
            if self.spec.probe == ProbeType::Return {
                spec_bail!(
                    "in '{raw}': '{name}' is not a parameter of the signature (a return probe reads $retval, \
                     $latency, and the parameters its signature names)"
                );
            }
            spec_bail!("in '{raw}': '{name}' is not a parameter of the signature");
        };
        if found.0 >= 6 {
            spec_bail!("in '{raw}': '{name}' is parameter {}: only the first 6 can be read", found.0 + 1);
        }
        Ok(found)
    }
}

/// `args->rqtp->tv_nsec` into `rqtp` and `[(true, tv_nsec)]` (a tracepoint's `args->` is its record, not a
/// pointer); `file->f_path.dentry` into `file` and `[(true, f_path), (false, dentry)]`.
fn split_path(name: &str, tracepoint: bool) -> (&str, Vec<(bool, String)>) {
    let name = if tracepoint { name.strip_prefix("args->").unwrap_or(name) } else { name };
    let end = name.find(['-', '.']).unwrap_or(name.len());
    let (base, mut rest) = name.split_at(end);
    let mut steps = Vec::new();
    while !rest.is_empty() {
        let (arrow, after) = if let Some(r) = rest.strip_prefix("->") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix('.') {
            (false, r)
        } else {
            // Not a member access: keep it in the base, which is then refused as a name.
            return (name, Vec::new());
        };
        let end = after.find(['-', '.']).unwrap_or(after.len());
        steps.push((arrow, after[..end].to_owned()));
        rest = &after[end..];
    }
    (base, steps)
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
