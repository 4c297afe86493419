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
set -uo pipefail
budget_min=45

case "${1:-}" in
run)
    file=$2 name=$3
    shift 3
    start=$(date +%s)
    echo "=== ci: $name: $* ($(date -u +%H:%M:%S))"
    "$@"
    rc=$?
    echo "$name $(($(date +%s) - start)) $rc" >> "$file"
    exit $rc
    ;;
report)
    file=$2
    [ -s "$file" ] || exit 0
    tools=$(ls -d "$(dirname "$0")"/../tools/*/Cargo.toml 2> /dev/null | wc -l)
    cache=${VM_CACHE:-$HOME/.cache/corebpf-vm}
    echo
    echo "CI phases ($tools tools):"
    awk '{ printf "  %-18s %6.1f min%s\n", $1, $2 / 60, ($3 == 0 ? "" : "   FAILED (exit " $3 ")"); t += $2 }
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
    awk -v b="$budget_min" '{ t += $2 } END { if (t > b * 60) { printf "over the CI budget: %.1f min > %d\n", t / 60, b; exit 1 } }' "$file"
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
