// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The JSON a tool writes, as its documentation declares it: the `## JSON` part of `tools/<tool>/doc.md`, whose
//! format, and the fields every tool shares (`time`, `ts`, `pid`, `comm`, ...), are written once in
//! `docs/json.md` ([`VOCABULARY`]). A tool names a shared field without describing it again, so the same key
//! means the same in every tool.
//!
//! From one [`Schema`]: the man page lists the fields ([`Schema::man_blocks`], through `man_completions`), and
//! the tests check every line a tool prints in them ([`Schema::check`], through `corebpf_tests::json_lines`).
//! `scripts/gen-docs.py` reads the same format for the web page and `docs/json/<tool>.schema.json`; a toolset
//! test compares those files with [`Schema::json_schema`].

use serde_json::{json, Map, Value};

/// docs/json.md: the shared fields, the lost-events line and the format of a tool's `## JSON` part.
pub const VOCABULARY: &str = include_str!("../../../docs/json.md");

/// The heading of the part of a doc.md (and of the man page section) that declares the tool's JSON.
pub const HEADING: &str = "JSON";

/// A field's type, as written after its name (`array of string`, `integer or null`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    String,
    Integer,
    Number,
    Boolean,
    Object,
    Array(Box<Type>),
    /// Any of these (`integer or string`).
    Either(Vec<Type>),
    /// The type, or null.
    Nullable(Box<Type>),
}

impl Type {
    /// `array of` takes all that follows it (`array of integer or string` holds either); `or null` allows null.
    fn parse(text: &str) -> Result<Type, String> {
        if let Some(inner) = text.strip_prefix("array of ") {
            return Ok(Type::Array(Box::new(Type::parse(inner)?)));
        }
        if let Some(inner) = text.strip_suffix(" or null") {
            return Ok(Type::Nullable(Box::new(Type::parse(inner)?)));
        }
        if text.contains(" or ") {
            return Ok(Type::Either(text.split(" or ").map(Type::parse).collect::<Result<_, _>>()?));
        }
        Ok(match text {
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            "object" => Type::Object,
            other => {
                return Err(format!(
                    "unknown type {other:?} (string, integer, number, boolean, object, array of TYPE, TYPE or null)"
                ))
            }
        })
    }

    /// The type as the documentation writes it.
    pub fn text(&self) -> String {
        match self {
            Type::String => "string".into(),
            Type::Integer => "integer".into(),
            Type::Number => "number".into(),
            Type::Boolean => "boolean".into(),
            Type::Object => "object".into(),
            Type::Array(t) => format!("array of {}", t.text()),
            Type::Either(ts) => ts.iter().map(Type::text).collect::<Vec<_>>().join(" or "),
            Type::Nullable(t) => format!("{} or null", t.text()),
        }
    }

    /// Whether `value` is of this type (an integer is a number too).
    fn admits(&self, value: &Value) -> bool {
        match (self, value) {
            (Type::Nullable(_), Value::Null) => true,
            (Type::Nullable(t), v) => t.admits(v),
            (Type::String, Value::String(_)) | (Type::Boolean, Value::Bool(_)) | (Type::Object, Value::Object(_)) => {
                true
            }
            (Type::Integer, Value::Number(n)) => n.is_u64() || n.is_i64(),
            (Type::Number, Value::Number(_)) => true,
            (Type::Array(t), Value::Array(items)) => items.iter().all(|item| t.admits(item)),
            (Type::Either(ts), v) => ts.iter().any(|t| t.admits(v)),
            _ => false,
        }
    }

    fn json_schema(&self) -> Value {
        match self {
            Type::Nullable(t) => json!({ "anyOf": [t.json_schema(), { "type": "null" }] }),
            Type::Array(t) => json!({ "type": "array", "items": t.json_schema() }),
            Type::Either(ts) => json!({ "anyOf": ts.iter().map(Type::json_schema).collect::<Vec<_>>() }),
            t => json!({ "type": t.text() }),
        }
    }

    /// The type of an array's items, looking through `or null`.
    fn items(&self) -> Option<&Type> {
        match self {
            Type::Array(t) => Some(t),
            Type::Nullable(t) => t.items(),
            _ => None,
        }
    }
}

/// One field of a record kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// `name`, `name.sub`, `name[].sub` or `name.*` (docs/json.md).
    pub path: String,
    pub ty: Type,
    /// Some lines of the kind leave it out.
    pub optional: bool,
    /// One of BCC's own keys with BCC's meaning, where a shared field has the same name.
    pub bcc: bool,
    /// A string in RFC 3339 (JSON Schema's format `date-time`).
    pub date_time: bool,
    /// Taken from the shared fields of docs/json.md.
    pub shared: bool,
    /// What it means, one line of text per line of the source (unindented).
    pub description: Vec<String>,
}

impl Field {
    /// The object the field belongs to (`""` for the line itself, `buckets[]` for `buckets[].low`) and its key.
    fn parent_and_key(&self) -> (&str, &str) {
        self.path.rsplit_once('.').unwrap_or(("", &self.path))
    }
}

/// One kind of line a tool writes: when it is written, and its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    pub intro: Vec<String>,
    pub fields: Vec<Field>,
}

/// Every kind of line a tool writes with `--json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    pub kinds: Vec<Kind>,
    /// docs/json.md's lost-events line, read once with the tool's kinds rather than at every line checked.
    lost: Kind,
}

/// The `## ` part of a Markdown text with this title, as lines; fences are skipped over.
fn part<'a>(text: &'a str, title: &str) -> Option<Vec<&'a str>> {
    let mut in_fence = false;
    let mut found: Option<Vec<&str>> = None;
    for line in text.lines() {
        let line = line.trim_end();
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence && line.starts_with("## ") {
            if found.is_some() {
                break;
            }
            if line[3..].trim() == title {
                found = Some(Vec::new());
            }
            continue;
        }
        if let Some(lines) = found.as_mut() {
            lines.push(line);
        }
    }
    found
}

/// Whether a line names a field: a key path that starts with a small letter (an intro starts with a capital),
/// alone or followed by `: type`.
fn field_line(line: &str) -> Option<(&str, Option<&str>)> {
    let (name, rest) = match line.split_once(": ") {
        Some((name, rest)) => (name, Some(rest)),
        None => (line, None),
    };
    let key_chars = |c: char| c.is_ascii_alphanumeric() || "_-.[]*".contains(c);
    (name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') && name.chars().all(key_chars))
        .then_some((name, rest))
}

/// Parses the record kinds of a `## JSON` part (or of a part of docs/json.md); `shared` resolves a field named
/// alone (none in docs/json.md itself).
fn parse_kinds(lines: &[&str], shared: &[Field]) -> Result<Vec<Kind>, String> {
    let mut kinds: Vec<Kind> = Vec::new();
    // Whether the lines so far belong to an intro still being read (a paragraph of several lines).
    let mut in_intro = false;
    for &line in lines {
        if line.trim().is_empty() {
            in_intro = false;
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            let field = kinds.last_mut().and_then(|k| k.fields.last_mut()).filter(|f| !f.shared && !in_intro);
            match field {
                Some(field) => field.description.push(line.trim().to_owned()),
                None => return Err(format!("an indented line that describes no field of its own: {line:?}")),
            }
            continue;
        }
        if in_intro {
            // An intro's paragraph goes on to its blank line.
            if let Some(kind) = kinds.last_mut() {
                kind.intro.push(line.to_owned());
            }
            continue;
        }
        match field_line(line) {
            Some((name, rest)) => {
                let kind = kinds.last_mut().ok_or_else(|| format!("a field before any intro: {line:?}"))?;
                kind.fields.extend(field(name, rest, shared)?);
            }
            None if line.starts_with(|c: char| c.is_uppercase()) => {
                kinds.push(Kind { intro: vec![line.to_owned()], fields: Vec::new() });
                in_intro = true;
            }
            None => return Err(format!("neither a field (name: type) nor an intro (a capital first): {line:?}")),
        }
    }
    for kind in &kinds {
        if kind.fields.is_empty() {
            return Err(format!("a kind of line with no fields: {:?}", kind.intro.join(" ")));
        }
        for (i, f) in kind.fields.iter().enumerate() {
            if kind.fields[..i].iter().any(|g| g.path == f.path) {
                return Err(format!("{} is declared twice in one kind of line", f.path));
            }
            let (parent, _) = f.parent_and_key();
            let parent = parent.strip_suffix("[]").unwrap_or(parent);
            if !parent.is_empty() && !kind.fields.iter().any(|g| g.path == parent) {
                return Err(format!("{} belongs to {parent}, which is not declared", f.path));
            }
        }
    }
    Ok(kinds)
}

/// The fields of one line: `name` alone (a shared field, with the shared fields inside it: `buckets` brings
/// `buckets[].low` and the rest), `name: optional` (a shared field some lines leave out) or
/// `name: type[, marks]`.
fn field(name: &str, rest: Option<&str>, shared: &[Field]) -> Result<Vec<Field>, String> {
    // A shared field may sit inside an object of the tool's (`waker.pid`, `cpus[].cpu`): its key is what counts.
    let (parent, key) = name.rsplit_once('.').unwrap_or(("", name));
    let common = shared.iter().find(|f| f.path == key);
    if rest.is_none() || rest == Some("optional") {
        if common.is_none() {
            return Err(format!("{name} is not a shared field (docs/json.md): give its type"));
        }
        let inside =
            |f: &&Field| f.path == key || [".", "[]."].iter().any(|s| f.path.starts_with(&format!("{key}{s}")));
        let mut fields: Vec<Field> = shared.iter().filter(inside).cloned().collect();
        for f in &mut fields {
            f.path = join(parent, &f.path);
        }
        fields[0].optional |= rest.is_some();
        return Ok(fields);
    }
    let rest = rest.unwrap_or_default();
    let mut words = rest.split(", ");
    let ty = Type::parse(words.next().unwrap_or_default())?;
    let (mut optional, mut bcc, mut date_time) = (false, false, false);
    for word in words {
        match word {
            "optional" => optional = true,
            "bcc" => bcc = true,
            "date-time" if ty == Type::String => date_time = true,
            other => return Err(format!("{name}: unknown mark {other:?} after the type (optional, bcc, date-time)")),
        }
    }
    if common.is_some() && !bcc {
        return Err(format!(
            "{name} is a shared field (docs/json.md): name it alone, or mark it `, bcc` where it keeps BCC's meaning"
        ));
    }
    Ok(vec![Field { path: name.to_owned(), ty, optional, bcc, date_time, shared: false, description: Vec::new() }])
}

/// The shared fields of docs/json.md.
fn shared_fields() -> Vec<Field> {
    let lines = part(VOCABULARY, "Shared fields").expect("docs/json.md has a `## Shared fields` part");
    let fields = parse_kinds(&[&["Shared."][..], &lines].concat(), &[]).expect("docs/json.md's shared fields parse");
    let mut fields = fields.into_iter().next().map(|k| k.fields).unwrap_or_default();
    for f in &mut fields {
        f.shared = true;
    }
    fields
}

/// The lost-events line of docs/json.md, which any tool may write.
fn lost_kind() -> Kind {
    let lines = part(VOCABULARY, "The lost-events line").expect("docs/json.md has a `## The lost-events line` part");
    let mut kinds = parse_kinds(&lines, &[]).expect("docs/json.md's lost-events line parses");
    kinds.remove(0)
}

impl Schema {
    /// The schema a tool's doc.md declares in its `## JSON` part; `Ok(None)` if it has none.
    pub fn from_doc(doc: &str) -> Result<Option<Schema>, String> {
        let Some(lines) = part(doc, HEADING) else { return Ok(None) };
        let kinds = parse_kinds(&lines, &shared_fields())?;
        if kinds.is_empty() {
            return Err("the `## JSON` part declares no kind of line".into());
        }
        Ok(Some(Schema { kinds, lost: lost_kind() }))
    }

    /// Checks one line of a tool's output: it must be of one of the tool's kinds (every key declared, of its
    /// type, and every field that is not optional present), or the lost-events line.
    pub fn check(&self, line: &Value) -> Result<(), String> {
        let lost = &self.lost;
        let mut why = Vec::new();
        for (i, kind) in self.kinds.iter().chain([lost]).enumerate() {
            let mut problems = Vec::new();
            match line.as_object() {
                Some(object) => check_object(kind, "", object, &mut problems),
                None => problems.push("not an object".to_owned()),
            }
            if problems.is_empty() {
                return Ok(());
            }
            let name = if i < self.kinds.len() { format!("kind {}", i + 1) } else { "the lost-events line".into() };
            why.push((problems.len(), format!("as {name}: {}", problems.join("; "))));
        }
        why.sort_by_key(|(n, _)| *n);
        Err(why.into_iter().map(|(_, w)| w).next().unwrap_or_default())
    }

    /// The man page's JSON section, as blocks of lines in the layout of the other sections: each kind's intro,
    /// then a tagged paragraph per field (`name (type, optional)` and its description; a shared field's from
    /// docs/json.md).
    pub fn man_blocks(&self) -> Vec<Vec<String>> {
        let mut blocks = Vec::new();
        for kind in &self.kinds {
            blocks.push(kind.intro.clone());
            for f in &kind.fields {
                let mut marks = vec![f.ty.text()];
                if f.optional {
                    marks.push("optional".into());
                }
                let mut block = vec![format!("{} ({})", f.path, marks.join(", "))];
                block.extend(f.description.iter().map(|l| format!("    {l}")));
                blocks.push(block);
            }
        }
        blocks
    }

    /// The JSON Schema (draft 2020-12) of the tool's lines: one of its kinds, or the lost-events line.
    /// `scripts/gen-docs.py` writes the same document to `docs/json/<tool>.schema.json`.
    pub fn json_schema(&self, tool: &str) -> Value {
        let lost = &self.lost;
        let kinds: Vec<Value> = self.kinds.iter().chain([lost]).map(|k| object_schema(k, "")).collect();
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": format!("{tool} --json"),
            "description": format!("One line of {tool}'s JSON output (docs/json.md)."),
            "anyOf": kinds,
        })
    }
}

/// The fields of `kind` that are keys of the object at `parent` (`""`, `buckets[]`, `counts`).
fn children<'a>(kind: &'a Kind, parent: &'a str) -> impl Iterator<Item = &'a Field> + 'a {
    kind.fields.iter().filter(move |f| f.parent_and_key().0 == parent)
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

fn check_object(kind: &Kind, parent: &str, object: &Map<String, Value>, problems: &mut Vec<String>) {
    for (key, value) in object {
        let path = join(parent, key);
        let Some(field) = children(kind, parent).find(|f| f.path == path || f.parent_and_key().1 == "*") else {
            problems.push(format!("{path} is not documented"));
            continue;
        };
        if !field.ty.admits(value) {
            problems.push(format!("{path} is {value}, not {}", field.ty.text()));
            continue;
        }
        if field.date_time && !value.as_str().is_some_and(is_rfc3339) {
            problems.push(format!("{path} is {value}, not a time in RFC 3339"));
            continue;
        }
        check_inside(kind, &field.path, value, problems);
    }
    for field in children(kind, parent) {
        let key = field.parent_and_key().1;
        if !field.optional && key != "*" && !object.contains_key(key) {
            problems.push(format!("{} is missing", field.path));
        }
    }
}

/// Checks the declared fields inside an object or an array of objects at `path`.
fn check_inside(kind: &Kind, path: &str, value: &Value, problems: &mut Vec<String>) {
    match value {
        Value::Object(inner) if children(kind, path).next().is_some() => check_object(kind, path, inner, problems),
        Value::Array(items) => {
            let element = format!("{path}[]");
            for item in items {
                match item {
                    Value::Object(inner) if children(kind, &element).next().is_some() => {
                        check_object(kind, &element, inner, problems)
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Whether a text is a date and time in RFC 3339 (`2026-12-03T15:04:05.123+01:00`, the fraction optional).
fn is_rfc3339(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let head = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !head {
        return false;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    let z = rest.as_bytes();
    rest == "Z"
        || (z.len() == 6
            && matches!(z[0], b'+' | b'-')
            && z[1..3].iter().all(u8::is_ascii_digit)
            && z[3] == b':'
            && z[4..6].iter().all(u8::is_ascii_digit))
}

/// The JSON Schema of the object at `parent` of a kind.
fn object_schema(kind: &Kind, parent: &str) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut pattern = None;
    for f in children(kind, parent) {
        let key = f.parent_and_key().1;
        let mut schema = field_schema(kind, f);
        if f.date_time {
            schema["format"] = Value::String("date-time".into());
        }
        if !f.description.is_empty() {
            schema["description"] = Value::String(f.description.join(" "));
        }
        if key == "*" {
            pattern = Some(schema);
            continue;
        }
        if !f.optional {
            required.push(Value::String(key.to_owned()));
        }
        properties.insert(key.to_owned(), schema);
    }
    let mut schema = json!({ "type": "object", "properties": properties, "required": required });
    schema["additionalProperties"] = pattern.unwrap_or(Value::Bool(false));
    if parent.is_empty() && !kind.intro.is_empty() {
        schema["description"] = Value::String(kind.intro.join(" "));
    }
    schema
}

/// A field's JSON Schema, with the declared fields of the object (or the array's objects) it holds.
fn field_schema(kind: &Kind, f: &Field) -> Value {
    let element = format!("{}[]", f.path);
    if children(kind, &f.path).next().is_some() {
        return wrap_nullable(&f.ty, object_schema(kind, &f.path));
    }
    if children(kind, &element).next().is_some() {
        let items = object_schema(kind, &element);
        let array = json!({ "type": "array", "items": items });
        return wrap_nullable(&f.ty, array);
    }
    debug_assert!(f.ty.items().is_some() || !matches!(f.ty, Type::Array(_)));
    f.ty.json_schema()
}

fn wrap_nullable(ty: &Type, schema: Value) -> Value {
    match ty {
        Type::Nullable(_) => json!({ "anyOf": [schema, { "type": "null" }] }),
        _ => schema,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# t\n\n## JSON\n\nOne object per event:\n\ntime\npid\nret: integer\n    What it returned.\n\
                       buckets\ncalls: array of object\n    The calls.\ncalls[].n: integer\n    How many.\n\
                       name: string or null, optional\n    A name.\n\n## SEE ALSO\n";

    fn schema() -> Schema {
        Schema::from_doc(DOC).unwrap().unwrap()
    }

    #[test]
    fn shared_fields_come_from_the_vocabulary() {
        let s = schema();
        let time = &s.kinds[0].fields[0];
        assert!(time.shared && time.ty == Type::String && !time.description.is_empty(), "{time:?}");
        assert_eq!(s.kinds[0].fields[2].description, ["What it returned."]);
    }

    #[test]
    fn lines_are_checked_against_their_kind() {
        let s = schema();
        let bucket = json!({"low": 0, "high": 1, "count": 3});
        let good = json!({"time": "2026-12-03T15:04:05.123+01:00", "pid": 1, "ret": -2, "buckets": [bucket],
                          "calls": [{"n": 1}], "name": null});
        assert_eq!(s.check(&good), Ok(()));
        assert_eq!(s.check(&json!({"lost": 3, "what": "events", "why": "full"})), Ok(()));
        let extra = json!({"time": "2026-12-03T15:04:05Z", "pid": 1, "ret": 0, "buckets": [], "calls": [], "other": 1});
        assert!(s.check(&extra).unwrap_err().contains("other is not documented"));
        let missing = json!({"time": "2026-12-03T15:04:05Z", "ret": 0, "buckets": [], "calls": [{}]});
        let why = s.check(&missing).unwrap_err();
        assert!(why.contains("pid is missing") && why.contains("calls[].n is missing"), "{why}");
        let wrong = json!({"time": "15:04:05", "pid": 1.5, "ret": 0, "buckets": [{"low": "a"}], "calls": []});
        let why = s.check(&wrong).unwrap_err();
        assert!(why.contains("pid is 1.5, not integer") && why.contains("buckets[].low"), "{why}");
        assert!(why.contains("not a time in RFC 3339"), "{why}");
    }

    #[test]
    fn types_nest_and_combine() {
        let t = Type::parse("array of integer or string").unwrap();
        assert!(t.admits(&json!([1, "a"])) && !t.admits(&json!([1.5])) && !t.admits(&json!("a")));
        assert_eq!(t.text(), "array of integer or string");
        let t = Type::parse("object or null").unwrap();
        assert!(t.admits(&json!(null)) && t.admits(&json!({})) && !t.admits(&json!(1)));
    }

    #[test]
    fn a_shared_field_may_be_optional() {
        let doc = "## JSON\n\nOne:\n\npid: optional\ncomm\n";
        let s = Schema::from_doc(doc).unwrap().unwrap();
        assert!(s.kinds[0].fields[0].optional && s.kinds[0].fields[0].shared);
        assert_eq!(s.check(&json!({"comm": "x"})), Ok(()));
    }

    #[test]
    fn a_shared_field_cannot_be_redefined_unless_it_is_bccs() {
        let doc = "## JSON\n\nOne:\n\nts: string\n    A date.\n";
        assert!(Schema::from_doc(doc).unwrap_err().contains("ts is a shared field"));
        let doc = "## JSON\n\nOne:\n\nts: string, bcc\n    BCC's date.\n";
        assert!(Schema::from_doc(doc).unwrap().unwrap().kinds[0].fields[0].bcc);
    }

    #[test]
    fn mistakes_in_the_part_are_refused() {
        for (doc, why) in [
            ("## JSON\n\nOne:\n\nfoo\n", "not a shared field"),
            ("## JSON\n\nOne:\n\nfoo: strin\n", "unknown type"),
            ("## JSON\n\nOne:\n\na.b: integer\n", "which is not declared"),
            ("## JSON\n\nfoo: integer\n", "before any intro"),
            ("## JSON\n\nOne:\n\n", "no fields"),
        ] {
            let err = Schema::from_doc(doc).unwrap_err();
            assert!(err.contains(why), "{doc:?}: {err}");
        }
    }

    #[test]
    fn the_json_schema_names_every_field_and_what_is_required() {
        let s = schema().json_schema("t");
        let kind = &s["anyOf"][0];
        assert_eq!(kind["required"], json!(["time", "pid", "ret", "buckets", "calls"]));
        assert_eq!(kind["properties"]["buckets"]["items"]["properties"]["low"]["type"], "integer");
        assert_eq!(kind["properties"]["calls"]["items"]["required"], json!(["n"]));
        assert_eq!(kind["properties"]["time"]["format"], "date-time");
        assert_eq!(kind["additionalProperties"], false);
        assert_eq!(s["anyOf"].as_array().unwrap().len(), 2, "the tool's kind and the lost-events line");
    }
}
