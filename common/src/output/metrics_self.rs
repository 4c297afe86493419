// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The self metrics every `--prometheus` tool exports, labelled by `tool`, so a fleet can watch the watchers:
//!
//! - `corebpf_build_info{tool, version, commit}` 1;
//! - `corebpf_attach_info{tool, mechanism}` 1: the attach mechanism the ladder chose (tp_btf, raw_tp, ...);
//! - `corebpf_bpf_program_run_seconds_total{tool, program}` and `corebpf_bpf_program_runs_total{tool, program}`:
//!   the kernel's `run_time_ns` and `run_cnt` of each loaded program (`bpf_prog_info`). The kernel counts them
//!   only while `kernel.bpf_stats_enabled` is 1 (`sysctl -w kernel.bpf_stats_enabled=1`; it costs a little on
//!   every program run), so these series are published only then: a 0 would read as a program that never runs;
//! - `corebpf_bpf_stats_enabled{tool}`: 1 while the kernel counts those (the sysctl, read at each scrape), else 0;
//! - `corebpf_bpf_program_skipped_runs_total{tool, program}`: the runs the kernel skipped because another BPF
//!   program was running on that CPU (`recursion_misses`, always counted; see [`crate::attach::skipped`]);
//! - `corebpf_lost_events_total{tool, what}` and `corebpf_map_full_total{tool, map}`, from the counters the
//!   tool hands its snapshot ([`super::metrics::Snapshot::lost_events`], [`super::metrics::Snapshot::map_full`]).

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::metrics::{Global, Snapshot};

/// What a tool's self metrics need: its attach mechanism and its loaded programs (its name is the snapshot's).
#[derive(Debug, Default)]
pub struct SelfMetrics {
    mechanism: Option<String>,
    /// Program name and a descriptor of it (a duplicate, so it outlives no one's object).
    programs: Vec<(String, OwnedFd)>,
}

impl SelfMetrics {
    pub fn new() -> SelfMetrics {
        SelfMetrics { mechanism: None, programs: Vec::new() }
    }

    /// Records the mechanism and the loaded programs of `object` (those not loaded have no descriptor).
    pub fn attached(&mut self, mechanism: &str, object: &libbpf_rs::Object) {
        use libbpf_rs::AsRawLibbpf;
        self.mechanism = Some(mechanism.to_string());
        for prog in object.progs() {
            // SAFETY: the program pointer is valid while `object` lives; bpf_program__fd only reads it.
            let fd = unsafe { libbpf_rs::libbpf_sys::bpf_program__fd(prog.as_libbpf_object().as_ptr()) };
            if fd < 0 {
                continue;
            }
            // SAFETY: fd is the program's open descriptor, valid for this call; it is duplicated at once.
            if let Ok(owned) = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned() {
                self.programs.push((prog.name().to_string_lossy().into_owned(), owned));
            }
        }
    }

    /// The attach mechanism recorded by [`SelfMetrics::attached`].
    pub fn mechanism(&self) -> Option<&str> {
        self.mechanism.as_deref()
    }

    /// Adds the self metrics to a scrape's snapshot.
    pub fn add_to(&self, s: &mut Snapshot) {
        let gauge = |name, help, labels| Global { name, help, unit: None, kind: MetricType::Gauge, labels };
        let commit = crate::identity::build_commit().unwrap_or("unknown").to_string();
        let build = gauge("build_info", "Build of the tool serving these metrics (always 1)", &["version", "commit"]);
        s.add_global(&build, vec![env!("CARGO_PKG_VERSION").to_string(), commit], Some(1.0));
        let attach = gauge("attach_info", "The attach mechanism the tool's programs use (always 1)", &["mechanism"]);
        s.add_global(&attach, vec![self.mechanism.clone().unwrap_or_else(|| "unknown".into())], Some(1.0));
        // Declared even when the tool counts none, so every tool has the same families.
        let lost = "Records lost on their way to user space (a full ring or perf buffer)";
        s.add_global(&Global::counter("lost_events", lost, &["what"]), Vec::new(), None);
        let full = "Events not counted because a BPF map was full";
        s.add_global(&Global::counter("map_full", full, &["map"]), Vec::new(), None);
        let run = Global {
            unit: Some(Unit::Seconds),
            ..Global::counter(
                "bpf_program_run",
                "Time the kernel spent running each BPF program (only while kernel.bpf_stats_enabled=1)",
                &["program"],
            )
        };
        let runs = Global::counter(
            "bpf_program_runs",
            "Runs of each BPF program (only while kernel.bpf_stats_enabled=1)",
            &["program"],
        );
        let skipped = Global::counter(
            "bpf_program_skipped_runs",
            "Runs of each BPF program the kernel skipped: another BPF program was running on that CPU",
            &["program"],
        );
        let counting = kernel_counts_runs();
        let stats = gauge(
            "bpf_stats_enabled",
            "1 while the kernel counts BPF programs' run time and runs (kernel.bpf_stats_enabled), else 0",
            &[],
        );
        s.add_global(&stats, Vec::new(), Some(if counting { 1.0 } else { 0.0 }));
        s.add_global(&run, Vec::new(), None);
        s.add_global(&runs, Vec::new(), None);
        s.add_global(&skipped, Vec::new(), None);
        for (name, fd) in &self.programs {
            let Some(info) = prog_info(fd) else { continue };
            if counting {
                s.add_global(&run, vec![name.clone()], Some(info.run_time_ns as f64 / 1e9));
                s.add_global(&runs, vec![name.clone()], Some(info.run_cnt as f64));
            }
            s.add_global(&skipped, vec![name.clone()], Some(info.recursion_misses as f64));
        }
    }
}

/// Whether the kernel counts programs' run time and runs now: `kernel.bpf_stats_enabled` reads 1 while the sysctl or
/// any process's BPF_ENABLE_STATS descriptor has it on. Unreadable (no /proc/sys) counts as off.
fn kernel_counts_runs() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|v| v.trim() == "1")
}

/// A program's `bpf_prog_info` (its `run_time_ns`, `run_cnt` and `recursion_misses`).
fn prog_info(fd: &OwnedFd) -> Option<libbpf_rs::libbpf_sys::bpf_prog_info> {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a plain struct of the size passed; the kernel fills at most len bytes.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    (rc == 0).then_some(info)
}
