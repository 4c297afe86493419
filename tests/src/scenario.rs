// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Scenarios shared by the host tests and the VM kernel matrix (vm/vmtest.sh): workloads with exact ground truth
//! and the checks on a tool's output, written once so that host and VM runs cannot drift apart.
//!
//! The first is kernel-function counting: a forked child that makes exactly N `read(2)` calls (so exactly N
//! calls of `vfs_read`) only when told to, and `funccount -p CHILD vfs_read` must count exactly N with whichever
//! attach mechanism (fentry, kprobe_multi, kprobe) `COREBPF_ATTACH` forces. This host lacks both fentry and kprobes,
//! so the matrix runs it on other kernels (tests/tests/kernel_functions.rs, built with `--features vm`).

use std::time::Duration;

use crate::{Finished, Running};

/// A child process that waits for [`Reader::go`] and then makes exactly `reads` one-byte `read(2)` calls on
/// `/dev/zero` and exits: nothing else it does reaches `vfs_read`, so a per-PID count of `vfs_read` is exact.
pub struct Reader {
    pid: libc::pid_t,
    reaped: bool,
}

impl Reader {
    /// Forks the child; it blocks in `sigwait` (not a read) until [`Reader::go`].
    pub fn spawn(reads: u32) -> Reader {
        // SAFETY: plain libc calls. Between fork and _exit the child only makes async-signal-safe system calls
        // (sigwait, read, _exit) on memory prepared before the fork.
        unsafe {
            let fd = libc::open(c"/dev/zero".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            assert!(fd >= 0, "open /dev/zero: {}", std::io::Error::last_os_error());
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            let mut old: libc::sigset_t = std::mem::zeroed();
            // Block SIGUSR1 before forking so that the child cannot miss it.
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            let pid = libc::fork();
            if pid == 0 {
                let mut sig = 0;
                libc::sigwait(&set, &mut sig);
                let mut byte = 0u8;
                for _ in 0..reads {
                    if libc::read(fd, (&mut byte as *mut u8).cast(), 1) != 1 {
                        libc::_exit(2);
                    }
                }
                libc::_exit(0);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            libc::close(fd);
            assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
            Reader { pid, reaped: false }
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Lets the child make its reads and waits until it has exited.
    pub fn go(&mut self) {
        let mut status = 0;
        // SAFETY: signal and reap our own child.
        let reaped = unsafe {
            libc::kill(self.pid, libc::SIGUSR1);
            libc::waitpid(self.pid, &mut status, 0)
        };
        self.reaped = true;
        assert_eq!(reaped, self.pid, "waitpid: {}", std::io::Error::last_os_error());
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "reader child failed: status {status}");
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: kill and reap our own child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// The count funccount printed for `func` (BCC's `FUNC  COUNT` table), if it printed one.
pub fn funccount_count(stdout: &str, func: &str) -> Option<u64> {
    stdout.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        (fields.next() == Some(func)).then(|| fields.next()?.parse().ok())?
    })
}

/// `funccount -v -p CHILD vfs_read` around a child that reads `reads` times: the count must be exactly `reads`.
/// With `attach` set, every mechanism but that one is ruled out (`COREBPF_ATTACH`) and `-v` must confirm it.
/// Also checks that the tool ends cleanly on SIGINT with no program left loaded.
pub fn funccount_counts_vfs_read_exactly(attach: Option<&str>, reads: u32) -> Finished {
    let mut reader = Reader::spawn(reads);
    let pid = reader.pid().to_string();
    let env: Vec<(&str, &str)> = attach.map(|a| ("COREBPF_ATTACH", a)).into_iter().collect();
    let mut run = Running::start_with_env("funccount", &["-v", "-p", &pid, "vfs_read"], &env);
    run.wait_for_line("Tracing", Duration::from_secs(120));
    reader.go();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(60));
    done.assert_success();
    if let Some(mech) = attach {
        assert!(done.stderr.contains(&format!("attached with {mech}")), "not attached with {mech}:\n{}", done.stderr);
    }
    assert_eq!(
        funccount_count(&done.stdout, "vfs_read"),
        Some(reads as u64),
        "expected exactly {reads} vfs_read calls from PID {pid}:\n{}\nstderr:\n{}",
        done.stdout,
        done.stderr
    );
    done.assert_no_programs_left();
    done
}
