// SPDX-License-Identifier: Apache-2.0 OR MIT
//! softirqslower's output: BCC's columns (`TIME STAGE SOFTIRQ LAT(us) CPU COMM`, the layout of BCC's
//! `tools/softirqslower.py`) or one JSON object per delay.

use std::io::{self, Write};

use common::attach::maps::from_bytes;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::consts::{STAGE_ENTRY_TO_EXIT, STAGE_RAISE_TO_ENTRY};
use crate::bpf::types::event;

// SAFETY: a #[repr(C)] struct of integers and a char array; the BPF side fills every byte.
unsafe impl plain::Plain for event {}

/// One soft IRQ delay, decoded from the BPF record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delay {
    /// `raise_to_entry` (waiting to run) or `entry_to_exit` (running).
    pub stage: &'static str,
    /// The vector's name (`net_rx`), or `vec N` for a number the kernel's BTF does not name.
    pub softirq: String,
    pub vec: u32,
    pub lat_us: u64,
    pub lat_ns: u64,
    pub cpu: u32,
    /// The thread that was running when the delay ended (0 for a CPU's idle task) and its name.
    pub tid: u32,
    pub comm: Name,
}

impl Delay {
    pub fn from_bytes(data: &[u8], names: &[String]) -> Delay {
        let e: event = from_bytes(data);
        let softirq = match names.get(e.vec as usize) {
            Some(name) if !name.is_empty() => name.clone(),
            _ => format!("vec {}", e.vec),
        };
        Delay {
            stage: match e.stage {
                s if s == STAGE_RAISE_TO_ENTRY as u32 => "raise_to_entry",
                s if s == STAGE_ENTRY_TO_EXIT as u32 => "entry_to_exit",
                _ => "unknown",
            },
            softirq,
            vec: e.vec,
            lat_us: e.delta_ns / 1000,
            lat_ns: e.delta_ns,
            cpu: e.cpu,
            tid: e.pid,
            comm: Name::from_c(&e.comm),
        }
    }

    /// BCC's STAGE column.
    pub fn stage_column(&self) -> &'static str {
        match self.stage {
            "raise_to_entry" => "irq(hard) to softirq",
            "entry_to_exit" => "softirq runtime",
            _ => "unknown",
        }
    }
}

#[derive(Serialize)]
struct JsonDelay<'a> {
    time: String,
    #[serde(flatten)]
    delay: &'a Delay,
}

pub struct Printer {
    json: bool,
}

impl Printer {
    pub fn new(json: bool) -> Printer {
        Printer { json }
    }

    /// BCC's banner and column header (none for JSON).
    pub fn write_header(&mut self, out: &mut Output, min_us: u64) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        writeln!(out, "Tracing softirq latency higher than {min_us} us... Hit Ctrl-C to end.")?;
        writeln!(out, "{:<8} {:<20} {:<8} {:<14} {:<6} {:<6}", "TIME", "STAGE", "SOFTIRQ", "LAT(us)", "CPU", "COMM")?;
        out.flush()
    }

    pub fn write(&mut self, out: &mut Output, d: &Delay) -> io::Result<()> {
        if self.json {
            return out.json_line(&JsonDelay { time: clock_rfc3339(), delay: d });
        }
        writeln!(
            out,
            "{:<8} {:<20} {:<8} {:<14} {:<6} {:<6}",
            clock_hms(),
            d.stage_column(),
            d.softirq,
            d.lat_us,
            d.cpu,
            d.comm
        )?;
        out.flush()
    }
}
