// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Probe runs the kernel skipped: a BPF program's `recursion_misses`.
//!
//! The kernel does not run a tracing program while another run of it (tp_btf, raw_tp, fentry) or, on the classic
//! tracepoints and kprobes, any such program is already running on that CPU; it counts each skipped run in the
//! program's `recursion_misses`. It happens when an interrupt's softirq lands inside a probe that runs in process
//! context and fires the same hook (a loopback packet changing a socket's state while `close()` changes another's):
//! rare, but an event the tool never saw. [`skipped_runs`] sums the count over every BPF program this process holds,
//! read from `/proc/self/fdinfo` (kernels since 5.12 print it there), so a tool needs to name nothing to report it.

use std::fs;

/// Why events are missing when the kernel skipped runs: the `why` of the tool's `lost N <what> (<why>)` line. It
/// is an upper bound: a skipped run may have been one that would have made no event.
pub const WHY: &str =
    "at most: the kernel skipped as many runs of its probes, another BPF program was running on that CPU";

/// The `recursion_misses` of every BPF program this process has loaded, summed; 0 where the kernel does not say.
pub fn skipped_runs() -> u64 {
    let Ok(fds) = fs::read_dir("/proc/self/fd") else { return 0 };
    fds.flatten()
        .filter(|fd| fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == "anon_inode:bpf-prog"))
        .filter_map(|fd| fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.file_name().to_string_lossy())).ok())
        .map(|info| recursion_misses(&info))
        .sum()
}

/// The `recursion_misses:` field of a program's fdinfo text.
fn recursion_misses(fdinfo: &str) -> u64 {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("recursion_misses:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_field_of_a_program_fdinfo() {
        let info = "pos:\t0\nflags:\t02000002\nprog_type:\t26\nrun_cnt:\t9\nrecursion_misses:\t3\nverified_insns:\t7\n";
        assert_eq!(recursion_misses(info), 3);
        assert_eq!(recursion_misses("pos:\t0\nprog_type:\t26\n"), 0);
    }

    #[test]
    fn a_process_without_programs_skipped_nothing() {
        assert_eq!(skipped_runs(), 0);
    }
}
