// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Helpers for the IRQ time tools' tests (hardirqs, softirqs): run the tool around a workload while the
//! kernel's own per-CPU counts (/proc/interrupts, /proc/softirqs) are read around it, and read the counts the
//! tool printed (its text table or its JSON lines).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use crate::{json_lines, prog_ids_of, Finished, Running};

/// A kernel count file read once: name → count per CPU.
pub type Snapshot = BTreeMap<String, Vec<u64>>;

/// /proc/softirqs: per vector name (as the kernel prints it, NET_RX), the count per CPU.
pub fn proc_softirqs() -> Snapshot {
    let text = std::fs::read_to_string("/proc/softirqs").unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let (name, counts) = l.split_once(':')?;
            Some((name.trim().to_string(), counts.split_whitespace().map(|c| c.parse().unwrap()).collect()))
        })
        .collect()
}

/// `n` ping-pongs of 100 bytes over a loopback TCP connection (each delivery raises NET_RX).
pub fn loopback_ping_pongs(n: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 100];
        while s.read_exact(&mut buf).is_ok() {
            s.write_all(&buf).unwrap();
        }
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut buf = [7u8; 100];
    for _ in 0..n {
        c.write_all(&buf).unwrap();
        c.read_exact(&mut buf).unwrap();
    }
    drop(c);
    server.join().unwrap();
}

/// Per name: (events while the tool was surely attached, events from before its start to after its exit).
pub type Bounds = BTreeMap<String, (u64, u64)>;

/// How one IRQ time tool is run and checked.
pub struct IrqTool {
    /// The binary (`hardirqs`).
    pub name: &'static str,
    /// The start of its banner (`Tracing hard irq`).
    pub banner: &'static str,
    /// Reads the kernel's counts.
    pub snapshot: fn() -> Snapshot,
    /// The tool's name for a kernel count's name (softirqs prints `NET_RX` as `net_rx`).
    pub rename: fn(&str) -> String,
    /// What makes the IRQs of the test happen.
    pub workload: fn(),
    /// Checks the counts the tool printed (name → count) against the bounds; the tool's output for messages.
    pub check: fn(&BTreeMap<String, u64>, &Bounds, &str),
}

fn on(snap: &Snapshot, name: &str, cpu: Option<usize>) -> u64 {
    snap.get(name).map_or(0, |c| cpu.map_or_else(|| c.iter().sum(), |i| c[i]))
}

impl IrqTool {
    /// Runs the tool with `args` and `env` around the workload; returns the finished run and the bounds per
    /// name, on CPU `cpu` or on all CPUs.
    pub fn traced(&self, args: &[&str], env: &[(&str, &str)], cpu: Option<usize>) -> (Finished, Bounds) {
        let before = (self.snapshot)();
        let mut run = Running::start_with_env(self.name, args, env);
        if args.contains(&"-j") {
            // JSON prints no banner: wait until the programs are loaded and give the attach a moment.
            for _ in 0..200 {
                if prog_ids_of(run.pid()).len() >= 2 {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
            run.note_programs();
            thread::sleep(Duration::from_millis(300));
        } else {
            run.wait_for_line(self.banner, Duration::from_secs(20));
        }
        let p0 = (self.snapshot)();
        (self.workload)();
        let p1 = (self.snapshot)();
        run.signal(libc::SIGINT);
        let done = run.finish(Duration::from_secs(20));
        done.assert_success();
        let after = (self.snapshot)();
        let bounds = after
            .keys()
            .map(|n| {
                let attached = on(&p1, n, cpu) - on(&p0, n, cpu);
                let around = on(&after, n, cpu) - on(&before, n, cpu);
                ((self.rename)(n), (attached, around))
            })
            .collect();
        (done, bounds)
    }
}

impl IrqTool {
    /// `-C` forced onto raw_tp (`COREBPF_ATTACH=raw_tp`) counts what the kernel counted, and detaches.
    pub fn raw_tp_fallback_counts_the_same(&self) {
        let (done, bounds) = self.traced(&["-C", "-v"], &[("COREBPF_ATTACH", "raw_tp")], None);
        assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
        (self.check)(&table_counts(&done.stdout), &bounds, &done.stdout);
        done.assert_no_programs_left();
    }

    /// `--prometheus`: each IRQ's `corebpf_<tool>_handler_seconds_count` scraped after the workload lies within
    /// the kernel's counts, and `promtool check metrics` accepts the exposition.
    pub fn prometheus_counts_are_the_kernels(&self) {
        let before = (self.snapshot)();
        // -N is a display flag: the metrics stay in seconds.
        let (run, addr) = crate::prom::serving(self.name, &["-N"]);
        let p0 = (self.snapshot)();
        (self.workload)();
        let p1 = (self.snapshot)();
        let text = crate::prom::scrape(&addr);
        run.signal(libc::SIGTERM);
        let done = run.finish(Duration::from_secs(20));
        done.assert_success();
        done.assert_no_programs_left();
        let after = (self.snapshot)();
        crate::prom::promtool_accepts(&text);
        let label = self.name.trim_end_matches('s');
        let prefix = format!("corebpf_{}_handler_seconds_count{{{label}=\"", self.name);
        let counts: BTreeMap<String, u64> = text
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .map(|l| {
                let (name, n) = l.split_once("\"} ").unwrap();
                (name.to_string(), n.parse().unwrap())
            })
            .collect();
        // /proc counts an IRQ as its handler starts, the tool as it ends: at the scrape, one handler a CPU may have
        // started (counted by /proc before p1) and not ended (a vCPU the host stopped in it), so the lower bound
        // allows that many.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        let bounds: Bounds = after
            .keys()
            .map(|n| {
                let lo = (on(&p1, n, None) - on(&p0, n, None)).saturating_sub(cpus);
                ((self.rename)(n), (lo, on(&after, n, None) - on(&before, n, None)))
            })
            .collect();
        (self.check)(&counts, &bounds, &text);
    }

    /// `-j -d 1`: every histogram holds its events ([`json_counts`]) and the counts are the kernel's.
    pub fn json_histograms_hold_every_event_and_time(&self) {
        let (done, bounds) = self.traced(&["-j", "-d", "1"], &[], None);
        let field = self.name.trim_end_matches('s');
        (self.check)(&json_counts(&done.stdout, self.name, field), &bounds, &done.stdout);
    }
}

/// The TOTAL_count table of a text report, summed over intervals: name → count.
pub fn table_counts(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        if let (Some(name), Some(n), None) = (f.next(), f.next(), f.next()) {
            if let Ok(n) = n.parse::<u64>() {
                *counts.entry(name.to_string()).or_default() += n;
            }
        }
    }
    counts
}

/// The counts of `-j -d` JSON lines, summed over intervals: name (the `field` of each object of the `array`) →
/// count. Checks on the way that each histogram holds every event and that each event took at least 100 ns.
pub fn json_counts(text: &str, array: &str, field: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in json_lines(text) {
        for v in line[array].as_array().unwrap() {
            let count = v["count"].as_u64().unwrap();
            let in_buckets: u64 = v["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
            assert_eq!(in_buckets, count, "{v}");
            assert!(v["total_ns"].as_u64().unwrap() >= count * 100, "less than 100 ns per event: {v}");
            *counts.entry(v[field].as_str().unwrap().to_string()).or_insert(0) += count;
        }
    }
    counts
}

/// A run the kernel counted while the tool was surely attached may still be going on (on another CPU, its
/// virtual CPU not scheduled by the host) when the tool stops, and is then never counted: at most one per CPU.
pub fn in_flight_at_stop() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}
