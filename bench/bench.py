#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Benchmarks corebpf-tools against libbpf-tools and bpftrace and writes docs/benchmarks.md (see `make bench`).

Run as root after a release build (bench/run.sh does both). Settings come from the environment:
BENCH_REPEAT (rounds per measurement, default 5), BENCH_QUICK=1 (small workloads, to debug the harness),
BENCH_ONLY=1,3 (only these figures), BENCH_COST_TOOLS=biolatency,runqlat (figure 24: only these tools), BENCH_OUT (the Markdown file to write, default docs/benchmarks.md).
Exit status 1 if a figure could not be measured (the file still says which and why).
"""

import atexit
import os
import sys
import time
import traceback
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import figures  # noqa: E402
import lib  # noqa: E402
import notes  # noqa: E402
import report  # noqa: E402
import functions  # noqa: E402
import snoop  # noqa: E402
import netbytes  # noqa: E402
import offcpu  # noqa: E402
import netcost  # noqa: E402
import vfs  # noqa: E402
import argdist  # noqa: E402
import biosnoop  # noqa: E402
import syscall_paths  # noqa: E402
import scrapes  # noqa: E402
import progcost  # noqa: E402


class Config:
    def __init__(self, env):
        quick = env.get("BENCH_QUICK") == "1"
        self.repeat = max(1, int(env.get("BENCH_REPEAT", "5")))
        self.quick = quick
        self.syscalls = 200_000 if quick else 2_000_000
        self.direct_ios = 2_000 if quick else 20_000
        self.mem_ios, self.mem_conns, self.mem_lookups, self.mem_syscalls = 1_000, 200, 200, 200_000
        self.freq = 999
        self.profile_secs = 2 if quick else 5
        self.paths = 500
        self.pingpongs = 20_000 if quick else 200_000
        # Figure 24 (the kernel's per-program clock): workload runs per attach order and the workloads' sizes.
        self.cost_rounds = 2 if quick else 3
        self.cost_ios = 500 if quick else 3_000
        self.cost_pingpongs = 2_000 if quick else 20_000
        self.cost_execs = 50 if quick else 300
        self.cost_syscalls = 20_000 if quick else 200_000
        self.cost_opens = 2_000 if quick else 20_000
        self.cost_conns = 50 if quick else 300
        self.cost_lookups = 50 if quick else 300
        only = env.get("BENCH_ONLY", "")
        self.only = {int(x) for x in only.split(",") if x.strip()} or set(num for num, _, _ in FIGURES)
        self.out = Path(env.get("BENCH_OUT", figures.ROOT / "docs" / "benchmarks.md"))


FIGURES = [
    (1, "start-up", figures.fig_startup),
    (2, "cost per event", figures.fig_event_cost),
    (3, "cost per block I/O", figures.fig_block_io),
    (4, "memory", figures.fig_memory),
    (5, "size", figures.fig_size),
    (6, "profile", figures.fig_profile),
    (7, "cost per context switch", figures.fig_context_switch),
]

# The later figures live in their own modules, each with its TITLE, METHOD and render(): (number, label, module,
# the function that measures it). The event tools (8), the network tools (12, 10), kernel and user functions
# (13), off-CPU tools (11), vfsstat (17), argdist (19), biosnoop (21), funccount's syscall paths (22), the cost of
# a Prometheus scrape (23).
MODULE_FIGURES = [
    (8, "cost per traced exec, open and syscall", snoop, snoop.fig_snoop_cost),
    (12, "cost per TCP connection, MB and drop: tcplife, tcpdrop", netbytes, netbytes.fig_netbytes_cost),
    (10, "cost per TCP connection", netcost, netcost.fig_net_cost),
    (13, "cost per traced call: funclatency, stackcount", functions, functions.fig_functions_cost),
    (11, "cost per context switch: offcputime, wakeuptime", offcpu, offcpu.fig_offcpu_cost),
    (17, "cost per counted VFS call: vfsstat", vfs, vfs.fig_vfs_cost),
    (19, "cost per write: argdist -H", argdist, argdist.fig_argdist_cost),
    (21, "cost per traced block I/O: biosnoop", biosnoop, biosnoop.fig_biosnoop_cost),
    (22, "funccount on syscall tracepoints: link each or raw", syscall_paths, syscall_paths.fig_syscall_paths),
    (23, "cost of a Prometheus scrape", scrapes, scrapes.fig_scrape_cost),
    (24, "cost per event of each tool's BPF programs", progcost, progcost.fig_program_cost),
]
for num, label, module, measure in MODULE_FIGURES:
    FIGURES.append((num, label, measure))
    notes.TITLES[num] = module.TITLE
    notes.METHOD[num] = module.METHOD
    report.RENDER[num] = module.render

def main():
    if os.geteuid() != 0:
        print("bench: run as root (the tools load BPF programs)", file=sys.stderr)
        return 1
    cfg = Config(os.environ)
    lib.install_cleanup()
    atexit.register(lib.cleanup)
    results = {"load_start": os.getloadavg(), "started": time.time()}
    failed = False
    for num, title, fn in FIGURES:
        if num not in cfg.only:
            continue
        print(f"bench: figure {num}, {title} (load {os.getloadavg()[0]:.2f})", flush=True)
        t0 = time.monotonic()
        load = os.getloadavg()[0]
        try:
            res = fn(cfg)
        except Exception as e:  # one broken figure must not lose the others
            traceback.print_exc()
            res = {"error": f"{type(e).__name__}: {e}"}
        res["load"] = (load, os.getloadavg()[0])
        res["seconds"] = time.monotonic() - t0
        if report.has_error(res):
            failed = True
            print(f"bench: figure {num}: {report.first_error(res)}", file=sys.stderr)
        results[num] = res
    results["load_end"] = os.getloadavg()
    results["finished"] = time.time()
    text = report.render(cfg, results)
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    cfg.out.write_text(text)
    print(f"bench: wrote {cfg.out} in {results['finished'] - results['started']:.0f} s")
    print(report.headline(results))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
