// SPDX-License-Identifier: Apache-2.0 OR MIT
//! sslsniff against real TLS traffic with known plaintext: a C helper (tests/sslpair.c) runs a TLS client and a
//! server (a child process named corebpf-tls-srv) over a socketpair through the system's libssl.so.3, and moves
//! known messages with SSL_write, SSL_write_ex, SSL_read and SSL_read_ex, one of them larger than the default
//! --max-buffer-size. The tool must report exactly those calls, with the right FUNC, PID, COMM, LEN and data, and
//! say how many bytes it did not keep as BCC does; -p, -c, -u and the output options are checked on the same
//! workload. A second helper (tests/gnutlspair.c) does the same through GnuTLS.
//! Calls of other processes (other tests run at the same time) are left out by PID.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = "sslsniff";
const WAIT: Duration = Duration::from_secs(30);
/// BCC's header, `%-12s %-18s %-16s %-7s %-7s` (so it ends in spaces).
const HEADER: &str = "FUNC         TIME(s)            COMM             PID     LEN    ";
const SERVER_COMM: &str = "corebpf-tls-srv";
/// The helper's messages (tests/sslpair.c): MSG1, 100 and 10000 bytes of the pattern, MSG2.
const MSG1: &str = "GET /corebpf-sslsniff HTTP/1.1\r\nHost: test\r\n\r\n";
const MSG2: &str = "reply from the server";
const MID: usize = 100;
const BIG: usize = 10000;
const DEFAULT_MAX: usize = 8192;

fn pattern(len: usize) -> String {
    (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect()
}

/// The TLS client and server, waiting for their go byte.
struct Pair {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    client: u32,
    server: u32,
    comm: String,
}

impl Pair {
    /// The OpenSSL pair (tests/sslpair.c).
    fn start() -> Pair {
        let flags = ["-O1", "-Wl,--no-as-needed", "-l:libssl.so.3", "-l:libcrypto.so.3"];
        Self::start_helper(build_c_helper("sslpair", include_str!("sslpair.c"), &flags))
    }

    /// The GnuTLS pair (tests/gnutlspair.c).
    fn start_gnutls() -> Pair {
        let flags = ["-O1", "-Wl,--no-as-needed", "-l:libgnutls.so.30"];
        Self::start_helper(build_c_helper("gnutlspair", include_str!("gnutlspair.c"), &flags))
    }

    fn start_helper(exe: std::path::PathBuf) -> Pair {
        let mut child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("sslpair");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(f.len() == 4 && f[0] == "client" && f[2] == "server", "helper said {line:?}");
        let comm: String = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
        Pair {
            client: f[1].parse().unwrap(),
            server: f[3].parse().unwrap(),
            child: KillOnDrop(child),
            stdin,
            stdout,
            comm,
        }
    }

    /// Lets both sides run their exchange and waits for its end: every traced call has returned by then.
    fn go_and_wait(mut self) {
        self.stdin.take().unwrap().write_all(b"g").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n", "the helper failed");
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
    }
}

/// One call as printed: the fields of its line, its data (lines between the marks, joined) and its end mark.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    fields: Vec<String>,
    data: Option<String>,
    end: Option<String>,
}

impl Event {
    fn func(&self) -> &str {
        &self.fields[0]
    }
    fn pid(&self) -> u32 {
        self.fields[3].parse().unwrap()
    }
    fn len(&self) -> usize {
        self.fields[4].parse().unwrap()
    }
}

/// Parses BCC's text output (after the header); checks the layout between events as it goes: each DATA block
/// is followed by two empty lines.
fn parse(stdout: &str) -> Vec<Event> {
    let lines: Vec<&str> = stdout.lines().collect();
    let mut events = Vec::new();
    let mut i = 1;
    while i < lines.len() {
        let line = lines[i];
        let fields: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        assert!(
            matches!(fields.first().map(String::as_str), Some("READ/RECV" | "WRITE/SEND" | "HANDSHAKE")),
            "line {i} is no event: {line:?}\n{stdout}"
        );
        i += 1;
        let (mut data, mut end) = (None, None);
        if lines.get(i) == Some(&"----- DATA -----") {
            let start = i + 1;
            let stop = (start..lines.len())
                .find(|&j| lines[j].starts_with("----- END DATA"))
                .unwrap_or_else(|| panic!("no END DATA after line {i}:\n{stdout}"));
            data = Some(lines[start..stop].join("\n"));
            end = Some(lines[stop].to_string());
            assert_eq!(lines.get(stop + 1..stop + 3), Some(&["", ""][..]), "two empty lines after line {stop}");
            i = stop + 3;
        }
        events.push(Event { fields, data, end });
    }
    events
}

fn of_pid(events: &[Event], pid: u32) -> Vec<Event> {
    events.iter().filter(|e| e.pid() == pid).cloned().collect()
}

fn end_mark(lost: usize) -> String {
    if lost == 0 {
        "----- END DATA -----".to_string()
    } else {
        format!("----- END DATA (TRUNCATED, {lost} bytes lost) -----")
    }
}

/// Asserts one process's calls: (FUNC, data sent or received) in order, with its COMM, and the data kept up to
/// `max` bytes (text output, which loses the \r of MSG1's line ends to the line reader).
fn assert_calls(events: &[Event], comm: &str, want: &[(&str, String)], max: usize, stdout: &str) {
    let funcs: Vec<(&str, usize)> = events.iter().map(|e| (e.func(), e.len())).collect();
    let want_funcs: Vec<(&str, usize)> = want.iter().map(|(f, d)| (*f, d.len())).collect();
    assert_eq!(funcs, want_funcs, "calls of {comm}:\n{stdout}");
    for (e, (_, data)) in events.iter().zip(want) {
        assert_eq!(e.fields[2], comm, "{e:?}");
        let kept = data.len().min(max);
        assert_eq!(e.data.as_deref(), Some(data[..kept].replace('\r', "").as_str()), "{e:?}");
        assert_eq!(e.end.as_deref(), Some(end_mark(data.len() - kept).as_str()), "{e:?}");
    }
}

fn client_calls() -> Vec<(&'static str, String)> {
    vec![
        ("WRITE/SEND", MSG1.to_string()),
        ("WRITE/SEND", pattern(MID)),
        ("WRITE/SEND", pattern(BIG)),
        ("READ/RECV", MSG2.to_string()),
    ]
}

fn server_calls() -> Vec<(&'static str, String)> {
    vec![
        ("READ/RECV", MSG1.to_string()),
        ("READ/RECV", pattern(MID)),
        ("READ/RECV", pattern(BIG)),
        ("WRITE/SEND", MSG2.to_string()),
    ]
}

/// Runs the tool with `args` (a closure of the helper's PIDs) over one exchange; returns its output and the pair's
/// PIDs and client COMM.
fn trace(args: impl Fn(&Pair) -> Vec<String>) -> (Finished, u32, u32, String) {
    trace_pair(Pair::start(), args)
}

fn trace_pair(pair: Pair, args: impl Fn(&Pair) -> Vec<String>) -> (Finished, u32, u32, String) {
    let (client, server, comm) = (pair.client, pair.server, pair.comm.clone());
    let args = args(&pair);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut run = Running::start(TOOL, &args);
    if args.contains(&"--json") {
        // No header in JSON: wait until its probes are in place.
        run.wait_attached(WAIT);
    } else {
        // The header comes once every probe is attached.
        run.wait_for_line("FUNC", WAIT);
    }
    pair.go_and_wait();
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    (done, client, server, comm)
}

#[test]
fn reports_each_read_and_write_with_its_data() {
    let (done, client, server, comm) = trace(|_| vec![]);
    assert_eq!(done.stdout.lines().next(), Some(HEADER), "{}", done.stdout);
    let events = parse(&done.stdout);
    assert_calls(&of_pid(&events, client), &comm, &client_calls(), DEFAULT_MAX, &done.stdout);
    assert_calls(&of_pid(&events, server), SERVER_COMM, &server_calls(), DEFAULT_MAX, &done.stdout);
    // BCC's columns, exactly: FUNC 12 wide, TIME(s) %-18.9f, COMM 16, PID 7, LEN %-6d.
    let line = done.stdout.lines().find(|l| l.starts_with("WRITE/SEND") && l.contains(&format!(" {client} "))).unwrap();
    let time = &line[13..31];
    assert!(time.trim_end().split_once('.').is_some_and(|(_, d)| d.len() == 9), "{line:?}");
    assert_eq!(&line[31..], format!(" {comm:<16} {client:<7} {:<6}", MSG1.len()), "{line:?}");
    done.assert_no_programs_left();
}

#[test]
fn pid_filter_excludes_the_other_process_and_extra_columns_show() {
    let (done, client, server, comm) =
        trace(|p| ["-p", &p.client.to_string(), "-x", "-l", "--handshake"].map(String::from).to_vec());
    assert_eq!(done.stdout.lines().next(), Some(format!("{HEADER} UID     TID     LAT(ms)").as_str()));
    let events = parse(&done.stdout);
    assert!(of_pid(&events, server).is_empty(), "-p {client} showed the server {server}:\n{}", done.stdout);
    assert!(events.iter().all(|e| e.pid() == client), "-p {client} showed others:\n{}", done.stdout);
    // The client's handshake first (SSL_connect runs SSL_do_handshake), then its calls.
    let (handshake, calls) = events.split_first().unwrap_or_else(|| panic!("no events:\n{}", done.stdout));
    assert_eq!(handshake.func(), "HANDSHAKE", "{}", done.stdout);
    assert_eq!((handshake.len(), handshake.data.as_ref()), (0, None), "{handshake:?}");
    assert_calls(calls, &comm, &client_calls(), DEFAULT_MAX, &done.stdout);
    for e in &events {
        // UID (root), TID (the single-threaded client's PID), LAT(ms) with three decimals.
        assert_eq!(e.fields[5..7], ["0".to_string(), client.to_string()], "{e:?}");
        assert!(e.fields[7].split_once('.').is_some_and(|(_, d)| d.len() == 3), "{e:?}");
    }
}

#[test]
fn comm_filter_hexdump_and_a_larger_buffer() {
    // -u 0 (root, the helper's user) keeps them.
    let (done, client, server, _) =
        trace(|_| ["-c", SERVER_COMM, "-u", "0", "--hexdump", "--max-buffer-size", "20000"].map(String::from).to_vec());
    let events = parse(&done.stdout);
    assert!(of_pid(&events, client).is_empty(), "-c {SERVER_COMM} showed the client:\n{}", done.stdout);
    let ours = of_pid(&events, server);
    let want = server_calls();
    assert_eq!(ours.len(), want.len(), "{}", done.stdout);
    for (e, (func, data)) in ours.iter().zip(&want) {
        assert_eq!((e.func(), e.len()), (*func, data.len()), "{e:?}");
        // Every byte (MSG1's \r too), 16 a line, and nothing lost: 20000 bytes are kept.
        let hex: String = data.bytes().map(|b| format!("{b:02x}")).collect();
        let lines: Vec<&str> = e.data.as_deref().unwrap().lines().collect();
        assert!(lines.iter().all(|l| l.len() <= 32) && lines[..lines.len() - 1].iter().all(|l| l.len() == 32));
        assert_eq!(lines.concat(), hex, "{e:?}");
        assert_eq!(e.end.as_deref(), Some(end_mark(0).as_str()));
    }
}

#[test]
fn json_lines_carry_the_data_and_what_was_lost() {
    let (done, client, _, comm) =
        trace(|p| ["--json", "-p", &p.client.to_string(), "--max-buffer-size", "10"].map(String::from).to_vec());
    let lines = json_lines(&done.stdout);
    let want = client_calls();
    assert_eq!(lines.len(), want.len(), "{}", done.stdout);
    for (v, (func, data)) in lines.iter().zip(&want) {
        assert_eq!(v["func"], *func, "{v}");
        assert_eq!(v["pid"], client, "{v}");
        assert_eq!(v["comm"], comm.as_str(), "{v}");
        assert_eq!(v["len"], data.len(), "{v}");
        assert_eq!(v["data"], data[..10.min(data.len())], "{v}");
        assert_eq!(v["lost_bytes"], data.len() - 10.min(data.len()), "{v}");
    }
}

/// GnuTLS's gnutls_record_send/recv, with OpenSSL and NSS left out (-o -n).
#[test]
fn gnutls_records_are_reported_too() {
    const GNUTLS_SERVER: &str = "corebpf-gnutls";
    const REQUEST: &str = "GET /corebpf-gnutls HTTP/1.1\r\n\r\n";
    const REPLY: &str = "reply from the gnutls server";
    let (done, client, server, comm) = trace_pair(Pair::start_gnutls(), |_| vec!["-o".into(), "-n".into()]);
    let events = parse(&done.stdout);
    let client_want = [("WRITE/SEND", REQUEST.to_string()), ("READ/RECV", REPLY.to_string())];
    let server_want = [("READ/RECV", REQUEST.to_string()), ("WRITE/SEND", REPLY.to_string())];
    assert_calls(&of_pid(&events, client), &comm, &client_want, DEFAULT_MAX, &done.stdout);
    assert_calls(&of_pid(&events, server), GNUTLS_SERVER, &server_want, DEFAULT_MAX, &done.stdout);
}

/// -u: a user other than the helper's (root) sees none of its calls.
#[test]
fn uid_filter_leaves_other_users_out() {
    let (done, client, server, _) = trace(|_| vec!["-u".into(), "65534".into()]);
    let events = parse(&done.stdout);
    assert!(of_pid(&events, client).is_empty() && of_pid(&events, server).is_empty(), "{}", done.stdout);
}

#[test]
fn bad_input_is_one_line() {
    use corebpf_tests::usage::assert_refused;
    assert_refused(TOOL, &["-p", "999999999"], 1, "no process with PID 999999999");
    assert_refused(TOOL, &["-p", "12x"], 2, "12x");
    assert_refused(TOOL, &["--extra-lib", "openssl"], 2, "TYPE:PATH");
    assert_refused(TOOL, &["--extra-lib", "boringssl:/bin/true"], 2, "boringssl");
    assert_refused(TOOL, &["--extra-lib", "openssl:/nonexistent/libssl.so"], 2, "/nonexistent/libssl.so");
    assert_refused(TOOL, &["--max-buffer-size", "2000000"], 2, "2000000");
    assert_refused(TOOL, &["-u", "no-such-user-corebpf"], 2, "no-such-user-corebpf");
    // Issue 53, item 12: every library left out is nothing to trace, not a library not found; --handshake does
    // nothing without -l, so it is refused alone.
    assert_refused(TOOL, &["-o", "-g", "-n"], 2, "-o, -g and -n leave no library to probe");
    assert_refused(TOOL, &["--handshake"], 2, "--latency");
    // A file that has none of the functions of its type (this test program): a run-time error naming it.
    let exe = std::env::current_exe().unwrap().display().to_string();
    let extra = format!("gnutls:{exe}");
    assert_refused(TOOL, &["-o", "-g", "-n", "--extra-lib", &extra], 1, &format!("{exe} defines none"));
}

#[test]
fn sigterm_and_a_closed_pipe_end_cleanly() {
    let own = std::process::id().to_string();
    corebpf_tests::pipe::assert_sigterm_and_closed_pipe_end_cleanly(TOOL, &["-p", &own], "FUNC", "FUNC", || {});
}
