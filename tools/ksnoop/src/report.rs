// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ksnoop's output: each record as libbpf-tools' ksnoop prints it (time, CPU, PID, then `function(`, each value as
//! `name = ` and btf_dump's text of it, and `);`), or as a JSON line; and the records held back until their call
//! says whether to show them (comparisons over entry and return values, and -s chains).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;
use common::output::stdout::Output;
use serde::Serialize;

use crate::bpf::consts::{REC_COMPLETE, REC_DISCARD, REC_ENTRY, REC_HOLD};
use crate::bpf::types::record;
use crate::dump::Dumper;
use crate::spec::{Function, Types, Value};

/// Where each value's bytes are in its record: (offset, length), by the value's index in the function's list.
pub type Layout = Vec<(usize, usize)>;

/// One record, as sent (its data cut to the bytes sent).
#[derive(Clone)]
pub struct Rec {
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub slot: usize,
    pub kind: u8,
    pub depth: u8,
    pub flags: u8,
    pub raw: [u64; 6],
    pub err: [i32; 6],
    pub data: Vec<u8>,
}

impl Rec {
    /// A record from the ring buffer's bytes.
    pub fn parse(bytes: &[u8]) -> Rec {
        let r: Box<record> = Box::new(common::attach::maps::from_bytes(bytes));
        let head = std::mem::offset_of!(record, data);
        let len = (r.len as usize).min(bytes.len().saturating_sub(head));
        Rec {
            time_ns: r.time_ns,
            pid: r.pid,
            tid: r.tid,
            cpu: r.cpu,
            slot: r.slot as usize,
            kind: r.kind,
            depth: r.depth,
            flags: r.flags,
            raw: r.raw,
            err: r.err,
            data: bytes[head..head + len].to_vec(),
        }
    }
}

/// A value shown in a record: from which record (the entry held back, or this one) and where.
struct Shown<'a> {
    value: &'a Value,
    raw: u64,
    err: i32,
    bytes: &'a [u8],
}

/// One value as a JSON object.
#[derive(Serialize)]
struct JsonValue {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pointer: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<i32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cut: bool,
}

#[derive(Serialize)]
struct JsonRecord<'a> {
    time_ns: u64,
    cpu: u32,
    pid: u32,
    tid: u32,
    function: &'a str,
    event: &'static str,
    values: Vec<JsonValue>,
}

pub struct Report<'t> {
    types: &'t Types,
    funcs: &'t [Function],
    /// Per function: the layout of its entry records and of its return records.
    layouts: Vec<(Layout, Layout)>,
    dumper: Dumper,
    json: bool,
    /// Entries held back, by task and depth of the call.
    held: BTreeMap<(u32, u8), Rec>,
}

impl<'t> Report<'t> {
    pub fn new(types: &'t Types, funcs: &'t [Function], layouts: Vec<(Layout, Layout)>, json: bool) -> Result<Self> {
        Ok(Report { types, funcs, layouts, dumper: Dumper::new(&types.btf)?, json, held: BTreeMap::new() })
    }

    pub fn header(&self, out: &mut Output) -> Result<()> {
        if !self.json {
            writeln!(out, "{:>16} {:>4} {:>8} FUNCTION/ARGS", "TIME", "CPU", "PID")?;
            out.flush()?;
        }
        Ok(())
    }

    /// Takes one record: shows it, holds it back, or shows or drops what was held.
    pub fn take(&mut self, out: &mut Output, rec: Rec) -> Result<()> {
        if rec.slot >= self.funcs.len() {
            return Ok(());
        }
        let key = (rec.tid, rec.depth);
        if rec.kind == REC_DISCARD as u8 {
            self.held.remove(&key);
            return Ok(());
        }
        if rec.kind == REC_ENTRY as u8 {
            if rec.flags & REC_HOLD as u8 != 0 {
                // Bounded: one per call in flight of a task, at most MAX_DEPTH deep; a held entry whose return was
                // never seen is replaced by the next call at its depth.
                self.held.insert(key, rec);
                return Ok(());
            }
            if rec.flags & REC_COMPLETE as u8 != 0 {
                let below: Vec<(u32, u8)> =
                    self.held.range((rec.tid, 0)..(rec.tid, rec.depth)).map(|(k, _)| *k).collect();
                for k in below {
                    if let Some(h) = self.held.remove(&k) {
                        self.show(out, &h, None)?;
                    }
                }
            }
            return self.show(out, &rec, None);
        }
        let held = self.held.remove(&key).filter(|h| h.slot == rec.slot && self.funcs[rec.slot].hold());
        self.show(out, &rec, held.as_ref())
    }

    /// Prints a record (with the entry values of `entry`, held back until this return).
    fn show(&mut self, out: &mut Output, rec: &Rec, entry: Option<&Rec>) -> Result<()> {
        let func = &self.funcs[rec.slot];
        let is_entry = rec.kind == REC_ENTRY as u8;
        let (entry_layout, return_layout) = &self.layouts[rec.slot];
        let mut shown = Vec::new();
        for (i, v) in func.values.iter().enumerate() {
            let (from, layout) = match (v.at_entry(), is_entry, entry) {
                (true, true, _) => (rec, entry_layout),
                (false, false, _) => (rec, return_layout),
                (true, false, Some(e)) => (e, entry_layout),
                _ => continue,
            };
            let (off, len) = layout[i];
            let bytes = from.data.get(off..off + len).unwrap_or(&[]);
            shown.push(Shown { value: v, raw: from.raw[i], err: from.err[i], bytes });
        }
        if shown.is_empty() {
            return Ok(());
        }
        if self.json {
            let values = shown.iter().map(|s| self.json_value(s)).collect();
            let line = JsonRecord {
                time_ns: rec.time_ns,
                cpu: rec.cpu,
                pid: rec.pid,
                tid: rec.tid,
                function: &func.name,
                event: if is_entry { "entry" } else { "return" },
                values,
            };
            out.json_line(&line)?;
            return Ok(());
        }
        let mut text = format!("{:>16} {:>4} {:>8} {}(\n", rec.time_ns, rec.cpu, rec.pid, func.name);
        for (n, s) in shown.iter().enumerate() {
            if n > 0 {
                text.push_str(",\n");
            }
            text.push_str(&format!("{:34} {} = ", "", s.value.name));
            if s.value.ptr {
                text.push_str(&format!("*(0x{:x})", s.raw));
            }
            text.push('\n');
            if s.err != 0 {
                text.push_str(&format!(
                    "{:36} /* Cannot show '{}' as '{}{}'; invalid/userspace ptr? */\n",
                    "",
                    s.value.name,
                    self.types.type_name(s.value.type_id),
                    if s.value.ptr { " *" } else { "" }
                ));
            } else if s.value.size > 0 {
                let d = self.dumper.dump(s.value.type_id, s.bytes, 36, false);
                text.push_str(&d.text);
                if d.cut {
                    text.push_str(&format!("{:36}... /* {} bytes of {} */", "", s.bytes.len(), s.value.size));
                }
            }
        }
        text.push_str(&format!("\n{:31});\n\n", ""));
        out.write_all(text.as_bytes())?;
        out.flush()?;
        Ok(())
    }

    fn json_value(&mut self, s: &Shown<'_>) -> JsonValue {
        let v = s.value;
        let mut ty = self.types.type_name(v.type_id);
        if v.ptr {
            ty.push('*');
        }
        let mut j = JsonValue {
            name: v.name.clone(),
            ty: ty.trim_end().to_owned(),
            pointer: v.ptr.then_some(s.raw),
            value: None,
            text: None,
            error: (s.err != 0).then_some(s.err),
            cut: false,
        };
        if s.err != 0 || v.size == 0 {
            return j;
        }
        if v.size <= 8 && s.bytes.len() == v.size as usize && self.types.is_number(v.type_id) {
            let mut word = [0u8; 8];
            word[..s.bytes.len()].copy_from_slice(s.bytes);
            let n = u64::from_le_bytes(word);
            let shift = 64 - 8 * s.bytes.len() as u32;
            j.value = Some(if self.types.signed(v.type_id) {
                serde_json::Value::from(((n << shift) as i64) >> shift)
            } else {
                serde_json::Value::from(n)
            });
        }
        let d = self.dumper.dump(v.type_id, s.bytes, 0, true);
        j.text = Some(d.text.trim().to_owned());
        j.cut = d.cut;
        j
    }
}
