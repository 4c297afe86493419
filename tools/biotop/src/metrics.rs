// SPDX-License-Identifier: Apache-2.0 OR MIT
//! biotop's `--prometheus`: the kernel's cumulative rows as three counters, labelled by process name, disk and
//! direction rather than by PID, so that the series of a host stay few and outlive its processes:
//! `corebpf_biotop_requests_total`, `corebpf_biotop_bytes_total` and `corebpf_biotop_io_time_seconds_total` (issue
//! to completion, summed). The rows of exited processes are folded into totals and deleted from the kernel's map
//! (`common::output::taskrows`), so the map holds the living processes only and no counter goes back.

use anyhow::Result;
use common::attach::maps::{c_string, from_bytes};
use common::domain::blockdev::{Disks, RqOps};
use common::output::metrics::Snapshot;
use common::output::taskrows::{Counts, Row, TaskRows};
use libbpf_rs::MapCore;

use crate::bpf::types::{io_key, io_stat};

/// (comm, device, operation).
type Labels = (String, String, &'static str);
const LABELS: &[&str] = &["comm", "device", "operation"];
const REQUESTS: &str = "Block I/O requests completed";
const BYTES: &str = "Bytes of the block I/O requests completed";
const TIME: &str = "Time from issue to completion, summed over the requests";

impl Counts for io_stat {
    fn add(&mut self, s: &Self) {
        self.io += s.io;
        self.bytes += s.bytes;
        self.ns += s.ns;
    }
}

/// The rows of the processes that have exited, the disks' names and the kernel's operation numbers.
pub struct Totals {
    rows: TaskRows<Labels, io_stat>,
    disks: Disks,
    ops: RqOps,
}

impl Totals {
    pub fn new(ops: RqOps) -> Self {
        Totals { rows: TaskRows::new(), disks: Disks::scan(), ops }
    }

    /// One scrape: every row of `rows` (the BPF map) plus the folded ones, as the three counters.
    pub fn write(&mut self, s: &mut Snapshot, rows: &impl MapCore) -> Result<()> {
        let (disks, ops) = (&mut self.disks, &self.ops);
        let now = self.rows.read(rows, |k, v| {
            let (key, counts) = (from_bytes::<io_key>(k), from_bytes::<io_stat>(v));
            let dev = crate::report::dev(&key);
            if disks.name(dev) == "?" {
                *disks = Disks::scan(); // a disk added since the last scan
            }
            let operation = ops.of(key.op as u64).label();
            Row { task: key.pid, labels: (c_string(&key.comm), disks.name(dev).to_string(), operation), counts }
        })?;
        s.declare_counter("requests", REQUESTS, LABELS);
        s.declare_counter("bytes", BYTES, LABELS);
        s.declare_counter_seconds("io_time", TIME, LABELS);
        for ((comm, device, operation), stat) in now {
            let values = vec![comm, device, operation.to_string()];
            s.counter("requests", REQUESTS, LABELS, values.clone(), stat.io);
            s.counter("bytes", BYTES, LABELS, values.clone(), stat.bytes);
            s.counter_seconds("io_time", TIME, LABELS, values, stat.ns as f64 / 1e9);
        }
        Ok(())
    }
}
