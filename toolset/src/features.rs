// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `corebpf-tools features`: what this kernel offers the tools, and the attach path each tool would take here.
//!
//! Every attach mechanism is decided the way the tools decide it: by loading and attaching a tiny program
//! (src/features.bpf.c) to a target every kernel has, then detaching it; BPF cookies and ring buffers by libbpf's
//! own trial loads; perf events by opening one. Nothing is read from the kernel version. With `--json`, one JSON
//! object instead of the tables, with each tool's whole attach ladder under `ladders`. This is the first thing to attach to a bug report,
//! so it starts with the facts a support ticket needs (`system`: version and commit, kernel release, architecture,
//! lockdown and the sysctls that restrict BPF and perf events).

mod bpf {
    include!(concat!(env!("OUT_DIR"), "/bpf.skel.rs"));
}

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use common::attach::features::{has_bpf_privileges, Attach};
use common::attach::loader::object_storage;
use common::attach::perf::{Rate, SamplingEvents};
use common::tool::Tool;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{KprobeMultiOpts, Link, UprobeMultiOpts, UprobeOpts};
use serde::Serialize;
use tabled::builder::Builder;
use tabled::settings::Style;

use bpf::{BpfSkel, BpfSkelBuilder};

/// One line of the feature table.
#[derive(Serialize)]
struct Feature {
    name: &'static str,
    available: bool,
    detail: String,
}

impl Feature {
    fn from_result(name: &'static str, result: Result<String>) -> Self {
        match result {
            Ok(detail) => Feature { name, available: true, detail },
            Err(err) => Feature { name, available: false, detail: refusal(&err) },
        }
    }
}

/// Why a trial failed, in a few words: the stage that failed and the kernel's error
/// (`load refused: Operation not permitted (os error 1)`).
fn refusal(err: &anyhow::Error) -> String {
    let cause = err.root_cause().to_string();
    match err.chain().next().map(|stage| stage.to_string()) {
        Some(stage) if !stage.contains(&cause) => format!("{stage}: {cause}"),
        _ => cause,
    }
}

/// `corebpf-tools features [--json]`.
pub fn main(tools: &[Tool], args: &[OsString]) -> ExitCode {
    let json = match args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().as_slice() {
        [] => false,
        [flag] if flag == "--json" => true,
        _ => {
            eprintln!("corebpf-tools features: unexpected arguments (usage: corebpf-tools features [--json])");
            return ExitCode::from(2);
        }
    };
    // A refused trial is an answer, not an error: libbpf's own messages about it stay quiet.
    common::attach::loader::init_libbpf_log(0);
    let features = probe_all();
    let paths: Vec<(&str, String)> = tools.iter().map(|t| (t.name, attach_path(t, &features))).collect();
    let system = crate::system::facts();
    if json {
        let ladders = tools_ladders(tools);
        let tools: serde_json::Map<String, serde_json::Value> =
            paths.iter().map(|(t, p)| (t.to_string(), serde_json::Value::from(p.as_str()))).collect();
        let system: serde_json::Map<String, serde_json::Value> =
            system.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(v.as_str()))).collect();
        let value = serde_json::json!({ "system": system, "features": features, "tools": tools, "ladders": ladders });
        println!("{value}");
    } else {
        let mut table = Builder::default();
        table.push_record(["SYSTEM", "VALUE"]);
        for (key, value) in &system {
            table.push_record([*key, value.as_str()]);
        }
        println!("{}", trimmed(table.build().with(Style::blank()).to_string()));
        println!();
        let mut table = Builder::default();
        table.push_record(["FEATURE", "AVAILABLE", "DETAIL"]);
        for f in &features {
            table.push_record([f.name, if f.available { "yes" } else { "no" }, &f.detail]);
        }
        println!("{}", trimmed(table.build().with(Style::blank()).to_string()));
        println!();
        let mut table = Builder::default();
        table.push_record(["TOOL", "ATTACH PATH HERE"]);
        for (tool, path) in &paths {
            table.push_record([*tool, path.as_str()]);
        }
        println!("{}", trimmed(table.build().with(Style::blank()).to_string()));
    }
    ExitCode::SUCCESS
}

/// Every tool's whole attach ladder by name, as `TOOL.attach` lists it (empty for a tool that keeps its own): every
/// mechanism it may use, cheapest first in each family, so a test can force each step this kernel offers.
fn tools_ladders(tools: &[Tool]) -> serde_json::Map<String, serde_json::Value> {
    tools.iter().map(|t| (t.name.to_string(), t.attach.iter().map(|a| a.name()).collect::<Vec<_>>().into())).collect()
}

fn trimmed(table: String) -> String {
    table.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

/// Per family of the tool's mechanisms (tracepoints, kernel functions, user functions, perf events), the first
/// that this kernel offers, or what the family lacks.
fn attach_path(tool: &Tool, features: &[Feature]) -> String {
    if tool.attach.is_empty() {
        return "-".into();
    }
    let available = |a: Attach| features.iter().any(|f| f.name == a.name() && f.available);
    let mut families: Vec<Vec<Attach>> = Vec::new();
    for &a in tool.attach {
        match families.iter_mut().find(|f| family(f[0]) == family(a)) {
            Some(f) => f.push(a),
            None => families.push(vec![a]),
        }
    }
    let labelled = families.len() > 1;
    families
        .iter()
        .map(|f| {
            let path = match f.iter().find(|&&a| available(a)) {
                Some(a) => a.name().to_string(),
                None => format!("none ({} unavailable)", f.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")),
            };
            if labelled {
                format!("{}: {path}", FAMILY_NAMES[family(f[0]) as usize])
            } else {
                path
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What each family of mechanisms attaches to, by [`family`].
const FAMILY_NAMES: [&str; 4] = ["tracepoints", "kernel functions", "user functions", "perf events"];

fn family(a: Attach) -> u8 {
    match a {
        Attach::TpBtf | Attach::RawTp | Attach::Tracepoint => 0,
        Attach::Fentry | Attach::KprobeMulti | Attach::Kprobe => 1,
        Attach::UprobeMulti | Attach::Uprobe => 2,
        Attach::PerfEvent => 3,
    }
}

/// Every feature, in the table's order.
fn probe_all() -> Vec<Feature> {
    let btf = Path::new("/sys/kernel/btf/vmlinux");
    let mut out = vec![
        Feature::from_result("privileges", privileges()),
        Feature::from_result(
            "btf",
            if btf.exists() { Ok(btf.display().to_string()) } else { Err(anyhow!("{} is missing", btf.display())) },
        ),
        Feature::from_result(
            "tracefs",
            common::attach::features::find_tracefs()
                .map(|p| format!("mounted at {}", p.display()))
                .ok_or_else(|| anyhow!("not mounted (tools that need it mount it at /sys/kernel/tracing)")),
        ),
    ];
    for mech in [
        Attach::TpBtf,
        Attach::RawTp,
        Attach::Tracepoint,
        Attach::Fentry,
        Attach::KprobeMulti,
        Attach::Kprobe,
        Attach::UprobeMulti,
        Attach::Uprobe,
        Attach::PerfEvent,
    ] {
        out.push(Feature::from_result(mech.name(), trial_attach(mech)));
    }
    out.push(Feature::from_result("bpf_cookie", trial_attach_cookie()));
    out.push(Feature::from_result("ring_buffer", ring_buffer()));
    out
}

fn privileges() -> Result<String> {
    let euid = nix::unistd::geteuid();
    if has_bpf_privileges() {
        Ok(if euid.is_root() { "root".into() } else { "CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)".into() })
    } else {
        bail!("uid {euid} without CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN: every trial below needs them")
    }
}

/// Opens the trial object with only `prog` to be loaded, and loads it.
fn load_only(prog: &str) -> Result<BpfSkel<'static>> {
    let mut open = BpfSkelBuilder::default().open(object_storage()).context("opening the trial object")?;
    for mut p in open.open_object_mut().progs_mut() {
        let keep = p.name().to_str() == Some(prog);
        p.set_autoload(keep);
    }
    open.load().context("load refused")
}

/// The system's C library and a function every libc has, for the uprobe trials.
fn libc_target() -> Result<std::path::PathBuf> {
    common::process::procmaps::system_libc()
}

/// Loads and attaches the trial program of `mech`, then detaches it. Ok holds a detail for the table.
fn trial_attach(mech: Attach) -> Result<String> {
    let attached = trial_attach_link(mech);
    attached.map_err(|err| if err.to_string() == "load refused" { err } else { err.context("attach refused") })
}

fn trial_attach_link(mech: Attach) -> Result<String> {
    let link: Link = match mech {
        Attach::TpBtf => load_only("probe_tp_btf")?.progs.probe_tp_btf.attach()?,
        Attach::RawTp => load_only("probe_raw_tp")?.progs.probe_raw_tp.attach_raw_tracepoint("sched_process_fork")?,
        Attach::Tracepoint => {
            common::attach::features::tracefs()?;
            let skel = load_only("probe_tracepoint")?;
            skel.progs
                .probe_tracepoint
                .attach_tracepoint(libbpf_rs::TracepointCategory::Custom("sched".into()), "sched_process_fork")?
        }
        Attach::Fentry => load_only("probe_fentry")?.progs.probe_fentry.attach()?,
        Attach::Kprobe => load_only("probe_kprobe")?.progs.probe_kprobe.attach_kprobe(false, "vfs_read")?,
        Attach::KprobeMulti => {
            let opts = KprobeMultiOpts { symbols: vec!["vfs_read".into()], ..Default::default() };
            load_only("probe_kprobe_multi")?.progs.probe_kprobe_multi.attach_kprobe_multi_with_opts(opts)?
        }
        Attach::Uprobe => {
            let libc = libc_target()?;
            let opts = UprobeOpts { func_name: Some("getpid".into()), ..Default::default() };
            load_only("probe_uprobe")?.progs.probe_uprobe.attach_uprobe_with_opts(-1, &libc, 0, opts)?
        }
        Attach::UprobeMulti => {
            let libc = libc_target()?;
            let opts = UprobeMultiOpts::default();
            load_only("probe_uprobe_multi")?
                .progs
                .probe_uprobe_multi
                .attach_uprobe_multi_with_opts(-1, &libc, "getpid", opts)?
        }
        Attach::PerfEvent => {
            let events = SamplingEvents::open(&[0], Rate::Frequency(1))?;
            let clock = events.clock;
            let (_, fd) = events.fds.into_iter().next().context("no perf event")?;
            let skel = load_only("probe_perf_event")?;
            let link = skel.progs.probe_perf_event.attach_perf_event(std::os::fd::IntoRawFd::into_raw_fd(fd))?;
            drop(link);
            return Ok(format!("sampling by {clock}"));
        }
    };
    drop(link);
    Ok(String::new())
}

/// BPF cookies: a uprobe program that calls bpf_get_attach_cookie() loads and attaches with a cookie.
fn trial_attach_cookie() -> Result<String> {
    let libc = libc_target()?;
    let opts = UprobeOpts { func_name: Some("getpid".into()), cookie: 1, ..Default::default() };
    let skel = load_only("probe_cookie")?;
    let link = skel.progs.probe_cookie.attach_uprobe_with_opts(-1, &libc, 0, opts)?;
    drop(link);
    Ok(String::new())
}

/// Ring buffers: a trial ring buffer of one page. The kernel's answer tells a missing map type (EINVAL) from a
/// refusal (EPERM: no BPF privileges), which says nothing about the kernel.
fn ring_buffer() -> Result<String> {
    use libbpf_rs::libbpf_sys;
    // SAFETY: sysconf has no pointers.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u32;
    // SAFETY: bpf_map_create with no name and no options; the descriptor it returns is closed below.
    let fd = unsafe {
        libbpf_sys::bpf_map_create(libbpf_sys::BPF_MAP_TYPE_RINGBUF, std::ptr::null(), 0, 0, page, std::ptr::null())
    };
    if fd >= 0 {
        // SAFETY: the descriptor was just returned to us and is not used again.
        unsafe { libc::close(fd) };
        return Ok(String::new());
    }
    let err = std::io::Error::from_raw_os_error(-fd);
    match -fd {
        libc::EPERM | libc::EACCES => {
            bail!("unknown: creating one was refused ({err}), a question of privileges, not of the kernel")
        }
        libc::EINVAL => bail!("the kernel has no BPF ring buffer"),
        _ => bail!("probing failed: {err}"),
    }
}
