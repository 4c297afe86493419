// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The helper of the off-CPU wakeup tests (offwaketime, wakeuptime), whose blocking and waking are known: after a
//! "go" byte on stdin, a thread named "reader" blocks K times reading a pipe in `main -> reader_loop ->
//! reader_wait`, and a thread named "writer" wakes it each time by writing the pipe from `writer_loop ->
//! writer_wake` after T ms. Both system calls are made from those functions themselves (raw syscalls), so they are
//! the innermost user frames. [`trace`] runs a tool over one run of the helper and stops it with SIGINT.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use crate::*;

pub const HELPER: &str = include_str!("offwake.c");

pub fn helper_exe() -> PathBuf {
    build_c_helper("offwake-pipe", HELPER, &["-fno-omit-frame-pointer", "-O1", "-g", "-pthread"])
}

pub struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Helper {
    pub fn start(k: u32, ms: u32) -> Helper {
        let mut child = Command::new(helper_exe())
            .args([k.to_string(), ms.to_string()])
            .stdin(Stdio::piped())
            .spawn()
            .expect("starting the helper");
        let stdin = child.stdin.take();
        Helper { child, stdin }
    }

    /// As [`Helper::start`], but the helper lives on after its run until [`Helper::end`] (see [`Helper::go`]).
    pub fn start_lingering(k: u32, ms: u32) -> Helper {
        let mut child = Command::new(helper_exe())
            .args([k.to_string(), ms.to_string(), "linger".to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the helper");
        let stdin = child.stdin.take();
        Helper { child, stdin }
    }

    /// A lingering helper's run: starts it and waits until it has blocked and woken K times (it is still alive).
    pub fn go(&mut self) {
        self.stdin.as_mut().unwrap().write_all(b"g").unwrap();
        let mut line = String::new();
        let stdout = self.child.stdout.as_mut().expect("a lingering helper");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
        assert_eq!(line, "done\n", "the helper failed");
    }

    /// Ends a lingering helper (closes its stdin) and waits for its exit.
    pub fn end(&mut self) {
        self.stdin = None;
        assert!(self.child.wait().unwrap().success());
    }

    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    pub fn run(&mut self) {
        self.stdin.as_mut().unwrap().write_all(b"g").unwrap();
        self.stdin = None;
        assert!(self.child.wait().unwrap().success());
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn trace(tool: &str, args: &[&str], helper: &mut Helper, banner: bool) -> Finished {
    let mut tool = Running::start(tool, args);
    if banner {
        tool.wait_for_line("Tracing blocked time (us)", Duration::from_secs(30));
    } else {
        // Folded and JSON output print no banner: wait until every program it loaded is attached.
        tool.wait_attached(Duration::from_secs(30));
    }
    helper.run();
    tool.signal(libc::SIGINT);
    let done = tool.finish(Duration::from_secs(60));
    done.assert_success();
    done
}
