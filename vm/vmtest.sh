#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# The kernel matrix: runs the tools' integration tests on other kernels, in QEMU (software emulation).
#
#   vm/vmtest.sh                      # KERNELS=5.10,6.1,6.12,host  TOOLS=<every tool>  VM_TIER=ci
#   KERNELS=6.1 TOOLS=funccount vm/vmtest.sh
#   VM_TIER=full vm/vmtest.sh         # every scenario (make vmtest-full), not only CI's
#
# 1. Builds the shipped static multicall binary (`make static`: corebpf-tools, a link per tool in the guest, as
#    `make install` lays them out) and the integration tests (`make test-build`: the host's test binaries, built
#    with the `vm` feature, dynamically linked: the C library goes into the guest with them), side by side.
# 2. Prebuilds the C test helpers the tests compile at run time (the guest has no compiler): the test binaries
#    run on the host with COREBPF_PREBUILD_HELPERS=1, which builds each test's helpers and stops the test before
#    it starts a tool; the guest finds them through COREBPF_HELPER_DIR.
# 3. Fetches each Debian cloud kernel once into $VM_CACHE (vm/fetch-kernel.sh; default ~/.cache/corebpf-vm).
# 4. Packs an initramfs: busybox, vm/init, the tools, the test binaries, the helpers (and the C library they use),
#    one scenario file per kernel, gathered from every tools/<tool>/scenarios (vm/README.md) of the tier, and each
#    kernel's KVM modules (loaded only by kvmexit's tests) and md modules (loaded only by mdflush's tests).
# 5. Boots each kernel with a fresh ext4 NVMe disk and runs its scenarios there, VM_LANES (2) at once
#    (the kernels side by side, one vCPU each: see step 5); the console goes to $VM_CACHE/logs/<run>/<kernel>.console.
# 6. Prints a table tool x kernel: pass/FAIL and the mechanisms each tool attached with (* = its own choice), and
#    the scenario seconds per tool ($VM_CACHE/logs/<run>/tool-seconds, read by CI's phase table).
#    Exits 1 if any scenario failed, printing the failing scenarios' output and the guest console's tail.
#
# VM_ARCH=aarch64 (`make vmtest-arm64`) is the matrix's arm64 column: the arm64 static toolset, cross-built
# (`make static ARCH=aarch64`), in Debian's arm64 kernels (KERNELS=6.1-arm64,6.12-arm64) booted in
# qemu-system-aarch64 (-M virt, -cpu max), with the arm64 user space vm/fetch-kernel.sh keeps beside them. Its
# scenarios are the same lines as x86's, less those vm/arm64.skip names: a line marked /arm64 runs its tests
# (cross-built with `make test-build ARCH=aarch64`, their helpers prebuilt under qemu-aarch64-static), any other
# is run as a smoke check (the probe run: the tool starts, attaches through the line's mechanism and stops).
#
# "host" in KERNELS stands for the machine's own kernel, which cannot be booted from a package: it is covered by
# the host test run (`make test`), and its column says so.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
cache=${VM_CACHE:-$HOME/.cache/corebpf-vm}
vm_arch=${VM_ARCH:-x86_64}
case $vm_arch in
    x86_64)
        kernels=${KERNELS:-5.10,6.1,6.12,host}
        qemu_cmd=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max)
        console_dev=ttyS0
        ;;
    aarch64)
        kernels=${KERNELS:-6.1-arm64,6.12-arm64}
        # pauth-impdef: QEMU's own pointer-authentication algorithm, much cheaper to emulate than the architected one.
        qemu_cmd=(qemu-system-aarch64 -accel tcg,thread=multi -M virt -cpu max,pauth-impdef=on)
        console_dev=ttyAMA0
        ;;
    *)
        echo "vmtest: VM_ARCH is x86_64 or aarch64, not '$vm_arch'" >&2
        exit 1
        ;;
esac
timeout_s=${VM_TIMEOUT:-2400}
target=$vm_arch-unknown-linux-gnu
cargo=${CARGO:-cargo}
run=$(date +%Y%m%d-%H%M%S)
logdir=$cache/logs/$run
mkdir -p "$logdir"
ln -sfn "$run" "$cache/logs/${VM_LOG_LINK:-latest}"
export PATH="$HOME/.cargo/bin:$PATH"

say() { echo "vmtest: $*" >&2; }
die() {
    say "$*"
    exit 1
}

for cmd in "${qemu_cmd[0]}" busybox cpio mkfs.ext4 dpkg-deb; do
    command -v $cmd > /dev/null || die "$cmd is missing: run ./scripts/deps.sh (it installs qemu-system-x86, qemu-system-arm, busybox-static, cpio, e2fsprogs)"
done
busybox_bin=$(command -v busybox)
file -L "$busybox_bin" 2> /dev/null | grep -q 'statically linked' || [ ! -x /usr/bin/file ] ||
    die "$busybox_bin is not static: install busybox-static"

# --- scenarios: each tool's own, tools/<tool>/scenarios, of the selected tier ---
# A line there: TIER[/alone][/arm64] ATTACH[@SERIES,...] PROBE-ARGS... -- TESTBIN TEST-ARGS... (see vm/README.md).
# Gathered into $selected as "CLASS TOOL ATTACH[@SERIES] ..." (CLASS: par, or alone for TIER/alone), the format
# VM_SCENARIOS files use too (vm/selfcheck.scenarios, every line run). In the arm64 column a line without /arm64
# is its smoke check: its test part becomes "-" (the probe run alone).
tier=${VM_TIER:-ci}
case $tier in ci | full) ;; *) die "VM_TIER is ci or full, not '$tier'" ;; esac
gather() {
    local m t
    for m in tools/*/scenarios; do
        t=$(basename "$(dirname "$m")")
        grep -v '^[[:space:]]*#' "$m" | awk -v t="$t" -v tier="$tier" -v arch="$vm_arch" 'NF {
            n = split($1, w, "/"); if (w[1] != "ci" && w[1] != "full") { print "bad tier " $1 > "/dev/stderr"; exit 1 }
            alone = 0; arm64 = 0
            for (i = 2; i <= n; i++) {
                if (w[i] == "alone") alone = 1; else if (w[i] == "arm64") arm64 = 1
                else { print "bad tier " $1 > "/dev/stderr"; exit 1 }
            }
            if (w[1] == "full" && tier == "ci") next
            if (arch != "x86_64" && !arm64) { for (i = 1; i <= NF; i++) if ($i == "--") break; NF = i; $0 = $0 " -" }
            $1 = (alone ? "alone" : "par") " " t; print }'
    done
}
if [ -n "${VM_SCENARIOS:-}" ]; then
    all=$(grep -v '^[[:space:]]*#' "$VM_SCENARIOS" | awk 'NF { print "par", $0 }')
else
    for d in tools/*/; do
        [ -f "$d/Cargo.toml" ] || continue
        grep -qE '^[[:space:]]*ci(/[a-z0-9]+)*[[:space:]]' "$d/scenarios" 2> /dev/null ||
            die "$(basename "$d") has no CI scenario: write tools/$(basename "$d")/scenarios (see vm/README.md)"
    done
    all=$(gather) || die "a tools/*/scenarios line has a tier other than ci or full"
fi
all_tools=$(echo "$all" | awk '{print $2}' | awk '!seen[$0]++')
if [ -n "${TOOLS:-}" ]; then
    tools=$(echo "$TOOLS" | tr ',' ' ')
    for t in $tools; do
        echo "$all_tools" | grep -qx "$t" || die "no scenarios for '$t' (tools/$t/scenarios)"
    done
else
    tools=$all_tools
fi
tools=$(echo $tools)
[ -n "$tools" ] || die "no tools selected"
selected=$logdir/scenarios
echo "$all" | awk -v tools=" $tools " 'NF && index(tools, " " $2 " ")' > "$selected"
if [ "$vm_arch" != x86_64 ]; then
    # The lines marked /arm64 run their tests; every other line is its smoke check (TESTBIN "-", from gather: the
    # probe run through the line's mechanism), once per tool and mechanism; the unforced ("default") smoke run is
    # left out where forced lines cover the tool's mechanisms. The probe arguments name the target's library paths
    # (aarch64-linux-gnu). vm/arm64.skip takes the mechanisms a kernel lacks (and the lines that cannot run there;
    # ATTACH "smoke": a tool's smoke checks) off the kernels it names: the line's @list is narrowed to the others,
    # and dropped when none is left. An @list may name the arm64 kernels themselves (@6.1-arm64): such a line runs
    # in this column only.
    arm64_versions=$(echo "$kernels" | tr ',' '\n' | sed -n 's/-arm64$//p' | paste -sd,)
    awk -v all="$arm64_versions" 'FNR == NR { if (NF >= 3 && $1 !~ /^#/) { r++; sk[r] = $1; st[r] = $2; sa[r] = $3 }; next }
        { gsub(/x86_64-linux-gnu/, "aarch64-linux-gnu")
          n = split($3, a, "@"); ks = (n > 1 ? a[2] : all); out = ""
          m = split(ks, kk, ",")
          for (j = 1; j <= m; j++) {
              sub(/-arm64$/, "", kk[j]); skip = 0
              for (q = 1; q <= r; q++)
                  if (index("," sk[q] ",", "," kk[j] ",") && (st[q] == "*" || st[q] == $2) && (sa[q] == "*" || sa[q] == a[1] || (sa[q] == "smoke" && $NF == "-"))) skip = 1
              if (!skip && index("," all ",", "," kk[j] ",")) out = out (out == "" ? "" : ",") kk[j]
          }
          if (out == "") next
          $3 = (out == all ? a[1] : a[1] "@" out)
          if (!seen[$0]++) print }' vm/arm64.skip "$selected" > "$selected.arch"
    # The unforced smoke run, only for tools with no forced line left; no smoke run of a tool and mechanism (and
    # kernels) that a tested line covers.
    awk 'FNR == NR { if ($3 !~ /^default/) forced[$2] = 1; if ($NF != "-") tested[$2 " " $3] = 1; next }
        $NF != "-" || (!tested[$2 " " $3] && ($3 !~ /^default/ || !forced[$2]))' \
        "$selected.arch" "$selected.arch" > "$selected"
    rm -f "$selected.arch"
fi
testbins=$(awk '{for (i = 1; i <= NF; i++) if ($i == "--") {print $(i + 1); break}}' "$selected" | grep -vx -- - | sort -u || true)
for b in $testbins; do
    [ -f "tests/tests/$b.rs" ] || [ -f "tools/$b/tests/$b.rs" ] ||
        die "a scenario names the test binary $b, but neither tools/$b/tests/$b.rs nor tests/tests/$b.rs exists"
done
say "tier: $tier; tools: $tools; test binaries: $(echo $testbins); kernels: $kernels; logs: $logdir"

# --- 1. static binaries ---
# (The Makefile gives the static build its LIBBPF_SYS_LIBRARY_PATH. Nothing here exports it: libbpf-sys's build
# script reruns when its value changes, and the test build, which CI's build phase ran without it, then rebuilt
# everything from libbpf-sys up, four minutes of CI's matrix phase.)
say "building the static corebpf-tools: make static ARCH=$vm_arch (log: $logdir/build.log)"
build_tools=(make --no-print-directory static ARCH="$vm_arch")
# The static binary and the test binaries are built side by side: the shipped binary's last step (whole-program LTO
# into one codegen unit) keeps one core busy for minutes while the test crates can use the other.
"${build_tools[@]}" > "$logdir/build.log" 2>&1 &
static_build=$!
trap 'kill $static_build 2> /dev/null || true' EXIT
declare -A testexe=()
if [ -n "$testbins" ]; then
    # The tests are built as usual (linked to the C library, which goes into the initramfs with them), so that
    # they find the libc they use in /proc/self/maps as on the host: the same binaries `make test` runs on the
    # host (`make test-build`, with the `vm` feature), so that after it this builds nothing.
    if [ "$vm_arch" = x86_64 ]; then
        build_tests=(make --no-print-directory test-build)
    else
        # Cross-built, only the binaries the scenarios name: a tool's own tests/<tool>.rs, or the tests crate's.
        select=""
        for b in $testbins; do
            if [ -f "tools/$b/tests/$b.rs" ]; then select="$select -p $b --test $b"; else select="$select -p corebpf-tests --test $b"; fi
        done
        build_tests=(make --no-print-directory test-build ARCH="$vm_arch" TEST_SELECT="$select")
    fi
    say "building the test binaries: ${build_tests[*]} (log: $logdir/build-tests.log)"
    tests_start=$(date +%s)
    "${build_tests[@]}" > "$logdir/build-tests.log" 2>&1 || {
        tail -30 "$logdir/build-tests.log" >&2
        wait $static_build || true
        die "building the test binaries failed"
    }
    # "Executable tests/NAME.rs (PATH)"
    while read -r name path; do
        testexe[$name]=$path
    done < <(sed -n 's/^ *Executable tests\/\([a-z0-9_]*\)\.rs (\(.*\))$/\1 \2/p' "$logdir/build-tests.log")
    for b in $testbins; do
        [ -n "${testexe[$b]:-}" ] || die "no test binary $b (see $logdir/build-tests.log)"
    done
    say "test binaries built in $(($(date +%s) - tests_start)) s"
fi
wait $static_build ||
    {
        tail -30 "$logdir/build.log" >&2
        die "building the static tools failed"
    }
staticdir=${CARGO_TARGET_DIR:-$repo/target}/$target/dist
if readelf -l "$staticdir/corebpf-tools" | grep -q 'program interpreter'; then
    die "$staticdir/corebpf-tools is dynamically linked; the matrix tests the static build"
fi
# VM_BUILD_ONLY=1: the builds above and nothing else. CI runs the arm64 column's so in the background, in a target
# directory of its own (CARGO_TARGET_DIR, so that it holds no lock the host tests wait on), while the host tests
# and the soak leave a core idle; its matrix phase then finds them built.
if [ "${VM_BUILD_ONLY:-0}" = 1 ]; then
    say "built the static binary and the test binaries (VM_BUILD_ONLY=1): $staticdir"
    exit 0
fi
# The tools as installed: corebpf-tools and a link per tool (the test helpers are prebuilt with these names too).
bindir=$logdir/bin
mkdir -p "$bindir"
cp "$staticdir/corebpf-tools" "$bindir/"
for t in $tools; do ln -sfn corebpf-tools "$bindir/$t"; done

# --- 2. test helpers ---
# Each test binary runs in a session of its own, killed whole afterwards: a test stopped at its first tool run
# must not leave a workload it had started (a spinning dd once kept a core busy for the whole matrix).
# The arm64 tests run here under QEMU's user mode with the cross C library, and build their helpers with the cross
# toolchain (COREBPF_HELPER_CROSS) into a cache of their own, target/test-helpers/aarch64.
helperdir=$repo/target/test-helpers
run_test=()
if [ "$vm_arch" != x86_64 ]; then
    helperdir=$helperdir/$vm_arch
    command -v "qemu-$vm_arch-static" > /dev/null || die "qemu-$vm_arch-static is missing: ./scripts/deps.sh installs qemu-user-static"
    run_test=("qemu-$vm_arch-static" -L "/usr/$vm_arch-linux-gnu")
    export COREBPF_HELPER_CROSS=$vm_arch-linux-gnu
    # Headers the cross C library lacks, from this machine's (architecture-independent) sys/sdt.h.
    mkdir -p "$helperdir/include/sys"
    for h in sdt.h sdt-config.h; do
        [ ! -f "/usr/include/$(uname -m)-linux-gnu/sys/$h" ] || ln -sfn "/usr/include/$(uname -m)-linux-gnu/sys/$h" "$helperdir/include/sys/$h"
    done
    # OpenSSL (sslsniff's helper): the headers and libraries of the guests' user space (vm/fetch-kernel.sh; the
    # arm64 kernels are one suite's, so the first one's), headers in include/, libraries in lib/ (-L).
    k=$(echo "$kernels" | tr ',' '\n' | grep -vx host | head -1 || true)
    if [ -n "$k" ]; then
        kdir=$(vm/fetch-kernel.sh "$k" 2>> "$logdir/fetch.log") || die "could not fetch kernel $k"
        kdir=$(dirname "$kdir")
        mkdir -p "$helperdir/lib"
        ln -sfn "$kdir/dev/include/openssl" "$helperdir/include/openssl"
        for l in libssl.so.3 libcrypto.so.3; do ln -sfn "$kdir/userland/usr/lib/$vm_arch-linux-gnu/$l" "$helperdir/lib/$l"; done
    fi
fi
prebuild_start=$(date +%s)
for b in $testbins; do
    say "prebuilding the C helpers of tests/$b.rs"
    COREBPF_PREBUILD_HELPERS=1 COREBPF_BIN_DIR=$bindir setsid "${run_test[@]}" "${testexe[$b]}" --test-threads=2 \
        >> "$logdir/prebuild.log" 2>&1 < /dev/null &
    session=$!
    wait $session || true
    kill -KILL -- -$session 2> /dev/null || true
done
[ -z "$testbins" ] || say "helpers prebuilt in $(($(date +%s) - prebuild_start)) s"

# --- 3/4. initramfs ---
root=$logdir/initramfs
mkdir -p "$root"/{bin,tools,tests,helpers,vm}
if [ "$vm_arch" = x86_64 ]; then
    cp "$busybox_bin" "$root/bin/busybox"
    # Programs the tests run besides busybox's applets (tcplife's client uses bash's /dev/tcp).
    for prog in bash; do
        cp "$(command -v $prog)" "$root/bin/$prog"
    done
fi
install -m 755 vm/init "$root/init"
# One scenario file per kernel series: the lines that run there, numbered, "@SERIES" taken off.
for k in $(echo "$kernels" | tr ',' ' '); do
    [ "$k" = host ] && continue
    # An arm64 kernel (6.1-arm64) runs the lines of its version (@6.1).
    awk -v k="${k%-arm64}" '{ n = split($3, a, "@"); if (n > 1 && !index("," a[2] ",", "," k ",")) next
                    $3 = a[1]; print ++i, $0 }' "$selected" > "$root/vm/scenarios.$k"
done
# Each kernel's KVM modules (vm/fetch-kernel.sh keeps them beside its vmlinuz), as /kvm/<series>/*.ko: the guest
# loads them only when kvmexit's tests ask (COREBPF_KVM_MODULES, vm/init), never for the other tools. Its md and
# loop modules likewise, as /md/<series>/*.ko, for mdflush's tests (COREBPF_MD_MODULES).
for k in $(echo "$kernels" | tr ',' ' '); do
    [ "$k" = host ] && continue
    vmlinuz=$(vm/fetch-kernel.sh "$k" 2>> "$logdir/fetch.log") || {
        tail -5 "$logdir/fetch.log" >&2
        die "could not fetch kernel $k"
    }
    mkdir -p "$root/kvm/$k" "$root/md/$k"
    # arm64 kernels have KVM built in: no modules (vm/fetch-kernel.sh), but their user space (busybox, libc, bash).
    [ "$vm_arch" != x86_64 ] || cp "$(dirname "$vmlinuz")"/kvm/*.ko "$root/kvm/$k/"
    [ "$vm_arch" = x86_64 ] || cp -a "$(dirname "$vmlinuz")/userland/." "$root/"
    cp "$(dirname "$vmlinuz")"/md/*.ko "$root/md/$k/"
done
cp -a "$bindir/." "$root/tools/"
for b in $testbins; do cp "${testexe[$b]}" "$root/tests/$b"; done
if [ -d "$helperdir" ]; then
    find "$helperdir" -maxdepth 1 -type f -perm -u+x ! -name '*.*' -exec cp {} "$root/helpers/" \;
fi
# Helpers and tests are dynamically linked: bring their libraries (and the loader) along, at the same paths.
for f in "$root"/helpers/* "$root"/tests/* "$root"/bin/bash; do
    [ -f "$f" ] || continue
    for lib in $(ldd "$f" 2> /dev/null | grep -o '/[^ ]*' || true); do
        # ldd of a musl or static program may print other words (its own path with a colon): libraries only.
        [ -f "$lib" ] || continue
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
done
initrd=$logdir/initramfs.cpio.gz
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$initrd"
say "initramfs: $(du -h "$initrd" | cut -f1)"

# --- 5. boot each kernel ---
# Kernels are fetched one after another (they share apt lists), then booted all at once (VM_PARALLEL=0: one after
# another). Each guest has one virtual CPU (VM_CPUS): under multi-threaded TCG, two vCPUs of one guest deadlocked
# whenever two tools attached kernel-function probes at the same moment (the kernel patches its text with
# text_poke_bp and waits for the other vCPU, which the emulation does not always let through: 6.1, funccount and
# funclatency through fentry side by side, twice in two boots), and now and then with one tool. One vCPU has no
# such race; the host's cores go to the guests running side by side, and inside a guest two scenarios overlap
# their waits (VM_LANES).
declare -A status=() vmlinuz_of=()
failed=0
boot_kernels=""
for k in $(echo "$kernels" | tr ',' ' '); do
    [ "$k" = host ] && continue
    vmlinuz_of[$k]=$(vm/fetch-kernel.sh "$k" 2>> "$logdir/fetch.log") || {
        tail -5 "$logdir/fetch.log" >&2
        die "could not fetch kernel $k"
    }
    boot_kernels="$boot_kernels $k"
done
# boot K VMLINUZ: runs the scenarios in kernel K; writes $logdir/K.console (and K.boot when the guest did not finish).
# A guest that prints nothing for VM_SILENCE seconds (default 360; no scenario is silent for more than about 130 s)
# has hung, and so has one that finishes no scenario for VM_STUCK (150) s while its kernel reports soft lockups or RCU stalls
# (a 5.10 guest did so in syscount's tests, printing a lockup report every 28 s). Under emulation (multi-threaded
# TCG) a guest has now and then hung, or panicked with an int3 Oops in __schedule, while a tool attached to or
# detached from the scheduler's tracepoints: the kernel patches the tracepoint's static call with text_poke_bp while
# the other vCPU runs that code, which QEMU's TCG does not always emulate faithfully (three times in a day of runs,
# on 5.10, 6.1 and 6.12; the same scenarios pass on other boots). Either way the guest is booted again with the
# scenarios it finished skipped (corebpf.done=...), so those that were running (VMTEST-START with no result) run once
# more; the console says VMTEST-HUNG, and the table marks them. A scenario running during two such failures fails.
# Two NUMA nodes of 768 MiB: node 0 has the CPUs, node 1 only memory, so that NUMA balancing has pages to move
# (numamove's tests place a helper's pages on node 1 and let the kernel bring them to node 0's CPU).
cpus=${VM_CPUS:-1}
boot() {
    local k=$1 vmlinuz=$2 disk=$logdir/disk-$1.img console=$logdir/$1.console start rc part tries=0
    local silence=${VM_SILENCE:-360} qemu size last_size quiet_for what done_list running n once=" "
    : > "$console"
    while :; do
        tries=$((tries + 1))
        part=$logdir/$k.console.$tries
        rm -f "$disk"
        truncate -s 512M "$disk"
        mkfs.ext4 -q -F -L corebpf "$disk"
        # The scenarios finished so far (their numbers, as ranges: 1-7,9).
        done_list=$(awk '$1 == "VMTEST-RESULT" && $6 != "" { print $6 }' "$console" | sort -n | awk '
            NR == 1 { lo = hi = $1; next } $1 == hi + 1 { hi = $1; next }
            { printf "%s%s,", lo, (hi > lo ? "-" hi : ""); lo = hi = $1 }
            END { if (NR) printf "%s%s", lo, (hi > lo ? "-" hi : "") }')
        say "booting $k ($(cat "$(dirname "$vmlinuz")/package" 2> /dev/null || echo "$vmlinuz"))$([ -n "$done_list" ] && echo ", skipping finished scenarios $done_list"); console: $console"
        start=$(date +%s)
        timeout "$timeout_s" "${qemu_cmd[@]}" -smp "$cpus" -m 1536 \
            -object memory-backend-ram,id=mem0,size=768M -object memory-backend-ram,id=mem1,size=768M \
            -numa node,nodeid=0,cpus=0-$((cpus - 1)),memdev=mem0 -numa node,nodeid=1,memdev=mem1 \
            -nographic -no-reboot -monitor none \
            -kernel "$vmlinuz" -initrd "$initrd" \
            -drive "file=$disk,if=none,id=d0,format=raw" -device nvme,serial=corebpf,drive=d0 \
            -append "console=$console_dev quiet panic=-1 rdinit=/init corebpf.kernel=$k corebpf.lanes=${VM_LANES:-2} corebpf.done=${done_list:-0}" \
            < /dev/null > "$part" 2>&1 &
        qemu=$!
        last_size=-1 quiet_for=0 last_steps=-1 stuck_for=0
        while kill -0 $qemu 2> /dev/null; do
            sleep 10
            size=$(stat -c %s "$part" 2> /dev/null || echo 0)
            if [ "$size" = "$last_size" ]; then quiet_for=$((quiet_for + 10)); else quiet_for=0 last_size=$size; fi
            # A guest that prints only the kernel's soft-lockup and RCU-stall reports is not silent, but stuck.
            steps=$(grep -c '^VMTEST-RESULT' "$part" 2> /dev/null || true)
            if [ "$steps" = "$last_steps" ]; then stuck_for=$((stuck_for + 10)); else stuck_for=0 last_steps=$steps; fi
            if [ $quiet_for -ge "$silence" ] ||
                { [ $stuck_for -ge "${VM_STUCK:-150}" ] && grep -qE 'BUG: soft lockup|detected stalls on CPUs' "$part"; }; then
                : > "$part.hung"
                kill -TERM $qemu 2> /dev/null
                break
            fi
        done
        rc=0
        wait $qemu || rc=$?
        rm -f "$disk"
        tr -d '\r' < "$part" >> "$console"
        say "$k: guest ran $(($(date +%s) - start)) s"
        grep -q '^VMTEST-DONE' "$part" && break
        what=""
        [ -f "$part.hung" ] && what="hung (no progress for ${silence} s)"
        grep -q 'Kernel panic' "$part" && what="crashed (kernel panic)"
        # The scenarios that were running: started in this boot, with no result.
        running=$(tr -d '\r' < "$part" | awk '$1 == "VMTEST-START" { s[$2] = $3 " " $4 }
            $1 == "VMTEST-RESULT" && $6 != "" { delete s[$6] } END { for (n in s) print n, s[n] }' | sort -n)
        if [ -n "$what" ] && [ -n "$running" ] && [ $tries -lt 6 ]; then
            while read -r n name; do
                if [[ "$once" == *" $n "* ]]; then
                    say "$k: the guest $what again while scenario $n ($name) ran: it fails"
                    echo "VMTEST-RESULT $name fail 0 $n" >> "$console"
                    echo "VMTEST-ERROR $name the guest failed twice while this scenario ran: last it $what" >> "$console"
                else
                    say "$k: the guest $what while scenario $n ($name) ran; booting again to run it once more"
                    echo "VMTEST-HUNG $name" >> "$console"
                    once="$once$n "
                fi
            done <<< "$running"
            continue
        fi
        echo boot > "$logdir/$k.boot"
        if [ $rc = 124 ]; then say "$k: the guest did not finish within ${timeout_s} s"; else say "$k: the guest stopped early (qemu exit $rc)"; fi
        say "$k: console tail:"
        tail -40 "$part" | sed 's/^/    /' >&2
        break
    done
}
pids=()
trap 'kill $(jobs -p) 2> /dev/null || true' EXIT
guests_start=$(date +%s)
for k in $boot_kernels; do
    if [ "${VM_PARALLEL:-1}" = 1 ]; then
        boot "$k" "${vmlinuz_of[$k]}" &
        pids+=($!)
    else
        boot "$k" "${vmlinuz_of[$k]}"
    fi
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
# The guests' wall time, boots included (what CI's report divides by the number of tools).
echo $(($(date +%s) - guests_start)) > "$logdir/guest-wall"
for k in $boot_kernels; do
    if [ -f "$logdir/$k.boot" ]; then
        failed=1
        status[$k]=boot
    fi
done

# --- 6. the table ---
# cell(tool, kernel): "pass tp_btf* raw_tp" or "FAIL raw_tp ..."
cell() {
    local tool=$1 k=$2 console=$logdir/$2.console out="" bad=0 def="" attach result ran=0
    [ "${status[$k]:-}" = boot ] && [ ! -s "$console" ] && {
        echo "no boot"
        return 1
    }
    def=$(awk -v t="$tool" '$1 == "VMTEST-ATTACH" && $2 == t && $3 == "default" {print $4; exit}' "$console")
    while read -r attach; do
        ran=1
        result=$(awk -v t="$tool" -v a="$attach" '$1 == "VMTEST-RESULT" && $2 == t && $3 == a {
                     r = (r == "" || r == "pass") ? $4 : r} END {print r}' "$console")
        [ "$result" = pass ] || bad=1
        if [ "$attach" = default ]; then
            # The unforced run only tells which mechanism the tool picks; it is listed only if it failed.
            [ "$result" = pass ] || out="$out default(${result:-no result})"
            continue
        fi
        local hung=""
        grep -q "^VMTEST-HUNG $tool $attach\$" "$console" && hung="(the guest hung or crashed once here; run again on a new boot)"
        local flaky=""
        grep -q "^VMTEST-FLAKY $tool $attach\$" "$console" && flaky="(flaky)"
        [ "$attach" = "$def" ] && attach="$attach*"
        [ "$result" = pass ] || attach="$attach(${result:-no result})"
        attach="$attach$flaky"
        attach="$attach$hung"
        out="$out $attach"
    done < <(awk -v t="$tool" -v k="${k%-arm64}" '$2 == t {
                 n = split($3, a, "@"); if (n == 1 || index("," a[2] ",", "," k ",")) print a[1] }' "$selected" |
        awk '!seen[$0]++')
    # Every line of the tool skipped on this kernel (the arm64 column's vm/arm64.skip): say so, not "pass".
    [ $ran = 1 ] || {
        echo "not run (vm/arm64.skip)"
        return 0
    }
    if [ $bad = 0 ]; then echo "pass$out"; else echo "FAIL$out"; fi
    return $bad
}
klist=$(echo "$kernels" | tr ',' ' ')
table=$(mktemp)
{
    row="tool"
    for k in $klist; do
        if [ "$k" = host ]; then row="$row|host $(uname -r | cut -d- -f1)"; else row="$row|$k"; fi
    done
    echo "$row"
    for t in $tools; do
        row=$t
        for k in $klist; do
            if [ "$k" = host ]; then
                row="$row|host tests (make test)"
            else
                c=$(cell "$t" "$k") || echo 1 > "$table.failed"
                row="$row|$c"
            fi
        done
        echo "$row"
    done
} > "$table"
[ -f "$table.failed" ] && failed=1
rm -f "$table.failed"
echo
# Columns as wide as their widest cell.
awk -F'|' '{for (i = 1; i <= NF; i++) {cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i)}; if (NF > nf) nf = NF}
    END {for (r = 1; r <= NR; r++) {line = ""; for (i = 1; i <= nf; i++) line = line sprintf("%-" w[i] + 2 "s", cell[r, i]); sub(/ +$/, "", line); print line}}' "$table"
rm -f "$table"
echo "(* = the mechanism the tool chose by itself; the others were forced with COREBPF_ATTACH)"

# --- the cost: each tool's scenario seconds over every guest (what one more tool adds; boots are extra) ---
for k in $klist; do
    if [ "$k" != host ] && [ -f "$logdir/$k.console" ]; then
        awk '$1 == "VMTEST-RESULT" { print $2, $5 }' "$logdir/$k.console"
    fi
done | awk '{ s[$1] += $2 } END { for (t in s) print t, s[t] }' | sort > "$logdir/tool-seconds"
for k in $klist; do
    if [ "$k" != host ] && [ -f "$logdir/$k.console" ]; then
        say "$k: $(awk '$1 == "VMTEST-RESULT" { n++; s += $5 } END { printf "%d scenarios, %d s of scenario time", n, s }' "$logdir/$k.console")"
    fi
done
say "guests: $(cat "$logdir/guest-wall") s of wall time; scenario seconds per tool (all kernels): $(awk '{ n++; s += $2 } END { if (n) printf "%.1f", s / n }' "$logdir/tool-seconds") on average ($logdir/tool-seconds)"

# --- failures and flakes: what each failing scenario printed, and a flaky one's first try ---
# block_tail CONSOLE TOOL ATTACH UNTIL: the last 40 lines of the scenario's block, up to the line starting with UNTIL.
block_tail() {
    awk -v t="$2" -v a="$3" -v until="$4" '
        $1 == "VMTEST-BEGIN" && $2 == t && $3 == a {on = 1; n = 0; next}
        on && $1 == until {exit}
        on {buf[n++ % 40] = $0}
        END {s = n > 40 ? n - 40 : 0; for (i = s; i < n; i++) print "    " buf[i % 40]}' "$1"
}
for k in $(echo "$kernels" | tr ',' ' '); do
    console=$logdir/$k.console
    [ "$k" != host ] && [ -f "$console" ] || continue
    awk '$1 == "VMTEST-RESULT" && $4 != "pass" {print $2, $3}' "$console" | while read -r tool attach; do
        echo
        echo "=== FAIL: $tool with $attach on $k ==="
        awk -v t="$tool" -v a="$attach" '$1 == "VMTEST-ERROR" && $2 == t && $3 == a {$1 = $2 = $3 = ""; sub(/^ +/, ""); print "tool said: " $0}' "$console"
        block_tail "$console" "$tool" "$attach" VMTEST-RESULT
    done
    awk '$1 == "VMTEST-FLAKY" {print $2, $3}' "$console" | while read -r tool attach; do
        echo
        echo "=== FLAKY (passed on its second try): $tool with $attach on $k ==="
        block_tail "$console" "$tool" "$attach" VMTEST-RETRY
    done
done
if [ $failed != 0 ]; then
    say "FAILED (logs: $logdir)"
    exit 1
fi
say "all scenarios passed (logs: $logdir)"
