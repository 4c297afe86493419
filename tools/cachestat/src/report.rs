// SPDX-License-Identifier: Apache-2.0 OR MIT
//! cachestat's output: BCC's header and rows, or one JSON object per interval; and BCC's arithmetic from the
//! counters to hits and misses.

use std::io::Write;

use anyhow::{Context, Result};
use common::attach::features::Attach;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::consts::{C_ACCESSED, C_ADDED, C_BUFDIRTY, C_DIRTIED, C_MAX};

/// One interval's figures, as BCC derives them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub hits: i64,
    pub misses: i64,
    pub dirties: u64,
    /// Hits over accesses, 0 to 1 (0 with no access).
    pub ratio: f64,
}

impl Stats {
    /// BCC's arithmetic: accesses are the access calls less the mark_buffer_dirty calls (writes through buffers
    /// also mark their page accessed), misses are the additions less the pages dirtied (pages added by writes),
    /// both at least 0, and hits the accesses less the misses; when that is negative (read-ahead added more
    /// than was read), every access is a miss. DIRTIES is mark_buffer_dirty's count on the kernel-function path
    /// (BCC's column), the pages dirtied on the tracepoint path (which has no mark_buffer_dirty and counts no
    /// write as an access).
    pub fn new(c: &[u64; C_MAX], functions: bool) -> Stats {
        let n = |k: usize| i64::try_from(c[k]).unwrap_or(i64::MAX);
        let (total, dirties) =
            if functions { (n(C_ACCESSED) - n(C_BUFDIRTY), c[C_BUFDIRTY]) } else { (n(C_ACCESSED), c[C_DIRTIED]) };
        let total = total.max(0);
        let mut misses = (n(C_ADDED) - n(C_DIRTIED)).max(0);
        let mut hits = total - misses;
        if hits < 0 {
            misses = total;
            hits = 0;
        }
        let ratio = if total > 0 { hits as f64 / total as f64 } else { 0.0 };
        Stats { hits, misses, dirties, ratio }
    }
}

/// Buffers and Cached of /proc/meminfo, in kB.
pub struct Meminfo {
    pub buffers_kb: u64,
    pub cached_kb: u64,
}

impl Meminfo {
    pub fn read() -> Result<Meminfo> {
        let text = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
        Meminfo::parse(&text).context("/proc/meminfo has no Buffers or Cached line")
    }

    fn parse(text: &str) -> Option<Meminfo> {
        let field = |name: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k == name).then(|| v.split_whitespace().next()?.parse().ok())?
            })
        };
        Some(Meminfo { buffers_kb: field("Buffers")?, cached_kb: field("Cached")? })
    }
}

/// BCC's header, with a TIME column first for -T.
pub fn write_header(out: &mut Output, timestamp: bool) -> Result<()> {
    if timestamp {
        write!(out, "{:<8} ", "TIME")?;
    }
    writeln!(
        out,
        "{:>8} {:>8} {:>8} {:>8} {:>12} {:>10}",
        "HITS", "MISSES", "DIRTIES", "HITRATIO", "BUFFERS_MB", "CACHED_MB"
    )?;
    out.flush()?;
    Ok(())
}

/// The format of one row, without the time (BCC's widths; the sizes in MB rounded to the nearest).
pub fn row(s: &Stats, mem: &Meminfo) -> String {
    format!(
        "{:>8} {:>8} {:>8} {:>7.2}% {:>12.0} {:>10.0}",
        s.hits,
        s.misses,
        s.dirties,
        100.0 * s.ratio,
        mem.buffers_kb as f64 / 1024.0,
        mem.cached_kb as f64 / 1024.0
    )
}

/// One of BCC's rows, with the time of day first for -T.
pub fn write_row(out: &mut Output, s: &Stats, mem: &Meminfo, timestamp: bool) -> Result<()> {
    if timestamp {
        write!(out, "{:<8} ", clock_hms())?;
    }
    writeln!(out, "{}", row(s, mem))?;
    out.flush()?;
    Ok(())
}

#[derive(Serialize)]
struct Counters {
    added: u64,
    accessed: u64,
    dirtied: u64,
    buffers_dirtied: Option<u64>,
}

#[derive(Serialize)]
struct Record {
    time: String,
    interval_s: u64,
    /// `functions` (BCC's kernel functions: counts of calls) or `tracepoints` (counts of pages).
    source: &'static str,
    hits: i64,
    misses: i64,
    dirties: u64,
    hit_ratio: f64,
    buffers_kb: u64,
    cached_kb: u64,
    /// The interval's raw counters behind hits and misses.
    counts: Counters,
}

/// One JSON line for an interval.
pub fn write_json(
    out: &mut Output,
    s: &Stats,
    c: &[u64; C_MAX],
    mem: &Meminfo,
    interval: u64,
    mech: Attach,
) -> Result<()> {
    let functions = matches!(mech, Attach::Fentry | Attach::Kprobe);
    out.json_line(&Record {
        time: clock_rfc3339(),
        interval_s: interval,
        source: if functions { "functions" } else { "tracepoints" },
        hits: s.hits,
        misses: s.misses,
        dirties: s.dirties,
        hit_ratio: (s.ratio * 10000.0).round() / 100.0,
        buffers_kb: mem.buffers_kb,
        cached_kb: mem.cached_kb,
        counts: Counters {
            added: c[C_ADDED],
            accessed: c[C_ACCESSED],
            dirtied: c[C_DIRTIED],
            buffers_dirtied: functions.then_some(c[C_BUFDIRTY]),
        },
    })?;
    Ok(())
}

/// `--prometheus`: the raw counters behind the columns, cumulative (HITS and MISSES are differences of them, which
/// a counter cannot be: `rate()` of these gives them). `event` is `added`, `accessed`, `dirtied` and, on the
/// kernel-function paths, `buffers_dirtied`; `unit` says whether they count pages (tracepoints) or calls.
pub fn metrics(s: &mut common::output::metrics::Snapshot, c: &[u64; C_MAX], functions: bool) {
    const HELP: &str = "Page cache events: additions (misses), accesses, pages dirtied, buffers dirtied";
    let unit = if functions { "calls" } else { "pages" };
    let mut events = vec![("added", C_ADDED), ("accessed", C_ACCESSED), ("dirtied", C_DIRTIED)];
    if functions {
        events.push(("buffers_dirtied", C_BUFDIRTY));
    }
    for (event, i) in events {
        s.counter("page_cache_events", HELP, &["event", "unit"], vec![event.into(), unit.into()], c[i]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(added: u64, accessed: u64, dirtied: u64, bufdirty: u64) -> [u64; C_MAX] {
        let mut c = [0; C_MAX];
        c[C_ADDED] = added;
        c[C_ACCESSED] = accessed;
        c[C_DIRTIED] = dirtied;
        c[C_BUFDIRTY] = bufdirty;
        c
    }

    #[test]
    fn bcc_arithmetic() {
        // 100 accesses, 30 of them misses.
        let s = Stats::new(&counts(30, 100, 0, 0), true);
        assert_eq!((s.hits, s.misses), (70, 30));
        assert!((s.ratio - 0.7).abs() < 1e-9);
        // Writes of 10 new pages through buffers: neutral but for DIRTIES.
        let s = Stats::new(&counts(10, 10, 10, 10), true);
        assert_eq!((s.hits, s.misses, s.dirties), (0, 0, 10));
        // Read-ahead added more than was read: every access is a miss.
        let s = Stats::new(&counts(50, 20, 0, 0), false);
        assert_eq!((s.hits, s.misses), (0, 20));
        // Tracepoints: DIRTIES are the pages dirtied.
        assert_eq!(Stats::new(&counts(8, 0, 8, 0), false).dirties, 8);
    }

    #[test]
    fn bcc_row_widths() {
        let s = Stats { hits: 1132, misses: 0, dirties: 4, ratio: 1.0 };
        let mem = Meminfo { buffers_kb: 277 * 1024, cached_kb: 4367 * 1024 + 100 };
        assert_eq!(row(&s, &mem), "    1132        0        4  100.00%          277       4367");
    }

    #[test]
    fn meminfo_fields() {
        let m = Meminfo::parse("MemTotal: 10 kB\nBuffers:   2048 kB\nCached:  4096 kB\n").unwrap();
        assert_eq!((m.buffers_kb, m.cached_kb), (2048, 4096));
        assert!(Meminfo::parse("MemTotal: 10 kB\n").is_none());
    }
}
