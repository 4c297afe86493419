// SPDX-License-Identifier: Apache-2.0 OR MIT
//! System call names and numbers of the architecture the tools are built for, and errno names, from the
//! `syscalls` crate (its tables are generated from the kernel's own syscall tables and `errno` headers, and kept
//! current there), so no tool keeps a hand-written table.
//!
//! The `syscalls:sys_enter_NAME` tracepoints are named after the kernel's `SYSCALL_DEFINE` names, which for a
//! few calls differ from the `__NR_` names of the table (`newstat` is `stat`, `umount` is `umount2`):
//! [`tracepoint_number`] knows those renames.

use syscalls::{Errno, Sysno};

/// Tracepoint (`SYSCALL_DEFINE`) names that differ from the `__NR_` name of the same call.
const TRACEPOINT_RENAMES: &[(&str, &str)] = &[
    ("newstat", "stat"),
    ("newfstat", "fstat"),
    ("newlstat", "lstat"),
    ("newuname", "uname"),
    ("sendfile64", "sendfile"),
    ("umount", "umount2"),
];

/// The name of system call `nr` on this architecture.
pub fn name(nr: u32) -> Option<&'static str> {
    Sysno::new(nr as usize).map(|s| s.name())
}

/// The name of system call `nr`, or BCC's `[unknown: NR]` for a number the table does not know.
pub fn display_name(nr: u32) -> String {
    name(nr).map_or_else(|| format!("[unknown: {nr}]"), str::to_string)
}

/// The number of the system call called `name` on this architecture (its `__NR_` name, as `strace` shows it).
pub fn number(name: &str) -> Option<u32> {
    name.parse::<Sysno>().ok().map(|s| s.id() as u32)
}

/// The number of the system call whose tracepoints are `syscalls:sys_enter_NAME`/`sys_exit_NAME`.
pub fn tracepoint_number(name: &str) -> Option<u32> {
    number(name).or_else(|| TRACEPOINT_RENAMES.iter().find(|(tp, _)| *tp == name).and_then(|(_, nr)| number(nr)))
}

/// Every system call of this architecture as (number, name), by number.
pub fn all() -> Vec<(u32, &'static str)> {
    // Sysno::iter() stops before the last call of the table; walk the numbers instead.
    (Sysno::first().id()..=Sysno::last().id())
        .filter_map(|nr| Sysno::new(nr as usize).map(|s| (nr as u32, s.name())))
        .collect()
}

/// The name of error number `errno` (`ENOENT` for 2).
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Errno::new(errno).name()
}

/// An error number from its name (`ENOENT`, case-insensitive) or its value (`2`, or `-2` as a syscall returns
/// it).
pub fn errno_number(text: &str) -> Option<i32> {
    if let Ok(n) = text.trim().parse::<i64>() {
        let n = i32::try_from(n.unsigned_abs()).ok()?;
        return (1..4096).contains(&n).then_some(n);
    }
    let upper = text.trim().to_ascii_uppercase();
    (1..4096).find(|&n| Errno::new(n).name() == Some(upper.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn x86_64_numbers_and_names() {
        assert_eq!(number("read"), Some(0));
        assert_eq!(number("getppid"), Some(110));
        assert_eq!(name(39), Some("getpid"));
        assert_eq!(display_name(100_000), "[unknown: 100000]");
        assert_eq!(tracepoint_number("newstat"), Some(4));
        assert_eq!(tracepoint_number("stat"), Some(4));
        assert_eq!(tracepoint_number("umount"), Some(166));
        assert_eq!(tracepoint_number("nosuchcall"), None);
        let all = all();
        assert_eq!(all.first(), Some(&(0, "read")));
        assert!(all.iter().any(|&(_, n)| n == "file_setattr"), "the last call of the table is listed");
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    #[cfg(target_arch = "aarch64")]
    fn aarch64_numbers_and_names() {
        // arm64 has the generic table (include/uapi/asm-generic/unistd.h): no open, stat or getpid at 39.
        assert_eq!(number("read"), Some(63));
        assert_eq!(number("getppid"), Some(173));
        assert_eq!(name(172), Some("getpid"));
        assert_eq!(number("open"), None);
        assert_eq!(tracepoint_number("newfstat"), Some(80));
        assert_eq!(tracepoint_number("umount"), Some(39));
        assert_eq!(tracepoint_number("newstat"), None);
        let all = all();
        assert_eq!(all.first(), Some(&(0, "io_setup")));
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn errno_by_name_or_number() {
        assert_eq!(errno_number("ENOENT"), Some(2));
        assert_eq!(errno_number("enoent"), Some(2));
        assert_eq!(errno_number("2"), Some(2));
        assert_eq!(errno_number("-13"), Some(13));
        assert_eq!(errno_number("EBOGUS"), None);
        assert_eq!(errno_number("0"), None);
        assert_eq!(errno_name(1), Some("EPERM"));
    }
}
