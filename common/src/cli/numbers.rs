// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Usage errors about numbers, in the tool's words rather than Rust's.
//!
//! An option read by one of clap's own number parsers (`Option<u64>`, `value_parser!(u32).range(1..=64)`, ...)
//! refuses a bad value with the standard library's reason: `biosnoop -m 0.5` said "invalid digit found in
//! string", and an out-of-range value "99 is not in 1..=64". [`explain`] turns such an error into one sentence
//! that names the flag, repeats the value and says which whole numbers the flag takes. It asks the flag's own
//! parser for its bounds (the type's limits, narrowed by any range), so no tool has to state them twice. Parsers
//! written by hand keep their own messages.

use clap::builder::ValueParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, Command};

/// The explanation of `err` if it is a number that clap's own parser refused; `None` for any other error.
pub fn explain(cmd: &Command, err: &clap::Error) -> Option<String> {
    if err.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let source = std::error::Error::source(err)?;
    let (Some(ContextValue::String(flag)), Some(ContextValue::String(value))) =
        (err.get(ContextKind::InvalidArg), err.get(ContextKind::InvalidValue))
    else {
        return None;
    };
    let std_reason = source.is::<std::num::ParseIntError>()
        || source.is::<std::num::TryFromIntError>()
        || source.is::<std::num::ParseFloatError>()
        || source.to_string().starts_with(&format!("{value} is not in "));
    if !std_reason {
        return None;
    }
    let arg = cmd.get_arguments().find(|a| a.to_string() == *flag)?;
    let allowed = allowed(arg)?;
    Some(format!("invalid value '{value}' for '{flag}': {allowed}"))
}

/// What `arg` takes: "a whole number from LO to HI" (found by asking its parser), or "a number" for a float.
fn allowed(arg: &Arg) -> Option<String> {
    let parser = arg.get_value_parser();
    if parser.type_id() == ValueParser::from(clap::value_parser!(f64)).type_id() {
        return Some("a number is expected (such as 2 or 0.5)".into());
    }
    let (min, max) = type_bounds(parser)?;
    // The flag's parser alone, in a command of its own.
    let probe = Command::new("probe")
        .no_binary_name(true)
        .arg(Arg::new("n").long("n").value_parser(parser.clone()).allow_negative_numbers(true));
    let accepts = |n: i128| probe.clone().try_get_matches_from([format!("--n={n}")]).is_ok();
    let seed = [0, 1, min, max].into_iter().find(|&n| (min..=max).contains(&n) && accepts(n))?;
    // The accepted numbers are one range (a type's limits, or clap's `.range()` within them): find its ends.
    let (mut lo, mut hi) = (min, seed);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if accepts(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let low = lo;
    let (mut lo, mut hi) = (seed, max);
    while lo < hi {
        let mid = lo + (hi - lo + 1) / 2;
        if accepts(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(format!("a whole number from {low} to {lo} is expected"))
}

/// The limits of the integer type `parser` produces, if it produces one.
fn type_bounds(parser: &ValueParser) -> Option<(i128, i128)> {
    macro_rules! bounds {
        ($($t:ty),*) => {
            $(if parser.type_id() == ValueParser::from(clap::value_parser!($t)).type_id() {
                return Some((<$t>::MIN as i128, <$t>::MAX as i128));
            })*
        };
    }
    bounds!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> Command {
        Command::new("tool")
            .arg(Arg::new("min").short('m').long("min").value_parser(clap::value_parser!(u64)))
            .arg(Arg::new("netns").long("netns-id").value_parser(clap::value_parser!(u32)))
            .arg(Arg::new("levels").short('l').long("levels").value_parser(clap::value_parser!(u32).range(1..=64)))
            .arg(Arg::new("ratio").long("ratio").value_parser(clap::value_parser!(f64)))
            .arg(Arg::new("own").long("own").value_parser(|s: &str| s.parse::<u32>().map_err(|_| "not mine")))
    }

    fn message(args: &[&str]) -> Option<String> {
        let mut cmd = command();
        let err = cmd.try_get_matches_from_mut(std::iter::once("tool").chain(args.iter().copied())).unwrap_err();
        explain(&cmd, &err)
    }

    #[test]
    fn numbers_name_the_flag_the_value_and_the_range() {
        let all_u64 = "a whole number from 0 to 18446744073709551615 is expected";
        assert_eq!(message(&["-m", "0.5"]).unwrap(), format!("invalid value '0.5' for '--min <min>': {all_u64}"));
        assert_eq!(message(&["--min=-1"]).unwrap(), format!("invalid value '-1' for '--min <min>': {all_u64}"));
        assert_eq!(
            message(&["--netns-id", "99999999999"]).unwrap(),
            "invalid value '99999999999' for '--netns-id <netns>': a whole number from 0 to 4294967295 is expected"
        );
        for bad in ["0", "65", "x", ""] {
            let text = message(&["--levels", bad]).unwrap();
            assert!(text.ends_with("a whole number from 1 to 64 is expected"), "{text}");
        }
        assert!(message(&["--ratio", "x"]).unwrap().contains("a number is expected"));
    }

    #[test]
    fn hand_written_parsers_keep_their_words() {
        assert_eq!(message(&["--own", "x"]), None);
        assert_eq!(message(&["--no-such"]), None);
    }
}
