# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 22: funccount on syscall tracepoints, a link per call against the shared raw tracepoint, as the share
of counted calls grows: the measurement behind funccount's RAW_SYSCALL_SHARE (tools/funccount/src/object.rs).

A C program cycles through eight cheap system calls n times; funccount counts the entries of the first k of them
(k = 1, 2, 4, 8) through each path, forced with COREBPF_ATTACH, and through the path it picks by itself, beside a
bpftrace one-liner counting the same tracepoints. Measured as figure 8 is (snoop.measure), per system call made.
"""

import subprocess

from figures import BT_READY, BUILD_DIR, bt, our
from lib import BenchError
import report
import snoop

TITLE = "funccount on syscall tracepoints: a link per call or one raw tracepoint"

CALLS = ["getppid", "getuid", "getgid", "geteuid", "getegid", "getpgid", "getsid", "umask"]

METHOD = """
A C program (`target/bench/mix.c`) makes eight system calls (getppid, getuid, getgid, geteuid, getegid, getpgid,
getsid, umask) in a loop, n rounds. funccount counts the
entries of the first k of them (`-r 't:syscalls:sys_enter_(getppid|...)'`) through a tracepoint link per call
(`COREBPF_ATTACH=tracepoint`), through the raw sys_enter tracepoint shared by all calls and filtered in BPF
(`COREBPF_ATTACH=raw_tp`), and with no choice forced (the path funccount picks: the raw tracepoint only when a
direction's matches are at least half of the system call table). bpftrace counts the same tracepoints with
`count()`. *Extra per call* = (median CPU time traced − untraced) / (8 n): the cost spread over every system call
the workload makes, counted or not. {cfg.repeat} rounds.
"""

MIX_C = r"""
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
    unsigned long n = strtoul(argv[1], 0, 10);
    for (unsigned long i = 0; i < n; i++) {
        syscall(SYS_getppid); syscall(SYS_getuid); syscall(SYS_getgid); syscall(SYS_geteuid);
        syscall(SYS_getegid); syscall(SYS_getpgid, 0); syscall(SYS_getsid, 0); syscall(SYS_umask, 022);
    }
    return 0;
}
"""

SHARES = [1, 2, 4, 8]
PATHS = [("link each", "tracepoint"), ("raw tracepoint", "raw_tp"), ("funccount's choice", None)]


def mix_binary():
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    src, exe = BUILD_DIR / "mix.c", BUILD_DIR / "mix"
    src.write_text(MIX_C)
    out = subprocess.run(["cc", "-O2", "-o", str(exe), str(src)], capture_output=True, text=True)
    if out.returncode != 0:
        raise BenchError(f"building {src} failed: {out.stderr}")
    return str(exe)


def specs(cfg):
    exe = mix_binary()
    rounds = 20_000 if cfg.quick else 200_000
    workload = lambda: snoop.run_cost([exe, str(rounds)])  # noqa: E731
    out = []
    for k in SHARES:
        names = "|".join(CALLS[:k])
        contenders = []
        for label, mech in PATHS:
            c = our("funccount", ["-r", f"t:syscalls:sys_enter_({names})$"])
            if mech is not None:
                c.env = {"COREBPF_ATTACH": mech}
            contenders.append((label, c))
        probes = ", ".join(f"tracepoint:syscalls:sys_enter_{n}" for n in CALLS[:k])
        contenders.append(("bpftrace", bt(BT_READY + f"{probes} {{ @ = count(); }}")))
        out.append((f"{k} of 8 calls counted", 8 * rounds, workload, contenders))
    return out


def fig_syscall_paths(cfg):
    try:
        return snoop.measure(cfg, specs(cfg))
    except BenchError as e:
        return {"rows": [], "error": str(e)}


def render(res):
    lines = []
    for row in res.get("rows", []):
        extra = row["ns_per_event"]
        cells = [row["name"]]
        for label in [p for p, _ in PATHS] + ["bpftrace"]:
            if label in row["missing"]:
                cells.append(row["missing"][label])
            elif label in extra:
                cells.append(f"{extra[label]:.0f} ns")
            else:
                cells.append("–")
        lines.append(cells)
    text = report.table(["counted", *[p for p, _ in PATHS], "bpftrace count()"], lines)
    errors = [f"{row['name']}: {row['error']}" for row in res.get("rows", []) if "error" in row]
    if res.get("error"):
        errors.append(res["error"])
    if errors:
        text += "\n\n**Errors:** " + "; ".join(errors)
    return text
