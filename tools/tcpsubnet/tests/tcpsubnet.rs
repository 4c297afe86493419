// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcpsubnet against a helper (tests/netsend.c) that sends known byte counts to known IPv4 addresses: loopback
//! addresses of 127.39.0.0/16 on the host (no other test sends there), and private and shared ranges (10.39.x,
//! 172.16.39.x, 192.168.39.x, 100.64.39.x) inside a network namespace of its own. Each test gives subnets only its
//! own traffic falls in (its own 127.39.N.0/24), so the counts are exact while other tests run; the default list
//! holds 0.0.0.0/0 and 127.0.0.1/32, which everything else on the machine sends to, so with it the helper's bytes
//! are a lower bound. Checked: the lines of one report (order, layout, the date line), JSON summed over
//! intervals, the units of -f, the first subnet that holds a destination wins, the raw_tp fallback, bad input.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

use corebpf_tests::sock::{start_attached, stop};
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = "tcpsubnet";

/// The helper, set up (its namespace made) and waiting for `go`.
struct Sender {
    child: KillOnDrop,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Sender {
    /// `sends` as ADDR:BYTES; `netns`: in a network namespace of its own.
    fn new(netns: bool, sends: &[(&str, u64)]) -> Sender {
        let exe = build_c_helper("tcpsubnet-netsend", include_str!("netsend.c"), &["-O1"]);
        let mut args: Vec<String> = if netns { vec!["-n".into()] } else { Vec::new() };
        args.extend(sends.iter().map(|(a, n)| format!("{a}:{n}")));
        let mut child = Command::new(exe).args(&args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n", "the helper could not set up");
        Sender { child: KillOnDrop(child), stdin, stdout }
    }

    /// Sends everything and waits until every byte has been received.
    fn send(mut self) {
        writeln!(self.stdin, "go").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n", "the helper failed");
        writeln!(self.stdin, "bye").unwrap();
        assert!(self.child.0.wait().unwrap().success());
    }
}

/// Starts the tool (with COREBPF_ATTACH as the environment has it) and waits until its programs are attached.
fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    let forced = env.iter().find(|(k, _)| *k == "COREBPF_ATTACH").map(|(_, v)| v.to_string());
    let mech = forced.or_else(|| std::env::var("COREBPF_ATTACH").ok());
    start_attached(TOOL, args, env, if mech.as_deref() == Some("kprobe") { 2 } else { 1 })
}

/// Sends `sends` while `tcpsubnet args` runs, stops it with SIGINT; what it printed.
fn traced(args: &[&str], env: &[(&str, &str)], netns: bool, sends: &[(&str, u64)]) -> Finished {
    let sender = Sender::new(netns, sends);
    let run = start(args, env);
    sender.send();
    let done = stop(run);
    done.assert_no_programs_left();
    done
}

/// The one report of a run with a long interval: its date line and its subnet lines.
fn one_report(stdout: &str, interval: &str) -> (String, Vec<String>) {
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some(format!("Tracing... Output every {interval} secs. Hit Ctrl-C to end").as_str()));
    let date = lines.next().unwrap_or_else(|| panic!("no report:\n{stdout}")).to_string();
    // [MM/DD/YY HH:MM:SS]
    let shape: String = date.chars().map(|c| if c.is_ascii_digit() { 'd' } else { c }).collect();
    assert_eq!(shape, "[dd/dd/dd dd:dd:dd]", "date line {date:?}");
    (date, lines.map(str::to_string).collect())
}

/// JSON entries per subnet, summed over every object (each also checked for BCC's layout).
fn json_sums(stdout: &str) -> std::collections::BTreeMap<String, f64> {
    let mut sums = std::collections::BTreeMap::new();
    for line in stdout.lines() {
        assert!(line.starts_with("{\"date\": \""), "{line}");
        assert!(line.contains("\", \"time\": \""), "{line}");
        assert!(line.contains("\", \"entries\": {"), "{line}");
    }
    for object in json_lines(stdout) {
        for (subnet, n) in object["entries"].as_object().unwrap() {
            *sums.entry(subnet.clone()).or_insert(0.0) += n.as_f64().unwrap();
        }
    }
    sums
}

#[test]
fn loopback_bytes_per_subnet_in_one_report() {
    let sends = [("127.39.1.1", 1000), ("127.39.1.7", 2500), ("127.39.2.5", 700), ("127.39.2.9", 300)];
    let done = traced(&["-i", "3600", "127.39.1.1/32,127.39.1.0/24,127.39.2.0/24"], &[], false, &sends);
    let (_, rows) = one_report(&done.stdout, "3600");
    // Largest first; 127.39.1.1 is counted by its /32, which comes first, not by the /24 that also holds it.
    assert_eq!(
        rows,
        ["127.39.1.0/24           2500", "127.39.1.1/32           1000", "127.39.2.0/24           1000"],
        "{}",
        done.stdout
    );
}

#[test]
fn json_sums_to_the_bytes_sent() {
    let sends = [("127.39.3.1", 123_456), ("127.39.3.200", 4321), ("127.39.3.2", 1)];
    let done = traced(&["-J", "127.39.3.0/25,127.39.3.128/25"], &[], false, &sends);
    let sums = json_sums(&done.stdout);
    assert_eq!(sums.get("127.39.3.0/25"), Some(&123_457.0), "{}", done.stdout);
    assert_eq!(sums.get("127.39.3.128/25"), Some(&4321.0), "{}", done.stdout);
    assert_eq!(sums.len(), 2, "{}", done.stdout);
}

#[test]
fn private_ranges_in_a_network_namespace() {
    let sends = [
        ("10.39.0.1", 1111),
        ("172.16.39.1", 2222),
        ("192.168.39.1", 3333),
        ("100.64.39.1", 4444),
        ("10.39.0.2", 5555),
    ];
    let subnets = "10.39.0.1/32,10.39.0.0/16,172.16.39.0/24,192.168.39.0/24,100.64.39.0/24";
    let done = traced(&["-i", "3600", subnets], &[], true, &sends);
    let (_, rows) = one_report(&done.stdout, "3600");
    assert_eq!(
        rows,
        [
            "10.39.0.0/16            5555",
            "100.64.39.0/24          4444",
            "192.168.39.0/24         3333",
            "172.16.39.0/24          2222",
            "10.39.0.1/32            1111",
        ],
        "{}",
        done.stdout
    );
}

#[test]
fn default_subnets_take_each_range() {
    let sends = [("10.39.0.9", 7001), ("172.16.39.9", 7002), ("192.168.39.9", 7003), ("100.64.39.9", 7004)];
    let done = traced(&["-J"], &[], true, &sends);
    let sums = json_sums(&done.stdout);
    // Other processes' traffic may add to these (the default list catches everything), never take away.
    for (subnet, least) in [("10.0.0.0/8", 7001.0), ("172.16.0.0/12", 7002.0), ("192.168.0.0/16", 7003.0)] {
        assert!(sums.get(subnet).is_some_and(|&n| n >= least), "{subnet}: {}", done.stdout);
    }
    assert!(sums.get("0.0.0.0/0").is_some_and(|&n| n >= 7004.0), "{}", done.stdout);
}

#[test]
fn units_of_f() {
    // Four runs at once see the same 5000 bytes.
    let sender = Sender::new(false, &[("127.39.5.5", 5000)]);
    let subnet = "127.39.5.0/24";
    let runs: Vec<Running> = [
        vec!["-i", "3600", "-f", "b", subnet],
        vec!["-i", "3600", "-f", "K", subnet],
        vec!["-i", "3600", "-f", "k", subnet],
        vec!["-i", "3600", "-f", "M", subnet],
        vec!["-J", "-f", "K", subnet],
    ]
    .iter()
    .map(|args| start(args, &[]))
    .collect();
    sender.send();
    let outs: Vec<String> = runs.into_iter().map(|r| stop(r).stdout.clone()).collect();
    for (out, n) in outs.iter().zip(["40000", "4", "39", "0"]) {
        assert_eq!(one_report(out, "3600").1, [format!("127.39.5.0/24         {n:>6}")], "{out}");
    }
    assert_eq!(json_sums(&outs[4]).get(subnet), Some(&4.8828125), "{}", outs[4]);
}

#[test]
fn raw_tp_fallback_counts_the_same() {
    let done = traced(&["-v", "-J", "127.39.4.0/24"], &[("COREBPF_ATTACH", "raw_tp")], false, &[("127.39.4.4", 9999)]);
    assert!(done.stderr.contains("attached with raw_tp"), "{}", done.stderr);
    assert_eq!(json_sums(&done.stdout).get("127.39.4.0/24"), Some(&9999.0), "{}", done.stdout);
}

#[test]
fn bad_subnets_and_flags_are_refused() {
    for (args, what) in [
        (&["10.0.0.0"][..], "10.0.0.0"),
        (&["10.0.0.0/33"], "mask"),
        (&["300.1.1.1/8"], "IPv4"),
        (&["10.0.0.0/8,bad/8"], "bad"),
        (&["::1/128"], "::1"),
        (&["-f", "x"], "-f"),
        (&["-i", "0"], "0"),
    ] {
        assert_refused(TOOL, args, 2, what);
    }
}

/// `--prometheus`: each subnet's counter holds exactly the bytes sent into it, and one given an interval is refused.
#[test]
fn prometheus_counters_hold_the_bytes_sent() {
    use corebpf_tests::prom::{promtool_accepts, sample, scrape, serving};
    let sends = [("127.39.6.1", 70_000), ("127.39.6.130", 555)];
    let sender = Sender::new(false, &sends);
    let (run, addr) = serving(TOOL, &["127.39.6.0/25,127.39.6.128/25,127.39.7.0/24"]);
    sender.send();
    let text = scrape(&addr);
    run.signal(libc::SIGTERM);
    let done = run.finish(std::time::Duration::from_secs(20));
    done.assert_success();
    done.assert_no_programs_left();
    promtool_accepts(&text);
    let bytes = |subnet: &str| sample(&text, &format!("corebpf_tcpsubnet_sent_bytes_total{{subnet=\"{subnet}\"}}"));
    assert_eq!(bytes("127.39.6.0/25"), Some(70_000.0), "{text}");
    assert_eq!(bytes("127.39.6.128/25"), Some(555.0), "{text}");
    assert_eq!(bytes("127.39.7.0/24"), Some(0.0), "{text}");

    let both = run_tool(TOOL, &["--prometheus", "127.0.0.1:1", "-i", "5"]);
    assert_eq!(both.status.code(), Some(2), "{}", both.stderr);
}
