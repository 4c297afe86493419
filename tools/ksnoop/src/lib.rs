// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ksnoop: kernel function entries and returns with their arguments and return value, printed as the function's
//! BTF signature describes them (libbpf-tools' tool, CO-RE).
//!
//! `ksnoop [trace] FUNC...` traces, `ksnoop info FUNC...` prints the signatures. Each FUNC (`name` or
//! `name(value, ...)`) is resolved against the kernel's BTF ([`spec`]) into what the BPF side copies at each entry
//! and return (an argument, what it points to, a member of the struct it points to, the return value) and the
//! comparisons it checks; the values go into the object's .rodata before load, one slot of programs per function,
//! attached by fentry/fexit, else kprobes/kretprobes. Records come through a ring buffer and are printed with
//! libbpf's btf_dump ([`dump`], [`report`]) as libbpf-tools' ksnoop prints them, or as JSON lines.

mod bpf;
mod dump;
mod report;
mod spec;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{CommandFactory, Parser};
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{load_first_working, rodata};
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, MapCore};

use bpf::consts::{MAX_FUNCS, MAX_VALUES, VAL_MEMBER, VAL_PTR};
use bpf::types::record;
use bpf::{BpfSkel, BpfSkelBuilder};
use report::{Layout, Rec, Report};
use spec::{Function, Types};

// SAFETY: a plain C struct of integers, generated from ksnoop.h.
unsafe impl plain::Plain for record {}

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Ring buffer pages per CPU unless -P says otherwise (libbpf-tools' perf buffer default).
const PAGES_DEFAULT: u32 = 16;

/// Kernel function entries and returns, with arguments and return value shown as their BTF types
#[derive(Debug, Parser)]
#[command(name = "ksnoop", version, after_help = EXAMPLES)]
struct Args {
    /// Print on stderr how each value was resolved (argument, member offset, size, comparison)
    #[arg(short = 'd', long)]
    debug: bool,
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Size the ring buffer to this many pages per CPU (default 16)
    #[arg(short = 'P', long, value_name = "PAGES", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pages: Option<u32>,
    /// Stack mode: show the functions only when each is called under the one before, in the order given
    #[arg(short = 's', long)]
    stack: bool,
    /// Print JSON lines: one object per entry or return shown
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// [trace | info | help] then the functions: name, or name(value, ...) where a value is an argument, return or
    /// arg->member, maybe compared (==, !=, <, <=, >, >=) with an integer
    #[arg(required = true, value_name = "FUNC", allow_hyphen_values = false)]
    words: Vec<String>,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe]);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Trace,
    Info,
}

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    let (command, funcs) = match args.words[0].as_str() {
        "help" => {
            let _ = Args::command().print_help();
            return ExitCode::SUCCESS;
        }
        "info" => (Command::Info, &args.words[1..]),
        "trace" => (Command::Trace, &args.words[1..]),
        _ => (Command::Trace, &args.words[..]),
    };
    if funcs.is_empty() {
        common::cli::usage_error("name a kernel function to trace");
    }
    if funcs.len() > MAX_FUNCS {
        common::cli::usage_error(&format!("at most {MAX_FUNCS} functions at once"));
    }
    let funcs = funcs.to_vec();
    match command {
        Command::Info => host.main(|| info(&funcs)),
        Command::Trace => host.bpf_main(args.verbose, |signals| trace(&args, &funcs, signals)),
    }
}

/// Resolves the specifications against the kernel's BTF; a bad one is a usage error (exit 2).
fn resolve(types: &Types, specs: &[String], debug: bool) -> Vec<Function> {
    let funcs: Vec<Function> =
        specs.iter().map(|s| types.function(s).unwrap_or_else(|e| common::cli::usage_error(&e.0))).collect();
    for f in funcs.iter().filter(|_| debug) {
        for v in &f.values {
            let from = if v.at_entry() { format!("argument {}", v.base + 1) } else { "the return value".into() };
            let member = v.member.map(|o| format!(", member at offset {o}")).unwrap_or_default();
            let ptr = if v.ptr { ", pointer: what it points to" } else { "" };
            let pred = v.pred.map(|(op, n)| format!(", compared {op:?} {n}")).unwrap_or_default();
            let ty = types.type_name(v.type_id);
            eprintln!(
                "ksnoop: {}: '{}' is {from}{member}{ptr}: {} bytes of {}{pred}",
                f.name,
                v.name,
                v.size,
                ty.trim_end()
            );
        }
    }
    funcs
}

fn info(specs: &[String]) -> Result<()> {
    let types = Types::load()?;
    let funcs = resolve(&types, specs, false);
    let mut out = Output::new();
    for f in &funcs {
        writeln!(out, "{}", f.declaration)?;
    }
    out.flush()?;
    Ok(())
}

fn trace(args: &Args, specs: &[String], signals: Signals) -> Result<()> {
    let types = Types::load()?;
    let funcs = resolve(&types, specs, args.debug);
    if let Some(pid) = args.pid.pid {
        common::cli::require_process(pid)?;
    }
    let layouts: Vec<(Layout, Layout)> = funcs.iter().map(layout).collect();
    let names: Vec<&str> = funcs.iter().map(|f| f.name.as_str()).collect();
    let ((skel, _links), _mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(args, &funcs, &layouts, mech))
            .with_context(|| format!("cannot trace {}: needs fentry or kprobes", names.join(", ")))?;
    let mut out = Output::new();
    let mut report = Report::new(&types, &funcs, layouts, args.json)?;
    report.header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let stream = EventStream::new(&skel.maps.events as &dyn MapCore, &bss.lost, "records").also_dropped(
        &bss.untracked,
        "calls",
        "too many tasks or nested calls to follow",
    );
    stream.print(&signals, &mut out, args.json, |out, data| report.take(out, Rec::parse(data)))
}

/// Where each value's bytes go: entry values one after the other in entry records, return values in return
/// records.
pub(crate) fn layout(f: &Function) -> (Layout, Layout) {
    let (mut entry, mut ret) = (Vec::new(), Vec::new());
    let (mut at_entry, mut at_return) = (0usize, 0usize);
    for v in &f.values {
        let len = v.copied() as usize;
        if v.at_entry() {
            entry.push((at_entry, len));
            ret.push((0, 0));
            at_entry += len;
        } else {
            ret.push((at_return, len));
            entry.push((0, 0));
            at_return += len;
        }
    }
    (entry, ret)
}

/// Ring buffer bytes for `pages` pages per CPU: a power of two.
fn ring_bytes(pages: u32) -> u32 {
    let cpus = libbpf_rs::num_possible_cpus().unwrap_or(1).max(1) as u64;
    let bytes = (pages as u64 * 4096 * cpus).next_power_of_two().clamp(64 * 1024, 1 << 30);
    bytes as u32
}

/// Opens the object, describes the functions in its .rodata, loads the programs of their slots for `mech` and
/// attaches them (the returns first, so that no return is seen without its entry).
fn load_and_attach(
    args: &Args,
    funcs: &[Function],
    layouts: &[(Layout, Layout)],
    mech: Attach,
) -> Result<(BpfSkel<'static>, Vec<Link>)> {
    match mech {
        Attach::Kprobe if !common::probe::attach::kprobes_available() => {
            bail!("no kprobes (CONFIG_KPROBES is not set)")
        }
        Attach::Fentry => {
            if let Some(f) = funcs.iter().find(|f| !f.fentry_ok) {
                bail!("{} has an argument that is not an integer or a pointer", f.name);
            }
        }
        _ => {}
    }
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    open.maps.events.set_max_entries(ring_bytes(args.pages.unwrap_or(PAGES_DEFAULT)))?;
    {
        let ro = rodata(&mut open.maps.rodata_data)?;
        ro.nr_funcs = funcs.len() as u32;
        ro.stack_mode = args.stack;
        ro.track = args.stack || funcs.iter().any(Function::hold);
        for (k, (f, (entry, ret))) in funcs.iter().zip(layouts).enumerate() {
            let s = &mut ro.funcs[k];
            s.nr_values = f.values.len() as u32;
            s.nr_args = f.nr_args;
            s.hold = u32::from(f.hold());
            s.has_entry = u32::from(f.values.iter().any(|v| v.at_entry()));
            s.has_return = u32::from(f.values.iter().any(|v| !v.at_entry()));
            s.entry_len = entry.iter().map(|(o, l)| o + l).max().unwrap_or(0) as u32;
            s.return_len = ret.iter().map(|(o, l)| o + l).max().unwrap_or(0) as u32;
            for (i, v) in f.values.iter().enumerate().take(MAX_VALUES) {
                let d = &mut s.values[i];
                d.base = v.base as u8;
                d.flags = (if v.ptr { VAL_PTR } else { 0 } | if v.member.is_some() { VAL_MEMBER } else { 0 }) as u8;
                d.offset = v.member.unwrap_or(0);
                d.size = v.copied();
                d.data_off = if v.at_entry() { entry[i].0 } else { ret[i].0 } as u32;
                if let Some((op, n)) = v.pred {
                    d.pred = spec::pred_code(op);
                    d.pred_value = n as u64;
                    (d.pred_size, d.pred_signed) = (v.pred_width.0, u8::from(v.pred_width.1));
                }
            }
        }
    }
    let prefixes: [&str; 2] = match mech {
        Attach::Fentry => ["fexit_", "fentry_"],
        _ => ["kretprobe_", "kprobe_"],
    };
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let slot = prefixes.iter().find_map(|p| name.strip_prefix(p)?.parse::<usize>().ok());
        let func = slot.and_then(|k| funcs.get(k));
        prog.set_autoload(func.is_some());
        if let (Some(f), Attach::Fentry) = (func, mech) {
            prog.set_attach_target(0, Some(f.name.clone()))
                .with_context(|| format!("setting the fentry target {}", f.name))?;
        }
    }
    let skel = match open.load() {
        Ok(skel) => skel,
        Err(err) if mech == Attach::Fentry => bail!("refused by the kernel: {err}"),
        Err(err) => return Err(err).with_context(|| format!("loading the BPF programs ({mech})")),
    };
    let mut links = Vec::new();
    for prefix in prefixes {
        for (k, f) in funcs.iter().enumerate() {
            let name = format!("{prefix}{k}");
            let prog = skel.object().progs_mut().find(|p| p.name().to_string_lossy() == name);
            let prog = prog.with_context(|| format!("no program {name} in the BPF object"))?;
            let link = match mech {
                Attach::Fentry => prog.attach_trace(),
                _ => prog.attach_kprobe(prefix.starts_with("kret"), &f.name),
            };
            links.push(link.with_context(|| format!("attaching {} to {}", prefix.trim_end_matches('_'), f.name))?);
        }
    }
    Ok((skel, links))
}
