# SPDX-License-Identifier: Apache-2.0 OR MIT
"""The prose of docs/benchmarks.md: how each figure is measured, and why a missed target is missed.

Kept apart from the numbers (report.py) so the method can be read and reviewed as text. METHOD strings are
formatted with the run's settings (`cfg`). MISSED[key] is printed only when that target is missed in a run.
"""

INTRO = """
# Benchmarks

corebpf-tools side by side with what a user would otherwise run: Debian's **libbpf-tools** (the same tools in C
over libbpf) and **bpftrace** one-liners. This file is written by `make bench` (`bench/run.sh`, which installs the
anchors and builds release binaries, then `bench/bench.py`); do not edit it by hand, re-run it.

Every number is the median of several rounds; in each round the contenders run one after another in an order that
rotates from round to round, so a drift of the machine falls on all of them; every measured workload starts 0.3 s
after its tracer is ready (0.3 s after the previous step when nothing traces). *Spread* is (max − min) / median over
the rounds: a large spread means a noisy machine, so read the load average below before the numbers. Ratios are
**ours / anchor**: below 1 means ours is faster, cheaper or smaller.
"""

TITLES = {
    1: "Start-up: exec to probes attached",
    2: "Cost per event: a counted tracepoint",
    3: "Cost per block I/O: O_DIRECT writes under biolatency",
    4: "Memory: peak RSS and BPF map memory",
    5: "Size of the binaries",
    6: "profile: samples handled and symbolization at exit",
    7: "Cost per context switch: a pipe ping-pong under runqlat",
}

METHOD = {
    1: """
Time from just before `exec` to the line each tool prints once its probes are attached: BCC's banner
(`Tracing block device I/O...`) or, for tcplife and gethostlatency, the column header (both ours and libbpf-tools
print it after attaching). Ours write to a pipe (they flush each line). libbpf-tools' stdio output is fully buffered
on a pipe, so they write to a pty instead, which makes it line-buffered without an extra exec such as `stdbuf`.
bpftrace prints `Attaching N probes...` *before* it attaches, so its one-liner carries
`BEGIN {{ printf("ready\\n"); }}`: bpftrace prints BEGIN's output from its event loop, which starts once every
probe is attached (`strace` shows the `ready` write after the tracepoint is enabled). Its anchor here is
`bpftrace -e 'tracepoint:syscalls:sys_enter_write {{ @ = count(); }}'`. One unmeasured warm-up run of each comes
first. *Fastest* is the minimum over the rounds, the figure least disturbed by other work on a busy machine.
*SIGINT → exit* is the time to detach, print the final report and exit (sent 100 ms after readiness).

Where the time goes (`perf record` over repeated starts): most of a start-up is libbpf's, inside
`bpf_object__load`: parsing the kernel's BTF (`/sys/kernel/btf/vmlinux`, 5.5 MB here) and, for CO-RE, searching all
of it once per kernel type a loaded program relocates against (about 1.5 ms a type). Ours keep both down: libbpf
is compiled at `-O3` in the shipped binary; types whose layout is ABI (syscall tracepoint contexts, `open_how`,
`pt_regs`) are declared without CO-RE (`bpf/include/syscall_tp.bpf.h`); a tool whose loaded programs then relocate
nothing and need no kernel BTF to attach (opensnoop without `-F`, gethostlatency) does not read the kernel BTF at
all (`common::attach::loader::open_skeleton_core_free`); a `-F`-only dentry walk sits in programs loaded only with
`-F`. `-vv` lists each "CO-RE relocating" type.
{cfg.repeat} rounds.
""",
    2: """
`dd if=/dev/zero of=/dev/null bs=1 count={cfg.syscalls}` makes {cfg.syscalls:,} one-byte read+write pairs, so as
many `sys_enter_write` events, with no tracing, with `funccount t:syscalls:sys_enter_write` running (ours) and with
the bpftrace one-liner of figure 1 (`@ = count()`), all system-wide with no filter, as in the measurement that
came with BPF tracing in Linux 4.1 (a map increment then cost about 5% of this loop). The measure is dd's own CPU
time (user+system, from `wait4`): the programs run in dd's context, so their cost lands there, while time dd spends
waiting for a CPU taken by other work does not. *Extra per event* = (median traced − median untraced) / number of
writes. *Largest count printed* checks that the tracer saw the writes. {cfg.repeat} rounds.
""",
    3: """
`dd if=/dev/zero of=FILE bs=4096 count={cfg.direct_ios} oflag=direct conv=notrunc` to a preallocated file on `/`
(virtio disk here), so every write is one block request through `block_rq_issue` and `block_rq_complete`; no
tracing, our `biolatency`, libbpf-tools' `biolatency` (both default options). *Extra per I/O* = (median traced −
median untraced) / I/Os. Disk latency dominates and varies, so differences below the spread are noise.
{cfg.repeat} rounds.
""",
    4: """
Each tool runs over a fixed workload (the second column); then, while it still runs, *peak RSS while tracing* is
`VmHWM` from `/proc/PID/status` and *BPF map memory* is the sum of `memlock` over the map file descriptors in
`/proc/PID/fdinfo`; *peak RSS incl. exit* is the last `VmHWM` read while the tool detaches, prints its final
report and exits after SIGINT (polled every 2 ms). `ru_maxrss` from `wait4` is not used: it keeps the high-water
mark of the forked Python parent from before `exec`. profile's memory is in figure 6. {cfg.repeat} rounds.
""",
    5: """
Every tool ships in one static binary, `corebpf-tools` (`make static`: the `dist` profile, fat LTO, one codegen
unit, `panic = "abort"`, stripped; libbpf, libelf, zlib and glibc linked in), installed with a symbolic link per
tool. *What the tools add* is the binary's size minus the size of the same build with every tool left out of the
multicall's list (`COREBPF_TOOLSET_WITHOUT=a,b,... make static`; the linker then drops their code and BPF objects);
for a sample of tools (`BENCH_SIZE_TOOLS`, default biolatency and argdist), each one's addition exactly:
the size minus that of the build without it. One fat-LTO build takes minutes, so every tool one by one would take
an hour; every tool's BPF object size is listed.
Debian's libbpf-tools links libbpf statically and libelf and zlib dynamically.
""",
    6: """
A generated C program (`target/bench/many_stacks.c`, built `-O0 -fno-omit-frame-pointer` so every frame can be
walked) spins through {cfg.paths} distinct call paths (`main → mid_i → leaf_i`, picked pseudo-randomly) on one
CPU. Each profiler samples that PID at {cfg.freq} Hz for {cfg.profile_secs} s and is then stopped with SIGINT. Ours
is `profile -F {cfg.freq} -p PID`; bpftrace's is `profile:hz:{cfg.freq} /pid == PID/ {{ @[ustack] = count(); }}`,
run twice: as it comes (with ASLR on it re-reads the target's symbols for every stack it prints) and with
`BPFTRACE_CACHE_USER_SYMBOLS=1`. *Samples handled per second* = samples in the printed report / seconds from
readiness to SIGINT; *of the target's on-CPU ticks* divides the samples by what the target could have given (its
CPU time in that window × the frequency), so 100% means no sample was lost. *Stacks in the report* counts its
entries (bpftrace keys stacks by address, so one path can appear several times). *CPU used* is the profiler's own
user+system time (10 ms resolution) until SIGINT (bpftrace's includes compiling its program) and in all.
*SIGINT → report printed* is the time to read the stack map, symbolize every stack and print it; *peak RSS* is
`VmHWM` polled until exit. {cfg.repeat} rounds.
""",
    7: """
`perf bench sched pipe -l {cfg.pingpongs}`: two processes pass a token through two pipes, both pinned to CPU 0
(`taskset -c 0`), so every context switch on that CPU is between them and a tracer's programs (sched_switch and
sched_wakeup, which run in the switching task's context) are charged to their CPU time. Traced by ours
(`runqlat`) and libbpf-tools' `runqlat` (both default options: one histogram), or by nothing. *Context switches* is
the change of `ctxt` in `/proc/stat` over the run (the whole machine's, so slightly more than the workload's);
*extra per switch* = (median CPU time traced − untraced) / median switches. {cfg.repeat} rounds.
""",
}

MISSED = {
    "progcost": """
**Where a tool's programs cost more per event than its anchor's, why.** Figure 24 lists each program's time per
run. bitesize names each request's submitter (noted at block_io_start, looked up at issue, forgotten at
completion: three programs where libbpf-tools' one names whoever issues the request, often another process on a
busy disk); biolatency, hardirqs and softirqs keep an exact count and sum beside the log2 slots (two more atomic
adds per event, for `-e`, JSON and the Prometheus `_count` and `_sum`). offwaketime and fsslower against their
bpftrace programs, and runqslower, are not analysed yet. A ratio within the spread of its row decides nothing
(sigsnoop's and tcprtt's spreads are above 80%).
""",
    "startup": """
**Where start-up is slower than libbpf-tools, why.** Both spend most of it in libbpf's `bpf_object__load`
(see the method above): the kernel BTF's parse and one search of it per relocated type. A tool slower than its
anchor relocates more types than the anchor (CO-RE flavours such as `sock___old` cost a search each), or pays a
failed trial load for a mechanism the kernel refuses before the one it takes (`-v` names it). On a 2-core machine
a millisecond tips a ratio near 1, so check the spread first.
""",
    "event": """
**Where our cost per event is higher than bpftrace's, why.** Most of either figure is the kernel's, not the
program's: enabling any syscall tracepoint sends every system call of every task through the slow syscall-entry
path, and each event then runs the program through the tracepoint's perf-event glue. The programs themselves are
of the same size (`bpftool prog dump xlated`): ours calls `bpf_get_attach_cookie` for the match's index, looks up
a per-CPU array (inlined by the verifier) and adds with an atomic `lock add` (needed where a preemptible uprobe
program can interrupt another on the same CPU); bpftrace's `@ = count()` looks up its one-entry per-CPU array
(inlined too), adds one to a copy and writes it back through a `bpf_map_update_elem` call. So a gap of a few
nanoseconds is within what the spread column shows; a larger one points at the attachment, not the program.
**What would close it:** a plain add for the program kinds that cannot be preempted (tracepoints, kprobes, perf
events), keeping the atomic one for uprobes; and a constant index instead of the cookie when the pattern matched
one probe.
""",
    "rss": """
**Where peak RSS is above 2× libbpf-tools', why.** A resident page of ours is one of: the binary and its libraries
as they are touched, the parsed kernel BTF while we decide features (freed before tracing), the ring buffer's pages
once written (counted in the RSS of the process that maps them) and, for tools that print stacks, blazesym's
symbol tables. **What would close it:** drop the parsed BTF before the ring buffer fills, size ring buffers by the
event rate rather than a fixed maximum, and symbolize in batches with a bounded cache.
""",
}

FINDINGS = """
## Why the numbers look the way they do

Checked by hand on this machine (`bpftool prog dump xlated`, `/proc/PID/fdinfo`, `strace`); true whatever the load.

- **Size.** Each of ours carries Rust's standard library, clap's parser and help text, serde_json, the `common`
  crate and a statically linked libbpf (libbpf-tools link libbpf statically too), so a binary is several times a
  libbpf-tools one; profile adds blazesym. What would shrink the installed set: one multi-call binary
  with a link per tool (busybox style), so that all of this is paid once instead of once per tool.
- **BPF map memory** is `memlock` of maps, and both sides preallocate their hash maps at `max_entries`. Our
  biolatency's `hists` entries keep 64-bit slots plus an exact count and sum per histogram (for `-e` and JSON),
  about twice the bytes of libbpf-tools' 32-bit slots. Our tcplife and gethostlatency send events through a BPF
  ring buffer, which is a map and is counted; libbpf-tools use perf buffers (one mmapped perf event per CPU),
  which are not maps and are not in their figure. funccount's per-CPU count array is as small as bpftrace's
  one-entry array; most of its figure is the two maps of libbpf's USDT support (`__bpf_usdt_spec`,
  `__bpf_usdt_ip_to_spec_id`, about 160 KiB), created even when no USDT probe is used.
- **gethostlatency, SIGINT → exit:** detaching a uprobe waits for the kernel (about 100 ms per link on this VM),
  and ours attaches 10 uprobes (every resolver function the C library has, on entry and return) to libbpf-tools'
  6, so it takes longer to leave.
- **bpftrace start-up** includes compiling the one-liner with LLVM, and most of its resident size is the pages of
  libLLVM and libclang it touches (about 55 and 8 MiB of its RSS here); its symbolization at exit is slow by
  default because with ASLR on it builds a new symbol resolver for every stack it prints
  (`BPFTRACE_CACHE_USER_SYMBOLS=1` turns that off; figure 6 shows both).
"""

FOOTER = """
## Reproducing

As root on Debian/Ubuntu with Rust installed: `make bench` (about 10 minutes). `BENCH_REPEAT=N` sets the rounds,
`BENCH_ONLY=1,4` runs only some figures, `BENCH_QUICK=1` shrinks the workloads to check the harness; the output
goes to `BENCH_OUT` (default `docs/benchmarks.md`). Numbers from a busy machine (load average well above 0) are
noisy: compare ratios measured in the same run, not absolute times across runs.
"""
