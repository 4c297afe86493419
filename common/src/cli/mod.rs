// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Command-line pieces every tool shares, with BCC's names and semantics.
//!
//! `IntervalCount` is the `[interval] [count]` pair of the histogram tools (no interval: one report at Ctrl-C);
//! the parsers check the syntax of PIDs, positive numbers, intervals and port lists so that a bad value is a clap
//! usage error (exit 2) naming the argument. Whether a PID names a live process is a runtime fact, checked in the
//! tool's body with [`require_process`] (one line `tool: no process with PID N`, exit 1).

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use clap::{Args, Parser};

use crate::host::endpoint::Endpoint;
use crate::host::Host;

pub mod filter;
pub mod man_completions;
pub mod numbers;

/// BCC's trailing `[interval] [count]` arguments.
#[derive(Debug, Clone, Args)]
pub struct IntervalCount {
    /// Seconds between reports (by default, a single report at Ctrl-C)
    #[arg(value_parser = parse_interval_secs)]
    pub interval: Option<u64>,
    /// Stop after this many reports (by default, run until Ctrl-C)
    #[arg(value_parser = parse_positive_u64, requires = "interval")]
    pub count: Option<u64>,
}

impl IntervalCount {
    /// The interval as a duration; `None` means "until Ctrl-C".
    pub fn interval(&self) -> Option<Duration> {
        self.interval.map(Duration::from_secs)
    }
}

/// Parses the tool's command line `argv` (argv[0] first) for a tool run in `host`. Every tool calls this
/// instead of `Args::parse()`, so that features that need the clap definition live in one place: help,
/// `--version` and usage errors name the tool as it was invoked ([`crate::identity::invoked_name`]); under the
/// exporter a tool without `--prometheus` is refused; with `COREBPF_GENERATE=man|bash|zsh|fish` set, the tool
/// prints its man page or completion script instead of running (see [`man_completions`]; the Makefile uses it);
/// with [`PARSE_ONLY`] set, it stops once its command line is parsed.
pub fn parse<T: Parser>(argv: Vec<OsString>, host: &Host) -> T {
    man_completions::from_env::<T>();
    let cmd = T::command();
    let name = crate::identity::set_invoked_name(argv.first(), cmd.get_name(), host.is_exported());
    let examples = cmd.get_after_help().map(|text| with_invoked_name(&text.to_string(), cmd.get_name(), name));
    let version: &'static str = Box::leak(crate::identity::version_line().into_boxed_str());
    if host.is_exported() && !cmd.get_arguments().any(|a| a.get_id() == "prometheus") {
        exit_usage_with(name, "keeps no histograms or counters to export (it has no --prometheus)");
    }
    let mut cmd = cmd.name(name).bin_name(name).display_name(name).version(version);
    if let Some(examples) = examples {
        cmd = cmd.after_help(examples);
    }
    let parsed = cmd.try_get_matches_from_mut(argv).and_then(|m| T::from_arg_matches(&m));
    let args = parsed.unwrap_or_else(|err| match numbers::explain(&cmd, &err) {
        Some(message) => exit_usage_with(name, &message),
        None => exit_usage(name, err.format(&mut cmd)),
    });
    if std::env::var_os(PARSE_ONLY).is_some() {
        std::process::exit(0);
    }
    args
}

/// Set (to anything), a tool parses its command line and exits 0 if it takes it, 2 if not, without loading
/// anything: the test that hands it every command line of BCC's examples uses it.
pub const PARSE_ONLY: &str = "COREBPF_PARSE_ONLY";

/// The examples at the end of `--help` with the tool's name as it was invoked, so that a pasted example runs
/// this tool: `biolatency -m 1` is shown as `bpf-biolatency -m 1` when the tool was run as bpf-biolatency.
/// Only the command word of an example changes (the first word of a line, or the word after `sudo` or a pipe;
/// `./biolatency` too).
pub fn with_invoked_name(examples: &str, tool: &str, invoked: &str) -> String {
    let mut out = String::with_capacity(examples.len() + 64);
    for (i, line) in examples.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut words = String::new();
        let mut command_word = true;
        for (j, word) in line.split(' ').enumerate() {
            if j > 0 {
                words.push(' ');
            }
            if command_word && (word == tool || word.strip_prefix("./") == Some(tool)) {
                words.push_str(invoked);
                command_word = false;
            } else {
                words.push_str(word);
                if !word.is_empty() {
                    command_word = matches!(word, "sudo" | "|" | "&&" | ";");
                }
            }
        }
        out.push_str(&words);
    }
    out
}

/// Help and `--version` print as clap prints them; any other clap error is a usage error: one line on stderr
/// (`tool: invalid value ...`) and exit status 2.
fn exit_usage(name: &str, err: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(err.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    {
        err.exit();
    }
    exit_usage_with(name, &one_line(&err.render().to_string()))
}

/// Clap's message in one line: its first paragraph (before the usage line) with a list under a heading such as
/// "the following required arguments were not provided:" brought up after it, comma-separated, so that the
/// missing `<PATTERN>` is named.
fn one_line(rendered: &str) -> String {
    let mut lines = rendered.lines().map(str::trim).take_while(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut message = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    let listed: Vec<&str> = lines.collect();
    if !listed.is_empty() {
        message.push(' ');
        message.push_str(&listed.join(", "));
    }
    message
}

/// A usage error found after parsing: `tool: MESSAGE (see --help)` on stderr, exit status 2.
pub fn usage_error(message: &str) -> ! {
    exit_usage_with(crate::identity::invoked_name(), message)
}

/// A usage error: `tool: MESSAGE (see --help)` on stderr, exit status 2.
fn exit_usage_with(name: &str, message: &str) -> ! {
    eprintln!("{name}: {message} (see --help)");
    std::process::exit(2);
}

/// The default cap on distinct label sets per metric (`--max-series`).
pub const DEFAULT_MAX_SERIES: usize = 1000;
/// Parses `--prometheus`'s `ADDR:PORT`, `:PORT` or `PORT` (then on 127.0.0.1); IPv6 as `[::1]:PORT`.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let port = s.strip_prefix(':').unwrap_or(s);
    match port.parse::<u16>() {
        Ok(port) => Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)),
        Err(_) => Err(format!("'{s}' is not ADDR:PORT, :PORT or PORT (e.g. 127.0.0.1:9435)")),
    }
}

/// `--prometheus ADDR:PORT` and `--max-series N`: the flags of every tool that keeps histograms or counters in
/// kernel maps, which it serves at scrape time instead of printing them ([`crate::output::metrics`]).
#[derive(Debug, Clone, Args)]
pub struct MetricsArgs {
    /// Serve the histograms or counts as Prometheus metrics on ADDR:PORT (127.0.0.1 if only a port is given)
    /// instead of printing them
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen, conflicts_with = "json")]
    pub prometheus: Option<std::net::SocketAddr>,
    /// With --prometheus: the most label sets per metric (1 to 100000); later ones are summed into one series
    /// labelled "other". Each set is one more series in every scrape
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SERIES, value_parser = parse_max_series,
          requires = "prometheus")]
    pub max_series: usize,
}

impl MetricsArgs {
    /// A display flag (`-m` milliseconds, `-N` nanoseconds, ...) as it applies: off when serving metrics. Display
    /// flags never change metrics: every exported histogram is collected in one fixed base unit, so hosts run
    /// with different flags can be aggregated. A tool passes its unit flags through this before using them.
    pub fn display(&self, flag: bool) -> bool {
        flag && self.prometheus.is_none()
    }

    /// With `--prometheus`: the endpoint of `host`'s tool, bound now (call before loading anything, so a busy
    /// port is one line at once). `interval_given`: the tool was also given an interval, count or duration, which
    /// metrics have no use for (a usage error).
    pub fn endpoint(&self, host: &Host, interval_given: bool) -> anyhow::Result<Option<Endpoint>> {
        let Some(listen) = self.prometheus else { return Ok(None) };
        if interval_given {
            usage_error("--prometheus serves cumulative metrics: it takes no interval, count or duration");
        }
        Endpoint::bind(host, listen, self.max_series).map(Some)
    }
}

/// [`MetricsArgs`] and `--heatmap FILE.svg`, which also draws the printed intervals as a latency heat map
/// ([`crate::output::heatmap`]): the flags of the latency histogram tools.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub metrics: MetricsArgs,
    /// Also draw the intervals as a latency heat map (one column per interval) in this SVG file
    #[arg(long, value_name = "FILE.svg", conflicts_with = "prometheus", value_parser = parse_output_file)]
    pub heatmap: Option<std::path::PathBuf>,
}

impl std::ops::Deref for ExportArgs {
    type Target = MetricsArgs;

    /// `--prometheus` and `--max-series` are read through the export flags as through [`MetricsArgs`].
    fn deref(&self) -> &MetricsArgs {
        &self.metrics
    }
}

/// The `-v` flag every tool has: `-v` says which attach path was taken and why others failed, `-vv` adds
/// libbpf's debug messages.
#[derive(Debug, Clone, Copy, Args)]
pub struct Verbose {
    /// Say on stderr which attach path was taken and why others failed (twice: libbpf's debug messages too)
    #[arg(id = "verbose", short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub level: u8,
}

impl Verbose {
    /// True with `-v` or more.
    pub fn on(self) -> bool {
        self.level > 0
    }
}

/// A number greater than zero.
pub fn parse_positive_u64(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be greater than 0".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a positive whole number")),
    }
}

/// The longest interval or duration a tool takes, in seconds (one year): longer ones are usage errors, so that no
/// deadline computed from user input can overflow.
pub const MAX_INTERVAL_SECS: u64 = 365 * 24 * 60 * 60;

/// An interval or duration in whole seconds, from 1 to [`MAX_INTERVAL_SECS`].
pub fn parse_interval_secs(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n @ 1..=MAX_INTERVAL_SECS) => Ok(n),
        _ => Err(format!("'{s}' is not a number of seconds from 1 to {MAX_INTERVAL_SECS} (a year)")),
    }
}

/// The syntax of a PID (a positive number that fits a kernel PID). Whether the process exists is checked at run
/// time, with [`require_process`].
pub fn parse_pid(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(pid @ 1..=0x3fff_ffff) => Ok(pid),
        _ => Err(format!("'{s}' is not a PID")),
    }
}

/// Fails with `no process with PID N` unless process (or thread) `pid` exists now, and says why a PID cannot be
/// filtered on when the tool runs in a PID namespace of its own (a container's). Every tool with a PID filter
/// calls this in its body, so an unknown PID is one line on stderr and exit status 1 ([`crate::host::Host::main`]).
pub fn require_process(pid: u32) -> anyhow::Result<()> {
    if !in_initial_pid_namespace() {
        anyhow::bail!(
            "PID {pid} is a PID of the namespace this tool runs in (a container's), but the kernel's events carry \
             the host's PIDs; to filter by PID, run the tool in the host's PID namespace (docker run --pid=host, \
             Kubernetes hostPID: true)"
        );
    }
    if pid == 0 || !Path::new(&format!("/proc/{pid}")).exists() {
        anyhow::bail!("no process with PID {pid}");
    }
    Ok(())
}

/// [`require_process`] for a thread ID (`-t TID`): the same namespace check, and `no thread with TID N` if there
/// is none (/proc/TID exists for every thread, though only processes are listed).
pub fn require_thread(tid: u32) -> anyhow::Result<()> {
    if tid != 0 && in_initial_pid_namespace() && !Path::new(&format!("/proc/{tid}")).exists() {
        anyhow::bail!("no thread with TID {tid}");
    }
    require_process(tid)
}

/// True unless this process runs in a PID namespace below the kernel's first one (a container's). The first
/// one's inode number is fixed (the kernel's PROC_PID_INIT_INO); where /proc/self/ns/pid cannot be read, true.
pub fn in_initial_pid_namespace() -> bool {
    use std::os::unix::fs::MetadataExt;
    const INITIAL_PID_NAMESPACE_INODE: u64 = 0xEFFF_FFFC;
    std::fs::metadata("/proc/self/ns/pid").map_or(true, |m| m.ino() == INITIAL_PID_NAMESPACE_INODE)
}

/// A UID given as a number or as a user name of the password file (BCC's `-u USER`). A number beyond the UIDs
/// is refused as a number, not looked up as a name.
pub fn parse_uid(s: &str) -> Result<u32, String> {
    const LAST: u32 = u32::MAX - 1; // (uid_t)-1 means "no UID" to the kernel
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return match s.parse::<u32>() {
            Ok(uid @ 0..=LAST) => Ok(uid),
            _ => Err(format!("a UID is a whole number from 0 to {LAST}, or a user name")),
        };
    }
    crate::domain::users::uid_of(s)
        .ok_or_else(|| format!("no user named '{s}' in /etc/passwd (a UID from 0 to {LAST} also works)"))
}

/// The most label sets a metric may have (`--max-series`): at least one, and few enough that a scrape stays a
/// reasonable size.
pub const MAX_SERIES: usize = 100_000;

/// `--max-series N`: a number from 1 to [`MAX_SERIES`].
pub fn parse_max_series(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n @ 1..=MAX_SERIES) => Ok(n),
        _ => Err(format!("a whole number from 1 to {MAX_SERIES} is expected")),
    }
}

/// An output file the tool will write when it ends (`--heatmap FILE.svg`): checked now, before anything is
/// loaded, so that a trace is never run only to fail at the end: its folder must exist and be writable, and the
/// path must not be a folder itself.
pub fn parse_output_file(s: &str) -> Result<std::path::PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    let path = Path::new(s);
    if s.is_empty() {
        return Err("a file name is expected".into());
    }
    if path.is_dir() {
        return Err(format!("{s} is a folder, not a file"));
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return Err(format!("there is no folder {}", folder.display()));
    }
    let c_folder = std::ffi::CString::new(folder.as_os_str().as_bytes()).map_err(|_| "a NUL byte in the path")?;
    // SAFETY: access(2) reads the NUL-terminated path it is given.
    if unsafe { libc::access(c_folder.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!("cannot write in {}: {}", folder.display(), std::io::Error::last_os_error()));
    }
    Ok(path.to_path_buf())
}

/// A comma-separated list of TCP/UDP ports, e.g. `80,443`.
pub fn parse_port_list(s: &str) -> Result<Vec<u16>, String> {
    s.split(',')
        .map(|part| {
            let part = part.trim();
            match part.parse::<u16>() {
                Ok(0) | Err(_) => Err(format!("'{part}' is not a port (1-65535)")),
                Ok(port) => Ok(port),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_name_the_tool_as_invoked() {
        let examples = "examples:\n    biolatency -m 1 10    # biolatency in ms\n    sudo biolatency -D\n    x | biolatency\n    ./biolatency -Q";
        assert_eq!(
            with_invoked_name(examples, "biolatency", "bpf-biolatency"),
            "examples:\n    bpf-biolatency -m 1 10    # biolatency in ms\n    sudo bpf-biolatency -D\n    x | bpf-biolatency\n    bpf-biolatency -Q"
        );
        assert_eq!(
            with_invoked_name("    ./biolatency -Q\n    biolatency", "biolatency", "biolatency"),
            "    biolatency -Q\n    biolatency"
        );
    }

    #[test]
    fn clap_messages_fit_one_line_with_their_list() {
        let cmd = || {
            clap::Command::new("t")
                .arg(clap::Arg::new("pattern").value_name("PATTERN").required(true))
                .arg(clap::Arg::new("pid").long("pid").value_name("PID").required(true))
        };
        let err = cmd().try_get_matches_from(["t"]).unwrap_err();
        assert_eq!(
            one_line(&err.render().to_string()),
            "the following required arguments were not provided: --pid <PID>, <PATTERN>"
        );
        let err = cmd().try_get_matches_from(["t", "x", "--pid", "1", "--no"]).unwrap_err();
        assert_eq!(one_line(&err.render().to_string()), "unexpected argument '--no' found");
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_listen("9435").unwrap(), "127.0.0.1:9435".parse().unwrap());
        assert_eq!(parse_listen(":9435").unwrap(), "127.0.0.1:9435".parse().unwrap());
        assert_eq!(parse_listen("0.0.0.0:80").unwrap(), "0.0.0.0:80".parse().unwrap());
        assert_eq!(parse_listen("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        assert!(parse_listen("localhost").is_err());
        assert!(parse_listen("70000").is_err());
    }

    #[test]
    fn positive_numbers() {
        assert_eq!(parse_positive_u64("5"), Ok(5));
        assert!(parse_positive_u64("0").is_err());
        assert!(parse_positive_u64("-1").is_err());
        assert!(parse_positive_u64("x").is_err());
    }

    #[test]
    fn pids() {
        assert_eq!(parse_pid(&std::process::id().to_string()), Ok(std::process::id()));
        assert_eq!(parse_pid("4000000"), Ok(4000000));
        assert!(parse_pid("0").is_err());
        assert!(parse_pid("4194304999").is_err());
        assert!(parse_pid("abc").is_err());
        assert!(parse_pid("-1").is_err());
        assert!(require_process(std::process::id()).is_ok());
        let err = require_process(0x3fff_fff0).unwrap_err().to_string();
        assert_eq!(err, "no process with PID 1073741808");
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval_secs("1"), Ok(1));
        assert_eq!(parse_interval_secs("31536000"), Ok(MAX_INTERVAL_SECS));
        for bad in ["0", "31536001", "18446744073709551615", "9223372036854775807", "-1", "x"] {
            let err = parse_interval_secs(bad).unwrap_err();
            assert!(err.contains("from 1 to 31536000"), "{err}");
        }
    }

    #[test]
    fn uids() {
        assert_eq!(parse_uid("0"), Ok(0));
        assert_eq!(parse_uid("root"), Ok(0));
        assert_eq!(parse_uid("4294967294"), Ok(4294967294));
        for bad in ["4294967295", "4294967296", "99999999999999999999999"] {
            assert!(parse_uid(bad).unwrap_err().contains("from 0 to 4294967294"), "{bad}");
        }
        assert!(parse_uid("no-such-user-anywhere").unwrap_err().starts_with("no user named"));
    }

    #[test]
    fn port_lists() {
        assert_eq!(parse_port_list("80,443"), Ok(vec![80, 443]));
        assert_eq!(parse_port_list("22"), Ok(vec![22]));
        assert!(parse_port_list("80,").is_err());
        assert!(parse_port_list("0").is_err());
        assert!(parse_port_list("65536").is_err());
    }
}
