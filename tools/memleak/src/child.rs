// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `-c COMMAND`: the command is forked at once but held before exec until the probes are attached, so that its
//! first allocations are seen (it keeps its PID across exec). It is ended (SIGTERM) when memleak ends.

use std::ffi::CString;

use anyhow::{bail, Context, Result};

/// A forked child waiting, before exec, for a byte on its pipe.
pub struct Held {
    pid: libc::pid_t,
    go: Option<libc::c_int>,
}

impl Held {
    /// Forks a child that will run `command` (split at whitespace, searched on $PATH) once released.
    pub fn fork(command: &str) -> Result<Self> {
        let words: Vec<CString> = command
            .split_whitespace()
            .map(|w| CString::new(w).context("a NUL byte in the command"))
            .collect::<Result<_>>()?;
        let Some(program) = words.first() else { bail!("empty command (-c)") };
        if !runnable(program.to_str().unwrap_or_default()) {
            bail!("cannot run '{command}': {} not found or not executable", program.to_string_lossy());
        }
        let mut argv: Vec<*const libc::c_char> = words.iter().map(|w| w.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is an array of two ints, as pipe2 requires.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("creating a pipe for the command");
        }
        let [read_end, write_end] = fds;
        // SAFETY: the child calls only async-signal-safe functions (close, read, execvp, _exit) on memory prepared
        // before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("forking the command");
        }
        if pid == 0 {
            // SAFETY: see above; the child never returns from this block.
            unsafe {
                libc::close(write_end);
                let mut byte = 0u8;
                if libc::read(read_end, (&raw mut byte).cast(), 1) == 1 {
                    libc::execvp(argv[0], argv.as_ptr());
                    libc::_exit(127);
                }
                libc::_exit(1);
            }
        }
        // SAFETY: read_end is our open descriptor.
        unsafe { libc::close(read_end) };
        Ok(Held { pid, go: Some(write_end) })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Lets the child exec its command.
    pub fn release(&mut self) -> Result<()> {
        if let Some(fd) = self.go.take() {
            // SAFETY: fd is our open write end; one byte from a live buffer.
            let wrote = unsafe { libc::write(fd, b"g".as_ptr().cast(), 1) };
            // SAFETY: as above; closed once.
            unsafe { libc::close(fd) };
            if wrote != 1 {
                return Err(std::io::Error::last_os_error()).context("starting the command");
            }
        }
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(fd) = self.go.take() {
            // SAFETY: our descriptor; the child then exits without running the command.
            unsafe { libc::close(fd) };
        }
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::kill(self.pid, libc::SIGTERM);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// Whether `program` names an executable file, directly (with a `/`) or on $PATH.
fn runnable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable =
        |p: &std::path::Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(program))))
}
