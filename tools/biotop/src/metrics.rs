// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biotop's `--prometheus`: the kernel's cumulative rows as three counters, labelled by process name, disk and
//! direction rather than by PID, so that the series of a host stay few and outlive its processes:
//! `corebpf_biotop_requests_total`, `corebpf_biotop_bytes_total` and `corebpf_biotop_io_time_seconds_total` (issue
//! to completion, summed). The rows of exited processes are folded into totals kept here and deleted from the
//! kernel's map, so the map holds the living processes only and no counter goes back.

use std::collections::HashMap;

use anyhow::{Context, Result};
use common::attach::maps::{c_string, from_bytes};
use common::domain::blockdev::Disks;
use common::output::metrics::Snapshot;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::types::{io_key, io_stat};

/// (comm, device, operation).
type Labels = (String, String, &'static str);
const LABELS: &[&str] = &["comm", "device", "operation"];

/// What exited processes did, kept after their rows are gone from the kernel's map.
#[derive(Default)]
pub struct Totals {
    gone: HashMap<Labels, io_stat>,
    disks: Option<Disks>,
}

fn add(to: &mut io_stat, s: &io_stat) {
    to.io += s.io;
    to.bytes += s.bytes;
    to.ns += s.ns;
}

impl Totals {
    /// One scrape: every row of `rows` (the BPF map) plus the folded ones, as the three counters.
    pub fn write(&mut self, s: &mut Snapshot, rows: &impl MapCore) -> Result<()> {
        let mut now: HashMap<Labels, io_stat> = self.gone.clone();
        let disks = self.disks.get_or_insert_with(Disks::scan);
        for id in rows.keys() {
            let Some(value) = rows.lookup(&id, MapFlags::ANY).context("reading the rows map")? else { continue };
            let (key, stat) = (from_bytes::<io_key>(&id), from_bytes::<io_stat>(&value));
            let dev = crate::report::dev(&key);
            if disks.name(dev) == "?" {
                *disks = Disks::scan(); // a disk added since the last scan
            }
            let labels =
                (c_string(&key.comm), disks.name(dev).to_string(), if key.write != 0 { "write" } else { "read" });
            add(now.entry(labels.clone()).or_default(), &stat);
            if !std::path::Path::new(&format!("/proc/{}", key.pid)).exists() {
                // Its process is gone: nothing more is submitted under this row (a request of its still in flight
                // may make the row again, and is counted from there).
                add(self.gone.entry(labels).or_default(), &stat);
                let _ = rows.delete(&id);
            }
        }
        s.declare_counter("requests", "Block I/O requests completed", LABELS);
        s.declare_counter("bytes", "Bytes of the block I/O requests completed", LABELS);
        s.declare_counter_seconds("io_time", "Time from issue to completion, summed over the requests", LABELS);
        for ((comm, device, operation), stat) in now {
            let values = vec![comm, device, operation.to_string()];
            s.counter("requests", "Block I/O requests completed", LABELS, values.clone(), stat.io);
            s.counter("bytes", "Bytes of the block I/O requests completed", LABELS, values.clone(), stat.bytes);
            let secs = stat.ns as f64 / 1e9;
            s.counter_seconds(
                "io_time",
                "Time from issue to completion, summed over the requests",
                LABELS,
                values,
                secs,
            );
        }
        Ok(())
    }
}
