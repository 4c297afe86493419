// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Reading syscount's kernel maps: the per-syscall per-CPU array in one batch (one bpf() call per interval, not one
//! per syscall slot, so a system-wide count is not crowded by the tool's own reads), and the per-process hash map.

use std::os::fd::{AsFd, AsRawFd};

use anyhow::{Context, Result};
use libbpf_rs::{libbpf_sys, MapCore, MapFlags};

use crate::bpf::types::{proc_stat, sys_stat};
use crate::bpf::{consts::SYSCALL_SLOTS, BpfSkel};
use crate::report::Totals;

/// The cumulative counts so far: per syscall (summed over CPUs) or per process.
pub fn read_totals(skel: &BpfSkel<'_>, by_process: bool) -> Result<Totals> {
    if by_process {
        let entries = common::attach::maps::hash_entries::<u32, proc_stat>(&skel.maps.processes)?;
        return Ok(Totals::Processes(entries));
    }
    let map = &skel.maps.syscalls;
    let cpus = libbpf_rs::num_possible_cpus()?;
    let per_cpu = std::mem::size_of::<sys_stat>().next_multiple_of(8);
    let mut keys = vec![0u32; SYSCALL_SLOTS];
    let mut values = vec![0u8; SYSCALL_SLOTS * cpus * per_cpu];
    let mut count = SYSCALL_SLOTS as u32;
    let mut next = 0u32;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        elem_flags: 0,
        flags: 0,
    };
    // SAFETY: the buffers hold `count` keys and `count` per-CPU values (each value_size rounded up to 8, per CPU),
    // as BPF_MAP_LOOKUP_BATCH writes them; the descriptor is the map's, alive for the call.
    let ret = unsafe {
        libbpf_sys::bpf_map_lookup_batch(
            map.as_fd().as_raw_fd(),
            std::ptr::null_mut(),
            (&mut next as *mut u32).cast(),
            keys.as_mut_ptr().cast(),
            values.as_mut_ptr().cast(),
            &mut count,
            &opts,
        )
    };
    // ENOENT: the whole array was read. Kernels without batch lookups (before 5.7): one lookup per slot.
    if ret != 0 && ret != -libc::ENOENT {
        return read_slots(map);
    }
    let mut per_syscall = Vec::new();
    for (i, &nr) in keys.iter().enumerate().take(count as usize) {
        let stats = values[i * cpus * per_cpu..(i + 1) * cpus * per_cpu].chunks(per_cpu);
        let (calls, ns) = stats
            .map(common::attach::maps::from_bytes::<sys_stat>)
            .fold((0, 0), |(c, n), s| (c + s.count, n + s.total_ns));
        if calls > 0 {
            per_syscall.push((nr, calls, ns));
        }
    }
    Ok(Totals::Syscalls(per_syscall))
}

/// The per-syscall counts one slot at a time.
fn read_slots(map: &impl MapCore) -> Result<Totals> {
    let mut per_syscall = Vec::new();
    for nr in 0..SYSCALL_SLOTS as u32 {
        let Some(cpus) = map.lookup_percpu(&nr.to_ne_bytes(), MapFlags::ANY).context("reading map syscalls")? else {
            continue;
        };
        let (calls, ns) = cpus
            .iter()
            .map(|b| common::attach::maps::from_bytes::<sys_stat>(b))
            .fold((0, 0), |(c, n), s| (c + s.count, n + s.total_ns));
        if calls > 0 {
            per_syscall.push((nr, calls, ns));
        }
    }
    Ok(Totals::Syscalls(per_syscall))
}
