// SPDX-License-Identifier: Apache-2.0 OR MIT
//! bashreadline against interactive bash shells the tests start on pseudo-terminals of their own, typing known
//! lines (`echo corebpf-<unique tag>-...`, then `exit`) as a user would, each after the shell's prompt. Only the
//! started shell's PID is looked at (other tests run shells too), and its lines must be exactly the typed ones, in
//! order. Debian's libbpf-tools bashreadline runs beside the tool and must print the same lines; a shell in its own
//! mount namespace (`unshare -m`) is seen through the same file; a shell started under another name (a symbolic
//! link to bash) is left out, as BCC leaves out every process not called `bash`.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corebpf_tests::anchor::Anchor;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const PROMPT: &str = "corebpf-prompt> ";

/// A tag no other test run uses.
fn unique_tag() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!("corebpf-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// An interactive shell on a pseudo-terminal of its own.
struct PtyShell {
    child: KillOnDrop,
    master: File,
    output: Arc<Mutex<String>>,
}

impl PtyShell {
    /// Starts `program args` (an interactive bash) as the session leader of a new pseudo-terminal.
    fn start(program: &str, args: &[&str]) -> PtyShell {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty fills the two descriptors; no name, termios or window size is passed.
        let rc =
            unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened by openpty and are owned here.
        let (master, slave) = unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("TERM", "dumb")
            .env("PS1", PROMPT)
            .env("HISTFILE", "/dev/null")
            .env("INPUTRC", "/dev/null")
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: only async-signal-safe calls between fork and exec: a new session, the terminal made its own.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = KillOnDrop(cmd.spawn().unwrap_or_else(|e| panic!("starting {program}: {e}")));
        let output = Arc::new(Mutex::new(String::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = Arc::clone(&output);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        PtyShell { child, master, output }
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Waits until the shell has printed its prompt `n` times.
    fn wait_prompts(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.output.lock().unwrap().matches(PROMPT).count() < n {
            assert!(Instant::now() < deadline, "no prompt {n} from the shell; it printed:\n{}", self.output());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Types each line after the shell's next prompt, then `exit`, and waits for the shell to end.
    fn type_lines(mut self, lines: &[String]) {
        for (i, line) in lines.iter().chain(std::iter::once(&"exit".to_string())).enumerate() {
            self.wait_prompts(i + 1);
            self.master.write_all(format!("{line}\n").as_bytes()).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.0.try_wait().unwrap() {
                assert!(status.success(), "the shell ended with {status}; it printed:\n{}", self.output());
                break;
            }
            assert!(Instant::now() < deadline, "the shell did not exit; it printed:\n{}", self.output());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The commands of text lines (`TIME PID COMMAND`, BCC's layout) whose PID is `pid`, in order.
fn commands_of(text: &str, pid: u32) -> Vec<String> {
    text.lines()
        .filter(|l| l.get(10..18).is_some_and(|p| p.trim_end() == pid.to_string()))
        .map(|l| {
            assert!(l.as_bytes()[2] == b':' && l.as_bytes()[5] == b':', "TIME is not HH:MM:SS: {l}");
            l[18..].to_string()
        })
        .collect()
}

fn typed(tag: &str) -> Vec<String> {
    vec![format!("echo {tag}-one"), format!("echo {tag}-two   with  spaces")]
}

fn expected(typed: &[String]) -> Vec<String> {
    typed.iter().cloned().chain(std::iter::once("exit".to_string())).collect()
}

fn start_tool(args: &[&str]) -> Running {
    let mut run = Running::start(TOOL, args);
    run.wait_attached(Duration::from_secs(20));
    run
}

#[test]
fn prints_each_typed_line_of_a_shell_beside_libbpf_tools() {
    let tag = unique_tag();
    let lines = typed(&tag);
    let run = start_tool(&[]);
    let mut anchor = Anchor::start("bashreadline", &[], "TIME");
    let shell = PtyShell::start("/bin/bash", &["--norc", "--noprofile", "-i"]);
    let pid = shell.pid();
    shell.type_lines(&lines);
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert_eq!(done.stdout.lines().next(), Some("TIME      PID     COMMAND"));
    assert_eq!(commands_of(&done.stdout, pid), expected(&lines), "output:\n{}", done.stdout);
    done.assert_no_programs_left();

    anchor.wait_for(|l| l.contains(&pid.to_string()) && l.ends_with(" exit"));
    let theirs = anchor.finish();
    assert_eq!(commands_of(&theirs, pid), expected(&lines), "libbpf-tools printed:\n{theirs}");
}

#[test]
fn json_lines_hold_the_shells_commands() {
    let tag = unique_tag();
    let lines = typed(&tag);
    let run = start_tool(&["-j"]);
    let shell = PtyShell::start("/bin/bash", &["--norc", "--noprofile", "-i"]);
    let pid = shell.pid();
    shell.type_lines(&lines);
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    let mine: Vec<serde_json::Value> = json_lines(&done.stdout).into_iter().filter(|l| l["pid"] == pid).collect();
    let commands: Vec<&str> = mine.iter().map(|l| l["command"].as_str().unwrap()).collect();
    assert_eq!(commands, expected(&lines), "output:\n{}", done.stdout);
    for line in &mine {
        assert_eq!(line["comm"], "bash");
        assert_eq!(line["tid"], pid);
        assert_eq!(line["truncated"], false);
    }
}

#[test]
fn sees_a_shell_in_its_own_mount_namespace() {
    let tag = unique_tag();
    let lines = typed(&tag);
    let run = start_tool(&[]);
    // unshare execs bash in a new mount namespace: same PID, same /bin/bash file.
    let shell =
        PtyShell::start("unshare", &["-m", "--propagation", "private", "/bin/bash", "--norc", "--noprofile", "-i"]);
    let pid = shell.pid();
    shell.wait_prompts(1);
    let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).unwrap();
    assert_ne!(ours, theirs, "the shell is not in a mount namespace of its own");
    shell.type_lines(&lines);
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert_eq!(commands_of(&done.stdout, pid), expected(&lines), "output:\n{}", done.stdout);
}

#[test]
fn leaves_out_a_shell_not_called_bash() {
    let tag = unique_tag();
    let link = ScratchFile::new("corebpf-sh");
    std::os::unix::fs::symlink(std::fs::canonicalize("/bin/bash").unwrap(), &link.0).unwrap();
    let hidden = vec![format!("echo {tag}-hidden")];
    let seen = typed(&tag);
    let run = start_tool(&[]);
    let other = PtyShell::start(link.0.to_str().unwrap(), &["--norc", "--noprofile", "-i"]);
    let other_pid = other.pid();
    other.type_lines(&hidden);
    let shell = PtyShell::start("/bin/bash", &["--norc", "--noprofile", "-i"]);
    let pid = shell.pid();
    shell.type_lines(&seen);
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert_eq!(commands_of(&done.stdout, pid), expected(&seen), "output:\n{}", done.stdout);
    assert_eq!(commands_of(&done.stdout, other_pid), Vec::<String>::new(), "output:\n{}", done.stdout);
    assert!(!done.stdout.contains(&format!("{tag}-hidden")), "output:\n{}", done.stdout);
}

#[test]
fn a_library_without_readline_or_no_file_is_one_line_and_exit_1() {
    for args in [&["-s", "/no/such/libreadline.so"][..], &["--shared=/bin/true"]] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(1), "{args:?}: stderr: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: stderr: {}", done.stderr);
    }
    let done = run_tool(TOOL, &["extra"]);
    assert_eq!(done.status.code(), Some(2), "stderr: {}", done.stderr);
}
