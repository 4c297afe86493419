// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ttysnoop's output: the bytes of each chunk as they were written (BCC's output: no header, no columns), or one
//! JSON object per write, its chunks gathered per thread.

use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;
use common::attach::maps::c_string;
use common::output::stdout::Output;
use serde::Serialize;

use crate::bpf::consts::{CHUNK_FAULT, CHUNK_LAST};
use crate::bpf::types::chunk;

/// Bytes of a record before its data (struct chunk's header).
const HEADER: usize = std::mem::offset_of!(chunk, data);

/// What clear(1) writes on common terminals: cursor home, erase the screen.
const CLEAR: &[u8] = b"\x1b[H\x1b[2J";

/// The fields of a record before its bytes (struct chunk; records carry only the bytes they hold, so the whole
/// struct is not read from them).
struct Header {
    total: u64,
    pid: u32,
    tid: u32,
    index: u32,
    len: u32,
    flags: u32,
    comm: [u8; 16],
}

impl Header {
    fn parse(data: &[u8]) -> Option<Header> {
        let head = data.get(..HEADER)?;
        let u32_at = |at: usize| u32::from_ne_bytes(head[at..at + 4].try_into().unwrap());
        Some(Header {
            total: u64::from_ne_bytes(head[0..8].try_into().unwrap()),
            pid: u32_at(std::mem::offset_of!(chunk, pid)),
            tid: u32_at(std::mem::offset_of!(chunk, tid)),
            index: u32_at(std::mem::offset_of!(chunk, index)),
            len: u32_at(std::mem::offset_of!(chunk, len)),
            flags: u32_at(std::mem::offset_of!(chunk, flags)),
            comm: head[std::mem::offset_of!(chunk, comm)..][..16].try_into().unwrap(),
        })
    }
}

#[derive(Serialize)]
struct JsonWrite<'a> {
    pid: u32,
    tid: u32,
    comm: &'a str,
    /// Bytes of the whole write.
    bytes: u64,
    /// The bytes shown (as UTF-8, invalid sequences replaced).
    data: &'a str,
    /// Fewer bytes shown than written (-s times -c, or unreadable memory).
    truncated: bool,
}

/// A write whose chunks are being gathered for JSON output.
struct Pending {
    pid: u32,
    comm: String,
    bytes: u64,
    data: Vec<u8>,
    fault: bool,
}

pub struct Report {
    json: bool,
    pending: HashMap<u32, Pending>,
}

/// Clears the screen, as BCC does by running clear(1) (which writes the sequence to a pipe too).
pub fn clear_screen(out: &mut Output) -> Result<()> {
    out.write_all(CLEAR)?;
    out.flush()?;
    Ok(())
}

impl Report {
    pub fn new(json: bool) -> Self {
        Report { json, pending: HashMap::new() }
    }

    /// One chunk from the ring buffer: its bytes printed at once, or kept until its write's last chunk.
    pub fn chunk(&mut self, out: &mut Output, data: &[u8]) -> Result<()> {
        let Some(c) = Header::parse(data) else { return Ok(()) };
        let len = (c.len as usize).min(data.len() - HEADER);
        let bytes = &data[HEADER..HEADER + len];
        if !self.json {
            out.write_all(bytes)?;
            out.flush()?;
            return Ok(());
        }
        if c.index == 0 {
            // A write whose last chunk was lost ends where the thread's next one starts.
            if let Some(p) = self.pending.remove(&c.tid) {
                write_json(out, c.tid, &p)?;
            }
        }
        let p = self.pending.entry(c.tid).or_insert_with(|| Pending {
            pid: c.pid,
            comm: c_string(&c.comm),
            bytes: c.total,
            data: Vec::new(),
            fault: false,
        });
        p.data.extend_from_slice(bytes);
        p.fault |= c.flags & CHUNK_FAULT as u32 != 0;
        if c.flags & CHUNK_LAST as u32 != 0 {
            let p = self.pending.remove(&c.tid).expect("inserted above");
            write_json(out, c.tid, &p)?;
        }
        Ok(())
    }

    /// Prints the writes still gathered when tracing stops.
    pub fn finish(&mut self, out: &mut Output) -> Result<()> {
        let mut left: Vec<(u32, Pending)> = self.pending.drain().collect();
        left.sort_by_key(|(tid, _)| *tid);
        for (tid, p) in &left {
            write_json(out, *tid, p)?;
        }
        Ok(())
    }
}

fn write_json(out: &mut Output, tid: u32, p: &Pending) -> Result<()> {
    out.json_line(&JsonWrite {
        pid: p.pid,
        tid,
        comm: &p.comm,
        bytes: p.bytes,
        data: &String::from_utf8_lossy(&p.data),
        truncated: p.fault || (p.data.len() as u64) < p.bytes,
    })?;
    Ok(())
}
