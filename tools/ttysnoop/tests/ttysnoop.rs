// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ttysnoop against pseudo-terminals this test opens: the bytes written to the watched one (several writes, a
//! writev, a write longer than -s times -c) appear exactly and in order, writes to another pts are not shown, JSON
//! has one object per write with its PID, size and bytes; a device that does not exist or is not a tty is one
//! line and exit 1; SIGTERM and a closed pipe end it cleanly.

use std::ffi::CStr;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");

/// Mounts devpts on /dev/pts where nothing is mounted there (the kernel-matrix guests mount none; a machine with
/// pseudo-terminals has one already and is left as it is).
fn ensure_devpts() {
    // One test process at a time checks and mounts: two mounts would make two instances, and the first test's
    // pts would no longer be found under its path.
    let lock = std::fs::File::create("/tmp/ttysnoop-test-devpts.lock").unwrap();
    // SAFETY: flock(2) on a descriptor we own; the lock is released when `lock` is closed.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if mounts.lines().any(|l| l.split_whitespace().nth(1) == Some("/dev/pts")) {
        return;
    }
    std::fs::create_dir_all("/dev/pts").unwrap();
    // SAFETY: mount(2) with NUL-terminated strings.
    let rc = unsafe {
        libc::mount(c"devpts".as_ptr(), c"/dev/pts".as_ptr(), c"devpts".as_ptr(), 0, c"ptmxmode=0666".as_ptr().cast())
    };
    assert_eq!(rc, 0, "mount devpts: {}", std::io::Error::last_os_error());
}

/// A pseudo-terminal pair: the slave (/dev/pts/N) is written to, the master drained by a thread so that writes
/// never wait for room.
struct Pty {
    slave: OwnedFd,
    path: String,
}

impl Pty {
    fn open() -> Pty {
        ensure_devpts();
        // SAFETY: plain libc calls on a descriptor this function owns; ptsname_r writes into the buffer given.
        unsafe {
            let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(master >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            assert_eq!(libc::grantpt(master), 0);
            assert_eq!(libc::unlockpt(master), 0);
            let mut name = [0 as libc::c_char; 64];
            assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
            let path = CStr::from_ptr(name.as_ptr()).to_str().unwrap().to_string();
            let master = OwnedFd::from_raw_fd(master);
            let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
            assert!(slave >= 0, "open {path}: {}", std::io::Error::last_os_error());
            let mut reader = std::fs::File::from(master);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
            });
            Pty { slave: OwnedFd::from_raw_fd(slave), path }
        }
    }

    fn write(&self, data: &[u8]) {
        // SAFETY: write(2) of a live buffer to a descriptor we own.
        let n = unsafe { libc::write(self.slave.as_raw_fd(), data.as_ptr().cast(), data.len()) };
        assert_eq!(n, data.len() as isize, "write to {}", self.path);
    }

    fn writev(&self, parts: &[&[u8]]) {
        let iov: Vec<libc::iovec> =
            parts.iter().map(|p| libc::iovec { iov_base: p.as_ptr() as *mut _, iov_len: p.len() }).collect();
        // SAFETY: writev(2) of live buffers described by `iov`.
        let n = unsafe { libc::writev(self.slave.as_raw_fd(), iov.as_ptr(), iov.len() as i32) };
        assert_eq!(n as usize, parts.iter().map(|p| p.len()).sum::<usize>(), "writev to {}", self.path);
    }

    /// The pts number (the argument BCC's ttysnoop takes for /dev/pts/N).
    fn number(&self) -> &str {
        self.path.strip_prefix("/dev/pts/").expect("a /dev/pts path")
    }
}

/// A write longer than one chunk: distinct bytes, so that a chunk out of place shows.
fn long_write(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Starts the tool on `pty` with `args`, makes the writes of `work` once it is attached, stops it with SIGINT.
fn traced(pty: &Pty, args: &[&str], work: impl FnOnce()) -> Finished {
    let mut all: Vec<&str> = args.to_vec();
    all.push(&pty.path);
    let mut run = Running::start(TOOL, &all);
    run.wait_attached(Duration::from_secs(20));
    work();
    run.signal(libc::SIGINT);
    run.finish(Duration::from_secs(20))
}

#[test]
fn shows_the_bytes_written_in_order() {
    let pty = Pty::open();
    let other = Pty::open();
    let long = long_write(1000);
    let done = traced(&pty, &["-C", "-s", "64", "-c", "4"], || {
        pty.write(b"first line\n");
        other.write(b"not this one\n");
        pty.writev(&[b"ab", b"", b"cd", b"\n"]);
        pty.write(&long);
        other.write(b"nor this\n");
        pty.write(b"\nlast\n");
    });
    done.assert_success();
    // The long write shows its first 4 chunks of 64 bytes, as BCC with -s 64 -c 4.
    let expected = format!("first line\nabcd\n{}\nlast\n", String::from_utf8_lossy(&long[..256]));
    assert_eq!(done.stdout, expected, "stderr: {}", done.stderr);
    done.assert_no_programs_left();
}

#[test]
fn a_pts_number_names_dev_pts() {
    let pty = Pty::open();
    let mut run = Running::start(TOOL, &["-C", pty.number()]);
    run.wait_attached(Duration::from_secs(20));
    pty.write(b"by number\n");
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert_eq!(done.stdout, "by number\n");
}

#[test]
fn the_screen_is_cleared_first_without_c() {
    let pty = Pty::open();
    let done = traced(&pty, &[], || pty.write(b"after the clear\n"));
    done.assert_success();
    assert_eq!(done.stdout, "\x1b[H\x1b[2Jafter the clear\n");
}

#[test]
fn json_has_one_object_per_write() {
    let pty = Pty::open();
    let long = long_write(5000);
    let done = traced(&pty, &["-j"], || {
        pty.write(b"hello\n");
        pty.writev(&[b"x", b"yz"]);
        pty.write(&long);
    });
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 3, "{}", done.stdout);
    // The writes are this thread's: its name is the comm.
    let comm = std::fs::read_to_string("/proc/thread-self/comm").unwrap().trim_end().to_string();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    for line in &lines {
        assert_eq!(line["pid"], std::process::id(), "{line}");
        assert_eq!(line["tid"], tid, "{line}");
        assert_eq!(line["comm"], comm.as_str(), "{line}");
    }
    assert_eq!((lines[0]["bytes"].as_u64(), lines[0]["data"].as_str()), (Some(6), Some("hello\n")));
    assert_eq!(lines[0]["truncated"], false);
    assert_eq!((lines[1]["bytes"].as_u64(), lines[1]["data"].as_str()), (Some(3), Some("xyz")));
    // 16 chunks of 256 bytes by default: 4096 of the 5000 bytes.
    assert_eq!(lines[2]["bytes"], 5000);
    assert_eq!(lines[2]["data"].as_str().unwrap().as_bytes(), &long[..4096]);
    assert_eq!(lines[2]["truncated"], true);
}

#[test]
fn bad_devices_are_one_line_and_exit_1() {
    let missing = run_tool(TOOL, &["/dev/pts/999999"]);
    let not_tty = run_tool(TOOL, &["/dev/null"]);
    let regular = run_tool(TOOL, &["/proc/self/status"]);
    for (what, done) in [("missing", missing), ("/dev/null", not_tty), ("regular file", regular)] {
        assert_eq!(done.status.code(), Some(1), "{what}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{what}: {}", done.stderr);
        assert!(done.stdout.is_empty(), "{what}: {}", done.stdout);
    }
}

#[test]
fn bad_sizes_are_usage_errors() {
    for args in [["-s", "0", "1"], ["-s", "4097", "1"], ["-c", "0", "1"], ["-c", "129", "1"]] {
        let done = run_tool(TOOL, &args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
    }
}

#[test]
fn sigterm_ends_cleanly() {
    let pty = Pty::open();
    let mut run = Running::start(TOOL, &["-C", &pty.path]);
    run.wait_attached(Duration::from_secs(20));
    pty.write(b"before the signal\n");
    run.wait_for_line("before the signal", Duration::from_secs(20));
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(done.stderr.is_empty(), "stderr: {}", done.stderr);
    done.assert_no_programs_left();
}

#[test]
fn closed_pipe_ends_cleanly() {
    let pty = Arc::new(Pty::open());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (pty, stop) = (pty.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                pty.write(b"tick\n");
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    pipe::assert_ends_when_pipe_closes(TOOL, &["-C", &pty.path], "tick", || {});
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}
