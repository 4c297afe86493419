//! Shared code of the corebpf-tools.
//!
//! Each tool is a thin `main.rs` over these modules:
//! - every tool: command-line pieces ([`cli`]), feature probes and preflight checks ([`probe`]), skeleton loading
//!   with attach fallbacks ([`loader`]), the signal-aware interval loop ([`run`]) and ring-buffer event loop
//!   ([`events`]), map reading ([`maps`]), output that survives pipes ([`output`]), and man pages and shell
//!   completions from the tool's clap definition ([`generate`]);
//! - histogram tools: BCC-compatible histograms ([`hist`]); block-device and cgroup helpers ([`blockdev`],
//!   [`cgroup`]);
//! - network tools: socket addresses from BPF records ([`net`]);
//! - uprobe tools: a process's (or the system's) libraries ([`procmaps`]), the functions and USDT probes of an ELF
//!   file ([`elf`]), name patterns as globs or regexes ([`pattern`]);
//! - kernel-function tools: traceable kernel functions ([`ksyms`]);
//! - stack tools: sampling perf events ([`perf`]) and symbolization with blazesym ([`syms`]).

pub mod blockdev;
pub mod cgroup;
pub mod cli;
pub mod elf;
pub mod events;
pub mod generate;
pub mod hist;
pub mod ksyms;
pub mod loader;
pub mod maps;
pub mod net;
pub mod output;
pub mod pattern;
pub mod perf;
pub mod probe;
pub mod procmaps;
pub mod run;
pub mod syms;
