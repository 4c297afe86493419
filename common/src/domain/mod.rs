// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Helpers for one subject each: [`blockdev`] (disks, partitions, request flags), [`cgroup`] (cgroup v2
//! filters), [`killcalls`] (the kill-syscall record and programs of killsnoop and sigsnoop), [`net`] (socket addresses and ports from BPF records), [`signals`] (signal names and numbers),
//! [`syscalls`] (system call and errno names), [`tcp`] (TCP states and flags as BCC names them), [`users`] (user names to UIDs).

pub mod blockdev;
pub mod cgroup;
pub mod killcalls;
pub mod net;
pub mod signals;
pub mod syscalls;
pub mod tcp;
pub mod users;
