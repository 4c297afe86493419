//! Attaching to the kernel, and what the kernel offers.
//!
//! [`features`] answers questions from BTF, capabilities and trial loads (never the version string);
//! [`loader`] opens and loads a tool's skeleton over its attach ladder (`tp_btf` > `raw_tp` > tracepoint, ...);
//! [`links`] holds a tool's links and detaches them in parallel; [`perf`] opens perf events; [`ring_buffer`]
//! polls ring buffers; [`maps`] reads maps into Rust values; [`kernel_functions`] lists the kernel functions that
//! can be traced; [`sched`] is the scheduler side of the off-CPU tools (their BPF filters and
//! `sched_switch`/wakeup tracepoints, with `bpf/include/offcpu.bpf.h`).

pub mod btf_enums;
pub mod features;
pub mod kernel_functions;
pub mod links;
pub mod loader;
pub mod maps;
pub mod perf;
pub mod ring_buffer;
pub mod sched;
