//! Shared code of the corebpf-tools.
//!
//! Each tool is a thin `main.rs` over these modules: command-line pieces ([`cli`]), feature probes and
//! preflight checks ([`probe`]), skeleton loading with attach fallbacks ([`loader`]), the signal-aware interval
//! loop ([`run`]) and ring-buffer event loop ([`events`]), BCC-compatible histograms ([`hist`]), map reading
//! ([`maps`]), output that survives pipes ([`output`]), block-device and cgroup helpers ([`blockdev`],
//! [`cgroup`]), and socket addresses from BPF records ([`net`]).
//! Uprobe tools find a process's (or the system's) libraries with [`procmaps`], and the functions and USDT probes
//! of an ELF file with [`elf`]; kernel-function tools find their candidates with [`ksyms`]; name patterns (globs or
//! regexes) are [`pattern`]s.
//! [`generate`] makes man pages and shell completions from a tool's clap definition, for packaging.
//! The stack tools open sampling perf events with [`perf`] and name addresses with [`syms`] (blazesym).

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
