#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 OR MIT
"""The cost of a Prometheus scrape of `biolatency -DF --prometheus`: wall time per GET /metrics (one map read,
the exposition encoded, the response written) and the tool's CPU time per scrape, over N scrapes, while
O_DIRECT writes keep the histograms busy. Run as root from the repository: python3 bench/scrape.py [N]."""
import os, socket, subprocess, sys, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
BIN = os.environ.get("BIOLATENCY", "target/release/biolatency")
ADDR = ("127.0.0.1", 9437)

def get():
    s = socket.create_connection(ADDR)
    s.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return data

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

tool = subprocess.Popen([BIN, "-DF", "--prometheus", f"{ADDR[0]}:{ADDR[1]}"], stdout=subprocess.PIPE)
tool.stdout.readline()
dd = subprocess.Popen(["dd", "if=/dev/zero", "of=/var/tmp/corebpf-scrape.bin", "bs=4k", "count=2000",
                       "oflag=direct", "status=none"])
dd.wait()
body = get()
c0, t0 = cpu(tool.pid), time.perf_counter()
for _ in range(N):
    get()
wall, used = (time.perf_counter() - t0) / N, (cpu(tool.pid) - c0) / N
tool.terminate(); tool.wait()
os.unlink("/var/tmp/corebpf-scrape.bin")
print(f"scrape: {wall * 1e3:.2f} ms wall, {used * 1e3:.2f} ms tool CPU per scrape; "
      f"{len(body)} bytes, {body.count(b'_count{')} histograms")
