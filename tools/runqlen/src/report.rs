// SPDX-License-Identifier: Apache-2.0 OR MIT
//! runqlen's output: per-interval linear histograms of run queue length (summed, or per CPU with `-C`), or the
//! run queue occupancy (`-O`), in BCC's layout or as JSON lines.
//!
//! The BPF side keeps cumulative per-CPU histograms; [`Report`] subtracts the previous read to get this
//! interval's samples.

use anyhow::Result;
use common::output::hist::{write_linear_hist, IntervalDiff, Log2Hist};
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use serde::Serialize;

use crate::bpf::types::hist;

// SAFETY: a plain C struct of integers, generated from runqlen.h.
unsafe impl plain::Plain for hist {}

#[derive(Serialize)]
struct JsonCpu {
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu: Option<u32>,
    samples: u64,
    /// Samples with a task waiting, in percent.
    runqocc: f64,
    /// Samples per run queue length (index = length; the last also holds longer queues).
    runqlen: Vec<u64>,
}

#[derive(Serialize)]
struct JsonInterval<'a> {
    time: &'a str,
    cpus: Vec<JsonCpu>,
}

pub struct Report {
    per_cpu: bool,
    occupancy: bool,
    /// Linear slots are carried in [`Log2Hist`]'s `slots` (the differencing is the same).
    diff: IntervalDiff<u32>,
}

impl Report {
    pub fn new(per_cpu: bool, occupancy: bool) -> Self {
        Report { per_cpu, occupancy, diff: IntervalDiff::new() }
    }

    /// This interval's samples: per CPU with -C (sorted by CPU), else one summed histogram keyed 0.
    fn interval(&mut self, entries: Vec<(u32, hist)>) -> Vec<(Option<u32>, Vec<u64>)> {
        let cpus: Vec<(u32, Vec<u64>)> = self
            .diff
            .update(entries.into_iter().map(|(cpu, h)| {
                let count = h.slots.iter().sum();
                (cpu, Log2Hist { slots: h.slots.to_vec(), count, sum: 0 })
            }))
            .into_iter()
            .map(|(cpu, h)| (cpu, h.slots))
            .collect();
        if self.per_cpu {
            return cpus.into_iter().map(|(cpu, s)| (Some(cpu), s)).collect();
        }
        let mut total = vec![0u64; crate::bpf::consts::MAX_SLOTS];
        for (_, slots) in &cpus {
            for (t, s) in total.iter_mut().zip(slots) {
                *t += s;
            }
        }
        vec![(None, total)]
    }

    /// Samples with a task waiting (length 1 or more), in percent of all samples.
    fn occupancy(slots: &[u64]) -> f64 {
        let samples: u64 = slots.iter().sum();
        let queued: u64 = slots.iter().skip(1).sum();
        if samples == 0 {
            0.0
        } else {
            100.0 * queued as f64 / samples as f64
        }
    }

    /// One interval in BCC's layout: a blank line, the time with `-T`, then the histograms or the occupancy.
    pub fn write_text(&mut self, out: &mut Output, entries: Vec<(u32, hist)>, timestamp: bool) -> Result<()> {
        use std::io::Write;
        let sections = self.interval(entries);
        writeln!(out)?;
        if timestamp {
            writeln!(out, "{:<8}", clock_hms())?;
        }
        for (cpu, slots) in &sections {
            if self.occupancy {
                match cpu {
                    Some(cpu) => writeln!(out, "runqocc, CPU {cpu:<3} {:6.2}%", Self::occupancy(slots))?,
                    None => writeln!(out, "runqocc: {:0.2}%", Self::occupancy(slots))?,
                }
            } else {
                if let Some(cpu) = cpu {
                    writeln!(out, "\ncpu = {cpu}")?;
                }
                let buckets: Vec<(u64, u64)> = slots.iter().enumerate().map(|(len, &n)| (len as u64, n)).collect();
                write_linear_hist(out, &buckets, "runqlen")?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// One JSON line per interval: per CPU with -C, else one summed entry.
    pub fn write_json(&mut self, out: &mut Output, entries: Vec<(u32, hist)>) -> Result<()> {
        let sections = self.interval(entries);
        let timestamp = clock_rfc3339();
        let cpus = sections
            .into_iter()
            .map(|(cpu, slots)| {
                let last = slots.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
                JsonCpu {
                    cpu,
                    samples: slots.iter().sum(),
                    runqocc: (Self::occupancy(&slots) * 100.0).round() / 100.0,
                    runqlen: slots[..last].to_vec(),
                }
            })
            .collect();
        out.json_line(&JsonInterval { time: &timestamp, cpus })?;
        Ok(())
    }

    /// `--prometheus`: the cumulative samples as the histogram `corebpf_runqlen_run_queue_length` (bucket `le = n`
    /// holds the samples with at most n tasks waiting; the last slot, where longer queues are clamped, is
    /// `+Inf`), per CPU (`cpu`) with -C, else summed over the CPUs.
    pub fn metrics(&self, s: &mut common::output::metrics::Snapshot, entries: Vec<(u32, hist)>) {
        use common::output::metrics::HistogramValue;
        const HELP: &str = "Tasks waiting on a CPU's run queue, sampled 99 times a second";
        let mut series: Vec<(Vec<String>, Vec<u64>)> = Vec::new();
        for (cpu, h) in entries {
            let values = if self.per_cpu { vec![cpu.to_string()] } else { Vec::new() };
            series.push((values, h.slots.to_vec()));
        }
        if series.is_empty() && !self.per_cpu {
            series.push((Vec::new(), vec![0; crate::bpf::consts::MAX_SLOTS]));
        }
        let labels: &[&'static str] = if self.per_cpu { &["cpu"] } else { &[] };
        for (values, slots) in series {
            let last = slots.len() - 1;
            let buckets =
                slots.iter().enumerate().map(|(n, &c)| (if n == last { f64::INFINITY } else { n as f64 }, c)).collect();
            let sum = slots.iter().enumerate().map(|(n, &c)| n as u64 * c).sum::<u64>() as f64;
            let value = HistogramValue { sum, count: slots.iter().sum(), buckets };
            s.histogram("run_queue_length", HELP, labels, values, value);
        }
    }
}
