// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Helpers for one subject each: [`blockdev`] (disks, partitions, request flags), [`capabilities`] (capability names, the
//! callers that set a check's options), [`cgroup`] (cgroup v2 filters), [`containers`] (BCC's --cgroupmap and
//! --mntnsmap, and --container), [`container_lookup`] (a running container by name or ID), [`container_names`] (the container a
//! task runs in, from its cgroup), [`killcalls`] (the kill-syscall record and programs of killsnoop and sigsnoop), [`net`] (socket addresses and ports from BPF records), [`paths`] (paths walked
//! from a dentry in BPF), [`signals`] (signal names and numbers),
//! [`fsop`] (the file system operations of fsslower and fsdist), [`syscalls`] (system call and errno names), [`tcp`] (TCP states and flags as BCC names them), [`users`] (user names to UIDs).

pub mod blockdev;
pub mod capabilities;
pub mod cgroup;
pub mod container_lookup;
pub mod container_names;
pub mod containers;
pub mod fsop;
pub mod killcalls;
pub mod net;
pub mod paths;
pub mod signals;
pub mod syscalls;
pub mod tcp;
pub mod users;
