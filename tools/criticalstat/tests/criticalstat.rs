// SPDX-License-Identifier: Apache-2.0 OR MIT
//! criticalstat. Its tracepoints (preemptirq:irq_disable/irq_enable, preempt_disable/preempt_enable) exist only
//! in kernels built with CONFIG_PREEMPTIRQ_TRACEPOINTS, and no kernel available to the project has them (this
//! host's 6.18, Debian's 5.10, 6.1 and 6.12 cloud kernels of the matrix, Debian's 6.1 RT kernel). So what is
//! tested is what such a kernel must get: the refusal in one line naming the missing tracepoint and the kernel
//! option, exit 1, for -i and -p, decided from the kernel's BTF (the test reads the same BTF to know which case
//! it is in); with -v, that the raw_tp programs were loaded, so the kernel's verifier accepted them; and bad
//! input. On a kernel that has the tracepoints, the first test checks instead that sections are reported in
//! BCC's layout.

use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");

/// Whether the running kernel's BTF names raw tracepoint `name` (its `btf_trace_<name>` typedef).
fn kernel_has_tracepoint(name: &str) -> bool {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").expect("kernel BTF");
    let needle = format!("\0btf_trace_{name}\0");
    btf.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn without_the_tracepoints_it_names_the_missing_option() {
    for (args, tracepoint, option) in [
        (&[][..], "irq_disable", "CONFIG_TRACE_IRQFLAGS"),
        (&["-p"][..], "preempt_disable", "CONFIG_TRACE_PREEMPT_TOGGLE"),
        (&["-p", "-i"][..], "irq_disable", "CONFIG_TRACE_IRQFLAGS"),
    ] {
        if kernel_has_tracepoint(tracepoint) {
            // A kernel with the tracepoints: sections at least 1 us long are everywhere; the first one is shown as
            // BCC's block.
            let mut all = args.to_vec();
            all.extend(["-d", "1"]);
            let mut run = Running::start(TOOL, &all);
            run.wait_for_line("Finding critical section with", Duration::from_secs(30));
            run.wait_for_line("===================================", Duration::from_secs(60));
            run.wait_for_line("TASK: ", Duration::from_secs(60));
            run.wait_for_line("Section end:   ", Duration::from_secs(60));
            run.signal(libc::SIGINT);
            run.finish(Duration::from_secs(30)).assert_success();
            continue;
        }
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(1), "{args:?}: stdout:\n{}\nstderr:\n{}", done.stdout, done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
        let want = format!(
            "criticalstat: this kernel has no preemptirq:{tracepoint} tracepoint: it was built without \
             CONFIG_PREEMPTIRQ_TRACEPOINTS (which needs {option}"
        );
        assert!(done.stderr.starts_with(&want), "{args:?}: {}", done.stderr);
        assert!(done.stdout.is_empty(), "{}", done.stdout);
    }
}

#[test]
fn with_v_its_programs_are_checked_by_the_verifier_first() {
    for (args, tracepoint) in [(&["-v"][..], "irq_disable"), (&["-v", "-p"][..], "preempt_disable")] {
        if kernel_has_tracepoint(tracepoint) {
            // Nothing to refuse: the test above traces for real.
            continue;
        }
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(1), "{args:?}: {}", done.stderr);
        assert!(
            done.stderr.contains(
                "the raw_tp programs load (the verifier accepts them), but there is nothing to attach them to"
            ),
            "{args:?}: {}",
            done.stderr
        );
        assert!(done.stderr.trim_end().lines().last().unwrap().contains("CONFIG_PREEMPTIRQ_TRACEPOINTS"));
    }
}

#[test]
fn bad_input_is_one_line() {
    for args in [&["-d", "0"][..], &["-d", "x"][..], &["-d", "-5"][..], &["10"][..], &["-x"][..]] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
    }
}
