# SPDX-License-Identifier: Apache-2.0 OR MIT
# The Python workload of the runtime tools' tests (runtimes.rs): prints "ready", waits for a line on stdin, then
# calls gc.collect() GCS times with automatic collection off, before the i-th call leaving i unreachable
# self-referencing lists, prints what each call returned, prints "done" and leaves with os._exit (interpreter
# shutdown would collect again).
import gc
import os
import sys

gcs = int(sys.argv[1])
gc.disable()
print("ready", flush=True)
sys.stdin.readline()
found = []
for i in range(gcs):
    for _ in range(i):
        cycle = []
        cycle.append(cycle)
    cycle = None
    found.append(gc.collect())
for n in found:
    print(n)
print("done", flush=True)
os._exit(0)
