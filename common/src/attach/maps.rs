// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Reading BPF maps and records into plain Rust values.
//!
//! Keys and values cross the kernel boundary as bytes; the skeleton generates `#[repr(C)]` types for them, and
//! these helpers copy the bytes into those types with `plain` (no unsafe casts in tools). [`c_string`] reads a
//! NUL-padded `char` array of a record (a comm, a path); [`DropCounter`] reports what the BPF side counted as
//! dropped in its `.bss` because a map was full (records a full ring buffer had no room for are the event
//! stream's to report: [`crate::attach::events`]). [`percpu_values`] reads each CPU's copy of a per-CPU map's
//! value, [`percpu_counters`] sums a per-CPU array of counters, and
//! [`CounterDeltas`] turns its growing totals into each interval's counts.

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use plain::Plain;

/// Copies `bytes` into a `T` (zero-filled if short).
pub fn from_bytes<T: Plain + Default>(bytes: &[u8]) -> T {
    let mut value = T::default();
    plain::copy_from_bytes(&mut value, bytes).ok();
    value
}

/// The `N` counters of a per-CPU array map of u64s (keys 0..N), each summed over the CPUs.
pub fn percpu_counters<const N: usize>(map: &impl MapCore) -> Result<[u64; N]> {
    let mut totals = [0u64; N];
    for (key, total) in totals.iter_mut().enumerate() {
        let per_cpu = map
            .lookup_percpu(&(key as u32).to_ne_bytes(), MapFlags::ANY)
            .with_context(|| format!("reading the counters of map {:?}", map.name()))?
            .unwrap_or_default();
        *total = per_cpu.iter().filter_map(|v| v.get(..8)?.try_into().ok()).map(u64::from_ne_bytes).sum();
    }
    Ok(totals)
}

/// Each CPU's copy of the value under `key` of a per-CPU map (none if the key is absent).
pub fn percpu_values<V: Plain + Default>(map: &impl MapCore, key: &[u8]) -> Result<Vec<V>> {
    let per_cpu = map
        .lookup_percpu(key, MapFlags::ANY)
        .with_context(|| format!("reading map {:?}", map.name()))?
        .unwrap_or_default();
    Ok(per_cpu.iter().map(|bytes| from_bytes(bytes)).collect())
}

/// Counters that only grow, turned into what each grew by since the last reading (the first: since zero).
pub struct CounterDeltas<const N: usize> {
    before: [u64; N],
}

impl<const N: usize> Default for CounterDeltas<N> {
    fn default() -> Self {
        CounterDeltas { before: [0; N] }
    }
}

impl<const N: usize> CounterDeltas<N> {
    pub fn next(&mut self, now: [u64; N]) -> [u64; N] {
        let mut delta = [0u64; N];
        for (i, d) in delta.iter_mut().enumerate() {
            *d = now[i].saturating_sub(self.before[i]);
        }
        self.before = now;
        delta
    }
}

/// Every (key, value) pair of a hash map, read one key at a time (a snapshot that may interleave with updates).
pub fn hash_entries<K, V>(map: &impl MapCore) -> Result<Vec<(K, V)>>
where
    K: Plain + Default,
    V: Plain + Default,
{
    let mut entries = Vec::new();
    for key in map.keys() {
        let Some(value) = map.lookup(&key, MapFlags::ANY).with_context(|| format!("reading map {:?}", map.name()))?
        else {
            continue; // deleted since the key was listed
        };
        entries.push((from_bytes(&key), from_bytes(&value)));
    }
    Ok(entries)
}

/// The text of a NUL-terminated C `char` array from a BPF record (`comm`, a path), lossy for invalid UTF-8.
pub fn c_string<T: Copy + Into<i16>>(chars: &[T]) -> String {
    String::from_utf8_lossy(&c_bytes(chars)).into_owned()
}

/// The bytes of a NUL-terminated C `char` array from a BPF record, up to the NUL (for
/// [`crate::output::stdout::printable`], which shows bytes that are not UTF-8 as they are).
pub fn c_bytes<T: Copy + Into<i16>>(chars: &[T]) -> Vec<u8> {
    chars.iter().map(|&c| c.into() as u8).take_while(|&b| b != 0).collect()
}

/// A counter the BPF side increments in its memory-mapped `.bss` when it has to drop something (an entry a full
/// map refused). [`DropCounter::check`] reports each increase on
/// stderr, once, as `tool: lost N <what> (<why>)`: call it while polling and once more at the end, so losses
/// are said when they happen and none is left unsaid.
#[derive(Debug)]
pub struct DropCounter {
    what: &'static str,
    why: &'static str,
    reported: u64,
}

impl DropCounter {
    /// A counter of `what` (`I/Os`, `sessions`) dropped because of `why` (`too many in flight`).
    pub fn new(what: &'static str, why: &'static str) -> Self {
        DropCounter { what, why, reported: 0 }
    }

    /// Reads the counter (a `u64` in the skeleton's live `.bss`) and reports what was dropped since the last
    /// call. Returns the total so far.
    pub fn check(&mut self, counter: &u64) -> u64 {
        self.check_all([counter])
    }

    /// [`DropCounter::check`] for a count kept in several objects' `.bss` (one object per attach site).
    pub fn check_all<'a>(&mut self, counters: impl IntoIterator<Item = &'a u64>) -> u64 {
        // SAFETY: each counter points into a skeleton's memory-mapped .bss, an aligned u64 that the kernel updates
        // concurrently: it must be read as volatile, not as a plain Rust value.
        let total: u64 = counters.into_iter().map(|c| unsafe { std::ptr::read_volatile(c) }).sum();
        if total > self.reported {
            eprintln!(
                "{}: lost {} {} ({})",
                crate::identity::invoked_name(),
                total - self.reported,
                self.what,
                self.why
            );
            self.reported = total;
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_stop_at_nul() {
        assert_eq!(c_string(&[b'a' as i8, b'b' as i8, 0, b'c' as i8]), "ab");
        assert_eq!(c_string(b"xy"), "xy");
    }

    #[test]
    fn drop_counters_report_increases() {
        let mut counter = DropCounter::new("events", "too many in flight");
        assert_eq!(counter.check(&0), 0);
        assert_eq!(counter.check(&5), 5);
        assert_eq!(counter.reported, 5);
        assert_eq!(counter.check(&5), 5);
    }

    #[test]
    fn counter_deltas_are_growth_since_the_last_reading() {
        let mut deltas = CounterDeltas::<2>::default();
        assert_eq!(deltas.next([3, 7]), [3, 7]);
        assert_eq!(deltas.next([10, 7]), [7, 0]);
        assert_eq!(deltas.next([9, 8]), [0, 1], "a counter read lower is no negative growth");
    }
}
