// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Helpers for the socket tools' tests (tcpaccept, tcpconnect, tcpdrop, tcplife, tcpretrans, tcptop): loopback
//! addresses and connections, waiting for a tool's BPF links, stopping it, and reading BCC's `PID COMM ...` rows.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use crate::{links_of, Finished, Running};

pub const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
pub const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

/// How long a tool gets to attach and to end.
pub const WAIT: Duration = Duration::from_secs(20);

/// True once process `pid` holds a BPF link (a program of it is attached).
pub fn has_link(pid: u32) -> bool {
    links_of(pid) >= 1
}

/// Starts `tool args` with environment `env` and waits (up to [`WAIT`]) until it holds `links` BPF links.
pub fn start_attached(tool: &str, args: &[&str], env: &[(&str, &str)], links: usize) -> Running {
    let mut run = Running::start_with_env(tool, args, env);
    let deadline = Instant::now() + WAIT;
    while links_of(run.pid()) < links {
        assert!(Instant::now() < deadline, "{tool} {args:?} did not attach within 20 s");
        thread::sleep(Duration::from_millis(20));
    }
    run.note_programs();
    run
}

/// Stops the tool with SIGINT and checks that it ended well.
pub fn stop(run: Running) -> Finished {
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done
}

/// A listener on `ip`, any port: (the listener, its port).
pub fn listener(ip: IpAddr) -> (TcpListener, u16) {
    let l = TcpListener::bind((ip, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

/// A connect from this process to `l`, accepted at once (so that the listener's queue holds nothing of ours):
/// (the client's port, both ends, kept open).
pub fn connect_accepted(l: &TcpListener) -> (u16, (TcpStream, TcpStream)) {
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, peer) = l.accept().unwrap();
    (peer.port(), (c, s))
}

/// This thread's comm, as the kernel shows it (the test harness names threads after tests).
pub fn thread_comm() -> String {
    std::fs::read_to_string("/proc/thread-self/comm").unwrap().trim_end().to_string()
}

/// Text rows of BCC's `PID COMM <5 columns>` layouts: PID, COMM (read between the PID and the last five
/// columns, so that it may hold spaces), then the five columns.
pub fn pid_comm_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 7 || f[0].parse::<u32>().is_err() {
                return None;
            }
            let t = &f[f.len() - 5..];
            let comm = f[1..f.len() - 5].join(" ");
            Some([f[0].to_string(), comm].into_iter().chain(t.iter().map(|s| s.to_string())).collect())
        })
        .collect()
}
