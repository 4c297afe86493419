"""The six benchmark figures: each takes the settings and returns a plain dict of raw samples and medians.

Every figure repeats its measurement `repeat` times and alternates the order of the contenders on each round
(ours first, then theirs first, ...), so slow drifts of the machine fall on both. A contender whose binary is not
there yields a row marked "not built yet" (ours) or "not installed" (an anchor) instead of numbers.
"""

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from lib import (BenchError, Tracer, dd_direct, dd_syscalls, getaddrinfo_calls, median, prepare_direct,
                 tcp_connections)

ROOT = Path(__file__).resolve().parent.parent
# Ours are measured as shipped: the static multicall binary (`make static`), run through a link per tool as
# `make install` lays them out (bench/run.sh makes the links).
OURS_DIR = ROOT / "target" / "bench" / "bin"
STATIC_DIR = ROOT / "target" / "x86_64-unknown-linux-gnu" / "dist"
BUILD_DIR = ROOT / "target" / "bench"
LIBBPF_TOOLS = Path("/usr/sbin")
# O_DIRECT writes must reach the disk behind "/", so the file is where "/" is (not on a tmpfs /var/tmp).
_ON_ROOT = os.path.isdir("/var/tmp") and os.stat("/var/tmp").st_dev == os.stat("/").st_dev
DIRECT_FILE = ("/var/tmp" if _ON_ROOT else "") + "/corebpf-bench-direct.dat"

# bpftrace's readiness signal ("Attaching N probes..." is printed before attaching, so it is not one): a BEGIN
# printf. bpftrace 0.17 runs BEGIN early, but its output reaches stdout only from the event loop, which starts
# after every probe is attached (strace: the "ready" write follows the tracepoint's PERF_EVENT_IOC_ENABLE).
BT_READY = 'BEGIN { printf("ready\\n"); } '
BT_FUNCCOUNT = BT_READY + "tracepoint:syscalls:sys_enter_write { @ = count(); }"
# TCP_CLOSE = 7 -> TCP_SYN_SENT = 2: an active open (tcpconnect's tracepoint path).
BT_TCPCONNECT = (BT_READY + "tracepoint:sock:inet_sock_set_state /args->oldstate == 7 && args->newstate == 2/ "
                 "{ printf(\"%d %s %d\\n\", pid, comm, args->dport); }")
BT_ALL_SYSCALLS = BT_READY + "tracepoint:raw_syscalls:sys_enter, tracepoint:raw_syscalls:sys_exit { @[probe, args->id] = count(); }"
# tcpdrop has no libbpf-tools port: bpftrace on the same tracepoint, each drop printed with its kernel stack.
BT_TCPDROP = BT_READY + "tracepoint:skb:kfree_skb /args->reason > 2/ { printf(\"%d %d %s\\n\", pid, args->reason, kstack); }"
# tcpretrans (libbpf-tools has none): each retransmit printed with its addresses, on the same tracepoint.
BT_TCPRETRANS = BT_READY + "tracepoint:tcp:tcp_retransmit_skb { printf(\"%d %d %d\\n\", pid, args->sport, args->dport); }"
# tcptop (libbpf-tools' needs kprobes): bytes per process and connection (ports) on the same tracepoints, TCP only,
# printed and cleared every second as tcptop does.
BT_TCPTOP = BT_READY + (
    "tracepoint:sock:sock_send_length /args->protocol == 6 && args->ret > 0/ "
    "{ $sk = (struct sock *)args->sk; @tx[pid, comm, $sk->__sk_common.skc_num, $sk->__sk_common.skc_dport] "
    "= sum(args->ret); } "
    "tracepoint:sock:sock_recv_length /args->protocol == 6 && args->ret > 0/ "
    "{ $sk = (struct sock *)args->sk; @rx[pid, comm, $sk->__sk_common.skc_num, $sk->__sk_common.skc_dport] "
    "= sum(args->ret); } "
    "interval:s:1 { print(@tx); print(@rx); clear(@tx); clear(@rx); }")
# vfsstat (libbpf-tools' needs fentry or kprobes): the x86-64 system calls its syscall path counts, by number, on
# the same tracepoint (raw_syscalls:sys_exit), printed and cleared every second as vfsstat does.
BT_VFSSTAT = BT_READY + (
    "tracepoint:raw_syscalls:sys_exit { $id = args->id; "
    "if ($id == 0 || $id == 17) { @[\"READ\"] = count(); } else if ($id == 1 || $id == 18) { @[\"WRITE\"] = count(); } "
    "else if ($id == 74 || $id == 75) { @[\"FSYNC\"] = count(); } "
    "else if ($id == 2 || $id == 257 || $id == 437 || $id == 85 || $id == 304) { @[\"OPEN\"] = count(); } "
    "else if ($id == 133 || $id == 259) { @[\"CREATE\"] = count(); } else if ($id == 87 || $id == 263) { @[\"UNLINK\"] = count(); } "
    "else if ($id == 83 || $id == 258) { @[\"MKDIR\"] = count(); } else if ($id == 84) { @[\"RMDIR\"] = count(); } } "
    "interval:s:1 { print(@); clear(@); }")
# biosnoop (libbpf-tools' needs fentry or kprobes on blk_account_io_start): the issuing PID and comm per (disk,
# sector) at block_io_start, the issue time at block_rq_issue, one line per completion, as BCC's tracepoint path.
BT_BIOSNOOP = BT_READY + (
    "tracepoint:block:block_io_start { @pid[args->dev, args->sector] = pid; @comm[args->dev, args->sector] = comm; } "
    "tracepoint:block:block_rq_issue { @iss[args->dev, args->sector] = nsecs; } "
    "tracepoint:block:block_rq_complete /@iss[args->dev, args->sector]/ { "
    "printf(\"%d %s %d %s %d %d %d\\n\", @pid[args->dev, args->sector], @comm[args->dev, args->sector], args->dev, "
    "args->rwbs, args->sector, args->nr_sector * 512, (nsecs - @iss[args->dev, args->sector]) / 1000); "
    "delete(@iss[args->dev, args->sector]); delete(@pid[args->dev, args->sector]); "
    "delete(@comm[args->dev, args->sector]); }")


def ours(name):
    path = OURS_DIR / name
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def theirs(name):
    path = LIBBPF_TOOLS / name
    return str(path) if path.is_file() else None


def bpftrace():
    return shutil.which("bpftrace")


class Contender:
    """One program in a comparison: how to run it and how it says it is ready."""

    def __init__(self, label, argv, ready, use_pty=False, missing="not built yet", resend_int=False):
        self.label = label
        self.argv = argv if argv and argv[0] else None
        self.ready = ready
        self.use_pty = use_pty
        self.missing = missing
        self.resend_int = resend_int
        self.env = None

    def start(self):
        return Tracer(self.argv, self.ready, use_pty=self.use_pty, resend_int=self.resend_int, env=self.env)


def our(name, args=(), ready="^Tracing"):
    path = ours(name)
    return Contender("ours", [path, *args] if path else None, ready)


def c_tool(name, args=(), ready="^Tracing"):
    # libbpf-tools print with stdio: fully buffered on a pipe, so they get a pty (line-buffered, no extra exec).
    path = theirs(name)
    return Contender("libbpf-tools", [path, *args] if path else None, ready, use_pty=True, missing="not installed",
                     resend_int=True)


def bt(program):
    path = bpftrace()
    return Contender("bpftrace", [path, "-e", program] if path else None, "^ready", missing="not installed",
                     resend_int=True)


def orders(items, rep):
    """Rotates the contenders by the round number, so each goes first in turn."""
    k = rep % len(items)
    return items[k:] + items[:k]


SETTLE = 0.3  # seconds of quiet before every measured workload, traced or not, so each starts from the same state


def run_traced(contender, workload):
    """Starts the contender (None: no tracing), runs workload() once it is ready, stops it; returns the result."""
    if contender is None:
        time.sleep(SETTLE)
        return workload(), None
    with contender.start() as t:
        t.wait_ready()
        time.sleep(SETTLE)
        result = workload()
        t.stop()
    return result, t


# ---- 1. start-up -----------------------------------------------------------------------------------------

def startup_specs():
    return [
        ("biolatency", our("biolatency"), c_tool("biolatency")),
        ("tcplife", our("tcplife", ready="^PID"), c_tool("tcplife", ready="^PID")),
        ("tcpdrop", our("tcpdrop", ready="^TIME"), bt(BT_TCPDROP)),
        # libbpf-tools' tcpconnect needs kprobes or fentry (neither works here): bpftrace on the same tracepoint.
        ("tcpconnect", our("tcpconnect"), bt(BT_TCPCONNECT)),
        # libbpf-tools' tcptop needs kprobes or fentry: bpftrace on the same tracepoints.
        ("tcptop", our("tcptop", ["-C"]), bt(BT_TCPTOP)),
        ("tcpretrans", our("tcpretrans"), bt(BT_TCPRETRANS)),
        # libbpf-tools' vfsstat needs fentry or kprobes: bpftrace counting the same calls on the same tracepoint.
        ("vfsstat", our("vfsstat", ready="^TIME"), bt(BT_VFSSTAT)),
        # offwaketime (no libbpf-tools port): bpftrace counting waker stacks on the same tracepoint.
        ("offwaketime", our("offwaketime"), bt(BT_READY + "tracepoint:sched:sched_waking { @[kstack] = count(); }")),
        ("wakeuptime", our("wakeuptime"), c_tool("wakeuptime")),
        ("gethostlatency", our("gethostlatency", ready="^TIME"), c_tool("gethostlatency", ready="^TIME")),
        ("funccount t:syscalls:sys_enter_write", our("funccount", ["t:syscalls:sys_enter_write"]),
         bt(BT_FUNCCOUNT)),
        # All 720 syscall tracepoints: exit time (issue 23 item 9). bpftrace on tracepoint:syscalls:* needs
        # BPFTRACE_MAX_PROBES and took 63 s to exit here, so the anchor counts every syscall by number instead.
        ("funccount t:syscalls:* (720 tracepoints)", our("funccount", ["t:syscalls:*"]), bt(BT_ALL_SYSCALLS)),
        ("runqlat", our("runqlat"), c_tool("runqlat")),
        ("softirqs", our("softirqs"), c_tool("softirqs")),
        ("hardirqs", our("hardirqs"), c_tool("hardirqs")),
        ("cpudist", our("cpudist"), c_tool("cpudist")),
        # libbpf-tools' runqlen is rejected by this host's verifier: its row says so.
        ("runqlen", our("runqlen", ready="^Sampling"), c_tool("runqlen", ready="^Sampling")),
        ("execsnoop", our("execsnoop", ready="^COMM"), c_tool("execsnoop", ready="^PCOMM")),
        ("opensnoop", our("opensnoop", ready="^PID"), c_tool("opensnoop", ready="^PID")),
        # trace (no libbpf-tools port): its generic program on one tracepoint, against bpftrace's printf there.
        ("trace t:syscalls:sys_enter_write", our("trace", ['t:syscalls:sys_enter_write "%d", args->count'],
                                                 ready="^PID"),
         bt(BT_READY + 'tracepoint:syscalls:sys_enter_write /comm != "bpftrace"/ { printf("%d\\n", args->count); }')),
        ("syscount", our("syscount"), c_tool("syscount")),
        ("biosnoop", our("biosnoop", ready="^TIME"), bt(BT_BIOSNOOP)),
    ]


def fig_startup(cfg):
    rows = []
    for name, a, b in startup_specs():
        row = {"name": name, "anchor": b.label, "ours": [], "theirs": [], "ours_exit": [], "theirs_exit": []}
        rows.append(row)
        for side, c in (("ours", a), ("theirs", b)):
            if c.argv is None:
                row[side + "_missing"] = c.missing
        if "ours_missing" in row and "theirs_missing" in row:
            continue
        try:
            for side, c in (("ours", a), ("theirs", b)):  # warm the page cache; not counted
                if c.argv is None or side + "_missing" in row:
                    continue
                try:
                    run_traced(c, lambda: None)
                except BenchError as e:
                    if side == "ours":
                        raise
                    # An anchor that does not run here is the anchor's problem: say so, and time ours alone.
                    row["theirs_missing"] = "does not run here"
                    row["theirs_failed"] = str(e)
            for rep in range(cfg.repeat):
                for side, c in orders([("ours", a), ("theirs", b)], rep):
                    if c.argv is None or side + "_missing" in row:
                        continue
                    with c.start() as t:
                        row[side].append(t.wait_ready())
                        time.sleep(0.1)  # a SIGINT right after the banner can race the tool's own set-up
                        row[side + "_exit"].append(t.stop())
                    time.sleep(0.05)
        except BenchError as e:
            row["error"] = str(e)
    return {"rows": rows}


# ---- 2. cost per event -----------------------------------------------------------------------------------

def fig_event_cost(cfg):
    n = cfg.syscalls
    contenders = [("none", None), ("ours", our("funccount", ["t:syscalls:sys_enter_write"])),
                  ("bpftrace", bt(BT_FUNCCOUNT))]
    res = {"n": n, "times": {k: [] for k, _ in contenders}, "cpu": {k: [] for k, _ in contenders}, "missing": {},
           "counted": {}}
    for k, c in contenders:
        if c is not None and c.argv is None:
            res["missing"][k] = c.missing
    active = [(k, c) for k, c in contenders if k not in res["missing"]]
    try:
        dd_syscalls(n // 10)  # warm-up
        for rep in range(cfg.repeat):
            for k, c in orders(active, rep):
                (secs, cpu), t = run_traced(c, lambda: dd_syscalls(n))
                res["times"][k].append(secs)
                res["cpu"][k].append(cpu)
                if t is not None:
                    res["counted"][k] = max_count(t.output())
    except BenchError as e:
        res["error"] = str(e)
    base = median(res["cpu"]["none"])
    res["ns_per_event"] = {}
    for k, _ in active:
        m = median(res["cpu"][k])
        if k != "none" and m is not None and base:
            res["ns_per_event"][k] = (m - base) / n * 1e9
    return res


def max_count(text):
    """The largest integer a counting tool printed (its count of our dd's writes plus a few others)."""
    nums = [int(x) for x in re.findall(r"(?<![\w.])(\d+)(?![\w.])", text)]
    return max(nums) if nums else 0


# ---- 3. cost per block I/O -------------------------------------------------------------------------------

def fig_block_io(cfg):
    n = cfg.direct_ios
    contenders = [("none", None), ("ours", our("biolatency")), ("libbpf-tools", c_tool("biolatency"))]
    res = {"n": n, "times": {k: [] for k, _ in contenders}, "missing": {}}
    for k, c in contenders:
        if c is not None and c.argv is None:
            res["missing"][k] = c.missing
    active = [(k, c) for k, c in contenders if k not in res["missing"]]
    try:
        prepare_direct(DIRECT_FILE, n)
        dd_direct(DIRECT_FILE, n // 10)  # warm-up
        for rep in range(cfg.repeat):
            for k, c in orders(active, rep):
                (secs, _cpu), _ = run_traced(c, lambda: dd_direct(DIRECT_FILE, n))
                res["times"][k].append(secs)
    except BenchError as e:
        res["error"] = str(e)
    finally:
        try:
            os.unlink(DIRECT_FILE)
        except OSError:
            pass
    return res


# ---- 4. memory -------------------------------------------------------------------------------------------

def memory_specs(cfg):
    n_io, n_conn, n_dns, n_sys = cfg.mem_ios, cfg.mem_conns, cfg.mem_lookups, cfg.mem_syscalls
    return [
        ("biolatency", f"{n_io} O_DIRECT 4 KiB writes", lambda: dd_direct(DIRECT_FILE, n_io),
         our("biolatency"), c_tool("biolatency")),
        ("tcplife", f"{n_conn} loopback TCP connections", lambda: tcp_connections(n_conn),
         our("tcplife", ready="^PID"), c_tool("tcplife", ready="^PID")),
        ("gethostlatency", f"{n_dns} getaddrinfo() calls", lambda: getaddrinfo_calls(n_dns),
         our("gethostlatency", ready="^TIME"), c_tool("gethostlatency", ready="^TIME")),
        ("funccount t:syscalls:sys_enter_write", f"{n_sys} write() calls", lambda: dd_syscalls(n_sys),
         our("funccount", ["t:syscalls:sys_enter_write"]), bt(BT_FUNCCOUNT)),
    ]


def fig_memory(cfg):
    rows = []
    try:
        prepare_direct(DIRECT_FILE, cfg.mem_ios)
        for name, what, workload, a, b in memory_specs(cfg):
            row = {"name": name, "workload": what, "anchor": b.label}
            rows.append(row)
            for side, c in (("ours", a), ("theirs", b)):
                row[side] = {"hwm": [], "maxrss": [], "memlock": []}
                if c.argv is None:
                    row[side + "_missing"] = c.missing
            try:
                for rep in range(cfg.repeat):
                    for side, c in orders([("ours", a), ("theirs", b)], rep):
                        if c.argv is None:
                            continue
                        with c.start() as t:
                            t.wait_ready()
                            workload()
                            time.sleep(0.2)
                            hwm = t.vm_hwm_kib()
                            if hwm is None:
                                raise BenchError(f"{name} exited during the workload: {t.stderr_tail()}")
                            row[side]["hwm"].append(hwm)
                            row[side]["memlock"].append(t.map_memlock())
                            t.stop()
                        row[side]["maxrss"].append(t.peak_kib)
            except BenchError as e:
                row["error"] = str(e)
    finally:
        try:
            os.unlink(DIRECT_FILE)
        except OSError:
            pass
    return {"rows": rows}


# ---- 5. size ---------------------------------------------------------------------------------------------

def shared_libs(path):
    """Resolved shared libraries of an executable (none for a static one)."""
    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted({m.group(1) for m in re.finditer(r"=>\s+(/\S+)", out)})


def tool_names():
    """Every tool of the workspace (tools/* with a Cargo.toml)."""
    return sorted(d.name for d in (ROOT / "tools").iterdir() if (d / "Cargo.toml").is_file())


def build_static(without=""):
    """`make static`, leaving the tools in `without` (comma-separated) out of the multicall's list; returns the
    binary's size in bytes."""
    env = dict(os.environ, COREBPF_TOOLSET_WITHOUT=without)
    out = subprocess.run(["make", "-s", "--no-print-directory", "static"], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise BenchError(f"make static (without {without or 'nothing'}) failed: {out.stderr[-500:]}")
    return os.path.getsize(STATIC_DIR / "corebpf-tools")


def bpf_object_size(tool):
    """Size of the tool's compiled BPF object, as embedded (the newest one the static build made)."""
    objects = list((STATIC_DIR / "build").glob(f"{tool}-*/out/bpf.o"))
    return os.path.getsize(max(objects, key=os.path.getmtime)) if objects else 0


def installed_tree():
    """`make install-files` into a scratch DESTDIR: (bytes of regular files, number of them, number of links)."""
    dest = Path(tempfile.mkdtemp(prefix="corebpf-bench-install."))
    try:
        out = subprocess.run(["make", "-s", "--no-print-directory", "install-files", f"DESTDIR={dest}",
                              "PREFIX=/usr"], cwd=ROOT, capture_output=True, text=True)
        if out.returncode != 0:
            raise BenchError(f"make install-files failed: {out.stderr[-500:]}")
        total = files = links = 0
        for path in dest.rglob("*"):
            if path.is_symlink():
                links += 1
            elif path.is_file():
                total += path.stat().st_size
                files += 1
        return total, files, links
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def libbpf_tools_installed():
    """Debian's libbpf-tools: (Installed-Size in KiB, number of tools in /usr/sbin), or None."""
    try:
        kib = subprocess.run(["dpkg-query", "-W", "-f=${Installed-Size}", "libbpf-tools"],
                             capture_output=True, text=True, check=True).stdout.strip()
        files = subprocess.run(["dpkg", "-L", "libbpf-tools"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    tools = [f for f in files.split() if f.startswith("/usr/sbin/") and os.path.isfile(f)]
    return int(kib), len(tools)


def fig_size(cfg):
    """The shipped binary, the installed tree, and what the tools add to it: all of them together (the binary
    built with none), and each of a sample exactly (built without it; BENCH_SIZE_TOOLS, default two)."""
    res = {"tools": tool_names(), "rows": [], "theirs_installed": libbpf_tools_installed()}
    try:
        res["static"] = build_static()
        res["installed"] = installed_tree()
        for tool in res["tools"]:
            theirs_path = theirs(tool)
            res["rows"].append({"name": tool, "bpf": bpf_object_size(tool), "without": None, "added": None,
                                "theirs": os.path.getsize(theirs_path) if theirs_path else None})
        res["base"] = build_static(",".join(res["tools"]))
        sample = [t for t in os.environ.get("BENCH_SIZE_TOOLS", "biolatency,argdist").split(",") if t]
        for row in res["rows"]:
            if row["name"] in sample:
                row["without"] = build_static(row["name"])
                row["added"] = res["static"] - row["without"]
    except BenchError as e:
        res["error"] = str(e)
    finally:
        try:
            build_static()  # leave the whole binary in place
        except BenchError:
            pass
    bt_path = bpftrace()
    res["bpftrace"] = os.path.getsize(os.path.realpath(bt_path)) if bt_path else None
    return res


# ---- 6. profile ------------------------------------------------------------------------------------------

def build_many_stacks(paths):
    """Compiles a C program that spins through `paths` distinct call paths (main -> mid_i -> leaf_i), picked
    in pseudo-random order so periodic sampling sees them all."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    src = BUILD_DIR / "many_stacks.c"
    exe = BUILD_DIR / "many_stacks"
    lines = ["/* generated by bench/figures.py */", "#include <stdint.h>", "static volatile uint64_t sink;"]
    for i in range(paths):
        lines.append(f"__attribute__((noinline)) void leaf_{i}(void) "
                     f"{{ for (int k = 0; k < 5000; k++) sink += k ^ {i}; }}")
        lines.append(f"__attribute__((noinline)) void mid_{i}(void) {{ leaf_{i}(); sink++; }}")
    lines.append(f"static void (*const paths[{paths}])(void) = {{"
                 + ", ".join(f"mid_{i}" for i in range(paths)) + "};")
    lines.append("int main(void) { uint32_t x = 12345; for (;;) { x = x * 1103515245u + 12345u;"
                 f" paths[(x >> 8) % {paths}](); }} }}")
    src.write_text("\n".join(lines) + "\n")
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise BenchError("no C compiler for the profile workload")
    subprocess.run([cc, "-O0", "-g", "-fno-omit-frame-pointer", "-o", str(exe), str(src)], check=True, timeout=300)
    return str(exe)


def profile_contenders(pid, freq):
    one_liner = BT_READY + f"profile:hz:{freq} /pid == {pid}/ {{ @[ustack] = count(); }}"
    cached = bt(one_liner)
    # bpftrace re-reads the target's symbols for every stack unless told to cache them (its default when ASLR
    # is on, as here): measure both its default and the cached mode.
    cached.env = {"BPFTRACE_CACHE_USER_SYMBOLS": "1"}
    return [
        ("ours", our("profile", ["-F", str(freq), "-p", str(pid)], ready="^Sampling")),
        ("bpftrace", bt(one_liner)),
        ("bpftrace-cached", cached),
    ]


def parse_profile(label, text):
    """(total samples, distinct stacks) from a profile's exit report."""
    if label.startswith("bpftrace"):
        counts = [int(x) for x in re.findall(r"^\]: (\d+)$", text, re.M)]
    else:
        # BCC's layout: frames, then "    -                comm (pid)", then the count on its own line.
        counts = [int(x) for x in re.findall(r"^\s+-\s+\S.*\(\d+\)\s*\n\s+(\d+)\s*$", text, re.M)]
    return sum(counts), len(counts)


def fig_profile(cfg):
    res = {"freq": cfg.freq, "seconds": cfg.profile_secs, "paths": cfg.paths, "missing": {}, "runs": {}}
    helper = None
    try:
        exe = build_many_stacks(cfg.paths)
        helper = subprocess.Popen([exe], start_new_session=True)
        time.sleep(0.3)
        contenders = profile_contenders(helper.pid, cfg.freq)
        for k, c in contenders:
            res["runs"][k] = []
            if c.argv is None:
                res["missing"][k] = c.missing
        active = [(k, c) for k, c in contenders if c.argv is not None]
        for rep in range(cfg.repeat):
            for k, c in orders(active, rep):
                with c.start() as t:
                    t.wait_ready()
                    helper_cpu = proc_cpu_seconds(helper.pid)
                    time.sleep(cfg.profile_secs)
                    sampled = time.perf_counter() - t.t_ready
                    helper_cpu = proc_cpu_seconds(helper.pid) - helper_cpu
                    cpu_before = proc_cpu_seconds(t.pid)
                    exit_secs = t.stop(timeout=90)
                samples, stacks = parse_profile(k, t.output())
                res["runs"][k].append({
                    "samples": samples, "stacks": stacks, "sampled": sampled, "exit": exit_secs,
                    "expected": helper_cpu * cfg.freq,
                    "cpu_sampling": cpu_before, "maxrss": t.peak_kib,
                    "cpu_total": t.rusage.ru_utime + t.rusage.ru_stime, "status": t.p.returncode,
                })
    except (BenchError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        res["error"] = str(e)
    finally:
        if helper is not None:
            helper.kill()
            helper.wait()
    return res


def proc_cpu_seconds(pid):
    """User+system CPU seconds a live process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- 7. cost per context switch (runqlat) ----------------------------------------------------------------

def context_switches():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    raise BenchError("no ctxt line in /proc/stat")


def pipe_pingpong(n):
    """perf's pipe ping-pong, both processes pinned to CPU 0 so that every switch is between them (and the
    tracer's programs run in their context, on their CPU time). Returns (wall s, CPU s, context switches)."""
    import resource
    perf = shutil.which("perf")
    if perf is None:
        raise BenchError("perf is not installed (perf bench sched pipe is the workload)")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    c0, t0 = context_switches(), time.monotonic()
    p = subprocess.run(["taskset", "-c", "0", perf, "bench", "sched", "pipe", "-l", str(n)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
    t1, c1 = time.monotonic(), context_switches()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise BenchError(f"perf bench sched pipe failed: {p.stderr.decode(errors='replace').strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return t1 - t0, cpu, c1 - c0


def fig_context_switch(cfg):
    return switch_cost(cfg, [("none", None), ("ours", our("runqlat")), ("libbpf-tools", c_tool("runqlat"))])


def switch_cost(cfg, contenders):
    """CPU, wall time and context switches of the pipe ping-pong under each (key, contender) of `contenders`
    ("none": untraced), rounds in rotating order; ns_per_switch: each one's extra CPU per context switch."""
    n = cfg.pingpongs
    res = {"n": n, "times": {k: [] for k, _ in contenders}, "cpu": {k: [] for k, _ in contenders},
           "switches": {k: [] for k, _ in contenders}, "missing": {}}
    for k, c in contenders:
        if c is not None and c.argv is None:
            res["missing"][k] = c.missing
    active = [(k, c) for k, c in contenders if k not in res["missing"]]
    try:
        pipe_pingpong(n // 10)  # warm-up
        for rep in range(cfg.repeat):
            for k, c in orders(active, rep):
                (secs, cpu, switches), _ = run_traced(c, lambda: pipe_pingpong(n))
                res["times"][k].append(secs)
                res["cpu"][k].append(cpu)
                res["switches"][k].append(switches)
    except BenchError as e:
        res["error"] = str(e)
    base = median(res["cpu"]["none"])
    res["ns_per_switch"] = {}
    for k, _ in active:
        m, sw = median(res["cpu"][k]), median(res["switches"][k])
        if k != "none" and m is not None and base and sw:
            res["ns_per_switch"][k] = (m - base) / sw * 1e9
    return res
