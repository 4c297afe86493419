#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# CI's phase clock (.ci/run uses it):
#   ci-phases.sh run FILE NAME CMD...   runs CMD, appends "NAME SECONDS EXIT" to FILE, exits as CMD did
#   ci-phases.sh report FILE            the table of phases with their minutes, the budget, and the marginal
#                                       cost of one more tool with the projection to 80 tools
#   ci-phases.sh strays                 every process still running that CI started (it carries CI's token,
#                                       COREBPF_CI_RUN, in its environment) is listed and killed; exits 1 if any
# The per-tool figures come from the phases themselves: the host tests' wall time over the number of tools (every
# tool brings its own test binary and its cases in the shared ones), and the guests' wall time over the number of
# tools (`make vmtest` writes it to $VM_CACHE/logs/latest/guest-wall; the scenarios' own seconds per tool and
# kernel are in tool-seconds beside it). Builds, lint and the soak grow more slowly than that and are taken as
# fixed, so the projection to 80 tools is total + (80 - tools) x (host + guests per tool).
# The budget is enforced on a machine CI has to itself. CI's machines may be busy with other work; each phase also
# records the CPU time CI's own processes used and the machine's busy CPU time (/proc/stat, steal included), so the
# report can say how much of the machine others took. When others took more than a fifth of it, a run over the
# budget is reported but not failed (its minutes measure the neighbours, not CI); past hard_min it always fails,
# before CI's own 90-minute limit would cut it off without a report.
set -uo pipefail
budget_min=45
hard_min=80
busy_share_limit=0.2

# The machine's busy and total CPU time so far, in clock ticks: "BUSY TOTAL" (steal counts as busy: another
# guest had the CPU).
machine_ticks() {
    awk '$1 == "cpu" { busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, busy + $5 + $6 }' /proc/stat
}

case "${1:-}" in
run)
    file=$2 name=$3
    shift 3
    start=$(date +%s)
    read -r busy0 total0 <<< "$(machine_ticks)"
    echo "=== ci: $name: $* ($(date -u +%H:%M:%S))"
    "$@"
    rc=$?
    read -r busy1 total1 <<< "$(machine_ticks)"
    # This script's waited-for descendants' user and system time (fields 16 and 17 of /proc/PID/stat): CI's
    # own CPU time in this phase.
    own=$(awk '{ print $16 + $17 }' /proc/$$/stat)
    echo "$name $(($(date +%s) - start)) $rc $own $((busy1 - busy0)) $((total1 - total0))" >> "$file"
    exit $rc
    ;;
report)
    file=$2
    [ -s "$file" ] || exit 0
    tools=$(ls -d "$(dirname "$0")"/../tools/*/Cargo.toml 2> /dev/null | wc -l)
    cache=${VM_CACHE:-$HOME/.cache/corebpf-vm}
    echo
    echo "CI phases ($tools tools):"
    # Each phase's minutes and the share of the machine's CPU its own processes used (idle capacity is what a phase
    # could still overlap with another).
    awk '{ printf "  %-18s %6.1f min %4.0f%% CPU%s\n", $1, $2 / 60, ($6 > 0 ? 100 * $4 / $6 : 0), ($3 == 0 ? "" : "   FAILED (exit " $3 ")"); t += $2 }
         END { printf "  %-18s %6.1f min\n", "total", t / 60 }' "$file"
    total=$(awk '{ t += $2 } END { print t }' "$file")
    host=$(awk '$1 == "host-tests" { print $2 }' "$file")
    guest=0 scen=0
    if [ -s "$cache/logs/latest/guest-wall" ] && grep -q '^matrix ' "$file"; then
        guest=$(cat "$cache/logs/latest/guest-wall")
        scen=$(awk '{ t += $2 } END { print t + 0 }' "$cache/logs/latest/tool-seconds" 2> /dev/null)
    fi
    if [ "$tools" -gt 0 ] && [ -n "$host" ]; then
        awk -v n="$tools" -v host="$host" -v guest="$guest" -v scen="$scen" -v total="$total" -v budget="$budget_min" 'BEGIN {
            h = host / n; g = guest / n
            printf "Marginal cost of one more tool: host tests %.1f s, guests %.1f s of wall time (%.1f s of scenarios ", h, g, scen / n
            printf "over all kernels); at 80 tools: %.0f min (budget %d)\n", (total + (80 - n) * (h + g)) / 60, budget
        }'
    fi
    # The host tests' closing line again, last (make test-run keeps it), for readers of CI's log.
    summary=${CARGO_TARGET_DIR:-$(dirname "$0")/../target}/nextest/summary
    [ -s "$summary" ] && cat "$summary"
    # Others' share of the machine: its busy time that was not CI's, over its whole capacity in the run.
    awk -v b="$budget_min" -v hard="$hard_min" -v limit="$busy_share_limit" '
        { t += $2; own += $4; busy += $5; cap += $6 }
        END {
            share = cap > 0 ? (busy - own) / cap : 0
            if (share < 0) share = 0
            mine = cap > 0 ? own / cap : 0
            printf "CPU: CI used %.0f%% of the machine, other processes %.0f%%\n", 100 * mine, 100 * share
            if (t > hard * 60) { printf "over the CI hard limit: %.1f min > %d\n", t / 60, hard; exit 1 }
            if (t <= b * 60) exit 0
            if (share > limit) {
                printf "over the CI budget (%.1f min > %d), not enforced: other processes took %.0f%% of the CPU\n", t / 60, b, 100 * share
                exit 0
            }
            printf "over the CI budget: %.1f min > %d\n", t / 60, b
            exit 1
        }' "$file"
    ;;
strays)
    token=${COREBPF_CI_RUN:?COREBPF_CI_RUN is not set}
    found=0
    for env in /proc/[0-9]*/environ; do
        pid=${env#/proc/}
        pid=${pid%/environ}
        # This script, CI's own shell, and this script's own children (the command substitutions below).
        [ "$pid" = $$ ] || [ "$pid" = "$PPID" ] && continue
        [ "$(awk '/^PPid:/ { print $2 }' "/proc/$pid/status" 2> /dev/null)" = $$ ] && continue
        { tr '\0' '\n' < "$env"; } 2> /dev/null | grep -qx "COREBPF_CI_RUN=$token" || continue
        echo "left running by CI: $pid $(tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null | cut -c1-120)"
        kill -KILL "$pid" 2> /dev/null
        found=1
    done
    [ $found = 0 ] && echo "no process that CI started is left"
    exit $found
    ;;
*)
    echo "usage: ci-phases.sh run FILE NAME CMD... | report FILE | strays" >&2
    exit 2
    ;;
esac
