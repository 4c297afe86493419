// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ksnoop's output: each record as libbpf-tools' ksnoop prints it (time, CPU, PID, then `function(`, each value as
//! `name = ` and btf_dump's text of it, and `);`), or as a JSON line; and the records held back until their call
//! says whether to show them (comparisons over entry and return values, and -s chains).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;
use common::output::stdout::{clock_rfc3339, Output, TraceStart};
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
        // The record is sent cut to its data: pad it to the struct's size to read the header.
        let head = std::mem::offset_of!(record, data);
        let mut whole = vec![0u8; std::mem::size_of::<record>()];
        let n = bytes.len().min(whole.len());
        whole[..n].copy_from_slice(&bytes[..n]);
        let r: Box<record> = Box::new(common::attach::maps::from_bytes(&whole));
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
    time: String,
    ts: f64,
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
    /// JSON's `ts` counts from it.
    start: TraceStart,
}

impl<'t> Report<'t> {
    pub fn new(types: &'t Types, funcs: &'t [Function], layouts: Vec<(Layout, Layout)>, json: bool) -> Result<Self> {
        Ok(Report {
            types,
            funcs,
            layouts,
            dumper: Dumper::new(&types.btf)?,
            json,
            held: BTreeMap::new(),
            start: TraceStart::now(),
        })
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
        if let Some(text) = self.render(rec, entry)? {
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        Ok(())
    }

    /// A record as text (or a JSON line), None if it has no value to show.
    fn render(&mut self, rec: &Rec, entry: Option<&Rec>) -> Result<Option<String>> {
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
            return Ok(None);
        }
        if self.json {
            let values = shown.iter().map(|s| self.json_value(s)).collect();
            let line = JsonRecord {
                time: clock_rfc3339(),
                ts: self.start.secs(rec.time_ns),
                time_ns: rec.time_ns,
                cpu: rec.cpu,
                pid: rec.pid,
                tid: rec.tid,
                function: &func.name,
                event: if is_entry { "entry" } else { "return" },
                values,
            };
            return Ok(Some(serde_json::to_string(&line)? + "\n"));
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
        Ok(Some(text))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A vfs_write entry and return as the BPF side would send them, rendered in text and JSON.
    #[test]
    fn records_as_ksnoop_prints_them() {
        let types = Types::load().unwrap();
        let funcs = vec![types.function("vfs_write(buf, count, pos, return)").unwrap()];
        let layouts = vec![crate::layout(&funcs[0])];
        let (entry_layout, _) = &layouts[0];
        let mut data = vec![0u8; 64];
        data[entry_layout[1].0..entry_layout[1].0 + 8].copy_from_slice(&1234u64.to_le_bytes());
        data[entry_layout[2].0..entry_layout[2].0 + 8].copy_from_slice(&2468u64.to_le_bytes());
        let mut rec = Rec {
            time_ns: 5,
            pid: 42,
            tid: 43,
            cpu: 1,
            slot: 0,
            kind: REC_ENTRY as u8,
            depth: 0,
            flags: 0,
            raw: [0x7f00, 1234, 0xffff0000, 0, 0, 0],
            err: [-14, 0, 0, 0, 0, 0],
            data,
        };
        let mut report = Report::new(&types, &funcs, layouts.clone(), false).unwrap();
        let text = report.render(&rec, None).unwrap().unwrap();
        let want = format!(
            "{:>16} {:>4} {:>8} vfs_write(\n{:35}buf = *(0x7f00)\n{:36} /* Cannot show 'buf' as 'char  *'; \
             invalid/userspace ptr? */\n,\n{:35}count = \n{:36}(size_t)1234,\n{:35}pos = *(0xffff0000)\n{:36}(loff_t)2468\n{:31});\n\n",
            5, 1, 42, "", "", "", "", "", "", ""
        );
        assert_eq!(text, want, "\n{text}");
        let mut report = Report::new(&types, &funcs, layouts, true).unwrap();
        let json: serde_json::Value = serde_json::from_str(&report.render(&rec, None).unwrap().unwrap()).unwrap();
        assert_eq!(json["values"][1]["value"], 1234);
        assert_eq!(json["values"][2]["value"], 2468);
        assert_eq!(json["values"][0]["error"], -14);
        rec.kind = crate::bpf::consts::REC_RETURN as u8;
        rec.raw[3] = u64::MAX;
        rec.data = (-5i64).to_le_bytes().to_vec();
        let json: serde_json::Value = serde_json::from_str(&report.render(&rec, None).unwrap().unwrap()).unwrap();
        assert_eq!(json["event"], "return");
        assert_eq!(json["values"][0]["value"], -5);
        assert_eq!(json["values"][0]["text"], "(ssize_t)-5");
    }
}
