//! Command-line pieces every tool shares, with BCC's names and semantics.
//!
//! `IntervalCount` is the `[interval] [count]` pair of the histogram tools (no interval: one report at Ctrl-C);
//! the parsers check the syntax of PIDs, positive numbers, intervals and port lists so that a bad value is a clap
//! usage error (exit 2) naming the argument. Whether a PID names a live process is a runtime fact, checked in the
//! tool's body with [`require_process`] (one line `tool: no process with PID N`, exit 1).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use clap::{Args, Parser};

pub mod man_completions;

/// BCC's trailing `[interval] [count]` arguments.
#[derive(Debug, Clone, Args)]
pub struct IntervalCount {
    /// Output interval, in seconds (default: one report at Ctrl-C)
    #[arg(value_parser = parse_interval_secs)]
    pub interval: Option<u64>,
    /// Number of outputs (default: unlimited)
    #[arg(value_parser = parse_positive_u64, requires = "interval")]
    pub count: Option<u64>,
}

impl IntervalCount {
    /// The interval as a duration; `None` means "until Ctrl-C".
    pub fn interval(&self) -> Option<Duration> {
        self.interval.map(Duration::from_secs)
    }
}

/// Parses the tool's command line `argv` (argv[0] first). Every tool calls this instead of `Args::parse()`, so
/// that features that need the clap definition live in one place: help, `--version` and usage errors name the
/// tool as it was invoked ([`crate::tool::invoked_name`]); with `COREBPF_GENERATE=man|bash|zsh|fish` set, the
/// tool prints its man page or completion script instead of running (see [`man_completions`]; the Makefile
/// uses it).
pub fn parse<T: Parser>(argv: Vec<OsString>) -> T {
    man_completions::from_env::<T>();
    let cmd = T::command();
    let name = crate::tool::set_invoked_name(argv.first(), cmd.get_name());
    let mut cmd = cmd.name(name).bin_name(name).display_name(name);
    let parsed = cmd.try_get_matches_from_mut(argv).and_then(|m| T::from_arg_matches(&m));
    parsed.unwrap_or_else(|err| exit_usage(name, err.format(&mut cmd)))
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
    let rendered = err.render().to_string();
    let first = rendered.lines().next().unwrap_or("invalid arguments");
    let message = first.strip_prefix("error: ").unwrap_or(first);
    eprintln!("{name}: {message} (see --help)");
    std::process::exit(2);
}

/// The flags of every tool that keeps histograms or counters in kernel maps: `--prometheus ADDR:PORT` serves
/// them at scrape time instead of printing them ([`crate::output::metrics`]), `--max-series` bounds label sets,
/// and `--heatmap FILE.svg` also draws the printed intervals as a latency heat map ([`crate::output::heatmap`]).
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Serve the histograms as Prometheus metrics on ADDR:PORT (127.0.0.1 if only a port is given) instead of
    /// printing them
    #[arg(long, value_name = "ADDR:PORT", value_parser = crate::output::metrics::parse_listen, conflicts_with = "json")]
    pub prometheus: Option<std::net::SocketAddr>,
    /// With --prometheus: the most label sets per metric; later ones are summed into one series labelled "other"
    #[arg(long, value_name = "N", default_value_t = crate::output::metrics::DEFAULT_MAX_SERIES)]
    pub max_series: usize,
    /// Also draw the intervals as a latency heat map (one column per interval) in this SVG file
    #[arg(long, value_name = "FILE.svg", conflicts_with = "prometheus")]
    pub heatmap: Option<std::path::PathBuf>,
}

/// The `-v` flag every tool has: `-v` says which attach path was taken and why others failed, `-vv` adds
/// libbpf's debug messages.
#[derive(Debug, Clone, Copy, Args)]
pub struct Verbose {
    /// Verbose debug output (repeat for libbpf's debug messages)
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

/// Fails with `no process with PID N` unless process (or thread) `pid` exists now. Every tool with a PID filter
/// calls this in its body, so an unknown PID is one line on stderr and exit status 1 ([`crate::run::main`]).
pub fn require_process(pid: u32) -> anyhow::Result<()> {
    if pid == 0 || !Path::new(&format!("/proc/{pid}")).exists() {
        anyhow::bail!("no process with PID {pid}");
    }
    Ok(())
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
    fn port_lists() {
        assert_eq!(parse_port_list("80,443"), Ok(vec![80, 443]));
        assert_eq!(parse_port_list("22"), Ok(vec![22]));
        assert!(parse_port_list("80,").is_err());
        assert!(parse_port_list("0").is_err());
        assert!(parse_port_list("65536").is_err());
    }
}
