# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 23: what a Prometheus scrape costs the tool that serves it, for a histogram tool (biolatency) and for
the tools that export stacks (stackcount, profile, offwaketime, wakeuptime, memleak), whose scrapes read a stack
map and name every frame. Each tool serves `--prometheus` on a port of its own while a workload fills its maps;
then the bench makes scrapes one after another and times them. No anchor: neither libbpf-tools nor bpftrace
serves metrics (ebpf_exporter does, but is not packaged here)."""

import os
import socket
import statistics
import subprocess
import sys
import time

import tool_bench
from figures import DIRECT_FILE, ours, proc_cpu_seconds
from lib import BenchError, Tracer, dd_direct, median, prepare_direct, spread
import report

TITLE = "Cost of a Prometheus scrape: histograms and stacks"

METHOD = """
Each row starts one tool with `--prometheus 127.0.0.1:PORT` and waits for its `Serving Prometheus metrics` line
(printed once its programs are attached), runs the row's workload so that its maps hold what a busy host's would,
then makes scrapes (`GET /metrics` over a new connection each) one after another. *First scrape* is the wall time
of the first one, which for a stack tool names every frame for the first time (blazesym reads the symbol tables
of the kernel and of each process's binaries); *later scrapes* is the median wall time of the next 100 (names come
from the tool's cache then); *tool CPU per scrape* is the tool's own user and system CPU time over those
scrapes (from /proc/PID/stat, in clock ticks, hence the average), divided by their number. *Exposition* is the size of
the last answer and its number of series (`_count` lines of histograms, sample lines of the rest), the self
metrics every serving tool adds (build, attach mechanism, per-program runs, lost events) included. Workloads:
biolatency -DF, n O_DIRECT 4 KiB writes by dd; stackcount -U on libc's getpid and profile, a Python loop of
getpid() calls running for the whole row (a process gone before the first scrape would not be named); offwaketime and wakeuptime, the whole machine's sleeps and
wake-ups during a shell loop of short sleeps; memleak (kernel allocations, whole machine), the same loop.
{cfg.repeat} rounds; the table gives medians over the rounds.
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    """One GET /metrics over a new connection; the body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n")
        data = bytearray()
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    if " 200 " not in status:
        raise BenchError(f"scrape answered {status!r}")
    return body


def series(body):
    """Series in an exposition: `_count` lines of histograms, every sample line of the other families."""
    lines = [l for l in body.decode(errors="replace").splitlines() if l and not l.startswith("#")]
    return sum(1 for l in lines if "_bucket{" not in l and "_sum" not in l.split(" ")[0])


def getpid_loop(n):
    return ["/usr/bin/python3", "-c", f"import os\nfor _ in range({n}): os.getpid()"]


def sleep_loop(n):
    return ["/bin/sh", "-c", f"i=0; while [ $i -lt {n} ]; do sleep 0.001; i=$((i+1)); done"]


def specs(cfg):
    """(label, tool, args, workload argv or a function, keep the workload running through the scrapes)."""
    small = cfg.quick
    return [
        ("biolatency -DF", "biolatency", ["-DF"], lambda: dd_direct(DIRECT_FILE, 200 if small else 2_000), False),
        ("stackcount -U getpid", "stackcount", ["-U", f"{tool_bench.libc_path()}:getpid"], getpid_loop(10**9), True),
        ("profile -F 99", "profile", ["-F", "99"], getpid_loop(10**9), True),
        ("offwaketime", "offwaketime", [], sleep_loop(100 if small else 500), False),
        ("wakeuptime", "wakeuptime", [], sleep_loop(100 if small else 500), False),
        ("memleak (kernel)", "memleak", [], sleep_loop(100 if small else 500), False),
    ]


def one_round(tool, args, workload, keep_running, n):
    path = ours(tool)
    if path is None:
        raise BenchError("not built yet")
    port = free_port()
    t = Tracer([path, *args, "--prometheus", f"127.0.0.1:{port}"], ready="^Serving Prometheus metrics")
    busy = None
    try:
        t.wait_ready()
        if callable(workload):
            workload()
        elif keep_running:
            busy = subprocess.Popen(workload, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        else:
            subprocess.run(workload, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=300)
        t0 = time.perf_counter()
        body = scrape(port)
        first = time.perf_counter() - t0
        walls = []
        cpu0 = proc_cpu_seconds(t.pid)
        for _ in range(n):
            t0 = time.perf_counter()
            body = scrape(port)
            walls.append(time.perf_counter() - t0)
        cpu = (proc_cpu_seconds(t.pid) - cpu0) / n
        return {"first": first, "later": statistics.median(walls), "cpu": cpu, "bytes": len(body),
                "series": series(body)}
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
        t.stop()


def fig_scrape_cost(cfg):
    n = 20 if cfg.quick else 100
    rows = []
    prepare_direct(DIRECT_FILE, 2_000)
    try:
        for label, tool, args, workload, keep in specs(cfg):
            row = {"label": label, "rounds": []}
            rows.append(row)
            try:
                for _ in range(cfg.repeat):
                    row["rounds"].append(one_round(tool, args, workload, keep, n))
            except (BenchError, subprocess.SubprocessError, OSError) as e:
                row["error"] = str(e)
                print(f"bench: scrape cost of {label}: {e}", file=sys.stderr)
    finally:
        try:
            os.unlink(DIRECT_FILE)
        except OSError:
            pass
    return {"rows": rows, "n": n}


def render(res):
    lines = []
    for row in res["rows"]:
        if "error" in row:
            lines.append([row["label"], f"not measured: {row['error']}", "", "", "", ""])
            continue
        med = lambda k: median([r[k] for r in row["rounds"]])
        lines.append([
            row["label"], report.ms(med("first")), f"{med('later') * 1e3:.2f} ms",
            f"{med('cpu') * 1e3:.2f} ms", f"{med('bytes') / 1024:.1f} KiB, {med('series'):.0f} series",
            report.pct(spread([r["later"] for r in row["rounds"]])),
        ])
    return report.table(["tool", "first scrape", "later scrapes (wall)", "tool CPU per scrape", "exposition",
                         "spread (later)"], lines)
