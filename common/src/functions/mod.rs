// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The function-target family: what funccount, funclatency and stackcount share.
//!
//! Each of them takes one of BCC's probe patterns (`vfs_*`, `t:sched:*`, `c:malloc`, `u:lib:probe`), resolves
//! it to a list of matches ([`targets`]), tries the mechanisms of its declared attach ladder that apply to that
//! kind of target, cheapest first (`COREBPF_ATTACH` restricts them, as for every tool), and attaches its loaded
//! BPF programs to every match ([`attach`]). What stays in a tool is what is its own: its BPF programs (named by
//! [`attach::Programs`]), the options and map sizes it writes into its object ([`attach::Objects::load`]), and
//! its report.

pub mod attach;
pub mod targets;
