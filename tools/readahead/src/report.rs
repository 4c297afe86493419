// SPDX-License-Identifier: Apache-2.0 OR MIT
//! readahead's report: BCC's two lines and histogram, or one JSON object.

use std::io::Write;

use anyhow::Result;
use common::attach::features::Attach;
use common::output::hist::{log2_buckets, write_log2_hist, Bucket};
use common::output::stdout::{clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::bss;

/// What the kernel counted since the start, in pages.
pub struct Totals {
    pub total: u64,
    pub used: u64,
    pub slots: Vec<u64>,
    /// The used pages' ages, summed (ns).
    pub sum_ns: u64,
    pub failed: u64,
}

impl Totals {
    pub fn read(bss: &bss) -> Self {
        Totals {
            total: bss.total_pages,
            used: bss.hist.count,
            slots: bss.hist.slots.to_vec(),
            sum_ns: bss.hist.sum_ns,
            failed: bss.births_failed,
        }
    }

    /// Born and not used yet. A use is counted on another CPU a moment after its birth at most, but both are read
    /// without a lock: the subtraction saturates.
    pub fn unused(&self) -> u64 {
        self.total.saturating_sub(self.used)
    }
}

pub fn write_banner(out: &mut Output) -> Result<()> {
    writeln!(out, "Tracing... Hit Ctrl-C to end.")?;
    out.flush()?;
    Ok(())
}

/// BCC's report: a blank line, the unused count, the histogram's title, a blank line and the histogram.
pub fn write_text(out: &mut Output, t: &Totals) -> Result<()> {
    writeln!(out)?;
    writeln!(out, "Read-ahead unused pages: {}", t.unused())?;
    writeln!(out, "Histogram of read-ahead used page age (ms):")?;
    writeln!(out)?;
    write_log2_hist(out, &t.slots, "age (ms)")?;
    out.flush()?;
    if t.failed > 0 {
        eprintln!("readahead: {} read-ahead folios could not be recorded", t.failed);
    }
    Ok(())
}

#[derive(Serialize)]
struct Json<'a> {
    time: &'a str,
    attach: &'static str,
    unused_pages: u64,
    total_pages: u64,
    used_pages: u64,
    unit: &'static str,
    buckets: Vec<Bucket>,
}

pub fn write_json(out: &mut Output, t: &Totals, mech: Attach) -> Result<()> {
    let timestamp = clock_rfc3339();
    out.json_line(&Json {
        time: &timestamp,
        attach: mech.name(),
        unused_pages: t.unused(),
        total_pages: t.total,
        used_pages: t.used,
        unit: "ms",
        buckets: log2_buckets(&t.slots),
    })?;
    Ok(())
}

/// `--prometheus`: the pages read ahead and used as counters, and the used pages' ages as a histogram in seconds
/// (from the millisecond slots).
pub fn metrics(s: &mut common::output::metrics::Snapshot, t: &Totals) {
    use common::output::metrics::HistogramValue;
    s.counter("pages_read_ahead", "Pages read ahead into the page cache", &[], Vec::new(), t.total);
    s.counter("pages_used", "Pages read ahead that were then used", &[], Vec::new(), t.used);
    let age = HistogramValue::from_log2_slots(&t.slots, t.sum_ns, 1_000_000);
    s.histogram_seconds("used_page_age", "Age of read-ahead pages at their first use", &[], Vec::new(), age);
}
