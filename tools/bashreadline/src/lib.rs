// SPDX-License-Identifier: Apache-2.0 OR MIT
//! bashreadline: print the command lines typed into bash shells (BCC's tool, CO-RE).
//!
//! A uretprobe on `readline` (or `readline_internal_teardown`, which returns the same line, where the file has it,
//! as BCC and libbpf-tools choose) in /bin/bash, or in the libreadline named with `-s` or that bash links with,
//! sends one ring-buffer record per line a process called `bash` read (`bashreadline.bpf.c`); this front end prints
//! BCC's `TIME PID COMMAND` columns or JSON lines. uprobe_multi (6.6+) is tried first, then a classic uprobe. The
//! probe is on the file's inode, so a bash in a container or another mount namespace is seen as long as it runs
//! the same file.

mod bpf;
mod report;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::loader::{autoload_by_section, load_first_working, open_skeleton};
use common::attach::uprobe;
use common::host::Host;
use common::output::stdout::Output;
use common::process::procmaps;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::{BpfSkel, BpfSkelBuilder};
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// The shell probed unless -s names a library.
const BASH: &str = "/bin/bash";
/// BCC's `-s` value when the option is given without one.
const DEFAULT_SHARED: &str = "/lib/libreadline.so";
/// The functions that return the line read, preferred first (BCC's choice: the teardown where it is defined).
const FUNCTIONS: [&str; 2] = ["readline_internal_teardown", "readline"];

/// Print the command lines typed into every running bash, as readline() returns them
#[derive(Debug, Parser)]
#[command(name = "bashreadline", version, after_help = EXAMPLES)]
struct Args {
    /// Probe readline in this libreadline.so instead of /bin/bash (given alone: /lib/libreadline.so)
    #[arg(short = 's', long, value_name = "PATH", num_args = 0..=1, default_missing_value = DEFAULT_SHARED)]
    shared: Option<PathBuf>,
    /// JSON output: one object per command line
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
}

pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::UprobeMulti, Attach::Uprobe]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| bashreadline(args, signals))
}

fn bashreadline(args: Args, signals: Signals) -> Result<()> {
    let (file, function, offset) = readline_target(args.shared.as_deref())?;
    let ((skel, _link), mech) = load_first_working(TOOL.attach, args.verbose.on(), |mech| {
        let skel = load(mech)?;
        let prog =
            if mech == Attach::UprobeMulti { &skel.progs.readline_return_multi } else { &skel.progs.readline_return };
        let link = uprobe::attach(prog, mech, None, &file, offset, true)?;
        Ok((skel, link))
    })?;
    if args.verbose.on() {
        eprintln!("probing the return of {function} at offset {offset:#x} of {} ({mech})", file.display());
    }

    let mut out = Output::new();
    let report = Report::new(args.json);
    report.write_header(&mut out)?;
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    EventStream::new(&skel.maps.events, &bss.lost, "command lines")
        .print(&signals, &mut out, args.json, |out, data| report.write_line(out, data))
}

/// The file to probe, the function and its offset: `-s`'s library, else /bin/bash if it defines readline, else
/// the libreadline the system's loader would give bash.
fn readline_target(shared: Option<&Path>) -> Result<(PathBuf, &'static str, u64)> {
    if let Some(given) = shared {
        let path = procmaps::user_library_path(given).context("-s")?;
        return match find_function(&path)? {
            Some((function, offset)) => Ok((path, function, offset)),
            None => bail!("{} defines no readline function", path.display()),
        };
    }
    let bash = Path::new(BASH);
    if !bash.exists() {
        bail!("{BASH}: no such file (name the readline library with -s)");
    }
    if let Some((function, offset)) = find_function(bash)? {
        return Ok((bash.to_path_buf(), function, offset));
    }
    for soname in ["libreadline.so.8", "libreadline.so.7", "libreadline.so.6"] {
        if let Some(path) = procmaps::system_library(soname) {
            if let Some((function, offset)) = find_function(&path)? {
                return Ok((path, function, offset));
            }
        }
    }
    bail!("{BASH} has no readline and no libreadline.so was found (name it with -s)")
}

/// The first of [`FUNCTIONS`] that `file` defines, with its offset.
fn find_function(file: &Path) -> Result<Option<(&'static str, u64)>> {
    for function in FUNCTIONS {
        if let Some(offset) = uprobe::function_offset(file, function)? {
            return Ok(Some((function, offset)));
        }
    }
    Ok(None)
}

/// Opens the BPF object, keeps the program of mechanism `mech` and loads it.
fn load(mech: Attach) -> Result<BpfSkel<'static>> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    autoload_by_section(open.open_object_mut(), mech);
    open.load().with_context(|| format!("loading the BPF program ({mech})"))
}
