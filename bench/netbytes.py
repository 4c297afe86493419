# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 12: the cost of tcplife and tcpdrop per traced network event, against bpftrace one-liners on the same
tracepoints: tcplife per loopback TCP connection and per MB sent over one connection (tcplife's programs run
only on state changes, so a bulk transfer should cost it nothing), tcptop per MB (its programs run on every
sendmsg/recvmsg), tcpdrop per dropped packet (a SYN to a closed
port, each with its kernel stack). The workload is a child process; its CPU time (from wait4) is measured
untraced and under each tracer; extra per event = (median traced - median untraced) / n. libbpf-tools' tcplife
runs here but tcpdrop has no libbpf-tools port, so the anchor of all three rows is bpftrace.
"""

import sys

import tool_bench
from figures import BT_READY, bt, orders, our, run_traced
from lib import BenchError, median
from snoop import run_cost, render as snoop_render

TITLE = "Cost per TCP connection, per MB and per drop: tcplife, tcptop and tcpdrop"

METHOD = """
Each row is a child process run untraced and under each tracer with default options (printing each event to a
pipe that the bench reads): n loopback TCP connections (connect, accept, one byte, close); one connection
carrying n MB; n SYNs to a closed local port (each dropped as NO_SOCKET). *Extra per event* = (median CPU time of
the child traced − untraced) / n. The bpftrace one-liners read the same tracepoints: `sock:inet_sock_set_state`
(birth time per socket, then at close PID, comm, ports, bytes_acked/bytes_received and the span),
`sock:sock_send_length`/`sock_recv_length` (bytes summed per PID, comm and ports, printed every second, as tcptop) and
`skb:kfree_skb` (reason > NOT_SPECIFIED, printed with the kernel stack). {cfg.repeat} rounds.
"""

BT_TCPLIFE = BT_READY + (
    "tracepoint:sock:inet_sock_set_state { if (args->newstate < 4) { @birth[args->skaddr] = nsecs; } "
    "if (args->newstate == 7 && @birth[args->skaddr]) { $tp = (struct tcp_sock *)args->skaddr; "
    "printf(\"%d %s %d %d %d %d %d\\n\", pid, comm, args->sport, args->dport, $tp->bytes_acked, "
    "$tp->bytes_received, (nsecs - @birth[args->skaddr]) / 1000); delete(@birth[args->skaddr]); } }")

CONNECTS = """
import socket, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(64); port = srv.getsockname()[1]
for _ in range(int(sys.argv[1])):
    c = socket.create_connection(("127.0.0.1", port)); s, _ = srv.accept()
    c.sendall(b"x"); s.recv(1); c.close(); s.close()
"""

BULK = """
import socket, sys, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1); port = srv.getsockname()[1]
mb = int(sys.argv[1])
def sink():
    s, _ = srv.accept()
    while s.recv(1 << 20):
        pass
    s.close()
t = threading.Thread(target=sink); t.start()
c = socket.create_connection(("127.0.0.1", port)); block = b"x" * (1 << 20)
for _ in range(mb):
    c.sendall(block)
c.close(); t.join()
"""

SYNS = """
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
for _ in range(int(sys.argv[1])):
    c = socket.socket()
    try:
        c.connect(("127.0.0.1", port))
    except ConnectionRefusedError:
        pass
    c.close()
"""


def child(script, n):
    return lambda: run_cost([sys.executable, "-c", script, str(n)])


def specs(cfg):
    """(name, n, workload, [(label, contender)]), as snoop.specs."""
    conns = 1_000 if cfg.quick else 5_000
    mb = 256 if cfg.quick else 1_024
    drops = 1_000 if cfg.quick else 5_000
    life = [("ours", our("tcplife", ready="^PID")), ("bpftrace", bt(BT_TCPLIFE))]
    return [
        ("tcplife, per connection", conns, child(CONNECTS, conns), life),
        ("tcplife, per MB over one connection", mb, child(BULK, mb), life),
        ("tcptop, per MB over one connection", mb, child(BULK, mb),
         [("ours", our("tcptop", ["-C"])), ("bpftrace", bt(tool_bench.bpftrace_program("tcptop")))]),
        ("tcpdrop, per dropped SYN", drops, child(SYNS, drops),
         [("ours", our("tcpdrop", ready="^TIME")), ("bpftrace", bt(tool_bench.bpftrace_program("tcpdrop")))]),
    ]


def fig_netbytes_cost(cfg):
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
