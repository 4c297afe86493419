// SPDX-License-Identifier: Apache-2.0 OR MIT
//! kvmexit against a tiny KVM guest (tests/guest.c): two vCPU threads, named "CPU 0/KVM" and "CPU 1/KVM" as QEMU
//! names them, run N0 and N1 `out` instructions and one `hlt` each, so each thread's I/O and HLT exits are known
//! exactly (the helper also counts the KVM_EXIT_IO exits it sees, which must be N0 and N1).
//!
//! Where KVM reports its exits to kvm:kvm_exit (VMX or SVM: the kernel matrix's guests, which load this kernel's
//! kvm-amd under QEMU's `-cpu max`), every layout must hold those exact counts. The PVM flavour of KVM (this
//! project's host) runs the guest but reports no exit to the tracepoint: there the tool must say so once on stderr
//! and count nothing for the guest; everything else (flags, errors, clean ends) is checked the same everywhere.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use corebpf_tests::*;
use serde_json::Value;

const TOOL: &str = env!("CARGO_PKG_NAME");
const N0: u64 = 5;
const N1: u64 = 7;
const PVM_LINE: &str = "kvmexit: this host's KVM is PVM (kvm_pvm), which does not report VM exits to kvm:kvm_exit, \
                        so no exits will be counted";

/// True when this kernel's KVM is PVM, whose exits never reach kvm:kvm_exit.
fn pvm() -> bool {
    Path::new("/sys/module/kvm_pvm").exists()
}

/// Makes /dev/kvm exist: in the kernel matrix's guests, by loading the kernel's own KVM modules from
/// $COREBPF_KVM_MODULES (vm/init; irqbypass, kvm, kvm-amd); elsewhere it must already exist.
fn ensure_kvm() {
    static LOADING: Mutex<()> = Mutex::new(());
    let _guard = LOADING.lock().unwrap();
    if Path::new("/dev/kvm").exists() {
        return;
    }
    let dir = std::env::var("COREBPF_KVM_MODULES")
        .unwrap_or_else(|_| panic!("no /dev/kvm here: kvmexit's tests need KVM (or COREBPF_KVM_MODULES)"));
    for module in ["irqbypass", "kvm", "kvm-amd"] {
        if Path::new(&format!("/sys/module/{}", module.replace('-', "_"))).exists() {
            continue;
        }
        let out = Command::new("insmod").arg(format!("{dir}/{module}.ko")).output().expect("insmod");
        assert!(out.status.success(), "insmod {module}: {}", String::from_utf8_lossy(&out.stderr));
    }
    for _ in 0..100 {
        if Path::new("/dev/kvm").exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("/dev/kvm did not appear after loading {dir}/kvm-amd.ko");
}

/// The helper, started and waiting: its PID and vCPU threads' TIDs.
struct Guest {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    pid: u32,
    tids: [u32; 2],
}

impl Guest {
    fn start() -> Guest {
        let exe = build_c_helper("kvmexit-guest", include_str!("guest.c"), &["-O1", "-pthread"]);
        ensure_kvm();
        let mut child = KillOnDrop(
            Command::new(exe)
                .args([N0.to_string(), N1.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let stdin = child.0.stdin.take();
        let mut line = String::new();
        BufReader::new(child.0.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let ids: Vec<u32> = line.split_whitespace().map(|s| s.parse().unwrap()).collect();
        assert_eq!(ids.len(), 3, "the helper said {line:?}");
        Guest { child, stdin, pid: ids[0], tids: [ids[1], ids[2]] }
    }

    /// Runs both vCPUs to their hlt; checks the helper saw N0 and N1 I/O exits.
    fn run(&mut self) {
        self.stdin.as_mut().unwrap().write_all(b"g").unwrap();
        let mut line = String::new();
        BufReader::new(self.child.0.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line, format!("io {N0} {N1}\n"), "the helper's own count of its I/O exits");
    }
}

/// Runs the tool with `args` (the guest's IDs substituted for "PID", "TID0", "TID1") across one run of the guest,
/// stopped with SIGINT; returns what it printed.
fn traced(guest: &mut Guest, args: &[&str]) -> Finished {
    let (pid, t0, t1) = (guest.pid.to_string(), guest.tids[0].to_string(), guest.tids[1].to_string());
    let both = format!("{t0},{t1}");
    let args: Vec<&str> = args
        .iter()
        .map(|&a| match a {
            "PID" => pid.as_str(),
            "TID0" => t0.as_str(),
            "TID1" => t1.as_str(),
            "TIDS" => both.as_str(),
            other => other,
        })
        .collect();
    let mut run = Running::start(TOOL, &args);
    run.wait_attached(Duration::from_secs(20));
    guest.run();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    let expected_stderr = if pvm() { format!("{PVM_LINE}\n") } else { String::new() };
    assert_eq!(done.stderr, expected_stderr, "stderr");
    done
}

/// (I/O, HLT) exit reason numbers of the vendor named in JSON.
fn io_hlt(isa: &str) -> (u64, u64) {
    match isa {
        "vmx" => (30, 12),
        "svm" => (0x7b, 0x78),
        other => panic!("unexpected isa {other}"),
    }
}

/// The I/O and HLT counts per TID (0 when folded) in JSON lines, checking each row's name against its number.
fn json_counts(stdout: &str) -> Vec<(u64, u64, u64)> {
    let mut by_tid: Vec<(u64, u64, u64)> = Vec::new();
    for row in json_lines(stdout) {
        let isa = row["isa"].as_str().unwrap();
        let (io, hlt) = io_hlt(isa);
        let reason = row["reason"].as_u64().unwrap();
        let name = row["name"].as_str().unwrap();
        let tid = row["tid"].as_u64().unwrap_or(0);
        let n = row["count"].as_u64().unwrap();
        let i = match by_tid.iter().position(|&(t, _, _)| t == tid) {
            Some(i) => i,
            None => {
                by_tid.push((tid, 0, 0));
                by_tid.len() - 1
            }
        };
        if reason == io {
            assert_eq!(name, if isa == "vmx" { "IO_INSTRUCTION" } else { "IOIO" }, "{row}");
            by_tid[i].1 += n;
        } else if reason == hlt {
            assert_eq!(name, "HLT", "{row}");
            by_tid[i].2 += n;
        }
    }
    by_tid.sort();
    by_tid
}

/// In text rows (`[PID] [TID] NAME COUNT`), the count of `name` on rows whose leading IDs are `ids`.
fn text_count(stdout: &str, ids: &[u32], names: &[&str]) -> u64 {
    stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == ids.len() + 2
                && ids.iter().zip(&w).all(|(id, s)| id.to_string() == *s)
                && names.contains(&w[ids.len()]))
            .then(|| w[ids.len() + 1].parse::<u64>().unwrap())
        })
        .sum()
}

const IO_NAMES: &[&str] = &["IOIO", "IO_INSTRUCTION"];

#[test]
fn counts_each_io_exit_of_a_vcpu_thread() {
    let mut guest = Guest::start();
    let done = traced(&mut guest, &["-t", "TID1", "--json"]);
    let counts = json_counts(&done.stdout);
    if pvm() {
        assert_eq!(done.stdout, "", "PVM reports no exits, yet some were counted");
        return;
    }
    let t1 = guest.tids[1] as u64;
    assert_eq!(counts, vec![(t1, N1, 1)], "{}", done.stdout);
    // Every row is the thread's.
    for row in json_lines(&done.stdout) {
        assert_eq!(row["tid"], Value::from(t1), "{row}");
    }
}

#[test]
fn pid_folds_its_threads_and_vcpu_picks_one() {
    let mut guest = Guest::start();
    let done = traced(&mut guest, &["-p", "PID"]);
    let mut lines = done.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("Display kvm exit reasons and statistics for PID {}... Hit Ctrl-C to end.", guest.pid).as_str())
    );
    assert_eq!(lines.next(), Some(""));
    assert_eq!(lines.next(), Some(format!("{:<35} COUNT", "KVM_EXIT_REASON").as_str()));
    if pvm() {
        assert_eq!(lines.next(), None, "{}", done.stdout);
    } else {
        assert_eq!(text_count(&done.stdout, &[], IO_NAMES), N0 + N1, "{}", done.stdout);
        assert_eq!(text_count(&done.stdout, &[], &["HLT"]), 2, "{}", done.stdout);
        // Most frequent first: the I/O exits lead.
        let first = lines.next().unwrap().split_whitespace().next().unwrap();
        assert!(IO_NAMES.contains(&first), "{}", done.stdout);
    }

    let mut guest = Guest::start();
    let done = traced(&mut guest, &["-p", "PID", "-v", "0", "--json"]);
    if pvm() {
        assert_eq!(done.stdout, "");
    } else {
        assert_eq!(json_counts(&done.stdout), vec![(guest.tids[0] as u64, N0, 1)], "{}", done.stdout);
    }
}

#[test]
fn alltids_and_tid_lists_print_each_thread() {
    for args in [&["-p", "PID", "-a"][..], &["-T", "TIDS"][..], &[][..]] {
        let mut guest = Guest::start();
        let done = traced(&mut guest, args);
        let (header, ids): (String, Vec<Vec<u32>>) = match args.first() {
            Some(&"-p") => (format!("TID      {:<35} COUNT", "KVM_EXIT_REASON"), guest.tids.map(|t| vec![t]).into()),
            Some(_) => (format!("TIDS     {:<35} COUNT", "KVM_EXIT_REASON"), guest.tids.map(|t| vec![t]).into()),
            None => (
                format!("PID      TID      {:<35} COUNT", "KVM_EXIT_REASON"),
                guest.tids.map(|t| vec![guest.pid, t]).into(),
            ),
        };
        assert!(done.stdout.lines().any(|l| l == header), "{args:?}:\n{}", done.stdout);
        let want = if pvm() { [(0, 0), (0, 0)] } else { [(N0, 1), (N1, 1)] };
        for (ids, (io, hlt)) in ids.iter().zip(want) {
            assert_eq!(text_count(&done.stdout, ids, IO_NAMES), io, "{args:?} {ids:?}:\n{}", done.stdout);
            assert_eq!(text_count(&done.stdout, ids, &["HLT"]), hlt, "{args:?} {ids:?}:\n{}", done.stdout);
        }
    }
}

#[test]
fn duration_ends_by_itself() {
    let done = run_tool(TOOL, &["-p", &std::process::id().to_string(), "1"]);
    done.assert_success();
    let mut lines = done.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(
            format!("Display kvm exit reasons and statistics for PID {} after sleeping 1 secs.", std::process::id())
                .as_str()
        )
    );
    assert_eq!(lines.next(), Some(format!("{:<35} COUNT", "KVM_EXIT_REASON").as_str()));
    assert_eq!(lines.next(), None, "{}", done.stdout);
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let me = std::process::id().to_string();
    let mut run = Running::start(TOOL, &["-p", &me]);
    run.wait_attached(Duration::from_secs(20));
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    assert!(done.stdout.ends_with(&format!("{:<35} COUNT\n", "KVM_EXIT_REASON")), "{}", done.stdout);
    pipe::assert_head_1_ends_cleanly(TOOL, "", "Display kvm exit reasons and statistics for all threads...");
}

#[test]
fn verbose_names_the_attach_path() {
    let mut run = Running::start(TOOL, &["--verbose", "-p", &std::process::id().to_string()]);
    run.wait_attached(Duration::from_secs(20));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(done.stderr.lines().any(|l| l.starts_with("attached with tracepoint")), "{}", done.stderr);
}

#[test]
fn bad_input() {
    // Usage errors: exit 2, one line.
    for args in [
        &["--bogus"][..],
        &["-t", "1", "-a", "-p", "1"],
        &["-t", "1", "-T", "1,2"],
        &["-v", "0"],
        &["-a"],
        &["-T", "1,,2"],
        &["-T", "1, 2"],
        &["-p", "x"],
        &["0"],
        &["-m", "0"],
    ] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
        assert!(done.stdout.is_empty(), "{args:?}: {}", done.stdout);
    }
    // Run-time errors: exit 1, one line.
    let me = std::process::id().to_string();
    for (args, said) in [
        (&["-p", "999999999"][..], "kvmexit: no process with PID 999999999".to_string()),
        (&["-t", "999999998"], "kvmexit: no thread with TID 999999998".to_string()),
        (
            &["-p", &me, "-v", "3"],
            format!("kvmexit: PID {me} has no thread of vCPU 3 (named \"CPU 3/KVM\", as QEMU names them)"),
        ),
    ] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(1), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.trim_end(), said, "{args:?}");
        assert!(done.stdout.is_empty(), "{args:?}: {}", done.stdout);
    }
    // Off x86 (the arm64 column of the kernel matrix runs this), it refuses in one line: the exit reasons it
    // decodes are VMX's and SVM's.
    if !cfg!(target_arch = "x86_64") {
        let done = run_tool(TOOL, &["1"]);
        assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
        assert_eq!(
            done.stderr.trim_end(),
            format!(
                "kvmexit: the exit reasons it decodes are x86's (VMX and SVM): KVM's exits on {} are not decoded",
                std::env::consts::ARCH
            )
        );
        assert!(done.stdout.is_empty(), "{}", done.stdout);
    }
}

/// `--prometheus`: the guest's exits per exit reason, summed over its threads, exactly (N0 + N1 I/O exits, two
/// HLTs); on PVM, which reports none, the family is declared and holds nothing of the guest. promtool accepts both.
#[test]
fn prometheus_counts_the_guests_exits_by_reason() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let mut guest = Guest::start();
    let pid = guest.pid.to_string();
    let (tool, addr) = serving(TOOL, &["-p", &pid]);
    guest.run();
    let text = scrape(&addr);
    // The matrix's guests (their helpers prebuilt in COREBPF_HELPER_DIR) carry no promtool; the host checks the
    // same exposition.
    if std::env::var_os("COREBPF_HELPER_DIR").is_none() {
        promtool_accepts(&text);
    }
    assert!(text.contains("# TYPE corebpf_kvmexit_exits_total counter"), "{text}");
    let ours: Vec<&str> = text.lines().filter(|l| l.contains(&format!("pid=\"{pid}\""))).collect();
    if pvm() {
        assert!(ours.is_empty(), "PVM reports no exits, yet some were counted:\n{text}");
    } else {
        let isa = ours.first().and_then(|l| l.split("isa=\"").nth(1)).and_then(|r| r.split('"').next());
        let isa = isa.unwrap_or_else(|| panic!("no exit of the guest:\n{text}"));
        let io = if isa == "vmx" { "IO_INSTRUCTION" } else { "IOIO" };
        let count = |reason: &str| {
            sample(&text, &format!("corebpf_kvmexit_exits_total{{pid=\"{pid}\",isa=\"{isa}\",reason=\"{reason}\"}}"))
        };
        assert_eq!(count(io), Some((N0 + N1) as f64), "{text}");
        assert_eq!(count("HLT"), Some(2.0), "{text}");
    }
    tool.signal(libc::SIGTERM);
    tool.finish(Duration::from_secs(20)).assert_success();
}
