# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Renders the benchmark results as docs/benchmarks.md: machine and versions, the targets, one table per figure.

Numbers are medians over the rounds; ratios are ours / theirs (below 1 means ours is faster, smaller or cheaper).
Where a target is missed, the note from `notes.py` for that target says why and what would close it.
"""

import os
import platform
import re
import shutil
import subprocess
import time

import notes
from figures import ROOT
from lib import median, pct, spread, table  # noqa: F401 (pct and table: report.pct, report.table for the figures)


# ---- small formatters ------------------------------------------------------------------------------------

def ms(s):
    return "–" if s is None else f"{s * 1e3:.1f} ms"


def kib(k):
    return "–" if k is None else f"{k / 1024:.1f} MiB"


def size(b):
    if b is None:
        return "–"
    return f"{b / 1024:.0f} KiB" if b < 1024 * 1024 else f"{b / 1048576:.2f} MiB"


def ratio(a, b):
    return "–" if a is None or b in (None, 0) else f"{a / b:.2f}×"


def cell_or_missing(row, side, value):
    return row.get(side + "_missing") or value


def has_error(res):
    return first_error(res) is not None


def first_error(res):
    if "error" in res:
        return res["error"]
    for row in res.get("rows", []):
        if "error" in row:
            return f"{row['name']}: {row['error']}"
    return None


def sh(*argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


# ---- machine ---------------------------------------------------------------------------------------------

def machine(cfg, results):
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    distro = ""
    if os.path.exists("/etc/os-release"):
        m = re.search(r'^PRETTY_NAME="?([^"\n]*)', open("/etc/os-release").read(), re.M)
        distro = m.group(1) if m else ""
    commit = sh("git", "-C", str(ROOT), "rev-parse", "--short", "HEAD")
    if sh("git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes)"
    bt = shutil.which("bpftrace")
    ls, le = results["load_start"], results["load_end"]
    rows = [
        ("date", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(results["started"]))),
        ("CPU", f"{cpu}, {os.cpu_count()} cores"),
        ("memory", f"{mem_kib / 1048576:.0f} GiB"),
        ("kernel", f"{platform.release()} ({distro})" if distro else platform.release()),
        ("load average (1, 5, 15 min)", f"{ls[0]:.2f} {ls[1]:.2f} {ls[2]:.2f} at start, "
                                        f"{le[0]:.2f} {le[1]:.2f} {le[2]:.2f} at end"),
        ("corebpf-tools", f"commit {commit}, {sh('rustc', '--version')}, release profile"),
        ("libbpf-tools", sh("dpkg-query", "-W", "-f=${Version}", "libbpf-tools") or "not installed"),
        ("bpftrace", (sh(bt, "--version") if bt else "") or "not installed"),
        ("rounds", f"{cfg.repeat} per measurement" + (" (BENCH_QUICK: small workloads)" if cfg.quick else "")),
        ("run time", f"{results['finished'] - results['started']:.0f} s"),
    ]
    return table(["", ""], rows)


def load_line(res):
    a, b = res.get("load", (None, None))
    if a is None:
        return ""
    return f"_Load average (1 min) {a:.2f} at the start of this figure, {b:.2f} at its end; " \
           f"measured in {res.get('seconds', 0):.0f} s._"


# ---- figures ---------------------------------------------------------------------------------------------

def startup_ratio(row):
    return (median(row["ours"]) / median(row["theirs"])) if row["ours"] and row["theirs"] else None


def render_startup(res):
    rows = []
    for r in res["rows"]:
        o, t = median(r["ours"]), median(r["theirs"])
        rows.append([
            r["name"], r["anchor"],
            cell_or_missing(r, "ours", ms(o)), cell_or_missing(r, "theirs", ms(t)), ratio(o, t),
            cell_or_missing(r, "ours", ms(min(r["ours"], default=None))),
            cell_or_missing(r, "theirs", ms(min(r["theirs"], default=None))),
            ratio(min(r["ours"], default=None), min(r["theirs"], default=None)),
            cell_or_missing(r, "ours", ms(median(r["ours_exit"]))),
            cell_or_missing(r, "theirs", ms(median(r["theirs_exit"]))),
            f"{pct(spread(r['ours']))} / {pct(spread(r['theirs']))}",
        ])
        if "error" in r:
            rows.append([r["name"], "**failed**", r["error"], "", "", "", "", "", "", "", ""])
    text = table(["tool", "anchor", "ours: exec → ready", "anchor: exec → ready", "ratio", "ours: fastest",
                  "anchor: fastest", "ratio of fastest",
                  "ours: SIGINT → exit", "anchor: SIGINT → exit", "spread ours / anchor"], rows)
    for r in res["rows"]:
        if "theirs_failed" in r:
            text += (f"\n\n{r['anchor']}' {r['name']} does not run on this kernel, so ours is timed alone: "
                     f"{r['theirs_failed']}")
    return text


def event_costs(res):
    """{contender: extra ns per event}."""
    return res.get("ns_per_event", {})


def render_event_cost(res):
    n = res["n"]
    cpu = res.get("cpu", {})
    base = median(cpu.get("none", []))
    rows = []
    names = {"none": "no tracing", "ours": "ours: funccount", "bpftrace": "bpftrace count()"}
    for k in ("none", "ours", "bpftrace"):
        if k in res["missing"]:
            rows.append([names[k], res["missing"][k], "", "", "", "", "", ""])
            continue
        m = median(cpu.get(k, []))
        extra = res["ns_per_event"].get(k)
        counted = res["counted"].get(k)
        rows.append([
            names[k], ms(m), ms(median(res["times"][k])), "–" if m is None else f"{m / n * 1e9:.0f} ns",
            "–" if extra is None else f"**{extra:.0f} ns**",
            "–" if m is None or not base or k == "none" else f"{(m / base - 1) * 100:.1f}%",
            pct(spread(cpu.get(k, []))),
            "–" if counted is None else f"{counted:,}",
        ])
    text = table(["tracing", f"dd CPU time ({n:,} writes)", "dd wall time", "CPU per read+write",
                  "extra per event", "overhead (CPU)", "spread (CPU)", "largest count printed"], rows)
    c = event_costs(res)
    if "ours" in c and "bpftrace" in c:
        text += f"\n\nRatio ours / bpftrace, extra time per event: **{ratio(c['ours'], c['bpftrace'])}**."
    return text


def render_block_io(res):
    n = res["n"]
    base = median(res["times"].get("none", []))
    rows = []
    for k in ("none", "ours", "libbpf-tools"):
        if k in res["missing"]:
            rows.append([k, res["missing"][k], "", "", "", "", ""])
            continue
        m = median(res["times"][k])
        rows.append([
            {"none": "no tracing", "ours": "ours: biolatency", "libbpf-tools": "libbpf-tools biolatency"}[k],
            ms(m), "–" if not m else f"{n / m:,.0f}", "–" if not m else f"{n * 4096 / m / 1e6:.1f} MB/s",
            "–" if not m or not base or k == "none" else f"{(m - base) / n * 1e6:.2f} µs",
            "–" if not m or not base or k == "none" else f"{(m / base - 1) * 100:.1f}%",
            pct(spread(res["times"][k])),
        ])
    text = table(["tracing", f"dd time ({n:,} × 4 KiB O_DIRECT)", "IOPS", "throughput", "extra per I/O",
                  "overhead", "spread"], rows)
    o, t = median(res["times"].get("ours", [])), median(res["times"].get("libbpf-tools", []))
    if o and t and base:
        text += f"\n\nThroughput ratio ours / libbpf-tools: **{t / o:.3f}** (1 = same throughput)."
    return text


def mem_ratio(row, key):
    o, t = median(row["ours"][key]), median(row["theirs"][key])
    return o / t if o is not None and t else None


def render_memory(res):
    rss, maps = [], []
    for r in res["rows"]:
        def c(side, key, fmt):
            return cell_or_missing(r, side, fmt(median(r[side][key])))
        rss.append([r["name"], r["workload"], r["anchor"],
                    c("ours", "hwm", kib), c("theirs", "hwm", kib), ratio(median(r["ours"]["hwm"]),
                                                                     median(r["theirs"]["hwm"])),
                    c("ours", "maxrss", kib), c("theirs", "maxrss", kib),
                    ratio(median(r["ours"]["maxrss"]), median(r["theirs"]["maxrss"]))])
        maps.append([r["name"], r["anchor"],
                     c("ours", "memlock", size), c("theirs", "memlock", size),
                     ratio(median(r["ours"]["memlock"]), median(r["theirs"]["memlock"]))])
        if "error" in r:
            rss.append([r["name"], "**failed**", r["error"], "", "", "", "", "", ""])
    return "\n\n".join([
        table(["tool", "workload", "anchor", "ours: peak RSS while tracing", "anchor", "ratio",
               "ours: peak RSS incl. exit", "anchor", "ratio"], rss),
        table(["tool", "anchor", "ours: BPF map memory", "anchor", "ratio"], maps),
    ])


def render_size(res):
    if "static" not in res:
        return f"Not measured: {res.get('error', 'the static build failed')}."
    n = len(res["tools"])
    total, files, links = res["installed"]
    rows = [[f"the static binary `corebpf-tools` ({n} tools)", size(res["static"]), ""],
             [f"the installed tree (`make install`: the binary, {links} links, {n} man pages, "
              f"{3 * n} completion files)", size(total), ""]]
    theirs = res.get("theirs_installed")
    if theirs:
        kib, count = theirs
        rows.append([f"Debian's libbpf-tools ({count} tools, Installed-Size)", size(kib * 1024),
                     f"{size(kib * 1024 / count)} a tool"])
        rows[1][2] = f"{size(total / n)} a tool"
    text = table(["what", "size", "per tool"], rows)
    if res.get("base"):
        n, added = len(res["tools"]), res["static"] - res["base"]
        text += (f"\n\nThe same binary with no tool in it (the runtime, libbpf, libelf, zlib, blazesym, clap...) is "
                 f"{size(res['base'])}: the {n} tools add {size(added)}, **{size(added / n)} a tool** on average "
                 "(the target is at most 250 KiB a tool).")
    if res["rows"]:
        per = [[r["name"], size(r["bpf"]), size(r["added"]) if r["added"] is not None else "",
                size(r["theirs"]) if r["theirs"] else "not in libbpf-tools"] for r in res["rows"]]
        text += "\n\n" + table(["tool", "its BPF object", "what it adds (size with it − without it)",
                                 "libbpf-tools' binary"], per)
        exact = [r for r in res["rows"] if r["added"] is not None]
        if exact:
            worst = max(exact, key=lambda r: r["added"])
            text += (f"\n\nOf the tools measured one by one, {worst['name']} adds the most, {size(worst['added'])}. "
                     "A tool's addition is its own code, its BPF object and what only it uses (a crate, a table).")
    if res.get("bpftrace"):
        text += f" bpftrace itself is {size(res['bpftrace'])} (without its LLVM and clang libraries)."
    if res.get("error"):
        text += f"\n\nIncomplete: {res['error']}"
    return text


def profile_stats(runs):
    if not runs:
        return None
    return {
        "rate": median([r["samples"] / r["sampled"] for r in runs]),
        "handled": median([r["samples"] / r["expected"] for r in runs if r["expected"]] or [None]),
        "stacks": median([r["stacks"] for r in runs]),
        "samples": median([r["samples"] for r in runs]),
        "exit": median([r["exit"] for r in runs]),
        "cpu_sampling": median([r["cpu_sampling"] for r in runs]),
        "cpu_total": median([r["cpu_total"] for r in runs]),
        "maxrss": median([r["maxrss"] for r in runs]),
        "spread_exit": spread([r["exit"] for r in runs]),
    }


def render_profile(res):
    rows = []
    stats = {}
    names = {"ours": "ours: profile", "bpftrace": "bpftrace `profile:hz` `@[ustack]`",
             "bpftrace-cached": "the same, `BPFTRACE_CACHE_USER_SYMBOLS=1`"}
    for k in ("ours", "bpftrace", "bpftrace-cached"):
        if k in res["missing"]:
            rows.append([names[k], res["missing"][k], "", "", "", "", "", "", "", ""])
            continue
        s = profile_stats(res["runs"].get(k))
        stats[k] = s
        if not s:
            rows.append([names[k], "no runs", "", "", "", "", "", "", "", ""])
            continue
        rows.append([
            names[k], f"{s['rate']:.0f} /s", pct(None if s["handled"] is None else s["handled"] * 100),
            f"{s['samples']:.0f}", f"{s['stacks']:.0f}",
            ms(s["cpu_sampling"]), ms(s["cpu_total"]),
            ms(s["exit"]), kib(s["maxrss"]), pct(s["spread_exit"]),
        ])
    text = table(["profiler", f"samples handled per second (asked: {res['freq']} Hz)",
                  "of the target's on-CPU ticks", "samples", "stacks in the report", "CPU used until SIGINT",
                  "CPU used in all",
                  "SIGINT → report printed (symbolization)", "peak RSS", "spread of exit time"], rows)
    o, b, bc = stats.get("ours"), stats.get("bpftrace"), stats.get("bpftrace-cached")
    if o and b:
        text += (f"\n\nRatios ours / bpftrace: samples per second **{ratio(o['rate'], b['rate'])}**, "
                 f"time to symbolize and print **{ratio(o['exit'], b['exit'])}** "
                 f"({ratio(o['exit'], bc['exit']) if bc else '–'} against its cached mode), "
                 f"peak RSS **{ratio(o['maxrss'], b['maxrss'])}**.")
    return text


def render_context_switch(res):
    n = res["n"]
    base = median(res["cpu"].get("none", []))
    rows = []
    for k in ("none", "ours", "libbpf-tools"):
        if k in res["missing"]:
            rows.append([k, res["missing"][k], "", "", "", ""])
            continue
        m = median(res["cpu"][k])
        extra = res["ns_per_switch"].get(k)
        rows.append([
            {"none": "no tracing", "ours": "ours: runqlat", "libbpf-tools": "libbpf-tools runqlat"}[k],
            ms(m), ms(median(res["times"][k])), f"{median(res['switches'][k]) or 0:,.0f}",
            "–" if extra is None else f"**{extra:.0f} ns**", pct(spread(res["cpu"][k])),
        ])
    text = table(["tracing", f"CPU time ({n:,} round trips)", "wall time", "context switches",
                  "extra per switch", "spread (CPU)"], rows)
    c = res.get("ns_per_switch", {})
    if "ours" in c and "libbpf-tools" in c:
        text += f"\n\nRatio ours / libbpf-tools, extra CPU per context switch: **{ratio(c['ours'], c['libbpf-tools'])}**."
    return text


RENDER = {1: render_startup, 2: render_event_cost, 3: render_block_io, 4: render_memory, 5: render_size,
          6: render_profile, 7: render_context_switch}


# ---- targets ---------------------------------------------------------------------------------------------

def targets(results):
    """[(target, measured, verdict, key)] for the three targets of issue 9."""
    out = []
    if 1 in results and "rows" in results[1]:
        parts, worst = [], None
        for r in results[1]["rows"]:
            x = startup_ratio(r)
            if x is not None:
                parts.append(f"{r['name'].split()[0]} {x:.2f}×")
                if r["anchor"] == "libbpf-tools":
                    worst = x if worst is None else max(worst, x)
        verdict = "–" if worst is None else ("met" if worst <= 1.0 else "**missed**")
        out.append(("start-up no slower than libbpf-tools (ours / theirs ≤ 1)", ", ".join(parts) or "–",
                    verdict, "startup"))
    if 2 in results:
        c = event_costs(results[2])
        if "ours" in c and "bpftrace" in c:
            x = c["ours"] / c["bpftrace"] if c["bpftrace"] > 0 else None
            measured = f"{c['ours']:.0f} ns vs {c['bpftrace']:.0f} ns per event" + (
                f" ({x:.2f}×)" if x is not None else "")
            verdict = "met" if c["ours"] <= c["bpftrace"] else "**missed**"
        else:
            measured, verdict = "–", "–"
        out.append(("cost per event no higher than bpftrace's", measured, verdict, "event"))
    if 4 in results and "rows" in results[4]:
        parts, worst = [], None
        for r in results[4]["rows"]:
            x = mem_ratio(r, "maxrss")
            if x is not None:
                parts.append(f"{r['name'].split()[0]} {x:.2f}×")
                if r["anchor"] == "libbpf-tools":
                    worst = x if worst is None else max(worst, x)
        verdict = "–" if worst is None else ("met" if worst <= 2.0 else "**missed**")
        out.append(("peak RSS within 2× of libbpf-tools'", ", ".join(parts) or "–", verdict, "rss"))
    if 24 in results and "rows" in results[24]:
        import progcost

        met, missed = progcost.targets(results[24])
        parts = [f"{name} {x:.2f}×" for name, x in sorted(met + missed)]
        verdict = "–" if not parts else ("met" if not missed else "**missed**")
        out.append(("BPF program time per event at or below the anchor's (kernel's clock, figure 24)",
                    ", ".join(parts) or "–", verdict, "progcost"))
    return out


def headline(results):
    return "; ".join(f"{t}: {m} ({v.strip('*')})" for t, m, v, _ in targets(results))


# ---- the document ----------------------------------------------------------------------------------------

def render(cfg, results):
    parts = [notes.INTRO.strip(), "## Machine and versions", machine(cfg, results)]
    tg = targets(results)
    if tg:
        parts += ["## Targets (reported, not asserted)",
                  table(["target", "measured (ratio ours / anchor)", "verdict"], [t[:3] for t in tg])]
        for _, _, verdict, key in tg:
            if "missed" in verdict:
                parts.append(notes.MISSED[key].strip())
    for num, title in notes.TITLES.items():
        if num not in results:
            continue
        res = results[num]
        parts.append(f"## {num}. {title}")
        parts.append(notes.METHOD[num].strip().format(cfg=cfg))
        if "error" in res and "rows" not in res and "times" not in res and "runs" not in res:
            parts.append(f"**Not measured:** {res['error']}")
        else:
            try:
                parts.append(RENDER[num](res))
            except Exception as e:  # a half-filled result still leaves the rest of the page
                parts.append(f"**Could not render:** {type(e).__name__}: {e}")
            if "error" in res:
                parts.append(f"**Stopped early:** {res['error']}")
        parts.append(load_line(res))
    parts.append(notes.FINDINGS.strip())
    parts.append(notes.FOOTER.strip())
    return "\n\n".join(p for p in parts if p) + "\n"
