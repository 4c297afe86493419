// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Signal numbers and their names, as Linux numbers them on x86-64 and arm64 (`kill -l`): the names the
//! signal tools print (exitsnoop's `signal 9 (KILL)`, sigsnoop's and killsnoop's `-n` and `-s`).

/// Names of signals 1..=31, without the `SIG` prefix.
const NAMES: [&str; 31] = [
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2", "PIPE", "ALRM", "TERM",
    "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO",
    "PWR", "SYS",
];

/// The highest signal number (SIGRTMAX).
pub const MAX: u32 = 64;

/// The name of signal `sig` without `SIG` (`KILL`; `RTMIN+3` for real-time ones), or None outside 1..=64.
pub fn name(sig: u32) -> Option<String> {
    match sig {
        1..=31 => Some(NAMES[sig as usize - 1].to_string()),
        32..=MAX => Some(if sig == 32 { "RTMIN".to_string() } else { format!("RTMIN+{}", sig - 32) }),
        _ => None,
    }
}

/// A signal given on the command line: a number from 1 to 64, or a name with or without `SIG`, in any case
/// (`9`, `KILL`, `sigkill`, `RTMIN+2`).
pub fn parse(s: &str) -> Option<u32> {
    if let Ok(n) = s.parse::<u32>() {
        return (1..=MAX).contains(&n).then_some(n);
    }
    let upper = s.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    (1..=MAX).find(|&n| name(n).as_deref() == Some(bare))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_round_trip() {
        assert_eq!(name(9).as_deref(), Some("KILL"));
        assert_eq!(name(11).as_deref(), Some("SEGV"));
        assert_eq!(name(31).as_deref(), Some("SYS"));
        assert_eq!(name(34).as_deref(), Some("RTMIN+2"));
        assert_eq!(name(0), None);
        assert_eq!(name(65), None);
        for n in 1..=MAX {
            assert_eq!(parse(&name(n).unwrap()), Some(n));
        }
        assert_eq!(parse("sigusr1"), Some(10));
        assert_eq!(parse("15"), Some(15));
        assert_eq!(parse("0"), None);
        assert_eq!(parse("SIGNOPE"), None);
    }
}
