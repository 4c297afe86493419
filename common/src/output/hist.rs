// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Histograms as BCC prints them.
//!
//! BPF programs count values into power-of-two slots (`log2l(v)`, slot 0 holding 0 and 1, slot `i` holding
//! `[2^i, 2^(i+1))`) or into linear slots. This module turns those slot counts into BCC's star-bar text, byte for
//! byte (`print_log2_hist` and `print_linear_hist` of BCC's `table.py`, including the wide layout once a value
//! needs more than 32 slots), and into bucket lists for JSON output.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

/// The widest star bar, as in BCC.
const STARS_MAX: u64 = 40;

/// One bucket of a histogram with its inclusive bounds, for JSON output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bucket {
    pub low: u64,
    pub high: u64,
    pub count: u64,
}

/// Inclusive bounds of log2 slot `slot`: slot 0 is `0 -> 1`, slot `i` is `2^i -> 2^(i+1)-1`.
pub fn log2_bounds(slot: usize) -> (u64, u64) {
    let high = (1u128 << (slot + 1)) - 1;
    let mut low = (1u128 << (slot + 1)) >> 1;
    if low == high {
        low -= 1;
    }
    (low as u64, high.min(u64::MAX as u128) as u64)
}

/// The log2 slot a value falls into, as the BPF side computes it (`log2l` in `bpf/include/bits.bpf.h`).
pub fn log2_slot(value: u64) -> usize {
    if value == 0 {
        0
    } else {
        63 - value.leading_zeros() as usize
    }
}

/// The buckets of a log2 histogram up to the highest non-empty slot, empty ones between included.
pub fn log2_buckets(slots: &[u64]) -> Vec<Bucket> {
    let Some(last) = slots.iter().rposition(|&count| count > 0) else {
        return Vec::new();
    };
    slots[..=last]
        .iter()
        .enumerate()
        .map(|(slot, &count)| {
            let (low, high) = log2_bounds(slot);
            Bucket { low, high, count }
        })
        .collect()
}

/// BCC's star bar: `width * val / max` stars, at most `width`.
fn stars(val: u64, val_max: u64, width: u64) -> String {
    if val_max == 0 {
        return String::new();
    }
    let n = ((width as u128 * val as u128) / val_max as u128).min(width as u128) as usize;
    "*".repeat(n)
}

/// Writes a log2 histogram exactly as BCC's `print_log2_hist(val_type)` does; nothing when all slots are empty.
pub fn write_log2_hist(out: &mut impl Write, slots: &[u64], val_type: &str) -> io::Result<()> {
    let Some(idx_max) = slots.iter().rposition(|&count| count > 0) else {
        return Ok(());
    };
    let val_max = slots.iter().copied().max().unwrap_or(0);
    // BCC numbers slots from 1 (its slot 1 is our slot 0) and goes wide past its slot 32.
    let narrow = idx_max < 32;
    let (width, stars_width) = if narrow { (10, STARS_MAX) } else { (20, STARS_MAX / 2) };
    if narrow {
        writeln!(out, "     {val_type:<19} : count     distribution")?;
    } else {
        writeln!(out, "               {val_type:<29} : count     distribution")?;
    }
    for (slot, &count) in slots[..=idx_max].iter().enumerate() {
        let (low, high) = log2_bounds(slot);
        let bar = stars(count, val_max, stars_width);
        let sw = stars_width as usize;
        writeln!(out, "{low:>width$} -> {high:<width$} : {count:<8} |{bar:<sw$}|")?;
    }
    Ok(())
}

/// Writes a linear histogram exactly as BCC's `print_linear_hist(val_type)` does: one row per bucket value,
/// from the first bucket to the last non-empty one. `buckets` pairs each bucket's value with its count.
pub fn write_linear_hist(out: &mut impl Write, buckets: &[(u64, u64)], val_type: &str) -> io::Result<()> {
    let Some(idx_max) = buckets.iter().rposition(|&(_, count)| count > 0) else {
        return Ok(());
    };
    let val_max = buckets.iter().map(|&(_, count)| count).max().unwrap_or(0);
    writeln!(out, "     {val_type:<13} : count     distribution")?;
    for &(value, count) in &buckets[..=idx_max] {
        let bar = stars(count, val_max, STARS_MAX);
        writeln!(out, "        {value:<10} : {count:<8} |{bar:<40}|")?;
    }
    Ok(())
}

/// Writes BCC's per-name totals table (softirqs, hardirqs without `-d`): a header `NAME TOTAL_unit` and one row
/// per name, largest value first (`"%-Ns %11s"` / `"%-Ns %11d"` in BCC, N = `name_width`).
pub fn write_totals(
    out: &mut impl Write,
    name_header: &str,
    name_width: usize,
    value_header: &str,
    rows: &[(String, u64)],
) -> io::Result<()> {
    writeln!(out, "{name_header:<name_width$} {value_header:>11}")?;
    let mut sorted: Vec<&(String, u64)> = rows.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (name, value) in sorted {
        writeln!(out, "{name:<name_width$} {value:>11}")?;
    }
    Ok(())
}

/// A log2 histogram with its event count and value sum, as read from a BPF map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Log2Hist {
    pub slots: Vec<u64>,
    pub count: u64,
    pub sum: u64,
}

impl Log2Hist {
    /// What was added since `earlier` (BPF histograms are cumulative; counters only grow).
    pub fn since(&self, earlier: &Log2Hist) -> Log2Hist {
        let slots = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, &n)| n.saturating_sub(earlier.slots.get(i).copied().unwrap_or(0)))
            .collect();
        Log2Hist { slots, count: self.count.saturating_sub(earlier.count), sum: self.sum.saturating_sub(earlier.sum) }
    }

    /// Adds `other`'s events to these (two series whose labels came out the same, say).
    pub fn add(&mut self, other: &Log2Hist) {
        if self.slots.len() < other.slots.len() {
            self.slots.resize(other.slots.len(), 0);
        }
        for (mine, n) in self.slots.iter_mut().zip(&other.slots) {
            *mine += n;
        }
        self.count += other.count;
        self.sum += other.sum;
    }

    /// No event: no slot counted, and no count or sum (tools that count without slots, e.g. hardirqs' totals,
    /// keep `slots` empty).
    pub fn is_empty(&self) -> bool {
        self.count == 0 && self.sum == 0 && self.slots.iter().all(|&n| n == 0)
    }
}

/// Turns cumulative per-key histograms into per-interval ones by remembering the previous read.
///
/// Reading and clearing a BPF map loses the events that land between the two steps; reading cumulative counters
/// and subtracting loses none.
#[derive(Debug, Default)]
pub struct IntervalDiff<K: Ord + Clone> {
    previous: BTreeMap<K, Log2Hist>,
}

impl<K: Ord + Clone> IntervalDiff<K> {
    pub fn new() -> Self {
        IntervalDiff { previous: BTreeMap::new() }
    }

    /// The non-empty per-key histograms of this interval, sorted by key, given the current cumulative ones.
    pub fn update(&mut self, current: impl IntoIterator<Item = (K, Log2Hist)>) -> Vec<(K, Log2Hist)> {
        let mut changed = Vec::new();
        for (key, hist) in current {
            let delta = match self.previous.get(&key) {
                Some(prev) => hist.since(prev),
                None => hist.clone(),
            };
            if !delta.is_empty() {
                changed.push((key.clone(), delta));
            }
            self.previous.insert(key, hist);
        }
        changed.sort_by(|a, b| a.0.cmp(&b.0));
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(slots: &[u64], val_type: &str) -> String {
        let mut buf = Vec::new();
        write_log2_hist(&mut buf, slots, val_type).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn log2_narrow_matches_bcc() {
        // BCC's bitehist example: slots for 0-1, 2-3, 4-7, ..., 128-255.
        let slots = [3, 0, 211, 0, 0, 0, 1, 800];
        let expected = [
            "     kbytes              : count     distribution\n",
            "         0 -> 1          : 3        |                                        |\n",
            "         2 -> 3          : 0        |                                        |\n",
            "         4 -> 7          : 211      |**********                              |\n",
            "         8 -> 15         : 0        |                                        |\n",
            "        16 -> 31         : 0        |                                        |\n",
            "        32 -> 63         : 0        |                                        |\n",
            "        64 -> 127        : 1        |                                        |\n",
            "       128 -> 255        : 800      |****************************************|\n",
        ]
        .concat();
        assert_eq!(text(&slots, "kbytes"), expected);
    }

    #[test]
    fn log2_usecs_example_from_bcc_biolatency() {
        // Shape of tools/biolatency_example.txt in BCC.
        let mut slots = vec![0u64; 16];
        slots[6] = 1; // 64 -> 127
        slots[7] = 4; // 128 -> 255
        slots[8] = 4; // 256 -> 511
        slots[9] = 16; // 512 -> 1023
        let out = text(&slots, "usecs");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 11);
        assert_eq!(lines[0], "     usecs               : count     distribution");
        assert_eq!(lines[7], "        64 -> 127        : 1        |**                                      |");
        assert_eq!(lines[8], "       128 -> 255        : 4        |**********                              |");
        assert_eq!(lines[10], "       512 -> 1023       : 16       |****************************************|");
    }

    #[test]
    fn log2_wide_layout_past_32_slots() {
        let mut slots = vec![0u64; 40];
        slots[0] = 2;
        slots[35] = 4;
        let out = text(&slots, "nsecs");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], format!("{:15}{:<29} : count     distribution", "", "nsecs"));
        assert_eq!(lines[1], format!("{:>20} -> {:<20} : {:<8} |{:<20}|", 0, 1, 2, "**********"));
        assert_eq!(
            lines[36],
            format!("{:>20} -> {:<20} : {:<8} |{}|", 34359738368u64, 68719476735u64, 4, "*".repeat(20))
        );
        assert_eq!(lines.len(), 37);
    }

    #[test]
    fn log2_boundary_slot_31_is_narrow_and_32_wide() {
        let mut slots = vec![0u64; 34];
        slots[31] = 1;
        assert!(text(&slots, "x").starts_with("     x"));
        slots[32] = 1;
        assert!(text(&slots, "x").starts_with("               x"));
    }

    #[test]
    fn log2_top_slot_does_not_overflow() {
        let mut slots = vec![0u64; 64];
        slots[63] = 1;
        let out = text(&slots, "v");
        assert!(out.ends_with(&format!("{:>20} -> {:<20} : 1        |{}|\n", 1u64 << 63, u64::MAX, "*".repeat(20))));
    }

    #[test]
    fn empty_histogram_prints_nothing() {
        assert_eq!(text(&[0, 0, 0], "usecs"), "");
        assert!(log2_buckets(&[0, 0]).is_empty());
    }

    #[test]
    fn slots_and_bounds_agree() {
        for v in [0u64, 1, 2, 3, 4, 7, 8, 1000, 1 << 40, u64::MAX] {
            let (low, high) = log2_bounds(log2_slot(v));
            assert!(low <= v && v <= high, "{v} not in {low}..={high}");
        }
    }

    #[test]
    fn buckets_for_json() {
        let b = log2_buckets(&[1, 0, 5, 0]);
        assert_eq!(
            b,
            vec![
                Bucket { low: 0, high: 1, count: 1 },
                Bucket { low: 2, high: 3, count: 0 },
                Bucket { low: 4, high: 7, count: 5 },
            ]
        );
        assert_eq!(serde_json::to_string(&b[2]).unwrap(), r#"{"low":4,"high":7,"count":5}"#);
    }

    #[test]
    fn interval_diff_reports_only_new_events() {
        let h = |slots: &[u64], count, sum| Log2Hist { slots: slots.to_vec(), count, sum };
        let mut diff = IntervalDiff::new();
        let first = diff.update([("b", h(&[1, 2], 3, 30)), ("a", h(&[0, 1], 1, 5))]);
        assert_eq!(first, vec![("a", h(&[0, 1], 1, 5)), ("b", h(&[1, 2], 3, 30))]);
        let second = diff.update([("a", h(&[0, 1], 1, 5)), ("b", h(&[4, 2], 6, 45))]);
        assert_eq!(second, vec![("b", h(&[3, 0], 3, 15))]);
    }

    #[test]
    fn totals_table_as_bcc_softirqs() {
        let mut buf = Vec::new();
        let rows = [("timer".to_string(), 120), ("net_rx".to_string(), 4511), ("rcu".to_string(), 7)];
        write_totals(&mut buf, "SOFTIRQ", 16, "TOTAL_usecs", &rows).unwrap();
        let expected = [
            "SOFTIRQ          TOTAL_usecs\n",
            "net_rx                  4511\n",
            "timer                    120\n",
            "rcu                        7\n",
        ]
        .concat();
        assert_eq!(String::from_utf8(buf).unwrap(), expected);
    }

    #[test]
    fn linear_matches_bcc() {
        let mut buf = Vec::new();
        write_linear_hist(&mut buf, &[(0, 0), (1, 10), (2, 5), (3, 0)], "cpu").unwrap();
        let expected = [
            "     cpu           : count     distribution\n",
            "        0          : 0        |                                        |\n",
            "        1          : 10       |****************************************|\n",
            "        2          : 5        |********************                    |\n",
        ]
        .concat();
        assert_eq!(String::from_utf8(buf).unwrap(), expected);
    }
}
