# SPDX-License-Identifier: Apache-2.0 OR MIT
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

import tool_bench
from tool_bench import BT_READY  # noqa: F401 (the cost modules import it from here)
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

# The anchors' bpftrace programs are in the tools' bench entries (tools/<tool>/bench.toml, read by tool_bench);
# the figures here that name one take it from there.
BT_FUNCCOUNT = tool_bench.bpftrace_program("funccount")


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
        self.ready_on_stderr = False

    def start(self):
        return Tracer(self.argv, self.ready, use_pty=self.use_pty, resend_int=self.resend_int, env=self.env,
                      ready_on_stderr=self.ready_on_stderr)


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

def contenders_of(row):
    """Ours and the anchor of one start-up row of a tool's bench entry."""
    anchor = row.anchor
    theirs = c_tool(anchor.binary, tool_bench.with_targets(anchor.args), anchor.ready) if anchor.binary else bt(anchor.program)
    ours = our(row.tool, tool_bench.with_targets(row.args), ready=row.ready)
    ours.ready_on_stderr = row.ready_on_stderr
    return ours, theirs


def startup_specs():
    """A row for every start-up entry of every tool (tools/*/bench.toml)."""
    return [(row.label, *contenders_of(row)) for row in tool_bench.all_rows()]


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

def memory_workloads(cfg):
    """The workloads a bench entry can name for the memory figure: name -> (what it does, the workload)."""
    n_io, n_conn, n_dns, n_sys = cfg.mem_ios, cfg.mem_conns, cfg.mem_lookups, cfg.mem_syscalls
    return {
        "direct-writes": (f"{n_io} O_DIRECT 4 KiB writes", lambda: dd_direct(DIRECT_FILE, n_io)),
        "tcp-connections": (f"{n_conn} loopback TCP connections", lambda: tcp_connections(n_conn)),
        "getaddrinfo": (f"{n_dns} getaddrinfo() calls", lambda: getaddrinfo_calls(n_dns)),
        "write-syscalls": (f"{n_sys} write() calls", lambda: dd_syscalls(n_sys)),
    }


def memory_specs(cfg):
    """A row for every bench entry that names a memory workload."""
    workloads = memory_workloads(cfg)
    specs = []
    for row in tool_bench.all_rows():
        if row.memory is None:
            continue
        if row.memory not in workloads:
            raise BenchError(f"tools/{row.tool}/bench.toml: no memory workload {row.memory!r} "
                             f"(known: {', '.join(workloads)})")
        what, workload = workloads[row.memory]
        specs.append((row.label, what, workload, *contenders_of(row)))
    return specs


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
    return tool_bench.tools()


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
