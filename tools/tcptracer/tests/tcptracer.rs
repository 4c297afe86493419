// SPDX-License-Identifier: Apache-2.0 OR MIT
//! tcptracer against a helper of two processes (tests/peers.c) making known IPv4 and IPv6 connections on
//! loopback: the client's connect and close and the server's accept and close are each one exact row, under the
//! PID that made them, with both addresses and ports; the client's refused connect (to a port nobody listens on)
//! shows nothing, as in BCC. -p, -4/-6, -N and -u keep only theirs; -v, -t and JSON carry the same facts.
//! Tests run concurrently, so each looks only at its helpers' PIDs.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

use corebpf_tests::pipe::assert_ends_when_pipe_closes;
use corebpf_tests::sock::*;
use corebpf_tests::usage::assert_refused;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");

/// One run of the helper, stopped before its connections until [`Peers::go`].
struct Peers {
    v6: bool,
    server: u32,
    client: u32,
    port: u16,
    refused: u16,
    comm: String,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    child: KillOnDrop,
}

impl Peers {
    fn start(v6: bool) -> Peers {
        Peers::start_with(v6, &[])
    }

    fn start_with(v6: bool, extra: &[&str]) -> Peers {
        let exe = build_c_helper("peers", include_str!("peers.c"), &["-O1", "-Wall", "-Werror"]);
        // The kernel's comm of the helper: its file name, cut to 15 characters.
        let comm: String = exe.file_name().unwrap().to_string_lossy().chars().take(15).collect();
        let mut child = Command::new(&exe)
            .arg(if v6 { "6" } else { "4" })
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start peers");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let child = KillOnDrop(child);
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 5, "peers said {line:?}");
        assert_eq!(f[0], "pids");
        Peers {
            v6,
            server: f[1].parse().unwrap(),
            client: f[2].parse().unwrap(),
            port: f[3].parse().unwrap(),
            refused: f[4].parse().unwrap(),
            comm,
            stdin,
            stdout,
            child,
        }
    }

    /// Lets the helper connect, accept and close; returns the client's port of the accepted connection.
    fn go(mut self) -> Done {
        self.stdin.write_all(b"g").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let cport: u16 = line.strip_prefix("done ").and_then(|p| p.trim().parse().ok()).unwrap_or_else(|| {
            panic!("peers said {line:?}");
        });
        assert!(self.child.0.wait().unwrap().success(), "the helper failed");
        let (v6, server, client, port, refused, comm) =
            (self.v6, self.server, self.client, self.port, self.refused, self.comm.clone());
        Done { v6, server, client, port, refused, comm, cport }
    }
}

/// What one helper run did.
struct Done {
    v6: bool,
    server: u32,
    client: u32,
    port: u16,
    refused: u16,
    comm: String,
    cport: u16,
}

impl Done {
    /// The rows BCC prints for it (type, PID, comm, IP, SADDR, DADDR, SPORT, DPORT), in the order they happen:
    /// the client's connect, the server's accept, the client's close (it closes first), the server's close.
    fn expected(&self) -> Vec<Vec<String>> {
        let (ip, a) = if self.v6 { ("6", "[::1]") } else { ("4", "127.0.0.1") };
        let row = |t: &str, pid: u32, sport: u16, dport: u16| -> Vec<String> {
            [t, &pid.to_string(), &self.comm, ip, a, a, &sport.to_string(), &dport.to_string()]
                .map(|s| s.to_string())
                .to_vec()
        };
        vec![
            row("C", self.client, self.cport, self.port),
            row("A", self.server, self.port, self.cport),
            row("X", self.client, self.cport, self.port),
            row("X", self.server, self.port, self.cport),
        ]
    }

    /// The expected rows as BCC prints them: `%-2s %-6d %-16s %-2d %-16s %-16s %-6d %-6d`, trailing blanks cut.
    fn expected_lines(&self) -> Vec<String> {
        self.expected()
            .iter()
            .map(|r| {
                format!(
                    "{:<2} {:<6} {:<16} {:<2} {:<16} {:<16} {:<6} {}",
                    r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
                )
            })
            .collect()
    }

    /// The text rows of `stdout` that belong to this run's processes (last column DPORT; a comm of one word).
    fn rows_of(&self, stdout: &str) -> Vec<Vec<String>> {
        let pids = [self.server.to_string(), self.client.to_string()];
        stdout
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .filter(|f| f.len() == 8 && pids.contains(&f[1]))
            .collect()
    }
}

/// Starts the tool and waits until it is attached (its header, or its links with --json).
fn start(args: &[&str]) -> Running {
    if args.contains(&"--json") {
        return start_attached(TOOL, args, &[], 3);
    }
    let mut run = Running::start(TOOL, args);
    run.wait_for_line(if args.contains(&"-v") { "TYPE" } else { "PID" }, WAIT);
    run
}

/// Sorted copies, for comparing rows that two CPUs may report in either order.
fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

#[test]
fn connect_accept_and_close_rows_exact_for_v4_and_v6() {
    let (p4, p6) = (Peers::start(false), Peers::start(true));
    let mut run = start(&[]);
    let (d4, d6) = (p4.go(), p6.go());
    for d in [&d4, &d6] {
        // The server's close is the last thing each run does.
        let last = &d.expected()[3];
        run.wait_for_line(&format!("{}  {}", last[0], last[1]), WAIT);
    }
    let done = stop(run);
    assert!(done.stdout.starts_with("Tracing TCP established connections. Ctrl-C to end.\n"), "{}", done.stdout);
    assert!(done.stdout.contains("\nT  PID    COMM             IP SADDR            DADDR            SPORT  DPORT\n"));
    for d in [&d4, &d6] {
        // Exactly these four rows: the refused connect (to d.refused) shows nothing, neither C nor X.
        assert_eq!(sorted(d.rows_of(&done.stdout)), sorted(d.expected()), "{}", done.stdout);
        assert!(!done.stdout.contains(&format!(" {} ", d.refused)), "{}", done.stdout);
        // Each process's own rows come in the order they happened.
        for pid in [d.server, d.client] {
            let mine = |rows: Vec<Vec<String>>| -> Vec<Vec<String>> {
                rows.into_iter().filter(|r| r[1] == pid.to_string()).collect()
            };
            assert_eq!(mine(d.rows_of(&done.stdout)), mine(d.expected()), "{}", done.stdout);
        }
    }
    // Whole lines, exactly as BCC lays them out.
    for d in [&d4, &d6] {
        for line in d.expected_lines() {
            assert_eq!(done.stdout.lines().filter(|l| *l == line).count(), 1, "{line:?} not in\n{}", done.stdout);
        }
    }
    done.assert_no_programs_left();
}

#[test]
fn an_aborted_connection_is_closed_under_each_owner() {
    // The server closes with SO_LINGER 0: its side goes to CLOSE in its close(), the client's side at the reset,
    // in interrupt context. Both closes are reported, each under the process that connected or accepted.
    let p = Peers::start_with(false, &["abort"]);
    let mut run = start(&[]);
    let d = p.go();
    let e = d.expected();
    run.wait_for_line(&format!("X  {}", d.client), WAIT);
    let done = stop(run);
    assert_eq!(sorted(d.rows_of(&done.stdout)), sorted(e.clone()), "{}", done.stdout);
    let server: Vec<_> = d.rows_of(&done.stdout).into_iter().filter(|r| r[1] == d.server.to_string()).collect();
    assert_eq!(server, vec![e[1].clone(), e[3].clone()], "{}", done.stdout);
}

#[test]
fn pid_and_family_filters_keep_only_theirs() {
    // -p the server: its accept and close only, not the client's connect and close.
    let p = Peers::start(false);
    let run = start(&["-p", &p.server.to_string()]);
    let d = p.go();
    let mut run = run;
    run.wait_for_line(&format!("X  {}", d.server), WAIT);
    let done = stop(run);
    let e = d.expected();
    assert_eq!(d.rows_of(&done.stdout), vec![e[1].clone(), e[3].clone()], "{}", done.stdout);
    assert_eq!(done.stdout.lines().count(), 4, "{}", done.stdout);

    // -6 with both families running: only the IPv6 run's rows.
    let (p4, p6) = (Peers::start(false), Peers::start(true));
    let mut run = start(&["-6"]);
    let (d4, d6) = (p4.go(), p6.go());
    run.wait_for_line(&format!("X  {}", d6.server), WAIT);
    let done = stop(run);
    assert_eq!(sorted(d6.rows_of(&done.stdout)), sorted(d6.expected()), "{}", done.stdout);
    assert!(d4.rows_of(&done.stdout).is_empty(), "{}", done.stdout);
}

/// This process's network namespace inode number.
fn own_netns() -> u32 {
    let link = std::fs::read_link("/proc/self/ns/net").unwrap();
    let s = link.to_string_lossy();
    s.trim_start_matches("net:[").trim_end_matches(']').parse().unwrap()
}

#[test]
fn verbose_timestamps_netns_and_uid() {
    let ns = own_netns();
    // -v -t: types spelled out, nanoseconds since the first event, a NETNS column.
    let p = Peers::start(true);
    let mut run = start(&["-v", "-t", "-p", &p.client.to_string()]);
    let d = p.go();
    run.wait_for_line("close", WAIT);
    let done = stop(run);
    assert!(done.stdout.contains(
        "\nTIME(ns)      TYPE         PID    COMM             IP SADDR            DADDR            SPORT  DPORT  NETNS\n"
    ));
    let rows: Vec<Vec<&str>> = done
        .stdout
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .filter(|f: &Vec<&str>| f.len() == 10)
        .collect();
    assert_eq!(rows.len(), 2, "{}", done.stdout);
    assert_eq!(rows[0][0], "0");
    assert!(rows[1][0].parse::<u64>().unwrap() > 0);
    let expect = |kind: &str| {
        vec![
            kind.to_string(),
            d.client.to_string(),
            "6".into(),
            "[::1]".into(),
            "[::1]".into(),
            d.cport.to_string(),
            d.port.to_string(),
            ns.to_string(),
        ]
    };
    for (row, kind) in rows.iter().zip(["connect", "close"]) {
        let got: Vec<String> = [&row[1..3], &row[4..]].concat().iter().map(|s| s.to_string()).collect();
        assert_eq!(got, expect(kind), "{}", done.stdout);
    }

    // -N this namespace and -U -u 0: the NETNS column goes (the filter fixes it), a UID column comes.
    let p = Peers::start(false);
    let mut run = start(&["-v", "-N", &ns.to_string(), "-U", "-u", "0", "-p", &p.server.to_string()]);
    let d = p.go();
    run.wait_for_line("close", WAIT);
    let done = stop(run);
    assert!(done.stdout.contains("\nUID   TYPE         PID"), "{}", done.stdout);
    assert!(!done.stdout.contains("NETNS"), "{}", done.stdout);
    let rows: Vec<&str> = done.stdout.lines().filter(|l| l.starts_with("0     ")).collect();
    assert_eq!(rows.len(), 2, "{}", done.stdout);
    assert!(rows[0].starts_with(&format!("0     accept       {:<6} ", d.server)), "{}", done.stdout);
    assert!(
        rows[1].ends_with(&format!("127.0.0.1        127.0.0.1        {:<6} {}", d.port, d.cport)),
        "{}",
        done.stdout
    );

    // -N another namespace: nothing of ours.
    let p = Peers::start(false);
    let mut run = start(&["-N", &(ns + 1).to_string(), "-p", &p.server.to_string()]);
    let _d = p.go();
    run.wait_for_more_lines(0, WAIT);
    let done = stop(run);
    assert_eq!(done.stdout.lines().count(), 2, "{}", done.stdout);
}

#[test]
fn json_records() {
    let p = Peers::start(true);
    let mut run = start(&["--json", "-p", &p.client.to_string()]);
    let d = p.go();
    run.wait_for_line("\"type\":\"close\"", WAIT);
    let done = stop(run);
    let recs = json_lines(&done.stdout);
    assert_eq!(recs.len(), 2, "{}", done.stdout);
    for (r, kind) in recs.iter().zip(["connect", "close"]) {
        assert_eq!(r["type"], kind);
        assert_eq!(r["pid"], d.client);
        assert_eq!(r["uid"], 0);
        assert_eq!(r["comm"], d.comm.as_str());
        assert_eq!(r["family"], "ipv6");
        assert_eq!(r["laddr"], "::1");
        assert_eq!(r["lport"], d.cport);
        assert_eq!(r["raddr"], "::1");
        assert_eq!(r["rport"], d.port);
        assert_eq!(r["netns"], own_netns());
    }
    done.assert_no_programs_left();
}

#[test]
fn sigterm_and_closed_pipe_end_cleanly() {
    let p = Peers::start(false);
    let run = start(&["-p", &p.server.to_string()]);
    let _d = p.go();
    run.signal(libc::SIGTERM);
    let done = run.finish(WAIT);
    done.assert_success();
    assert!(done.stderr.is_empty(), "{}", done.stderr);
    done.assert_no_programs_left();

    // `tcptracer | head -1`: the banner is read, the pipe closes, the tool ends quietly at its next row.
    let (l, _) = listener(V4);
    let mut keep = Vec::new();
    assert_ends_when_pipe_closes(TOOL, &[], "Tracing TCP", || keep.push(connect_accepted(&l)));
}

#[test]
fn bad_input_is_refused_clearly() {
    for (args, what, code) in [
        (&["-N", "x"][..], "not a network namespace", 2),
        (&["-4", "-6"][..], "cannot be used with", 2),
        (&["-p", "999999999"][..], "", 1),
    ] {
        assert_refused(TOOL, args, code, what);
    }
}
