# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Process handling, workloads and statistics for the benchmark driver (bench/bench.py).

A `Tracer` is a tool started in its own process group whose output is read by a thread, so the time its
readiness line appears is known to well under a millisecond and a chatty tool never blocks on a full pipe.
Every tracer started is registered, and `cleanup()` (run at exit, on SIGTERM/SIGHUP and on Ctrl-C) stops the
ones still alive: SIGINT, then SIGKILL to the whole group. Workloads are plain commands (dd) or loops in this
process (loopback TCP connections, getaddrinfo calls) whose size is fixed, so every tool sees the same events.
"""

import os
import pty
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

LIVE = set()


class BenchError(Exception):
    """A measurement that could not be taken; the figure reports it instead of a number."""


class Tracer:
    """One tracing tool run: start, wait for its readiness line, read status, stop, collect rusage."""

    def __init__(self, argv, ready, use_pty=False, resend_int=False, env=None, ready_on_stderr=False):
        self.argv = argv
        self.ready_on_stderr = ready_on_stderr
        self.ready_re = re.compile(ready.encode(), re.M)
        self.resend_int = resend_int
        self.buf = bytearray()
        self.cond = threading.Condition()
        self.t_ready = None
        self.eof = False
        self.rusage = None
        self.status = None
        self.t_exit = None
        self.t_stop = None
        self.peak_kib = None
        self.err = tempfile.TemporaryFile()
        if ready_on_stderr:
            # The readiness line comes on stderr (a tool that prints nothing on stdout until its first report, run
            # with -v): stderr is a pipe, copied to self.err by a reader of its own that watches for the line.
            err_r, err_w = os.pipe()
        if use_pty:
            rfd, wfd = pty.openpty()
        else:
            rfd, wfd = os.pipe()
        full_env = dict(os.environ, LC_ALL="C")
        full_env.update(env or {})
        self.t0 = time.perf_counter()
        try:
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=wfd,
                                      stderr=err_w if ready_on_stderr else self.err,
                                      start_new_session=True, env=full_env)
        finally:
            os.close(wfd)
            if ready_on_stderr:
                os.close(err_w)
        self.pid = self.p.pid
        LIVE.add(self)
        self.fd = rfd
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if ready_on_stderr:
            threading.Thread(target=self._read_stderr, args=(err_r,), daemon=True).start()

    def _read_stderr(self, fd):
        seen = bytearray()
        while True:
            chunk = os.read(fd, 65536)
            now = time.perf_counter()
            if not chunk:
                break
            self.err.write(chunk)
            self.err.flush()
            seen += chunk
            with self.cond:
                if self.t_ready is None and self.ready_re.search(seen):
                    self.t_ready = now
                    self.cond.notify_all()
        os.close(fd)

    def _read(self):
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO on a pty whose child has exited
                chunk = b""
            now = time.perf_counter()
            with self.cond:
                if not chunk:
                    self.eof = True
                    self.cond.notify_all()
                    break
                self.buf += chunk
                if self.t_ready is None and not self.ready_on_stderr and self.ready_re.search(self.buf):
                    self.t_ready = now
                self.cond.notify_all()
        os.close(self.fd)

    def stderr_tail(self):
        self.err.seek(0)
        text = self.err.read().decode(errors="replace").strip().splitlines()
        return " / ".join(text[-3:]) or "(no stderr)"

    def wait_ready(self, timeout=30):
        """Seconds from exec to the readiness line; raises BenchError if it never comes."""
        with self.cond:
            self.cond.wait_for(lambda: self.t_ready is not None or self.eof, timeout)
            ready = self.t_ready
        if ready is None:
            self.stop(timeout=3)
            why = "exited" if self.eof else f"no readiness line in {timeout}s"
            raise BenchError(f"{os.path.basename(self.argv[0])} {why}: {self.stderr_tail()}")
        return ready - self.t0

    def vm_hwm_kib(self):
        """Peak resident set so far (VmHWM: reset by exec, never lowered), in KiB; None once it has exited.

        Not `ru_maxrss` from wait4: that one keeps the high-water mark of the forked Python process from before
        exec, so every small tool would show Python's size."""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm = int(line.split()[1])
                        self.peak_kib = max(hwm, self.peak_kib or 0)
                        return hwm
        except OSError:
            pass
        return None

    def map_memlock(self):
        """Bytes of BPF map memory (memlock) held through this process's map file descriptors."""
        return sum(int(info.get("memlock", 0)) for info in fd_infos(self.pid) if "map_type" in info)

    def stop(self, sig=signal.SIGINT, timeout=20):
        """Signal, wait for exit (SIGKILL to the group after `timeout`); returns seconds from signal to exit."""
        if self.status is not None:
            return self.t_exit - self.t_stop
        self.t_stop = time.perf_counter()
        deadline = self.t_stop + timeout
        next_int = self.t_stop + 1.0
        with self.cond:
            out_at_signal = len(self.buf)
        self._signal(sig)
        self.vm_hwm_kib()
        while True:
            pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
            now = time.perf_counter()
            if pid:
                break
            self.vm_hwm_kib()  # polled to the end, so peak_kib includes the final report
            if now > deadline:
                self._signal(signal.SIGKILL, group=True)
                pid, status, rusage = os.wait4(self.pid, 0)
                now = time.perf_counter()
                break
            if self.resend_int and now > next_int and len(self.buf) == out_at_signal:
                # libbpf-tools install their SIGINT handler before printing the banner but only check the flag
                # after their first sleep, and bpftrace 0.17 can lose a SIGINT taken before its poll loop: a
                # signal that lands in that window is lost. Resend while the tool has printed nothing since,
                # never after (bpftrace restores SIG_DFL once it starts printing: a second SIGINT kills it).
                self._signal(signal.SIGINT)
                next_int = now + 1.0
            time.sleep(0.002)
        self.t_exit = now
        self.status, self.rusage = status, rusage
        self.p.returncode = os.waitstatus_to_exitcode(status)
        try:
            os.killpg(self.pid, signal.SIGKILL)  # anything the tool left behind in its group
        except OSError:
            pass
        self.reader.join(timeout=5)
        LIVE.discard(self)
        return self.t_exit - self.t_stop

    def _signal(self, sig, group=False):
        try:
            if group:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)
        except OSError:
            pass

    def output(self):
        with self.cond:
            return bytes(self.buf).decode(errors="replace")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop(timeout=5)


def fd_infos(pid):
    """The fields of /proc/PID/fdinfo/FD of each file descriptor of `pid` ({name: value}, both strings); a
    descriptor closed meanwhile is left out."""
    fd_dir = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fd_dir):
        try:
            with open(f"{fd_dir}/{fd}") as f:
                yield dict(re.findall(r"^(\w+):\s+(\S+)", f.read(), re.M))
        except OSError:
            continue


def cleanup():
    """Stops every tracer still running (used at exit and on signals)."""
    for t in list(LIVE):
        t.stop(timeout=3)


def install_cleanup():
    def on_signal(signum, _frame):
        cleanup()
        sys.exit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)


# ---- workloads -------------------------------------------------------------------------------------------

def dd_run(args, timeout=120):
    """Runs dd with `args`; returns (seconds dd reports for the copy, dd's own user+system CPU seconds).

    The CPU time is what a tracer adds to each of dd's system calls (its programs run in dd's context), and unlike
    wall time it does not grow when other work on the machine takes dd's CPU away."""
    p = subprocess.Popen(["dd", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=dict(os.environ, LC_ALL="C"))
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        err = p.stderr.read().decode(errors="replace")
        _, status, rusage = os.wait4(p.pid, 0)  # not p.wait(): wait4 gives this child's own rusage
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        timer.cancel()
        p.stderr.close()
    m = re.search(r"copied, ([0-9.e+-]+) s", err)
    if p.returncode != 0 or not m:
        raise BenchError(f"dd {' '.join(args)} failed (status {p.returncode}): {err.strip()}")
    return float(m.group(1)), rusage.ru_utime + rusage.ru_stime


def dd_seconds(args, timeout=120):
    """Seconds dd itself reports for the copy."""
    return dd_run(args, timeout)[0]


def dd_syscalls(n):
    """n one-byte read+write pairs: n sys_enter_write events. Returns (wall seconds, CPU seconds)."""
    return dd_run(["if=/dev/zero", "of=/dev/null", "bs=1", f"count={n}"])


def dd_direct(path, n, bs=4096):
    """n O_DIRECT writes of bs bytes over the same blocks of `path` (preallocated with prepare_direct).
    Returns (wall seconds, dd's CPU seconds)."""
    return dd_run(["if=/dev/zero", f"of={path}", f"bs={bs}", f"count={n}", "oflag=direct", "conv=notrunc"])


def prepare_direct(path, n, bs=4096):
    dd_seconds(["if=/dev/zero", f"of={path}", f"bs={bs}", f"count={n}", "conv=fsync"])


def tcp_connections(n):
    """n loopback TCP connections, each accepted, sent 1 byte and closed."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    port = srv.getsockname()[1]
    try:
        for _ in range(n):
            c = socket.create_connection(("127.0.0.1", port))
            s, _ = srv.accept()
            c.sendall(b"x")
            s.recv(1)
            c.close()
            s.close()
    finally:
        srv.close()


def getaddrinfo_calls(n):
    """n libc getaddrinfo() calls (answered from /etc/hosts)."""
    for _ in range(n):
        socket.getaddrinfo("localhost", None)


# ---- statistics ------------------------------------------------------------------------------------------

def median(xs):
    return statistics.median(xs) if xs else None


def spread(xs):
    """(max - min) / median, as a percentage: how noisy the repeats were."""
    if not xs or len(xs) < 2:
        return None
    m = statistics.median(xs)
    return 100.0 * (max(xs) - min(xs)) / m if m else None


# ---- markdown ------------------------------------------------------------------------------------------------

def pct(x):
    """A spread as a whole percentage, or a dash where there is none."""
    return "–" if x is None else f"{x:.0f}%"


def table(header, rows):
    """A markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)
