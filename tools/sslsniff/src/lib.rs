// SPDX-License-Identifier: Apache-2.0 OR MIT
//! sslsniff: print the plaintext processes pass to TLS libraries before encryption and get back after decryption
//! (BCC's tool, CO-RE).
//!
//! A uprobe on entry and a uretprobe on return of each read and write function of OpenSSL (SSL_read, SSL_write,
//! and the SSL_read_ex/SSL_write_ex pair libssl 3 programs use), GnuTLS (gnutls_record_recv/send) and NSPR
//! (PR_Read, PR_Recv, PR_Write, PR_Send), and with `-l --handshake` on SSL_do_handshake; the BPF side
//! (`sslsniff.bpf.c`) sends one ring-buffer record per call that moved data, with up to `--max-buffer-size` bytes
//! of it, and this front end prints BCC's `FUNC TIME(s) COMM PID LEN` lines with the data framed by BCC's marks,
//! or JSON lines. The libraries are the system's (as its loader finds them), the `-p` process's own (through
//! `/proc/PID/root`), and any named with `--extra-lib TYPE:PATH`. uprobe_multi (6.6+) is tried first, then
//! classic uprobes.

mod bpf;
mod report;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{autoload_by_section, load_first_working, rodata};
use common::attach::uprobe;
use common::cli::filter::open_filtered;
use common::host::Host;
use common::output::stdout::Output;
use common::process::procmaps;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::ProgramMut;

use bpf::consts::MAX_BUF_LIMIT;
use bpf::types::ssl_event;
use bpf::{BpfSkel, BpfSkelBuilder};
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// BCC's default --max-buffer-size.
const DEFAULT_MAX_BUFFER: u32 = 8192;
/// The largest --max-buffer-size.
const MAX_BUFFER: u32 = MAX_BUF_LIMIT as u32;

/// Print the data passed to OpenSSL, GnuTLS and NSS read and write functions, as plaintext
#[derive(Debug, Parser)]
#[command(name = "sslsniff", version, after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    pid: common::cli::filter::PidArg,
    /// Only calls made by this user (UID or user name)
    #[arg(short = 'u', long, value_parser = common::cli::parse_uid)]
    uid: Option<u32>,
    /// Add the UID and TID columns
    #[arg(short = 'x', long)]
    extra: bool,
    /// Only calls made by tasks with exactly this command name
    #[arg(short = 'c', long, value_name = "COMM")]
    comm: Option<String>,
    /// Leave OpenSSL's functions out
    #[arg(short = 'o', long)]
    no_openssl: bool,
    /// Leave GnuTLS's functions out
    #[arg(short = 'g', long)]
    no_gnutls: bool,
    /// Leave NSS's (NSPR's) functions out
    #[arg(short = 'n', long)]
    no_nss: bool,
    /// Print the data in hexadecimal, 16 bytes a line, instead of as UTF-8 text
    #[arg(long)]
    hexdump: bool,
    /// Bytes of data kept per call; the rest is counted as lost
    #[arg(long, value_name = "SIZE", default_value_t = DEFAULT_MAX_BUFFER, value_parser = parse_max_buffer)]
    max_buffer_size: u32,
    /// Add the LAT(ms) column: the time spent in each call
    #[arg(short = 'l', long)]
    latency: bool,
    /// With -l, also report each completed OpenSSL handshake (SSL_do_handshake) with its latency
    #[arg(long, requires = "latency")]
    handshake: bool,
    /// Also probe this library, given as TYPE:PATH with TYPE openssl, gnutls or nss (may be repeated)
    #[arg(long, value_name = "TYPE:PATH", value_parser = parse_extra_lib)]
    extra_lib: Vec<(Kind, PathBuf)>,
    /// Print JSON lines: one object per call
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// BCC's -d (which printed its generated BPF program): taken as -v
    #[arg(short = 'd', long, action = clap::ArgAction::Count, hide = true)]
    debug: u8,
}

/// A family of TLS library, by its API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    Openssl,
    Gnutls,
    Nss,
}

/// What the return program of a function makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// The count is the return value.
    Read,
    Write,
    /// 1 on success, the count through the fourth argument (OpenSSL's _ex functions).
    ReadEx,
    WriteEx,
    Handshake,
}

impl Kind {
    /// The sonames the system's copy is looked up by, and the name of its files (`ssl` for libssl.so.*).
    fn sonames(self) -> (&'static [&'static str], &'static str) {
        match self {
            Kind::Openssl => (&["libssl.so.3", "libssl.so.1.1", "libssl.so.1.0.0", "libssl.so"], "ssl"),
            Kind::Gnutls => (&["libgnutls.so.30", "libgnutls.so"], "gnutls"),
            Kind::Nss => (&["libnspr4.so"], "nspr4"),
        }
    }

    fn functions(self, handshake: bool) -> Vec<(&'static str, Call)> {
        match self {
            Kind::Openssl => {
                let mut f = vec![
                    ("SSL_write", Call::Write),
                    ("SSL_read", Call::Read),
                    ("SSL_write_ex", Call::WriteEx),
                    ("SSL_read_ex", Call::ReadEx),
                ];
                if handshake {
                    f.push(("SSL_do_handshake", Call::Handshake));
                }
                f
            }
            Kind::Gnutls => vec![("gnutls_record_send", Call::Write), ("gnutls_record_recv", Call::Read)],
            Kind::Nss => vec![
                ("PR_Write", Call::Write),
                ("PR_Send", Call::Write),
                ("PR_Read", Call::Read),
                ("PR_Recv", Call::Read),
            ],
        }
    }
}

fn parse_max_buffer(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n <= MAX_BUFFER => Ok(n),
        _ => Err(format!("'{s}' is not a number of bytes from 0 to {MAX_BUFFER}")),
    }
}

/// `--extra-lib TYPE:PATH`: a known type and an existing file (BCC's checks, as usage errors).
fn parse_extra_lib(s: &str) -> Result<(Kind, PathBuf), String> {
    let Some((kind, path)) = s.split_once(':') else {
        return Err(format!("'{s}' is not TYPE:PATH"));
    };
    let kind =
        Kind::from_str(kind, false).map_err(|_| format!("'{kind}' is not a library type (openssl, gnutls, nss)"))?;
    if !Path::new(path).is_file() {
        return Err(format!("{path}: no such file"));
    }
    // Absolute, so that the kernel finds the same file whatever the current directory.
    let path = fs::canonicalize(path).map_err(|e| format!("{path}: {e}"))?;
    Ok((kind, path))
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::UprobeMulti, Attach::Uprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let mut args: Args = common::cli::parse(argv, &host);
    args.verbose.level = args.verbose.level.saturating_add(args.debug);
    host.bpf_main(args.verbose, |signals| sslsniff(args, signals))
}

/// One function of one library file to probe.
struct Target {
    file: PathBuf,
    function: &'static str,
    offset: u64,
    call: Call,
}

fn sslsniff(args: Args, signals: Signals) -> Result<()> {
    if args.no_openssl && args.no_gnutls && args.no_nss && args.extra_lib.is_empty() {
        common::cli::usage_error("-o, -g and -n leave no library to probe; name one with --extra-lib");
    }
    args.pid.filter().check()?;
    let targets = targets(&args)?;
    let ((skel, links), mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        let skel = load(&args, mech)?;
        let links = attach(&skel, mech, args.pid.pid, &targets)?;
        Ok((skel, links))
    })?;
    if args.verbose.on() {
        for t in &targets {
            eprintln!("probing {} at offset {:#x} of {} ({mech})", t.function, t.offset, t.file.display());
        }
    }

    let mut out = Output::new();
    let mut report = Report::new(&args);
    report.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "calls")
        .also_dropped(&bss.untracked, "calls", "too many calls in progress")
        .print(&signals, &mut out, args.json, |out, data| report.write_call(out, data))?;
    drop(links);
    Ok(())
}

/// The library files to probe: for each family not left out, the `-p` process's own copy if it maps one, else
/// the system's; then the `--extra-lib` files. A family whose library is not installed is skipped; nothing at
/// all to probe is an error.
fn targets(args: &Args) -> Result<Vec<Target>> {
    let handshake = args.latency && args.handshake;
    let mut libs: Vec<(Kind, PathBuf)> = Vec::new();
    for (kind, skip) in [(Kind::Openssl, args.no_openssl), (Kind::Gnutls, args.no_gnutls), (Kind::Nss, args.no_nss)] {
        if skip {
            continue;
        }
        let (sonames, name) = kind.sonames();
        let mapped = match args.pid.pid {
            Some(pid) => procmaps::mapped_library(pid, |f| procmaps::is_library_file(f, name))?,
            None => None,
        };
        match mapped.or_else(|| sonames.iter().find_map(|s| procmaps::system_library(s))) {
            Some(path) => libs.push((kind, path)),
            None if args.verbose.on() => eprintln!("no {} found: its functions are not probed", sonames[0]),
            None => {}
        }
    }
    libs.extend(args.extra_lib.iter().cloned());

    let mut targets = Vec::new();
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    for (kind, file) in libs {
        let canonical = fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
        let mut found = 0;
        for (function, call) in kind.functions(handshake) {
            let Some(offset) = uprobe::function_offset(&file, function)? else { continue };
            found += 1;
            if seen.contains(&(canonical.clone(), function)) {
                continue;
            }
            seen.push((canonical.clone(), function));
            targets.push(Target { file: file.clone(), function, offset, call });
        }
        if found == 0 {
            let names: Vec<&str> = kind.functions(false).iter().map(|(f, _)| *f).collect();
            bail!("{} defines none of the functions {}", file.display(), names.join(", "));
        }
    }
    if targets.is_empty() {
        bail!("no TLS library to probe: none of libssl, libgnutls or libnspr4 was found (name one with --extra-lib)");
    }
    Ok(targets)
}

/// Opens the BPF object, sizes its scratch slots and ring buffer for the buffer size, sets the filters, keeps
/// the programs of mechanism `mech` and loads it.
fn load(args: &Args, mech: Attach) -> Result<BpfSkel<'static>> {
    let mut open = open_filtered::<BpfSkelBuilder>(args.pid.filter())?;
    let record = (std::mem::size_of::<ssl_event>() as u32) + args.max_buffer_size;
    let cpus = libbpf_rs::num_possible_cpus().context("counting the possible CPUs")? as u32;
    open.maps.scratch.set_value_size(record).context("sizing the scratch map")?;
    open.maps.scratch.set_max_entries(cpus).context("sizing the scratch map")?;
    // Room for 16 records of the largest size at least (1 MiB at the least), a power of two.
    let ring = (16 * record.next_power_of_two()).max(1 << 20);
    open.maps.events.set_max_entries(ring).context("sizing the ring buffer")?;
    let rodata = rodata(&mut open.maps.rodata_data)?;
    rodata.max_buf = args.max_buffer_size;
    if let Some(uid) = args.uid {
        rodata.filter_uid = true;
        rodata.target_uid = uid;
    }
    if let Some(comm) = &args.comm {
        rodata.filter_comm = true;
        // A name longer than a task's name (15 bytes) matches no task, as in BCC.
        for (slot, byte) in rodata.target_comm.iter_mut().zip(comm.bytes().chain(std::iter::repeat(0))) {
            *slot = byte as _;
        }
        if comm.len() >= rodata.target_comm.len() {
            rodata.target_comm[rodata.target_comm.len() - 1] = 1;
        }
    }
    autoload_by_section(open.open_object_mut(), mech);
    open.load().with_context(|| format!("loading the BPF programs ({mech})"))
}

/// Attaches every target's return program, then every entry program, so that each entry recorded sees its
/// return.
fn attach(skel: &BpfSkel<'static>, mech: Attach, pid: Option<u32>, targets: &[Target]) -> Result<Links> {
    let p = &skel.progs;
    let multi = mech == Attach::UprobeMulti;
    let exit_prog = |call: Call| -> &ProgramMut<'_> {
        match (call, multi) {
            (Call::Read, false) => &p.read_exit,
            (Call::Read, true) => &p.read_exit_multi,
            (Call::Write, false) => &p.write_exit,
            (Call::Write, true) => &p.write_exit_multi,
            (Call::ReadEx, false) => &p.read_ex_exit,
            (Call::ReadEx, true) => &p.read_ex_exit_multi,
            (Call::WriteEx, false) => &p.write_ex_exit,
            (Call::WriteEx, true) => &p.write_ex_exit_multi,
            (Call::Handshake, false) => &p.handshake_exit,
            (Call::Handshake, true) => &p.handshake_exit_multi,
        }
    };
    let entry_prog = |call: Call| -> &ProgramMut<'_> {
        match (call, multi) {
            (Call::Read | Call::Write, false) => &p.rw_enter,
            (Call::Read | Call::Write, true) => &p.rw_enter_multi,
            (Call::ReadEx | Call::WriteEx, false) => &p.rw_ex_enter,
            (Call::ReadEx | Call::WriteEx, true) => &p.rw_ex_enter_multi,
            (Call::Handshake, false) => &p.handshake_enter,
            (Call::Handshake, true) => &p.handshake_enter_multi,
        }
    };
    let mut links = Links::default();
    for t in targets {
        links.push(
            uprobe::attach(exit_prog(t.call), mech, pid, &t.file, t.offset, true)
                .with_context(|| format!("probing {}", t.function))?,
        );
    }
    for t in targets {
        links.push(
            uprobe::attach(entry_prog(t.call), mech, pid, &t.file, t.offset, false)
                .with_context(|| format!("probing {}", t.function))?,
        );
    }
    Ok(links)
}
