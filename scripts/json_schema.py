# SPDX-License-Identifier: Apache-2.0 OR MIT
"""The JSON a tool declares in the `## JSON` part of its doc.md, in the format docs/json.md gives (which also
holds the fields every tool shares). scripts/gen-docs.py imports it for the web page's field list and for
docs/json/<tool>.schema.json; common/src/output/schema.rs reads the same format for the man page and the tests,
and a toolset test checks that both give the same JSON Schema."""

import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADING = "JSON"
TYPES = ["string", "integer", "number", "boolean", "object"]


def part(text, title):
    """The lines of the `## title` part of a Markdown text (fences skipped over), or None."""
    found, in_fence = None, False
    for line in text.splitlines():
        line = line.rstrip()
        if line.startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith("## "):
            if found is not None:
                break
            if line[3:].strip() == title:
                found = []
            continue
        if found is not None:
            found.append(line)
    return found


def parse_type(text):
    """A type as nested lists: ["array", T], ["nullable", T], ["either", T...] or the name of a base type;
    `array of` takes all that follows it (`array of integer or string` holds either)."""
    if text.startswith("array of "):
        return ["array", parse_type(text[len("array of "):])]
    if text.endswith(" or null"):
        return ["nullable", parse_type(text[:-len(" or null")])]
    if " or " in text:
        return ["either"] + [parse_type(t) for t in text.split(" or ")]
    if text not in TYPES:
        raise ValueError(f"unknown type {text!r} (string, integer, number, boolean, object, array of TYPE, TYPE or null)")
    return text


def type_text(ty):
    if isinstance(ty, list):
        if ty[0] == "either":
            return " or ".join(type_text(t) for t in ty[1:])
        return f"array of {type_text(ty[1])}" if ty[0] == "array" else f"{type_text(ty[1])} or null"
    return ty


def field_line(line):
    name, _, rest = line.partition(": ")
    if re.fullmatch(r"[a-z_][A-Za-z0-9_.\[\]*-]*", name):
        return name, (rest if _ else None)
    return None


def parse_kinds(lines, shared):
    """The record kinds of a part: [{"intro": [lines], "fields": [field]}], a field being a dict with path, type,
    optional, bcc, shared and description (lines)."""
    kinds, in_intro = [], False
    for line in lines:
        if not line.strip():
            in_intro = False
            continue
        if line[:1].isspace():
            field = kinds[-1]["fields"][-1] if kinds and kinds[-1]["fields"] and not in_intro else None
            if field is None or field["shared"]:
                raise ValueError(f"an indented line that describes no field of its own: {line!r}")
            field["description"].append(line.strip())
            continue
        if in_intro:
            kinds[-1]["intro"].append(line)
            continue
        named = field_line(line)
        if named:
            if not kinds:
                raise ValueError(f"a field before any intro: {line!r}")
            kinds[-1]["fields"] += make_fields(*named, shared)
        elif line[:1].isupper():
            kinds.append({"intro": [line], "fields": []})
            in_intro = True
        else:
            raise ValueError(f"neither a field (name: type) nor an intro (a capital first): {line!r}")
    for kind in kinds:
        if not kind["fields"]:
            raise ValueError(f"a kind of line with no fields: {' '.join(kind['intro'])!r}")
        paths = [f["path"] for f in kind["fields"]]
        for i, f in enumerate(kind["fields"]):
            if f["path"] in paths[:i]:
                raise ValueError(f"{f['path']} is declared twice in one kind of line")
            parent = parent_and_key(f["path"])[0]
            parent = parent[:-2] if parent.endswith("[]") else parent
            if parent and parent not in paths:
                raise ValueError(f"{f['path']} belongs to {parent}, which is not declared")
    return kinds


def make_fields(name, rest, shared):
    """The fields of one line: a shared field named alone, with the shared fields inside it (`buckets` brings
    `buckets[].low` and the rest), `name: optional` (a shared field some lines leave out), or
    `name: type[, marks]`."""
    # A shared field may sit inside an object of the tool's (`waker.pid`, `cpus[].cpu`): its key is what counts.
    parent, key = parent_and_key(name)
    common = next((f for f in shared if f["path"] == key), None)
    if rest is None or rest == "optional":
        if common is None:
            raise ValueError(f"{name} is not a shared field (docs/json.md): give its type")
        fields = [dict(f, path=f"{parent}.{f['path']}" if parent else f["path"]) for f in shared
                  if f["path"] == key or f["path"].startswith(key + ".") or f["path"].startswith(key + "[].")]
        fields[0]["optional"] = fields[0]["optional"] or rest is not None
        return fields
    words = rest.split(", ")
    ty = parse_type(words[0])
    marks = set(words[1:])
    known = {"optional", "bcc"} | ({"date-time"} if ty == "string" else set())
    if marks - known:
        raise ValueError(f"{name}: unknown mark {sorted(marks - known)[0]!r} after the type (optional, bcc, date-time)")
    if common is not None and "bcc" not in marks:
        raise ValueError(f"{name} is a shared field (docs/json.md): name it alone, or mark it `, bcc` where it keeps"
                         " BCC's meaning")
    return [{"path": name, "type": ty, "optional": "optional" in marks, "bcc": "bcc" in marks,
             "date_time": "date-time" in marks, "shared": False, "description": []}]


def parent_and_key(path):
    parent, dot, key = path.rpartition(".")
    return (parent, key) if dot else ("", path)


def vocabulary():
    with open(os.path.join(ROOT, "docs", "json.md"), encoding="utf-8") as f:
        return f.read()


def shared_fields():
    fields = parse_kinds(["Shared."] + part(vocabulary(), "Shared fields"), [])[0]["fields"]
    for f in fields:
        f["shared"] = True
    return fields


def lost_kind():
    return parse_kinds(part(vocabulary(), "The lost-events line"), [])[0]


def from_doc(doc):
    """The kinds a doc.md's `## JSON` part declares, or None without one; ValueError on a mistake."""
    lines = part(doc, HEADING)
    if lines is None:
        return None
    kinds = parse_kinds(lines, shared_fields())
    if not kinds:
        raise ValueError("the `## JSON` part declares no kind of line")
    return kinds


def man_lines(kinds):
    """The part as the man page and the web page list it: each kind's intro, then each field as a tagged
    paragraph `name (type, optional)` with its description (a shared field's from docs/json.md)."""
    out = []
    for kind in kinds:
        out += kind["intro"] + [""]
        for f in kind["fields"]:
            marks = [type_text(f["type"])] + (["optional"] if f["optional"] else [])
            out += [f"{f['path']} ({', '.join(marks)})"] + ["    " + l for l in f["description"]] + [""]
    return out


def _children(kind, parent):
    return [f for f in kind["fields"] if parent_and_key(f["path"])[0] == parent]


def _type_schema(ty):
    if isinstance(ty, list):
        if ty[0] == "either":
            return {"anyOf": [_type_schema(t) for t in ty[1:]]}
        if ty[0] == "nullable":
            return {"anyOf": [_type_schema(ty[1]), {"type": "null"}]}
        return {"type": "array", "items": _type_schema(ty[1])}
    return {"type": ty}


def _wrap_nullable(ty, schema):
    return {"anyOf": [schema, {"type": "null"}]} if isinstance(ty, list) and ty[0] == "nullable" else schema


def _field_schema(kind, f):
    if _children(kind, f["path"]):
        return _wrap_nullable(f["type"], _object_schema(kind, f["path"]))
    if _children(kind, f["path"] + "[]"):
        return _wrap_nullable(f["type"], {"type": "array", "items": _object_schema(kind, f["path"] + "[]")})
    return _type_schema(f["type"])


def _object_schema(kind, parent):
    properties, required, pattern = {}, [], None
    for f in _children(kind, parent):
        key = parent_and_key(f["path"])[1]
        schema = _field_schema(kind, f)
        if f["date_time"]:
            schema["format"] = "date-time"
        if f["description"]:
            schema["description"] = " ".join(f["description"])
        if key == "*":
            pattern = schema
            continue
        if not f["optional"]:
            required.append(key)
        properties[key] = schema
    schema = {"type": "object", "properties": properties, "required": required,
              "additionalProperties": pattern if pattern is not None else False}
    if not parent and kind["intro"]:
        schema["description"] = " ".join(kind["intro"])
    return schema


def json_schema(tool, kinds):
    """The JSON Schema (draft 2020-12) of one line of the tool's output: one of its kinds or the lost-events
    line (what common/src/output/schema.rs's Schema::json_schema gives too)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{tool} --json",
        "description": f"One line of {tool}'s JSON output (docs/json.md).",
        "anyOf": [_object_schema(k, "") for k in kinds + [lost_kind()]],
    }


def schema_text(tool, kinds):
    return json.dumps(json_schema(tool, kinds), indent=2, ensure_ascii=False) + "\n"


def main(argv):
    """`scripts/json_schema.py TOOL...`: each tool's `## JSON` part as the man page lists it, or its mistake."""
    bad = 0
    for tool in argv:
        try:
            with open(os.path.join(ROOT, "tools", tool, "doc.md"), encoding="utf-8") as f:
                kinds = from_doc(f.read())
        except (OSError, ValueError) as e:
            print(f"{tool}: {e}")
            bad = 1
            continue
        print(f"== {tool}")
        print("\n".join(man_lines(kinds)) if kinds else "(no ## JSON part)")
    return bad


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv[1:]))
