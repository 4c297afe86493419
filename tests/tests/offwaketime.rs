//! offwaketime against a helper whose blocking and waking are known: after a "go" byte on stdin, a thread named
//! "reader" blocks K times reading a pipe in `main -> reader_loop -> reader_wait`, and a thread named "writer"
//! wakes it each time by writing the pipe from `writer_loop -> writer_wake` after T ms. Both system calls are made
//! from those functions themselves (raw syscalls), so they are the innermost user frames. The tests check that the
//! reader's blocked time is found under its own stack with the writer's stack and name as waker, in text, folded,
//! JSON and flame graph forms, and bad input.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::Duration;

use corebpf_tests::*;

const HELPER: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static int k = 10, ms = 20;

static inline __attribute__((always_inline)) long raw3(long nr, long a, long b, long c)
{
	long ret;
#if defined(__x86_64__)
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	ret = x0;
#endif
	return ret;
}

#if defined(__x86_64__)
#define NR_READ 0
#define NR_WRITE 1
#else
#define NR_READ 63
#define NR_WRITE 64
#endif

__attribute__((noinline)) void reader_wait(void)
{
	char c;
	raw3(NR_READ, fds[0], (long)&c, 1);
}

__attribute__((noinline)) void reader_loop(void)
{
	for (int i = 0; i < k; i++)
		reader_wait();
}

__attribute__((noinline)) void writer_wake(void)
{
	char c = 'w';
	raw3(NR_WRITE, fds[1], (long)&c, 1);
}

__attribute__((noinline)) void *writer_loop(void *arg)
{
	prctl(PR_SET_NAME, "writer");
	for (int i = 0; i < k; i++) {
		struct timespec ts = { 0, ms * 1000000L };
		nanosleep(&ts, NULL);
		writer_wake();
	}
	return arg;
}

int main(int argc, char **argv)
{
	char c;
	pthread_t writer;
	k = argc > 1 ? atoi(argv[1]) : 10;
	ms = argc > 2 ? atoi(argv[2]) : 20;
	if (pipe(fds) || read(0, &c, 1) != 1)
		return 1;
	prctl(PR_SET_NAME, "reader");
	pthread_create(&writer, NULL, writer_loop, NULL);
	reader_loop();
	pthread_join(writer, NULL);
	return 0;
}
"#;

fn helper_exe() -> PathBuf {
    build_c_helper("offwake-pipe", HELPER, &["-fno-omit-frame-pointer", "-O1", "-g", "-pthread"])
}

struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Helper {
    fn start(k: u32, ms: u32) -> Helper {
        let mut child = Command::new(helper_exe())
            .args([k.to_string(), ms.to_string()])
            .stdin(Stdio::piped())
            .spawn()
            .expect("starting the helper");
        let stdin = child.stdin.take();
        Helper { child, stdin }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn run(&mut self) {
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

fn trace(args: &[&str], helper: &mut Helper, banner: bool) -> Finished {
    let mut tool = Running::start("offwaketime", args);
    if banner {
        tool.wait_for_line("Tracing blocked time (us)", Duration::from_secs(30));
    } else {
        let mut ready = false;
        for _ in 0..300 {
            if !prog_ids_of(tool.pid()).is_empty() {
                ready = true;
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        assert!(ready, "offwaketime loaded no program");
        tool.note_programs();
        thread::sleep(Duration::from_millis(300));
    }
    helper.run();
    tool.signal(libc::SIGINT);
    let done = tool.finish(Duration::from_secs(60));
    done.assert_success();
    done
}

/// The reader's blocked time whose folded line has the reader's stack, `--`, then the writer's stack and name.
fn reader_time_woken_by_writer(folded: &str) -> u64 {
    folded
        .lines()
        .filter_map(|l| {
            let (stack, total) = l.rsplit_once(' ')?;
            let (target, waker) = stack.split_once(";--;")?;
            let target: Vec<&str> = target.split(';').collect();
            let waker: Vec<&str> = waker.split(';').collect();
            let target_ok = target.first() == Some(&"reader")
                && target.windows(3).any(|w| w == ["main", "reader_loop", "reader_wait"]);
            let waker_ok =
                waker.last() == Some(&"writer") && waker.windows(2).any(|w| w == ["writer_wake", "writer_loop"]);
            (target_ok && waker_ok).then(|| total.parse::<u64>().unwrap())
        })
        .sum()
}

#[test]
fn folded_reader_stack_with_its_waker_on_top() {
    let mut helper = Helper::start(10, 20);
    let done = trace(&["-p", &helper.pid(), "-f"], &mut helper, false);
    let time = reader_time_woken_by_writer(&done.stdout);
    // Ten reads, each blocked about 20 ms until the writer's write (at least 10 x 20 ms; more on a busy machine).
    assert!(time >= 10 * 20_000 * 99 / 100, "{time} us:\n{}", done.stdout);
    done.assert_no_programs_left();
}

#[test]
fn multiline_waker_above_the_separator_target_below() {
    let mut helper = Helper::start(10, 20);
    let pid = helper.pid();
    let done = trace(&["-p", &pid], &mut helper, true);
    assert!(done
        .stdout
        .starts_with("Tracing blocked time (us) by user + kernel off-CPU and waker stack... Hit Ctrl-C"));
    let lines: Vec<&str> = done.stdout.lines().collect();
    // The block of the reader woken by the writer: "waker: writer TID", the writer's frames, "--  --", the
    // reader's frames, "target: reader TID", the total.
    let block = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("target:") && l.contains("reader"))
        .map(|(at, _)| {
            let start = lines[..at].iter().rposition(|l| l.trim_start().starts_with("waker:")).unwrap();
            &lines[start..=at + 1]
        })
        .find(|block| block[0].contains("writer") && block.iter().any(|l| l.trim() == "reader_wait"))
        .unwrap_or_else(|| panic!("no reader woken by the writer:\n{}", done.stdout));
    let text = block.join("\n");
    assert!(block[0].contains("writer"), "{text}");
    let sep = block.iter().position(|l| l.trim() == "--               --").unwrap_or_else(|| panic!("{text}"));
    let (waker, target_part) = block.split_at(sep);
    // Waker frames outermost first (BCC prints them reversed), the target's innermost first.
    let pos = |part: &[&str], f: &str| part.iter().position(|l| l.trim() == f);
    assert!(pos(waker, "writer_loop") < pos(waker, "writer_wake") && pos(waker, "writer_loop").is_some(), "{text}");
    assert!(pos(target_part, "reader_wait") < pos(target_part, "reader_loop"), "{text}");
    assert!(pos(target_part, "reader_wait").is_some(), "{text}");
}

#[test]
fn json_and_flamegraph() {
    let svg = ScratchFile::new("offwaketime.svg");
    let mut helper = Helper::start(10, 20);
    let done = trace(&["-p", &helper.pid(), "--json", "--flamegraph", svg.0.to_str().unwrap()], &mut helper, false);
    let mut time = 0;
    for s in json_lines(&done.stdout) {
        let names = |v: &serde_json::Value| -> Vec<String> {
            v.as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_string()).collect()
        };
        if s["comm"] == "reader"
            && names(&s["user_stack"]).starts_with(&["reader_wait".into(), "reader_loop".into()])
            && s["waker"]["comm"] == "writer"
            && names(&s["waker"]["user_stack"]).starts_with(&["writer_wake".into(), "writer_loop".into()])
        {
            time += s["total_us"].as_u64().unwrap();
        }
    }
    assert!(time >= 10 * 20_000 * 99 / 100, "{time} us:\n{}", done.stdout);
    let svg = std::fs::read_to_string(&svg.0).unwrap();
    assert!(svg.trim_end().ends_with("</svg>") && svg.contains("Off-Wake Time Flame Graph"));
    assert!(svg.contains(">reader_wait (") && svg.contains(">writer_wake ("), "frames missing from the SVG");
}

#[test]
fn bad_input_is_refused() {
    let cases: [(&[&str], i32, &str); 5] = [
        (&["-p", "999999999"], 1, "no process with PID 999999999"),
        (&["-p", "1", "-t", "1"], 2, "cannot be used with"),
        (&["-u", "-k"], 2, "cannot be used with"),
        (&["-U", "-K"], 2, "cannot be used with"),
        (&["-m", "100", "-M", "10"], 2, "-M 10 is below -m 100"),
    ];
    for (args, code, message) in cases {
        let done = run_tool("offwaketime", args);
        assert_eq!(done.status.code(), Some(code), "{args:?}: {}", done.stderr);
        assert!(done.stderr.contains(message), "{args:?}: {}", done.stderr);
    }
}
