// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The HTTP side of `--prometheus`: a bounded server on the tool's own thread.
//!
//! One thread and a fixed number of connections, whatever the clients do: the listening socket is bound before
//! any BPF program is loaded ([`Listener::bind`]: a busy port fails at once), and then one `poll(2)` loop
//! accepts, reads requests and writes responses without blocking. At most [`MAX_CONNECTIONS`] connections are
//! held: a new one closes the oldest, so thousands of idle clients cannot starve a scrape or the process (no
//! thread or descriptor per client beyond the cap). A request must arrive whole within [`REQUEST_TIMEOUT`] and
//! fit in [`MAX_REQUEST`] bytes; every response closes its connection.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use nix::poll::{PollFd, PollFlags};

use crate::run::Signals;

/// Connections held at once; one more closes the oldest.
pub const MAX_CONNECTIONS: usize = 32;
/// How long a client has to send its request (and read the response).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head read; a longer one is answered 431.
pub const MAX_REQUEST: usize = 16 * 1024;

/// A bound, listening socket.
#[derive(Debug)]
pub struct Listener {
    socket: TcpListener,
}

impl Listener {
    /// Binds and listens on `addr` (before anything is loaded, so that a busy port is one line at once).
    pub fn bind(addr: SocketAddr) -> Result<Listener> {
        let socket = TcpListener::bind(addr).map_err(|e| anyhow!("cannot listen on {addr}: {e}"))?;
        socket.set_nonblocking(true)?;
        Ok(Listener { socket })
    }

    /// The address bound (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr().expect("a bound socket has an address")
    }
}

/// A parsed request: method, path (without the query) and `Accept` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub accept: Option<String>,
}

/// A response: status, content type and body (left out for `HEAD`).
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    pub fn text(status: u16, body: &str) -> Response {
        Response { status, content_type: "text/plain; charset=utf-8", body: body.to_string() }
    }
}

struct Connection {
    stream: TcpStream,
    since: Instant,
    input: Vec<u8>,
    /// The response being written, and how much of it is written.
    output: Option<(Vec<u8>, usize)>,
}

enum Step {
    Keep,
    Close,
}

/// Serves on `listener` until a stop signal: each whole request is answered by `answer` (on this thread).
/// `answer` returning an error ends the loop with that error (after the 500 it gives is sent, if it can be).
pub fn run(
    listener: &Listener,
    signals: &Signals,
    mut answer: impl FnMut(&Request) -> (Response, Option<anyhow::Error>),
) -> Result<()> {
    let mut conns: VecDeque<Connection> = VecDeque::new();
    loop {
        if signals.stopped() {
            return Ok(());
        }
        let now = Instant::now();
        conns.retain(|c| now.duration_since(c.since) < REQUEST_TIMEOUT);
        let (listen_ready, ready) = {
            let mut fds = vec![PollFd::new(listener.socket.as_fd(), PollFlags::POLLIN)];
            for c in &conns {
                let want = if c.output.is_some() { PollFlags::POLLOUT } else { PollFlags::POLLIN };
                fds.push(PollFd::new(c.stream.as_fd(), want));
            }
            signals.poll_with(&mut fds, Duration::from_secs(1));
            let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
            (ready(&fds[0]), fds[1..].iter().map(ready).collect::<Vec<bool>>())
        };
        let mut failed = None;
        let mut keep = VecDeque::with_capacity(conns.len());
        for (mut conn, is_ready) in conns.drain(..).zip(ready) {
            if !is_ready {
                keep.push_back(conn);
                continue;
            }
            match step(&mut conn, &mut answer, &mut failed) {
                Step::Keep => keep.push_back(conn),
                Step::Close => {}
            }
        }
        conns = keep;
        if let Some(e) = failed {
            return Err(e.context("reading the maps for a scrape"));
        }
        if listen_ready {
            loop {
                let stream = match listener.socket.accept() {
                    Ok((stream, _)) => stream,
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => break,
                    Err(_) => {
                        // Out of descriptors (or memory): free one, or wait a moment rather than spin on a listener
                        // that stays readable.
                        if conns.pop_front().is_none() {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        break;
                    }
                };
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if conns.len() >= MAX_CONNECTIONS {
                    conns.pop_front();
                }
                conns.push_back(Connection { stream, since: Instant::now(), input: Vec::new(), output: None });
            }
        }
    }
}

/// Reads or writes what a ready connection allows.
fn step(
    conn: &mut Connection,
    answer: &mut impl FnMut(&Request) -> (Response, Option<anyhow::Error>),
    failed: &mut Option<anyhow::Error>,
) -> Step {
    if let Some((bytes, written)) = conn.output.as_mut() {
        return match conn.stream.write(&bytes[*written..]) {
            Ok(n) => {
                *written += n;
                if *written >= bytes.len() {
                    Step::Close
                } else {
                    Step::Keep
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => Step::Keep,
            Err(_) => Step::Close,
        };
    }
    let mut buf = [0u8; 4096];
    match conn.stream.read(&mut buf) {
        Ok(0) => return Step::Close,
        Ok(n) => conn.input.extend_from_slice(&buf[..n]),
        Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => return Step::Keep,
        Err(_) => return Step::Close,
    }
    let head_end = conn.input.windows(4).position(|w| w == b"\r\n\r\n");
    let response = match head_end {
        None if conn.input.len() > MAX_REQUEST => Response::text(431, "request too large\n"),
        None => return Step::Keep,
        Some(end) => match parse_head(&conn.input[..end]) {
            None => Response::text(400, "bad request\n"),
            Some(request) => {
                let (response, error) = answer(&request);
                if error.is_some() {
                    *failed = error;
                }
                let head_only = request.method == "HEAD";
                return queue(conn, response, head_only);
            }
        },
    };
    queue(conn, response, false)
}

fn queue(conn: &mut Connection, response: Response, head_only: bool) -> Step {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    };
    let mut bytes = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    )
    .into_bytes();
    if !head_only {
        bytes.extend_from_slice(response.body.as_bytes());
    }
    conn.output = Some((bytes, 0));
    // Most responses fit the socket's buffer: write now rather than after another poll.
    conn.since = Instant::now();
    let mut nothing = None;
    step(conn, &mut |_: &Request| (Response::text(500, ""), None), &mut nothing)
}

/// The request line and the `Accept` header of a request head.
fn parse_head(head: &[u8]) -> Option<Request> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if !version.starts_with("HTTP/1.") || parts.next().is_some() {
        return None;
    }
    let accept = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim().eq_ignore_ascii_case("accept").then(|| value.trim().to_string())
    });
    let path = target.split('?').next().unwrap_or("").to_string();
    Some(Request { method: method.to_string(), path, accept })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse() {
        let r = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\naccept: application/openmetrics-text").unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/metrics");
        assert_eq!(r.accept.as_deref(), Some("application/openmetrics-text"));
        assert!(parse_head(b"GET /metrics").is_none());
        assert!(parse_head(b"\xff\xfe").is_none());
    }
}
