# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 10: the cost per TCP connection of the network event tools (tcpconnect first), against a bpftrace
one-liner on the same tracepoint. The workload is a child process making n loopback TCP connections (connect,
accept, close); its CPU time (from wait4) is measured untraced and under each tracer; extra per connection =
(median traced - median untraced) / n. libbpf-tools' tcpconnect cannot load on this host (it needs kprobes or
fentry), so the anchor here is bpftrace.
"""

import sys

import tool_bench
from figures import BT_READY, bt, orders, our, run_traced
from lib import BenchError, median
from snoop import run_cost, render as snoop_render

TITLE = "Cost per TCP connection: the network event tools"

METHOD = """
Each row is a child process making n loopback TCP connections (connect, accept, one byte, close), run untraced
and under each tracer with default options (printing each event to a pipe that the bench reads). *Extra per event*
= (median CPU time of the child traced − untraced) / n. The bpftrace one-liner reads the same tracepoint
(`sock:inet_sock_set_state`, CLOSE → SYN_SENT) and prints PID, comm and port. {cfg.repeat} rounds.
"""


CONNECTS = """
import socket, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(64); port = srv.getsockname()[1]
for _ in range(int(sys.argv[1])):
    c = socket.create_connection(("127.0.0.1", port)); s, _ = srv.accept()
    c.sendall(b"x"); s.recv(1); c.close(); s.close()
"""


def connects(n):
    return run_cost([sys.executable, "-c", CONNECTS, str(n)])


def specs(cfg):
    """(name, n, workload, [(label, contender)]), as snoop.specs."""
    n = 1_000 if cfg.quick else 5_000
    return [
        ("tcpconnect", n, lambda: connects(n),
         [("ours", our("tcpconnect")), ("bpftrace", bt(tool_bench.bpftrace_program("tcpconnect")))]),
        ("tcpaccept", n, lambda: connects(n),
         [("ours", our("tcpaccept", ready="^PID")), ("bpftrace", bt(tool_bench.bpftrace_program("tcpaccept")))]),
    ]


def fig_net_cost(cfg):
    rows = []
    for name, n, workload, contenders in specs(cfg):
        row = {"name": name, "n": n, "cpu": {}, "times": {}, "missing": {}, "ns_per_event": {}}
        rows.append(row)
        active = [("none", None)]
        for k, c in contenders:
            if c.argv is None:
                row["missing"][k] = c.missing
            else:
                active.append((k, c))
        try:
            workload()  # warm-up
            for rep in range(cfg.repeat):
                for k, c in orders(active, rep):
                    (secs, cpu), _ = run_traced(c, workload)
                    row["times"].setdefault(k, []).append(secs)
                    row["cpu"].setdefault(k, []).append(cpu)
        except BenchError as e:
            row["error"] = str(e)
        base = median(row["cpu"].get("none", []))
        for k, _ in active[1:]:
            m = median(row["cpu"].get(k, []))
            if m is not None and base is not None:
                row["ns_per_event"][k] = (m - base) / n * 1e9
    return {"rows": rows}


render = snoop_render
