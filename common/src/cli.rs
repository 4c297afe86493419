//! Command-line pieces every tool shares, with BCC's names and semantics.
//!
//! `IntervalCount` is the `[interval] [count]` pair of the histogram tools (no interval: one report at Ctrl-C);
//! the parsers check PIDs, positive numbers and port lists so that a bad value is a clap usage error (exit 2)
//! naming the argument.

use std::path::Path;
use std::time::Duration;

use clap::{Args, Parser};

/// BCC's trailing `[interval] [count]` arguments.
#[derive(Debug, Clone, Args)]
pub struct IntervalCount {
    /// Output interval, in seconds (default: one report at Ctrl-C)
    #[arg(value_parser = parse_positive_u64)]
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

/// Parses the tool's command line. Every tool calls this instead of `Args::parse()`, so that features that need
/// the clap definition live in one place: with `COREBPF_GENERATE=man|bash|zsh|fish` set, the tool prints its
/// man page or completion script instead of running (see [`crate::generate`]; the Makefile uses it).
pub fn parse<T: Parser>() -> T {
    crate::generate::from_env::<T>();
    T::parse()
}

/// A number greater than zero.
pub fn parse_positive_u64(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be greater than 0".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a positive whole number")),
    }
}

/// A PID of a process that exists now.
pub fn parse_pid(s: &str) -> Result<u32, String> {
    let pid: u32 = s.parse().map_err(|_| format!("'{s}' is not a PID"))?;
    if pid == 0 || !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(format!("no process with PID {pid}"));
    }
    Ok(pid)
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
        assert!(parse_pid("0").is_err());
        assert!(parse_pid("4194304999").is_err());
        assert!(parse_pid("abc").is_err());
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
