// SPDX-License-Identifier: Apache-2.0 OR MIT
//! numamove's output: libbpf-tools' header and rows, one JSON object per interval, or Prometheus counters.

use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use common::attach::features::Attach;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::consts::{S_MAXSTAT, S_MIGRATIONS, S_NS};

/// libbpf-tools' header: `%-10s %18s %18s`.
pub fn write_header(out: &mut Output) -> Result<()> {
    writeln!(out, "{:<10} {:>18} {:>18}", "TIME", "NUMA_migrations", "NUMA_migrations_ms")?;
    out.flush()?;
    Ok(())
}

/// One row: the wall-clock time, the migrations of the interval and the whole milliseconds they took together
/// (libbpf-tools drops each migration's fraction of a millisecond before adding; this adds nanoseconds and
/// rounds the sum down, so many short migrations still add up).
pub fn write_row(out: &mut Output, counts: &[u64; S_MAXSTAT]) -> Result<()> {
    writeln!(out, "{:<10} {:>18} {:>18}", clock_hms(), counts[S_MIGRATIONS], counts[S_NS] / 1_000_000)?;
    out.flush()?;
    Ok(())
}

#[derive(Serialize)]
struct Record {
    time: String,
    interval_s: u64,
    /// The interval's true length in seconds: `interval_s`, or less for a last interval cut short by a signal.
    seconds: f64,
    /// What a migration is here: `function` (a call of the migration function) or `tracepoints` (a
    /// migrate_pages() run for NUMA balancing).
    source: &'static str,
    migrations: u64,
    /// The time the interval's migrations took, summed, in nanoseconds.
    migration_ns: u64,
    /// The same in whole milliseconds, as the text column.
    migration_ms: u64,
}

/// One JSON line for an interval.
pub fn write_json(
    out: &mut Output,
    counts: &[u64; S_MAXSTAT],
    interval: u64,
    length: Duration,
    mech: Attach,
) -> Result<()> {
    let source = match mech {
        Attach::Fentry | Attach::Kprobe => "function",
        _ => "tracepoints",
    };
    out.json_line(&Record {
        time: clock_rfc3339(),
        interval_s: interval,
        seconds: length.as_millis() as f64 / 1000.0,
        source,
        migrations: counts[S_MIGRATIONS],
        migration_ns: counts[S_NS],
        migration_ms: counts[S_NS] / 1_000_000,
    })?;
    Ok(())
}

/// `--prometheus`: `corebpf_numamove_migrations_total` and `corebpf_numamove_migration_seconds_total`.
pub fn metrics(s: &mut common::output::metrics::Snapshot, totals: &[u64; S_MAXSTAT]) {
    s.counter(
        "migrations",
        "Pages NUMA balancing tried to move to the node of the task using them",
        &[],
        vec![],
        totals[S_MIGRATIONS],
    );
    s.counter_seconds(
        "migration",
        "Time spent in NUMA-balancing page migrations",
        &[],
        vec![],
        totals[S_NS] as f64 / 1e9,
    );
}
