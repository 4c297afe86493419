// SPDX-License-Identifier: Apache-2.0 OR MIT
//! BCC's documented trace and argdist command lines (the examples of their --help, man pages and
//! *_example.txt), each run here as its docs say: those this host can take start, attach, and stop cleanly on
//! Ctrl-C; a kernel-function probe runs where the kernel has kprobes or fentry and is otherwise refused with one
//! line (exit 1); a USDT probe runs where the library has it (Debian's glibc has none: one line, exit 2); what
//! the tools do not take is refused with the one line their docs name. Kernel function names are today's
//! (`do_sys_openat2` for `do_sys_open`, `ksys_read` for `sys_read`), and `-p` gets a live process of its own.

use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::libc;
use corebpf_tests::{run_tool, KillOnDrop, Running};

#[derive(Clone, Copy)]
enum Expect {
    /// Starts, attaches and stops cleanly.
    Runs,
    /// A kernel-function probe: runs where kprobes exist, else one line and exit 1.
    Kernel,
    /// A USDT probe of glibc: one line naming the missing probe, exit 2, where the library lacks it.
    Usdt,
    /// Refused: one line containing this, exit 2.
    Refused(&'static str),
}
use Expect::*;

const TRACE: &[(&[&str], Expect)] = &[
    (&["do_sys_openat2"], Kernel),
    (&["tcp_sendmsg+0x12"], Kernel),
    (&[r#"do_sys_openat2 "%s", arg2@user"#], Kernel),
    (&[r#"do_sys_openat2 "%s", arg2@user"#, "-n", "main"], Kernel),
    (&[r#"do_sys_openat2 "%s", arg2@user"#, "--uid", "1001"], Kernel),
    (&[r#"do_sys_openat2 "%s", arg2@user"#, "-f", "config"], Kernel),
    (&[r#"ksys_read (arg3 > 20000) "read %d bytes", arg3"#], Kernel),
    (&[r#"r::do_sys_openat2 "%llx", retval"#], Kernel),
    (&[r#"c:open (arg2 == 42) "%s %d", arg1, arg2"#], Runs),
    (&[r#"c:malloc "size = %d", arg1"#], Runs),
    (&[r#"p:c:write (arg1 == 1) "writing %d bytes to STDOUT", arg3"#], Runs),
    (&[r#"r::__kmalloc_noprof (retval == 0) "kmalloc failed!""#], Kernel),
    (&[r#"r:c:malloc (retval) "allocated = %x", retval"#], Runs),
    (&[r#"t:block:block_rq_complete "sectors=%d", args->nr_sector"#], Runs),
    (&["u:pthread:pthread_create (arg4 != 0)"], Usdt),
    (&["u:pthread:libpthread:pthread_create (arg4 != 0)"], Usdt),
    (&[r#"p::do_nanosleep(struct hrtimer_sleeper *t) "%d", t->task->pid"#], Kernel),
    (&["-c", "{cgroup}", "__x64_sys_nanosleep", "__x64_sys_clone"], Kernel),
    (&["-I", "linux/fs.h", r#"p::uprobe_register(struct inode *inode) "a_ops = %llx", inode->i_mapping->a_ops"#], Kernel),
    (&["-I", "net/sock.h", "udpv6_sendmsg(struct sock *sk) (sk->sk_dport == 13568)"], Kernel),
    (&["-I", "linux/fs_struct.h", r#"mntns_install "users = %d", $task->fs->users"#], Kernel),
    (&["-s", "/lib/x86_64-linux-gnu/libc.so.6,/bin/ping", "p:c:inet_pton", "-U"], Runs),
    (&[r#"u:pthread:pthread_create "%U", arg3"#, "-T", "-C"], Usdt),
    (&[r#"r:bash:readline "%s", retval"#], Runs),
    (&["-U", "-a", r#"r::__x64_sys_futex "%d", retval"#], Kernel),
    (&[r#"r:c:read ((int)retval < 0) "read failed: %d", retval"#], Runs),
    (&[r#"p:c:open (STRCMP("test.txt", arg1)) "opening %s", arg1"#, "-T"], Runs),
    (&[r#"p:c:open(char *filename) "opening %s", filename"#], Runs),
    (&[r#"do_sys_openat2 "%s", arg2@user"#, "-T", "-p", "{pid}"], Kernel),
    (&["__x64_sys_openat"], Kernel),
    (
        &[
            "__sys_setsockopt(int fd, int level, int optname, char* optval, int optlen) (level==0 && optname == 1 && STRCMP(\"{0x6C, 0x00, 0x00, 0x00}\", optval))",
            "-U",
            "-M",
            "1",
            "--bin_cmp",
        ],
        Kernel,
    ),
    (&[r#"p:/bin/true:main+0xd "%x", ctx->dx"#], Refused("ctx")),
    (&["-K", r#"t:syscalls:sys_enter_openat "%s", args->filename"#], Runs),
];

const ARGDIST: &[(&[&str], Expect)] = &[
    (&["-H", "p::__kmalloc_noprof(u64 size):u64:size"], Kernel),
    (&["-p", "{pid}", "-C", "p:c:malloc(size_t size):size_t:size:size==16"], Runs),
    (&["-C", "r:c:gets():char*:(char*)$retval#snooped strings"], Runs),
    (&["-H", "r::__kmalloc_noprof(size_t size):u64:$latency/$entry(size)#ns per byte"], Kernel),
    (&["-C", "p::__kmalloc_noprof(size_t sz, gfp_t flags):size_t:sz:flags&GFP_ATOMIC"], Refused("GFP_ATOMIC")),
    (&["-p", "{pid}", "-C", "p:c:write(int fd):int:fd", "-T", "5"], Runs),
    (&["-p", "{pid}", "-H", "r:c:read()"], Runs),
    (&["-C", "r::vfs_read():u32:$PID:$latency > 100000"], Kernel),
    (&["-C", "r::vfs_read():u32:$COMM:$latency > 100000"], Kernel),
    (&["-H", "r::vfs_read(void *file, void *buf, size_t count):size_t:$entry(count):$latency > 1000000"], Kernel),
    (&["-H", "p:c:write(int fd, const void *buf, size_t count):size_t:count:fd==1"], Runs),
    (&["-C", "p:c:fork()#fork calls"], Runs),
    (&["-H", "t:block:block_rq_complete():u32:args->nr_sector"], Runs),
    (&["-C", "t:irq:irq_handler_entry():int:args->irq"], Runs),
    (&["-C", "u:pthread:pthread_start():u64:arg2", "-p", "{pid}"], Usdt),
    (
        &["-H", "p:c:sleep(u32 seconds):u32:seconds", "-H", "p:c:nanosleep(struct timespec *req):long:req->tv_nsec"],
        Runs,
    ),
    (&["-p", "{pid}", "-z", "120", "-C", "p:c:write(int fd, char* buf, size_t len):char*:buf:fd==1"], Runs),
    (&["-c", "-H", r#"r:c:open(char *file):u64:$latency/1000:STRCMP("test.txt",$entry(file))"#], Runs),
    (&["-C", "r:c:strlen():int:$retval#lengths"], Refused("IFUNC")),
];

fn kprobes() -> bool {
    std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists()
}

/// Runs every command line of `table` with `tool` at once, and checks each as its [`Expect`] says.
fn run_all(tool: &str, ready: &str, table: &[(&[&str], Expect)]) {
    let mut target = KillOnDrop(Command::new("sleep").arg("120").stdin(Stdio::null()).spawn().expect("sleep"));
    let pid = target.0.id().to_string();
    let mut running = Vec::new();
    let mut failures = Vec::new();
    for (args, expect) in table {
        let cgroup = corebpf_tests::cgroup::cgroup2_root().display().to_string();
        let args: Vec<String> = args.iter().map(|a| a.replace("{pid}", &pid).replace("{cgroup}", &cgroup)).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let expect = match expect {
            Kernel if kprobes() => Runs,
            other => *other,
        };
        let refusal = match expect {
            Runs => None,
            Kernel => Some((1, "kernel function")),
            Usdt => Some((2, "no USDT probe")),
            Refused(needle) => Some((2, needle)),
        };
        let Some((code, needle)) = refusal else {
            running.push((args.join(" "), Running::start(tool, &args)));
            continue;
        };
        let done = run_tool(tool, &args);
        // -I and -s add a note that they are ignored; the refusal is the one other line.
        let lines = done.stderr.lines().filter(|l| !l.contains(" ignored")).count();
        if done.status.code() != Some(code) || lines != 1 || !done.stderr.contains(needle) {
            failures.push(format!(
                "{args:?}: expected exit {code} and one line with '{needle}': {:?} {}",
                done.status.code(),
                done.stderr
            ));
        }
    }
    for (_, run) in &mut running {
        run.wait_for_line(ready, Duration::from_secs(90));
    }
    for (line, run) in running {
        run.signal(libc::SIGINT);
        let done = run.finish(Duration::from_secs(30));
        if !done.status.success() {
            failures.push(format!("{line}: {:?} {}", done.status.code(), done.stderr));
        }
        done.assert_no_programs_left();
    }
    let _ = target.0.kill();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn bcc_trace_examples() {
    run_all("trace", "PID     TID", TRACE);
}

#[test]
fn bcc_argdist_examples() {
    run_all("argdist", "[", ARGDIST);
}
