// SPDX-License-Identifier: Apache-2.0 OR MIT
//! An anchor run side by side with our tool: one of Debian's libbpf-tools (BCC's tools rewritten in C over
//! libbpf), started on the same workload as ground truth. [`Anchor::start`] returns once the anchor says it is
//! tracing; [`Anchor::finish`] stops it with SIGINT (its final report) and returns what it printed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::KillOnDrop;

pub struct Anchor {
    child: KillOnDrop,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Anchor {
    /// Starts `/usr/sbin/<tool> args` and waits (up to 30 s) for a stdout line containing `ready`.
    pub fn start(tool: &str, args: &[&str], ready: &str) -> Anchor {
        let path = format!("/usr/sbin/{tool}");
        assert!(
            std::path::Path::new(&path).exists(),
            "the anchor {path} is needed: apt-get install libbpf-tools (scripts/deps.sh does)"
        );
        // Line-buffered (stdbuf), or a C tool writing to a pipe holds its banner back until it exits.
        let mut child = Command::new("stdbuf")
            .arg("-oL")
            .arg(&path)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {path}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut anchor = Anchor { child: KillOnDrop(child), lines, seen: Vec::new() };
        anchor.wait_for(|l| l.contains(ready));
        anchor
    }

    /// Waits (up to 30 s) until the anchor has printed a line for which `pred` holds.
    pub fn wait_for(&mut self, pred: impl Fn(&str) -> bool) -> &mut Self {
        while !self.seen.iter().any(|l| pred(l)) {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(line) => self.seen.push(line),
                Err(e) => {
                    panic!("the anchor did not print the line awaited ({e}); it printed:\n{}", self.seen.join("\n"))
                }
            }
        }
        self
    }

    /// Stops the anchor with SIGINT (its handler prints its report and flushes; SIGTERM would lose its output),
    /// checks that it ended well, and returns everything it printed.
    pub fn finish(mut self) -> String {
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(self.child.0.id() as i32, libc::SIGINT);
        }
        let status = self.child.0.wait().unwrap();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
        assert!(status.success(), "the anchor exited with {status}; it printed:\n{}", self.seen.join("\n"));
        self.seen.join("\n") + "\n"
    }
}
