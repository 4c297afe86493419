// SPDX-License-Identifier: Apache-2.0 OR MIT
//! filetop's `--prometheus`: the kernel's cumulative rows (thread, file) as counters labelled by process name,
//! file name and file type, not by thread, so that series outlive threads: `corebpf_filetop_reads_total`,
//! `corebpf_filetop_read_bytes_total`, `corebpf_filetop_writes_total`, `corebpf_filetop_written_bytes_total`.
//! Files are many: `--max-series` caps the label sets (later ones add up into `other`). The rows of exited
//! threads are folded and deleted from the kernel's map (`common::output::taskrows`), so no counter goes back.

use anyhow::Result;
use common::attach::maps::{c_string, from_bytes};
use common::output::metrics::Snapshot;
use common::output::taskrows::{Counts, Row, TaskRows};
use libbpf_rs::MapCore;

use crate::bpf::types::{file_key, file_stat};

/// (comm, file, type).
type Labels = (String, String, &'static str);
const LABELS: &[&str] = &["comm", "file", "type"];
const FAMILIES: [(&str, &str); 4] = [
    ("reads", "Read calls that returned"),
    ("read_bytes", "Bytes read"),
    ("writes", "Write calls that returned"),
    ("written_bytes", "Bytes written"),
];

/// A row's counts, in the order of [`FAMILIES`].
#[derive(Debug, Clone, Copy, Default)]
struct Io([u64; 4]);

impl Counts for Io {
    fn add(&mut self, other: &Self) {
        self.0.iter_mut().zip(other.0).for_each(|(a, b)| *a += b);
    }
}

/// The rows of the threads that have exited.
#[derive(Default)]
pub struct Totals {
    rows: TaskRows<Labels, Io>,
}

impl Totals {
    /// One scrape: every row of `rows` (the BPF map) plus the folded ones, as the four counters.
    pub fn write(&mut self, s: &mut Snapshot, rows: &impl MapCore) -> Result<()> {
        let now = self.rows.read(rows, |k, v| {
            let (key, stat) = (from_bytes::<file_key>(k), from_bytes::<file_stat>(v));
            let kind = match stat.r#type as u8 {
                b'R' => "regular",
                b'S' => "socket",
                _ => "other",
            };
            let file = crate::report::shown_name(
                &common::attach::maps::c_bytes(&stat.name),
                stat.name_len,
                crate::report::lossy,
            );
            let counts = Io([stat.reads, stat.read_bytes, stat.writes, stat.write_bytes]);
            Row { task: key.tid, labels: (c_string(&key.comm), file, kind), counts }
        })?;
        for (name, help) in FAMILIES {
            s.declare_counter(name, help, LABELS);
        }
        for ((comm, file, kind), io) in now {
            let values = vec![comm, file, kind.to_string()];
            for ((name, help), n) in FAMILIES.into_iter().zip(io.0) {
                s.counter(name, help, LABELS, values.clone(), n);
            }
        }
        Ok(())
    }
}
