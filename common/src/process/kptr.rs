// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Hidden kernel addresses: /proc/kallsyms lists every symbol at address 0 to a process the kernel does not trust
//! with kernel pointers (`kernel.kptr_restrict`, CAP_SYSLOG, `kernel.perf_event_paranoid`), and then no kernel
//! frame can be named. [`warn_if_hidden`] says so once per run, with what would fix it, instead of a silent
//! `[unknown]` in every kernel frame.

use std::io::BufRead;
use std::sync::Once;

/// Says once, on stderr, why kernel frames print as `[unknown]` if /proc/kallsyms hides the kernel's addresses
/// from this process. Call before naming kernel frames.
pub fn warn_if_hidden() {
    static CHECKED: Once = Once::new();
    CHECKED.call_once(|| {
        let Ok(file) = std::fs::File::open("/proc/kallsyms") else { return };
        if hidden(std::io::BufReader::new(file)) {
            let sysctl = |name: &str| {
                std::fs::read_to_string(format!("/proc/sys/kernel/{name}")).ok()?.trim().parse::<i32>().ok()
            };
            eprintln!(
                "{}: {}",
                crate::identity::invoked_name(),
                warning(sysctl("kptr_restrict"), sysctl("perf_event_paranoid"))
            );
        }
    });
}

/// True if the first symbols of a /proc/kallsyms read all sit at address 0 (the kernel hides them all or none).
fn hidden(reader: impl BufRead) -> bool {
    let addrs: Vec<bool> = reader
        .lines()
        .take(16)
        .map_while(Result::ok)
        .filter_map(|l| l.split_whitespace().next().map(|a| u64::from_str_radix(a, 16).is_ok_and(|a| a == 0)))
        .collect();
    !addrs.is_empty() && addrs.iter().all(|&zero| zero)
}

/// The warning, with the fix that fits the kernel's settings (`kptr_restrict`, `perf_event_paranoid`): the kernel
/// shows the addresses with `kptr_restrict` 0 if `perf_event_paranoid` is 1 or less, with 0 or 1 to a process with
/// CAP_SYSLOG, with 2 to none.
fn warning(kptr_restrict: Option<i32>, perf_event_paranoid: Option<i32>) -> String {
    let fix = match kptr_restrict {
        Some(2) => {
            "kernel.kptr_restrict is 2, which hides them from every process: set it to 1 and run with CAP_SYSLOG"
                .to_string()
        }
        Some(0) => format!(
            "run with CAP_SYSLOG (root has it unless capabilities were dropped), or set kernel.perf_event_paranoid \
             to 1 (it is {})",
            perf_event_paranoid.map_or("unknown".into(), |p| p.to_string())
        ),
        _ => "run with CAP_SYSLOG (root has it unless capabilities were dropped)".to_string(),
    };
    format!("kernel frames print as [unknown]: /proc/kallsyms shows this process no kernel addresses; {fix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_addresses_are_hidden_ones() {
        assert!(hidden("0000000000000000 T _stext\n0000000000000000 t foo\t[mod]\n".as_bytes()));
        assert!(!hidden("ffffffff81000000 T _stext\nffffffff81000100 T vfs_read\n".as_bytes()));
        assert!(!hidden("".as_bytes()));
    }

    #[test]
    fn the_fix_fits_the_settings() {
        assert!(warning(Some(2), Some(2)).ends_with("set it to 1 and run with CAP_SYSLOG"));
        assert!(
            warning(Some(1), Some(2)).ends_with("run with CAP_SYSLOG (root has it unless capabilities were dropped)")
        );
        assert!(warning(Some(0), Some(2)).contains("kernel.perf_event_paranoid to 1 (it is 2)"));
    }
}
