// SPDX-License-Identifier: Apache-2.0 OR MIT
//! dcstat's output: BCC's header and per-second rows with the hit ratio, one JSON object per interval, or the
//! cumulative counts as Prometheus counters.

use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::consts::{S_MAXSTAT, S_MISS, S_REFS, S_SLOW};

/// The column names, in BCC's order (the counters' keys).
const NAMES: [&str; S_MAXSTAT] = ["REFS", "SLOW", "MISS"];

/// BCC's header: `TIME`, then ` %8s` of each `NAME/s`, then `HIT%`.
pub fn write_header(out: &mut Output) -> Result<()> {
    write!(out, "{:<8}  ", "TIME")?;
    for name in NAMES {
        write!(out, " {:>8}", format!("{name}/s"))?;
    }
    writeln!(out, " {:>8}", "HIT%")?;
    out.flush()?;
    Ok(())
}

/// One of BCC's rows: the time, each count divided by the interval's length (an integer rate), then the share of
/// references that did not miss, in percent with two decimals, or ` -%` when there were none. The last interval,
/// cut short by a signal, is divided by its true length (BCC prints no row for it).
pub fn write_row(out: &mut Output, counts: &[u64; S_MAXSTAT], length: Duration) -> Result<()> {
    write!(out, "{:<8}: ", clock_hms())?;
    for &c in counts {
        write!(out, " {:>8}", per_second(c, length))?;
    }
    match hit_percent(counts) {
        Some(pct) => writeln!(out, " {pct:>8.2}")?,
        None => writeln!(out, " {:>7}%", "-")?,
    }
    out.flush()?;
    Ok(())
}

/// (REFS - MISS) / REFS in percent, as BCC computes it (negative if misses outnumber references), or None
/// without references.
fn hit_percent(counts: &[u64; S_MAXSTAT]) -> Option<f64> {
    let refs = counts[S_REFS];
    (refs > 0).then(|| 100.0 * (refs as f64 - counts[S_MISS] as f64) / refs as f64)
}

/// `count` over `length`, per second, rounded down (whole seconds divide exactly, as BCC's `count / interval`).
fn per_second(count: u64, length: Duration) -> u64 {
    let ms = length.as_millis().max(1);
    (u128::from(count) * 1000 / ms).try_into().unwrap_or(u64::MAX)
}

#[derive(Serialize)]
struct Counts {
    refs: u64,
    slow: u64,
    miss: u64,
}

impl Counts {
    fn new(c: &[u64; S_MAXSTAT], rate: impl Fn(u64) -> u64) -> Self {
        Counts { refs: rate(c[S_REFS]), slow: rate(c[S_SLOW]), miss: rate(c[S_MISS]) }
    }
}

#[derive(Serialize)]
struct Record {
    time: String,
    interval_s: u64,
    /// The interval's true length in seconds: `interval_s`, or less for a last interval cut short by a signal.
    seconds: f64,
    /// The exact counts of the interval.
    counts: Counts,
    /// The counts divided by the interval's true length, as the text columns.
    per_second: Counts,
    /// The hit ratio in percent, null without references.
    hit_percent: Option<f64>,
}

/// One JSON line for an interval.
pub fn write_json(out: &mut Output, counts: &[u64; S_MAXSTAT], interval: u64, length: Duration) -> Result<()> {
    out.json_line(&Record {
        time: clock_rfc3339(),
        interval_s: interval,
        seconds: length.as_millis() as f64 / 1000.0,
        counts: Counts::new(counts, |c| c),
        per_second: Counts::new(counts, |c| per_second(c, length)),
        hit_percent: hit_percent(counts).map(|p| (p * 100.0).round() / 100.0),
    })?;
    Ok(())
}

/// `--prometheus`: the cumulative counts as three counters, `corebpf_dcstat_references_total`,
/// `corebpf_dcstat_slow_lookups_total` and `corebpf_dcstat_misses_total`.
pub fn metrics(s: &mut common::output::metrics::Snapshot, totals: &[u64; S_MAXSTAT]) {
    s.counter("references", "Path components looked up in the dentry cache", &[], vec![], totals[S_REFS]);
    s.counter("slow_lookups", "Dentry cache lookups that took the slower path", &[], vec![], totals[S_SLOW]);
    s.counter("misses", "Dentry cache lookups that had to ask the file system", &[], vec![], totals[S_MISS]);
}
