#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Loads bench/floor.bpf.c's empty programs of the kinds named on the command line, attaches them, prints `ready`
and holds them until SIGINT or SIGTERM: the floor of each mechanism for bench/progcost.py, timed by the kernel like
any tool's programs (the process's program fds).

    floor.py tp_btf raw_tp tracepoint uprobe uretprobe perf_event

The uprobes go on the C library's write(), the tracepoints on every system call's entry, perf_event on a software
CPU clock at 999 Hz on every CPU. It drives Debian's libbpf (libbpf1) through ctypes, so the bench needs no build
of its own beyond clang.
"""

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = ("tp_btf", "raw_tp", "tracepoint", "uprobe", "uretprobe", "perf_event")


class UprobeOpts(ctypes.Structure):
    # struct bpf_uprobe_opts of libbpf 1.x, up to func_name (sz says how much of it this caller knows).
    _fields_ = [("sz", ctypes.c_size_t), ("ref_ctr_offset", ctypes.c_uint64), ("bpf_cookie", ctypes.c_uint64),
                ("retprobe", ctypes.c_bool), ("func_name", ctypes.c_char_p)]


def libbpf():
    lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
    for name, res, args in (
        ("bpf_object__open_file", ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_void_p]),
        ("bpf_object__find_program_by_name", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]),
        ("bpf_program__set_autoload", ctypes.c_int, [ctypes.c_void_p, ctypes.c_bool]),
        ("bpf_object__load", ctypes.c_int, [ctypes.c_void_p]),
        ("bpf_program__attach", ctypes.c_void_p, [ctypes.c_void_p]),
        ("bpf_program__attach_uprobe_opts", ctypes.c_void_p,
         [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(UprobeOpts)]),
        ("bpf_program__attach_perf_event", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def libc_path():
    sys.path.insert(0, str(HERE))
    import tool_bench  # noqa: E402

    return tool_bench.libc_path()


def cpu_clock_fd(cpu):
    """A perf event fd: the software CPU clock of `cpu`, sampling at 999 Hz."""
    attr = (ctypes.c_uint8 * 128)()
    ctypes.c_uint32.from_buffer(attr, 0).value = 1       # PERF_TYPE_SOFTWARE
    ctypes.c_uint32.from_buffer(attr, 4).value = 128     # size
    ctypes.c_uint64.from_buffer(attr, 8).value = 0       # PERF_COUNT_SW_CPU_CLOCK
    ctypes.c_uint64.from_buffer(attr, 16).value = 999    # sample_freq
    ctypes.c_uint64.from_buffer(attr, 40).value = 1 << 10  # freq
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(298 if os.uname().machine == "x86_64" else 241, attr, -1, cpu, -1, 8)
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"perf_event_open on CPU {cpu}")
    return fd


def main(kinds):
    bad = [k for k in kinds if k not in KINDS]
    if not kinds or bad:
        print(f"usage: floor.py KIND... (KIND: {' '.join(KINDS)})", file=sys.stderr)
        return 2
    obj_file = Path(tempfile.mkdtemp(prefix="corebpf-floor-")) / "floor.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", "-c", str(HERE / "floor.bpf.c"), "-o", str(obj_file)],
                   check=True)
    lib = libbpf()
    obj = lib.bpf_object__open_file(str(obj_file).encode(), None)
    if not obj:
        raise OSError(ctypes.get_errno(), "bpf_object__open_file")
    progs = {k: lib.bpf_object__find_program_by_name(obj, f"floor_{k}".encode()) for k in KINDS}
    for k, p in progs.items():
        lib.bpf_program__set_autoload(p, k in kinds)
    if lib.bpf_object__load(obj):
        raise OSError(ctypes.get_errno(), "bpf_object__load")
    links = []
    for k in kinds:
        if k in ("uprobe", "uretprobe"):
            opts = UprobeOpts(sz=ctypes.sizeof(UprobeOpts), retprobe=k == "uretprobe", func_name=b"write")
            link = lib.bpf_program__attach_uprobe_opts(progs[k], -1, libc_path().encode(), 0, ctypes.byref(opts))
            links.append((k, link))
        elif k == "perf_event":
            for cpu in range(os.cpu_count()):
                links.append((k, lib.bpf_program__attach_perf_event(progs[k], cpu_clock_fd(cpu))))
        else:
            links.append((k, lib.bpf_program__attach(progs[k])))
    for k, link in links:
        if not link:
            raise OSError(ctypes.get_errno(), f"attaching the empty {k} program")
    os.unlink(obj_file)
    os.rmdir(obj_file.parent)
    print("ready", flush=True)
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
