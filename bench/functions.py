# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 13: the cost per traced call of funclatency and stackcount on a tight user function, against
libbpf-tools' funclatency and bpftrace one-liners doing the same work (an entry and a return probe timing each
call into a histogram; a stack per call counted in a map). Measured as figure 8 is (snoop.measure): the
workload's CPU time traced and untraced, extra per call = (median traced - median untraced) / n.
"""

import subprocess

from figures import BT_READY, BUILD_DIR, bt, c_tool, our
from lib import BenchError
import snoop

TITLE = "Cost per traced call: funclatency and stackcount on a user function"

METHOD = """
A C program (`target/bench/calls.c`, -O0 so the function sets up its frame) calls `tight()` n times, then exits;
it is run untraced and under each tracer attached to `tight` in that binary (uprobes: entry and return for the
latency tools, entry for stackcount). The workload's CPU time includes the probes' cost, which the kernel charges
to the traced thread. *Extra per call* = (median CPU time traced − untraced) / n. The anchors are libbpf-tools'
funclatency (uprobe + uretprobe, a log2 histogram) and the bpftrace one-liners `uprobe:BIN:tight {{ @s[tid] =
nsecs; }} uretprobe:BIN:tight /@s[tid]/ {{ @ = hist(nsecs - @s[tid]); delete(@s[tid]); }}` and `uprobe:BIN:tight
{{ @[ustack] = count(); }}`. {cfg.repeat} rounds.
"""

CALLS_C = r"""
#include <stdlib.h>
volatile unsigned long sink;
void tight(unsigned long i) { sink += i; }
int main(int argc, char **argv) {
    unsigned long n = strtoul(argv[1], 0, 10);
    for (unsigned long i = 0; i < n; i++) tight(i);
    return 0;
}
"""


def calls_binary():
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    src, exe = BUILD_DIR / "calls.c", BUILD_DIR / "calls"
    src.write_text(CALLS_C)
    out = subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-o", str(exe), str(src)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise BenchError(f"building {src} failed: {out.stderr}")
    return str(exe)


def specs(cfg):
    exe = calls_binary()
    n = 20_000 if cfg.quick else 200_000
    func = f"{exe}:tight"
    bt_latency = (BT_READY + f"uprobe:{exe}:tight {{ @s[tid] = nsecs; }} "
                  f"uretprobe:{exe}:tight /@s[tid]/ {{ @ = hist(nsecs - @s[tid]); delete(@s[tid]); }}")
    bt_stacks = BT_READY + f"uprobe:{exe}:tight {{ @[ustack] = count(); }}"
    workload = lambda: snoop.run_cost([exe, str(n)])  # noqa: E731
    return [
        ("funclatency", n, workload,
         [("ours", our("funclatency", [func])), ("libbpf-tools", c_tool("funclatency", [func], ready="^Tracing")),
          ("bpftrace", bt(bt_latency))]),
        ("stackcount", n, workload,
         [("ours", our("stackcount", ["-U", func])), ("bpftrace", bt(bt_stacks))]),
    ]


def fig_functions_cost(cfg):
    try:
        return snoop.measure(cfg, specs(cfg))
    except BenchError as e:
        return {"rows": [], "error": str(e)}


def render(res):
    text = snoop.render(res)
    if res.get("error"):
        text += f"\n\n**Error:** {res['error']}"
    return text
