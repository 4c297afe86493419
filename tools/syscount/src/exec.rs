// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--exec CMD...`: runs a command and counts its syscalls from its first one, as BCC's `bcc.exec.run_cmd` does.
//!
//! The command is forked first and waits on a pipe; its PID goes into the BPF filter; once the programs are
//! attached, a byte on the pipe lets it exec. When it exits, the tool stops as on Ctrl-C (SIGINT to itself), so
//! the final report follows. If the tool fails before that, the pipe closes and the child exits without running.

use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The forked command, waiting for [`Command::start`].
pub struct Command {
    pid: u32,
    go: Option<OwnedFd>,
}

/// The executable `name` runs: itself if it holds a `/`, else the first on `$PATH` (resolved here, so that the
/// traced process makes one execve, not one per `$PATH` entry).
fn resolve(name: &OsString) -> Option<PathBuf> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.as_bytes().contains(&b'/') {
        return executable(Path::new(name)).then(|| PathBuf::from(name));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| executable(p))
}

impl Command {
    /// Forks `argv` (the program, then its arguments), stopped before its exec.
    pub fn fork(argv: &[OsString]) -> Result<Command> {
        let Some(program) = argv.first() else { bail!("--exec without command") };
        let Some(path) = resolve(program) else {
            bail!("--exec: command not found: {}", program.to_string_lossy());
        };
        let path = CString::new(path.as_os_str().as_bytes()).context("--exec: the path holds a NUL byte")?;
        let args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .context("--exec: an argument holds a NUL byte")?;
        let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors, owned from here on.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            bail!("--exec: cannot make a pipe: {}", std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just opened and nothing else owns them.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let _ = std::io::stdout().flush(); // nothing buffered is printed twice
                                           // SAFETY: no other thread runs yet (the tool forks before loading anything); the child calls only
                                           // async-signal-safe functions (close, read, execv, _exit) on memory prepared before the fork.
        match unsafe { libc::fork() } {
            -1 => bail!("--exec: cannot fork: {}", std::io::Error::last_os_error()),
            0 => unsafe {
                libc::close(fds[1]);
                let mut byte = 0u8;
                let n = loop {
                    let n = libc::read(fds[0], (&mut byte as *mut u8).cast(), 1);
                    if n < 0 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    break n;
                };
                if n == 1 {
                    libc::execv(path.as_ptr(), ptrs.as_ptr());
                }
                libc::_exit(127)
            },
            pid => {
                drop(read);
                Ok(Command { pid: pid as u32, go: Some(write) })
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Lets the command exec, and stops the tool (SIGINT to itself) once the command has exited.
    pub fn start(&mut self) -> Result<()> {
        let go = self.go.take().context("--exec: the command was started already")?;
        // SAFETY: a one-byte write to the pipe this struct owns.
        if unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr().cast(), 1) } != 1 {
            bail!("--exec: cannot start the command: {}", std::io::Error::last_os_error());
        }
        drop(go);
        let pid = self.pid as libc::pid_t;
        std::thread::spawn(move || {
            let mut status = 0;
            // SAFETY: waitpid on our own child, then a signal to this process.
            unsafe {
                while libc::waitpid(pid, &mut status, 0) == -1 && *libc::__errno_location() == libc::EINTR {}
                libc::kill(libc::getpid(), libc::SIGINT);
            }
        });
        Ok(())
    }
}
