// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--prometheus` for the top tools (biotop, filetop): their BPF maps keep cumulative rows per task (a process or
//! thread and what it did), which the screens print as differences and forget once the task has gone. Metrics
//! must not go back, and their labels must not be per task (too many series, each living as long as a PID), so
//! [`TaskRows`] reads every row at each scrape, adds the rows up by the labels the tool chooses (process name,
//! disk, file, ...), and folds the rows of tasks that have exited into totals kept here, deleting them from the
//! kernel's map: the map keeps to the living tasks, and each counter only grows.
//!
//! A row of an exited task that changes between its read and its deletion loses that change: only a request
//! still in flight when its task exited can do that (its completion then makes the row again, counted from there).

use std::collections::HashMap;
use std::hash::Hash;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

/// Counts that add up: a row's cumulative values.
pub trait Counts: Copy + Default {
    fn add(&mut self, other: &Self);
}

/// One row as the tool reads it: the task it belongs to (a PID or TID, checked in /proc), its labels and counts.
pub struct Row<L, C> {
    pub task: u32,
    pub labels: L,
    pub counts: C,
}

/// The counts of the tasks that have exited, by labels.
#[derive(Debug, Default)]
pub struct TaskRows<L, C> {
    gone: HashMap<L, C>,
}

impl<L: Hash + Eq + Clone, C: Counts> TaskRows<L, C> {
    pub fn new() -> Self {
        TaskRows { gone: HashMap::new() }
    }

    /// Every row of `map`, decoded by `decode(key, value)`, added up by labels with the folded totals; the rows
    /// whose task no longer exists are folded and deleted from `map`.
    pub fn read(
        &mut self,
        map: &impl MapCore,
        mut decode: impl FnMut(&[u8], &[u8]) -> Row<L, C>,
    ) -> Result<HashMap<L, C>> {
        let mut now = self.gone.clone();
        for key in map.keys() {
            let Some(value) = map.lookup(&key, MapFlags::ANY).context("reading the rows map")? else { continue };
            let row = decode(&key, &value);
            now.entry(row.labels.clone()).or_default().add(&row.counts);
            if !std::path::Path::new(&format!("/proc/{}", row.task)).exists() {
                self.gone.entry(row.labels).or_default().add(&row.counts);
                let _ = map.delete(&key);
            }
        }
        Ok(now)
    }
}
