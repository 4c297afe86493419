// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Shared code of the corebpf-tools, in a few rooms by what they serve.
//!
//! - [`tool`]: what every tool is to the multicall binary and the exporter (name, one-line description, entry
//!   point); [`host`]: how a tool runs (standalone or under the exporter), its entry (preflight, exit codes)
//!   and the serving of its metrics; [`identity`]: the name it was invoked by and the build; [`cli`]: the
//!   command-line pieces every tool shares, and man pages and completions from a tool's clap definition;
//!   [`run`]: the life of a running tool (signals, intervals).
//! - [`attach`]: attaching and kernel features: BTF queries and feature checks, skeleton loading over the attach
//!   ladder, perf events, the event stream (ring buffers and lost records), map reading, the traceable kernel
//!   functions.
//! - [`process`]: processes, ELF files and symbols: /proc maps and libraries, ELF symbols and USDT notes, name
//!   patterns, blazesym symbolization.
//! - [`output`]: what tools print: stdout that survives pipes, BCC's histograms.
//! - families of tools: [`stacks`] (stack traces, from the kernel's map to BCC's output forms, for the stack
//!   tools) and [`offcpu`] (offcputime, offwaketime and wakeuptime: scheduler filters and tracepoints, their run
//!   and report).
//! - [`domain`]: helpers for one subject: block devices, cgroups, network addresses.
//! - [`probe`]: the probe specs of argdist and trace, parsed into parameters of generic BPF programs.
//! - [`functions`]: the function-target family of funccount, funclatency and stackcount: BCC's probe patterns
//!   resolved to matches, and a tool's programs attached to them over its attach ladder.
//! - [`runtime`]: language runtimes (Java, Python, Ruby, Node...) for the tools over their USDT probes: the
//!   providers and probe names of each, guessing a process's language, finding the file that carries its probes.

pub mod attach;
#[cfg(test)]
mod c_header;
pub mod cli;
pub mod domain;
pub mod functions;
pub mod host;
pub mod identity;
pub mod offcpu;
pub mod output;
pub mod probe;
pub mod process;
pub mod run;
pub mod runtime;
pub mod stacks;
pub mod tool;
