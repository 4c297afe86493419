// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funccount's output: per-interval counts in BCC's `FUNC COUNT` layout, or as JSON lines.
//!
//! The BPF side keeps cumulative counts; [`Report`] subtracts the previous read, so no call made between two
//! reads is lost, and prints the non-zero counts of the interval sorted ascending (ties by name), as BCC does.

use std::io::Write;

use anyhow::Result;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

/// One interval as a JSON line.
#[derive(Serialize)]
struct JsonInterval<'a> {
    time: String,
    pattern: &'a str,
    counts: Vec<JsonCount<'a>>,
}

#[derive(Serialize)]
struct JsonCount<'a> {
    func: &'a str,
    count: u64,
}

/// The interval-to-interval state of the report.
pub struct Report {
    pattern: String,
    names: Vec<String>,
    previous: Vec<u64>,
    timestamp: bool,
    json: bool,
}

impl Report {
    pub fn new(pattern: &str, names: Vec<String>, timestamp: bool, json: bool) -> Self {
        let previous = vec![0; names.len()];
        Report { pattern: pattern.to_string(), names, previous, timestamp, json }
    }

    /// This interval's (name, count) pairs with a non-zero count, ascending.
    fn interval(&mut self, totals: &[u64]) -> Vec<(&str, u64)> {
        let mut rows: Vec<(&str, u64)> = self
            .names
            .iter()
            .zip(totals.iter().zip(&self.previous))
            .map(|(name, (now, before))| (name.as_str(), now.saturating_sub(*before)))
            .filter(|(_, count)| *count > 0)
            .collect();
        rows.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
        rows
    }

    /// Prints one interval given the cumulative `totals`; `last` adds BCC's `Detaching...`.
    pub fn write(&mut self, out: &mut Output, totals: Vec<u64>, last: bool) -> Result<()> {
        let (json, timestamp) = (self.json, self.timestamp);
        let pattern = self.pattern.clone();
        let rows = self.interval(&totals);
        if json {
            let counts = rows.iter().map(|&(func, count)| JsonCount { func, count }).collect();
            out.json_line(&JsonInterval { time: clock_rfc3339(), pattern: &pattern, counts })?;
        } else {
            writeln!(out)?;
            if timestamp {
                writeln!(out, "{:<8}", clock_hms())?;
            }
            writeln!(out, "{:<36} {:>8}", "FUNC", "COUNT")?;
            for (name, count) in &rows {
                writeln!(out, "{name:<36} {count:>8}")?;
            }
            if last {
                writeln!(out, "Detaching...")?;
            }
            out.flush()?;
        }
        self.previous = totals;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_differences_sorted_ascending_without_zeros() {
        let mut r = Report::new("x", vec!["a".into(), "b".into(), "c".into()], false, false);
        assert_eq!(r.interval(&[5, 2, 0]), [("b", 2), ("a", 5)]);
        r.previous = vec![5, 2, 0];
        assert_eq!(r.interval(&[5, 9, 1]), [("c", 1), ("b", 7)]);
    }
}
