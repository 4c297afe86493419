// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Bad input: what every tool must do with it.

use crate::run_tool;

/// `tool args` is refused: exit status `code` (2 for usage, 1 for a runtime fact such as an unknown PID), one
/// line on stderr that contains `what`, nothing on stdout.
pub fn assert_refused(tool: &str, args: &[&str], code: i32, what: &str) {
    let done = run_tool(tool, args);
    assert_eq!(done.status.code(), Some(code), "{tool} {args:?}: {}", done.stderr);
    assert!(done.stderr.contains(what), "{tool} {args:?}: {}", done.stderr);
    assert_eq!(done.stderr.trim_end().lines().count(), 1, "{tool} {args:?}: {}", done.stderr);
    assert!(done.stdout.is_empty(), "{tool} {args:?}: {}", done.stdout);
}
