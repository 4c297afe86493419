// SPDX-License-Identifier: Apache-2.0 OR MIT
//! For tests: the `#define NAME <integer>` lines of the shared C headers in `bpf/include/`, where a number both
//! the BPF programs and the Rust side use has its home, so a test can hold the Rust copy to it.

/// The value of `#define NAME VALUE` in `header` (the header's text); panics if it has none.
pub fn define(header: &str, name: &str) -> usize {
    header
        .lines()
        .find_map(|l| l.strip_prefix("#define ")?.strip_prefix(name)?.strip_prefix([' ', '\t']))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("the header has no #define {name} <integer>"))
}
