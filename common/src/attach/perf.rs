// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Sampling perf events for BPF programs: one `perf_event_open` per CPU, and the CPUs that are online.
//!
//! [`SamplingEvents::open`] opens a sampling event on each CPU asked for (all online CPUs, or one with `-C`),
//! counting hardware CPU cycles where the PMU offers them and the software `cpu-clock` otherwise (virtual
//! machines often have no PMU), at a frequency (`-F HZ`) or every N events (`-c COUNT`). The tool attaches its
//! `perf_event` program to each descriptor; the links own and close them. A frequency above the kernel's
//! `kernel.perf_event_max_sample_rate` and a CPU that does not exist or is offline are refused with a clear
//! message. [`online_cpus`] parses `/sys/devices/system/cpu/online`.

use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use anyhow::{bail, Context, Result};

const ONLINE_CPUS: &str = "/sys/devices/system/cpu/online";
const MAX_SAMPLE_RATE: &str = "/proc/sys/kernel/perf_event_max_sample_rate";

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
/// `perf_event_attr` flag bits used here.
const FLAG_FREQ: u64 = 1 << 10;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// `struct perf_event_attr` up to `config2` (`PERF_ATTR_SIZE_VER1`, 72 bytes), which every kernel accepts.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period_or_freq: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
}

/// How often to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// Samples per second per CPU (`-F HZ`).
    Frequency(u64),
    /// One sample every this many events (`-c COUNT`).
    Period(u64),
}

/// What is counted to trigger samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Hardware CPU cycles (needs a PMU).
    Cycles,
    /// The software `cpu-clock` timer.
    CpuClock,
}

impl fmt::Display for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Clock::Cycles => "cycles",
            Clock::CpuClock => "cpu-clock",
        })
    }
}

/// Sampling perf events, one per CPU, ready to have a BPF program attached.
#[derive(Debug)]
pub struct SamplingEvents {
    /// (CPU, event descriptor).
    pub fds: Vec<(u32, OwnedFd)>,
    /// What the events count.
    pub clock: Clock,
}

impl SamplingEvents {
    /// Opens a sampling event for all processes on each of `cpus`, at `rate`: hardware cycles if the first CPU's
    /// PMU accepts them, else the software cpu-clock.
    pub fn open(cpus: &[u32], rate: Rate) -> Result<Self> {
        check_rate(rate)?;
        let Some(&first) = cpus.first() else {
            bail!("no CPU to sample on");
        };
        let clock = match open_one(Clock::Cycles, rate, first) {
            Ok(_) => Clock::Cycles,
            Err(err) if no_such_event(&err) => Clock::CpuClock,
            Err(err) => return Err(err).context(format!("opening a perf event on CPU {first}")),
        };
        let mut fds = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            match open_one(clock, rate, cpu) {
                Ok(fd) => fds.push((cpu, fd)),
                // A CPU that went offline since the list was read.
                Err(err) if err.raw_os_error() == Some(libc::ENODEV) => continue,
                Err(err) => return Err(err).context(format!("opening a {clock} perf event on CPU {cpu}")),
            }
        }
        if fds.is_empty() {
            bail!("none of the CPUs could be sampled (all offline?)");
        }
        Ok(SamplingEvents { fds, clock })
    }
}

/// True if the kernel has no such event type here (no PMU, or no cycles counter).
fn no_such_event(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV | libc::EINVAL))
}

fn open_one(clock: Clock, rate: Rate, cpu: u32) -> io::Result<OwnedFd> {
    let (type_, config) = match clock {
        Clock::Cycles => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
        Clock::CpuClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK),
    };
    open_event(type_, config, rate, cpu)
}

/// Opens one sampling perf event of any kind (`type_` and `config` as in `perf_event_open(2)`: e.g. type 0,
/// config 3 for hardware cache misses) for all processes on `cpu`, at `rate`. The error is the kernel's errno
/// as it came (ENOENT or EOPNOTSUPP for an event this machine cannot count), so a tool can name it.
pub fn open_event(type_: u32, config: u64, rate: Rate, cpu: u32) -> io::Result<OwnedFd> {
    let mut attr = PerfEventAttr { size: std::mem::size_of::<PerfEventAttr>() as u32, ..Default::default() };
    (attr.type_, attr.config) = (type_, config);
    match rate {
        Rate::Frequency(hz) => {
            attr.sample_period_or_freq = hz;
            attr.flags |= FLAG_FREQ;
        }
        Rate::Period(n) => attr.sample_period_or_freq = n,
    }
    // SAFETY: perf_event_open(2) reads `attr.size` bytes of `attr`, which outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Refuses a frequency above the kernel's limit (`kernel.perf_event_max_sample_rate`) up front, with the limit.
pub fn check_rate(rate: Rate) -> Result<()> {
    let Rate::Frequency(hz) = rate else {
        return Ok(());
    };
    if hz == 0 {
        bail!("the sampling frequency must be at least 1 Hz");
    }
    if let Some(max) = fs::read_to_string(MAX_SAMPLE_RATE).ok().and_then(|s| s.trim().parse::<u64>().ok()) {
        if hz > max {
            bail!(
                "frequency {hz} Hz is above the kernel's limit of {max} Hz (sysctl kernel.perf_event_max_sample_rate)"
            );
        }
    }
    Ok(())
}

/// The online CPUs, from `/sys/devices/system/cpu/online` (e.g. `0-3,6`).
pub fn online_cpus() -> Result<Vec<u32>> {
    let text = fs::read_to_string(ONLINE_CPUS).with_context(|| format!("reading {ONLINE_CPUS}"))?;
    parse_cpu_list(text.trim()).with_context(|| format!("parsing {ONLINE_CPUS}: '{}'", text.trim()))
}

/// The CPUs to sample: all online ones, or just `cpu` if it is online (`-C CPU`).
pub fn sampling_cpus(cpu: Option<u32>) -> Result<Vec<u32>> {
    let online = online_cpus()?;
    match cpu {
        None => Ok(online),
        Some(cpu) if online.contains(&cpu) => Ok(vec![cpu]),
        Some(cpu) => bail!("CPU {cpu} does not exist or is offline (online CPUs: {})", format_cpu_list(&online)),
    }
}

/// Parses a kernel CPU list such as `0-3,6,8-9`.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (low, high) = part.split_once('-').unwrap_or((part, part));
        let (low, high): (u32, u32) = (low.trim().parse()?, high.trim().parse()?);
        if low > high {
            bail!("bad CPU range '{part}'");
        }
        cpus.extend(low..=high);
    }
    Ok(cpus)
}

/// Formats CPUs back as a kernel CPU list (`0-3,6`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_has_the_v1_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 72);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("0-3,6,8-9").unwrap(), vec![0, 1, 2, 3, 6, 8, 9]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format_cpu_list(&[1]), "1");
    }

    #[test]
    fn this_machine_has_online_cpus() {
        let cpus = online_cpus().unwrap();
        assert!(!cpus.is_empty());
        assert!(sampling_cpus(Some(cpus[0])).is_ok());
        let err = sampling_cpus(Some(100_000)).unwrap_err().to_string();
        assert!(err.contains("CPU 100000 does not exist or is offline"), "{err}");
    }

    #[test]
    fn absurd_frequencies_are_refused() {
        let err = check_rate(Rate::Frequency(u64::MAX)).unwrap_err().to_string();
        assert!(err.contains("above the kernel's limit"), "{err}");
        assert!(check_rate(Rate::Frequency(0)).is_err());
        assert!(check_rate(Rate::Period(1_000_000)).is_ok());
    }
}
