//! Reading BPF maps into plain Rust values.
//!
//! Keys and values cross the kernel boundary as bytes; the skeleton generates `#[repr(C)]` types for them, and
//! these helpers copy the bytes into those types with `plain` (no unsafe casts in tools).

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use plain::Plain;

/// Copies `bytes` into a `T` (zero-filled if short).
pub fn from_bytes<T: Plain + Default>(bytes: &[u8]) -> T {
    let mut value = T::default();
    plain::copy_from_bytes(&mut value, bytes).ok();
    value
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
