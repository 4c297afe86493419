# SPDX-License-Identifier: Apache-2.0 OR MIT
# corebpf-tools: build, test, install and package the tools. Every target works over tools/* (each folder with a
# Cargo.toml), so a new tool needs no change here.
#
#   make              build every tool and the multicall corebpf-tools (release, linked to libelf and zlib)
#   make static       the shipped binary: corebpf-tools, fully static, fat LTO (`dist` profile), in
#                     target/$(uname -m)-unknown-linux-gnu/dist; ARCH=aarch64 (or arm64) cross-builds it for arm64
#                     on an x86_64 machine, in target/aarch64-unknown-linux-gnu/dist (`make deb ARCH=arm64` too)
#   make install      install corebpf-tools, a link per tool, man pages and completions (PREFIX, DESTDIR, APP_PREFIX)
#   make uninstall    remove exactly what `make install` installs (same PREFIX, DESTDIR, APP_PREFIX)
#   make deb          Debian package in target/debian/ (tools as /usr/sbin/$(DEB_APP_PREFIX)TOOL; default bpf-)
#   make image        the exporter's container image, corebpf-tools-exporter (FROM scratch around `make static`)
#   make deb-source   the same package the Debian way: dpkg-buildpackage on debian/ from a clean export, and lintian
#   make repro-check  build the static tools twice, from two copies of this commit, and compare sha256 (minutes)
#   make snapshots    regenerate tools/TOOL/tests/TOOL.help from each tool's --help
#   make test         unit and integration tests (as root: they load BPF programs) against the static binary;
#                     builds static, the test binaries and the deb first (= make static test-build test-run)
#   make test-build   the unit and integration test binaries (also what the kernel matrix runs in its guests);
#                     ARCH=aarch64 cross-builds them for the arm64 column (TEST_SELECT: cargo's -p/--test arguments)
#   make test-run     run them (cargo-nextest) against the static corebpf-tools in target/bin; T=FILTERSET picks
#   make new-tool NAME=x [KIND=hist|snoop]  start tools/x from templates/KIND (scripts/new-tool.sh); the folder is all you edit
#   make template-check  make a tool from each template in a scratch copy of the workspace: build, lint, check, test them
#   make deps         install build and test dependencies (Debian/Ubuntu, as root)
#   make lint         clippy and rustfmt checks
#   make license-check  SPDX lines, dependency licences, debian/copyright (CI); make copyright rewrites it
#   make docs         write docs/tools/TOOL.md and the README's tool table from each tools/TOOL/doc.md
#   make docs-check   fail, one line per problem, if those are stale or a tool lacks a part (doc, test, snapshot...)
#   make provenance-check  fail, one `file:line: phrase` per hit, if help or doc text repeats BCC's words (NOTICE)
#   make soak         every tool at once under load and faults for SOAK_SECONDS (default 600); writes docs/soak.md

CARGO ?= cargo
# Cargo runs build scripts that run make themselves (libbpf-sys builds libbpf with its own `make install`). The
# variables a packager gives this make (DESTDIR, PREFIX, ...) would reach them through MAKEFLAGS and the
# environment, and libbpf would install itself into the package: cargo runs without them.
RUN_CARGO = env -u MAKEFLAGS -u MFLAGS -u MAKEOVERRIDES -u MAKELEVEL -u DESTDIR -u PREFIX -u APP_PREFIX -u ARCH $(CARGO)
PREFIX ?= /usr/local
DESTDIR ?=
APP_PREFIX ?=
TOOLS := $(notdir $(wildcard tools/*))
RELEASE_DIR := target/release

# The tool crates: every tools/NAME with a Cargo.toml.
PKG_TOOLS := $(patsubst tools/%/Cargo.toml,%,$(wildcard tools/*/Cargo.toml))
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
# The architecture of the shipped binary: the build machine's, or ARCH=aarch64 (Debian's name arm64 works too)
# for arm64, cross-built on x86_64 with Debian's gcc-aarch64-linux-gnu (./scripts/deps.sh installs it and the
# Rust target). Only a command-line or explicit ARCH counts: a kernel build's ARCH=x86 in the environment does not.
HOST_ARCH := $(shell uname -m)
ifeq ($(origin ARCH),environment)
ARCH := $(HOST_ARCH)
endif
ARCH ?= $(HOST_ARCH)
override ARCH := $(patsubst arm64,aarch64,$(patsubst amd64,x86_64,$(ARCH)))
ifeq ($(filter x86_64 aarch64,$(ARCH)),)
$(error ARCH=$(ARCH): the toolset is built for x86_64 (amd64) and aarch64 (arm64))
endif
STATIC_TRIPLE ?= $(ARCH)-unknown-linux-gnu
STATIC_DIR := $(TARGET_DIR)/$(STATIC_TRIPLE)/dist
LIBBPF_SYS_LIBRARY_PATH ?= /usr/lib/$(ARCH)-linux-gnu
CARGO_HOME ?= $(HOME)/.cargo
# Reproducible builds: no build-machine paths in the binaries (the BPF object gets -fdebug-prefix-map in
# bpf/src/lib.rs). The workspace maps to /corebpf-tools and the cargo home (registry sources) to /cargo.
REPRO_RUSTFLAGS := --remap-path-prefix=$(CARGO_HOME)=/cargo --remap-path-prefix=$(CURDIR)=/corebpf-tools
STATIC_RUSTFLAGS := -C target-feature=+crt-static $(REPRO_RUSTFLAGS)
# A cross build (ARCH other than the machine's): the cross C compiler links and builds the C libraries, and libelf
# and zlib are libbpf-sys's vendored sources (`libbpf-rs/vendored`) rather than the machine's own, so no arm64
# system library is needed. Their C objects get the same path mapping as the Rust code.
ifneq ($(ARCH),$(HOST_ARCH))
CROSS_CC := $(ARCH)-linux-gnu-gcc
CROSS_TRIPLE_VAR := $(subst -,_,$(STATIC_TRIPLE))
CROSS_ENV := CARGO_TARGET_$(shell echo $(CROSS_TRIPLE_VAR) | tr a-z A-Z)_LINKER=$(CROSS_CC) \
	CC_$(CROSS_TRIPLE_VAR)=$(CROSS_CC) AR_$(CROSS_TRIPLE_VAR)=$(ARCH)-linux-gnu-ar \
	CFLAGS_$(CROSS_TRIPLE_VAR)='-O2 -ffile-prefix-map=$(CARGO_HOME)=/cargo -ffile-prefix-map=$(CURDIR)=/corebpf-tools'
STATIC_FEATURES := static,libbpf-rs/vendored
# Installing and packaging run the binary (it writes its own man pages and completions): through QEMU's user mode.
RUN_WITH := qemu-$(ARCH)-static
# Its C library is the cross one; libelf and zlib are vendored (the .deb's Static-Built-Using).
STATIC_BUILT_FROM := libc6-dev-$(patsubst aarch64,arm64,$(ARCH))-cross
else
STATIC_BUILT_FROM :=
RUN_WITH :=
CROSS_ENV :=
STATIC_FEATURES := static
endif
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
# Dates the man pages and the files in the .deb: the last commit's time, so every build of a commit agrees.
# The last commit's time; outside a git checkout (a release tarball), the release's date from debian/changelog.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || dpkg-parsechangelog -l debian/changelog -S Timestamp 2>/dev/null || echo 0)
# The .deb installs bpf-biolatency etc. so as not to clash with libbpf-tools' /usr/sbin/biolatency; with
# DEB_APP_PREFIX= (empty) it installs plain names and declares Conflicts: libbpf-tools.
DEB_APP_PREFIX ?= bpf-
DEB_DIR := $(TARGET_DIR)/debian
DEB_ARCH := $(patsubst aarch64,arm64,$(patsubst x86_64,amd64,$(ARCH)))
INSTALL_ENV = RUN_WITH='$(RUN_WITH)' BIN_SRC='$(STATIC_DIR)' DESTDIR='$(DESTDIR)' PREFIX='$(PREFIX)' APP_PREFIX='$(APP_PREFIX)' \
	SOURCE_DATE_EPOCH='$(SOURCE_DATE_EPOCH)'

.PHONY: all build static install install-files uninstall deb deb-package repro-check snapshots test deps lint fmt \
	clean tools template-check new-tool test-build test-run bin-links docs docs-check provenance-check license-check copyright deb-source

all: build

build:
	$(RUN_CARGO) build --release --bins

# The one shipped binary, corebpf-tools, with every tool in it. --target keeps RUSTFLAGS off build scripts and
# proc-macros, which must stay dynamic.
static:
	@[ "$(ARCH)" = "$(HOST_ARCH)" ] || command -v $(CROSS_CC) > /dev/null || \
		{ echo "$(CROSS_CC) is missing: ./scripts/deps.sh installs the cross compiler" >&2; exit 1; }
	RUSTFLAGS='$(STATIC_RUSTFLAGS)' LIBBPF_SYS_LIBRARY_PATH='$(LIBBPF_SYS_LIBRARY_PATH)' $(CROSS_ENV) \
		$(RUN_CARGO) build --profile dist --target $(STATIC_TRIPLE) --features $(STATIC_FEATURES) -p corebpf-tools

tools:
	@echo $(TOOLS)

install: static
	@$(MAKE) --no-print-directory install-files

# Installs what `make static` built, without building (the packaging tests use it).
install-files:
	@$(INSTALL_ENV) ./packaging/install-tools.sh install $(PKG_TOOLS)

uninstall:
	@$(INSTALL_ENV) ./packaging/install-tools.sh uninstall $(PKG_TOOLS)

deb: static
	@$(MAKE) --no-print-directory deb-package

# The exporter's image (packaging/exporter/Dockerfile): the static binary and an example config, nothing else.
.PHONY: image
image: static
	@ctx=$$(mktemp -d) && cp $(STATIC_DIR)/corebpf-tools packaging/exporter/Dockerfile packaging/exporter/exporter.conf \
		"$$ctx/" && docker build -t corebpf-tools-exporter:$(VERSION) -t corebpf-tools-exporter:latest "$$ctx"; \
		rc=$$?; rm -rf "$$ctx"; exit $$rc

# Packages what `make static` built, without building.
deb-package:
	@BIN_SRC='$(STATIC_DIR)' VERSION='$(VERSION)' DEB_APP_PREFIX='$(DEB_APP_PREFIX)' DEB_ARCH='$(DEB_ARCH)' RUN_WITH='$(RUN_WITH)' \
		STATIC_BUILT_FROM='$(STATIC_BUILT_FROM)' \
		SOURCE_DATE_EPOCH='$(SOURCE_DATE_EPOCH)' ./packaging/build-deb.sh $(DEB_DIR) $(PKG_TOOLS)

# What `make static deb ARCH=...` built is for ARCH: a static ELF file (no program interpreter) of ARCH's machine, and
# a .deb whose Architecture field is ARCH's Debian name (CI's arm64-package phase runs it after `make deb ARCH=arm64`).
ELF_MACHINE := $(if $(filter aarch64,$(ARCH)),AArch64,Advanced Micro Devices X86-64)
.PHONY: arch-check
arch-check:
	@bin=$(STATIC_DIR)/corebpf-tools; deb=$(DEB_DIR)/corebpf-tools_$(VERSION)_$(DEB_ARCH).deb; \
	readelf -h $$bin | grep -q 'Machine: *$(ELF_MACHINE)$$' || { echo "$$bin is not an ELF file for $(ARCH)" >&2; exit 1; }; \
	! readelf -l $$bin | grep -q 'program interpreter' || { echo "$$bin is not static" >&2; exit 1; }; \
	[ "$$(dpkg-deb -f $$deb Architecture)" = $(DEB_ARCH) ] || { echo "$$deb: Architecture is not $(DEB_ARCH)" >&2; exit 1; }; \
	echo "$$bin: static, $(ARCH); $$deb: Architecture $(DEB_ARCH)"

# The Debian source package built with dpkg-buildpackage (debian/), from a clean export of HEAD, then checked with
# lintian; the results land in target/debian-source/. Minutes: it builds everything from scratch.
deb-source:
	./packaging/build-deb-source.sh $(TARGET_DIR)/debian-source

repro-check:
	ARCH=$(ARCH) ./packaging/repro-check.sh

# A copied tool folder must build and run with only its package name changed (the template promise).
template-check:
	./scripts/template-check.sh

new-tool:
	@[ -n "$(NAME)" ] || { echo 'usage: make new-tool NAME=mytool [KIND=hist|snoop]' >&2; exit 2; }
	./scripts/new-tool.sh $(NAME) $(or $(KIND),hist)

# --help is snapshot-tested (tests/tests/packaging.rs) at a fixed width, with no terminal attached.
snapshots: build
	@for t in $(PKG_TOOLS); do \
		COLUMNS=100 $(RELEASE_DIR)/$$t --help < /dev/null > tools/$$t/tests/$$t.help 2>&1 || exit 1; \
		echo "wrote tools/$$t/tests/$$t.help"; \
	done

# The tests run the shipped binary: target/bin holds corebpf-tools (the static build) and a link per tool, as
# `make install` lays them out. They are built once, with the `vm` feature, so that the kernel matrix runs the same
# test binaries (its tests of kernel functions, which this host cannot run, are left out here).
BIN_DIR := $(TARGET_DIR)/bin
TEST_FEATURES := --workspace --features corebpf-tests/vm
# The test binaries' cargo profile (Cargo.toml's `tests`: built for build time; what they test is the static binary).
TEST_PROFILE := tests
# Tests that need the machine to themselves run after the others, one at a time: profile's idle-CPU test and
# offwaketime's idle waker (both need a CPU to go idle), runqlat's contrast of a sleeper's waits alone and among spinners (its "alone" must be a quiet CPU), and the
# sweeps that start every tool many times (their attaches and detaches on shared tracepoints disturb the
# scheduler tools' exact counts: .config/nextest.toml), and tcpconnlat's and tcpstates' floods of connects that
# overflow a stopped reader's ring buffer (tens of thousands of events that every other unfiltered socket tracer
# running beside them must keep up with).
ALONE := test(=idle_is_sampled_only_with_include_idle) | test(=competition_lengthens_the_waits) \
	| test(=an_idle_waker_has_no_user_stack_and_nothing_is_lost) | binary(bad_input) | binary(conformance) \
	| test(=connects_lost_while_the_reader_is_stopped_are_counted) | test(=changes_lost_while_the_reader_is_stopped_are_counted)
NEXTEST_FILTER := not binary(kernel_functions)
test: static test-build
	@$(MAKE) --no-print-directory test-run

# ARCH=aarch64 cross-builds them for the arm64 column of the kernel matrix (vm/vmtest.sh): dynamically linked to
# the cross C library (its libraries and loader go into the guest), libbpf's libelf and zlib vendored as in the
# static cross build; TEST_SELECT (cargo's -p and --test arguments) builds only the binaries the scenarios name.
ifneq ($(ARCH),$(HOST_ARCH))
TEST_SELECT ?= --workspace
test-build:
	@command -v $(CROSS_CC) > /dev/null || { echo "$(CROSS_CC) is missing: ./scripts/deps.sh installs the cross compiler" >&2; exit 1; }
	$(CROSS_ENV) $(RUN_CARGO) test --profile $(TEST_PROFILE) --target $(STATIC_TRIPLE) \
		--features corebpf-tests/vm,libbpf-rs/vendored $(TEST_SELECT) --no-run
else
test-build:
	$(RUN_CARGO) test --profile $(TEST_PROFILE) $(TEST_FEATURES) --no-run
endif

bin-links:
	@test -x $(STATIC_DIR)/corebpf-tools || { echo "$(STATIC_DIR)/corebpf-tools is not built: make static" >&2; exit 1; }
	@mkdir -p $(BIN_DIR)
	@ln -sfn $(abspath $(STATIC_DIR))/corebpf-tools $(BIN_DIR)/corebpf-tools
	@for t in $(PKG_TOOLS); do ln -sfn corebpf-tools $(BIN_DIR)/$$t; done

# PAUSE_PGID=N: process group N is stopped while the tests that need the machine to themselves run (CI's arm64
# builds in the background). No `--` before the group: the recipe's shell may be dash, whose kill refuses it. Both passes run (and the closing line is printed) even when the first fails; the exit status says whether all
# passed, and that some test ran (T may select tests of one pass only). The closing line is kept in $(TARGET_DIR)/nextest/summary for CI's report.
test-run: bin-links
	@$(MAKE) --no-print-directory deb-package
	@command -v cargo-nextest > /dev/null || { echo "cargo-nextest is missing: ./scripts/deps.sh installs it" >&2; exit 1; }
	@rm -f $(TARGET_DIR)/nextest/*/junit.xml
	@rc=0; export COREBPF_BIN_DIR=$(abspath $(BIN_DIR)); \
	$(RUN_CARGO) nextest run --cargo-profile $(TEST_PROFILE) $(TEST_FEATURES) --no-fail-fast --no-tests pass \
		-E '$(NEXTEST_FILTER) and not ($(ALONE))$(if $(T), and ($(T)))' || rc=1; \
	$(if $(PAUSE_PGID),kill -STOP -$(PAUSE_PGID) 2> /dev/null || echo "background group $(PAUSE_PGID) not paused: it has ended";) \
	$(RUN_CARGO) nextest run --cargo-profile $(TEST_PROFILE) $(TEST_FEATURES) --no-fail-fast --profile alone --no-tests pass \
		-E '$(NEXTEST_FILTER) and ($(ALONE))$(if $(T), and ($(T)))' || rc=1; \
	$(if $(PAUSE_PGID),kill -CONT -$(PAUSE_PGID) 2> /dev/null;) \
	./scripts/test-summary.sh $(TARGET_DIR)/nextest | tee $(TARGET_DIR)/nextest/summary; \
	grep -q '^tests: 0 passed, 0 failed' $(TARGET_DIR)/nextest/summary && { echo "no test matched" >&2; rc=1; }; \
	exit $$rc

deps:
	./scripts/deps.sh

# With the test build's profile and features (TEST_FEATURES, which also lints the matrix-only tests): the
# dependencies' build-script runs (libbpf's C) are then shared with `make test-build`. The tools' own build scripts
# (their BPF objects) run again there: cargo keys the workspace's crates by clippy's compiler wrapper too.
lint:
	$(RUN_CARGO) fmt --all --check
	$(RUN_CARGO) clippy --profile $(TEST_PROFILE) $(TEST_FEATURES) --all-targets -- -D warnings

fmt:
	$(RUN_CARGO) fmt --all

# Each tool's documentation source is tools/TOOL/doc.md (docs/tool-doc.md): the man page's sections and --help's
# examples are made from it at build and install time, its web page and README row here.
docs:
	@python3 scripts/gen-docs.py

docs-check:
	@python3 scripts/gen-docs.py --check

# The tools' help, man and web texts are the project's own words: no phrase of BCC's tools (held as hashes in
# scripts/bcc-phrases.sha256) may appear in tools/*/doc.md, the --help snapshots or the clap doc comments.
provenance-check:
	@python3 scripts/provenance-check.py

# Licences (scripts/license-check.py): every source file's SPDX line, every shipped crate's and C library's
# licence against the policy, and debian/copyright current. `make copyright` rewrites debian/copyright.
license-check:
	@python3 scripts/license-check.py

copyright:
	@python3 scripts/license-check.py copyright --write

clean:
	$(RUN_CARGO) clean

# The kernel matrix (vm/vmtest.sh, vm/README.md): each tool's scenarios (tools/<tool>/scenarios) on Debian's 5.10,
# 6.1 and 6.12 kernels in QEMU, with a table tool x kernel. Kernels are cached in VM_CACHE (~/.cache/corebpf-vm).
#   make vmtest [KERNELS=5.10,6.1,6.12,host] [TOOLS=biolatency,...]   CI's tier
#   make vmtest-full                                                  every scenario
#   make vmtest-selfcheck   deliberately broken fallbacks must fail the matrix with readable reasons
#   make vmtest-arm64 [KERNELS=6.1-arm64,6.12-arm64] [TOOLS=...]   the arm64 column: the aarch64 static toolset
#                           in Debian's arm64 kernels under qemu-system-aarch64: the /arm64 lines' tests (cross-built),
#                           every other CI line as a smoke check
# TOOLS is also this Makefile's list of every tool: only a TOOLS given on the command line selects.
VMTEST_TOOLS = $(if $(filter command line,$(origin TOOLS)),$(TOOLS))
.PHONY: vmtest vmtest-full vmtest-selfcheck vmtest-arm64
vmtest:
	KERNELS='$(KERNELS)' TOOLS='$(VMTEST_TOOLS)' VM_TIER=ci ./vm/vmtest.sh

vmtest-full:
	KERNELS='$(KERNELS)' TOOLS='$(VMTEST_TOOLS)' VM_TIER=full ./vm/vmtest.sh

vmtest-selfcheck:
	KERNELS='$(KERNELS)' ./vm/selfcheck.sh

vmtest-arm64:
	KERNELS='$(KERNELS)' TOOLS='$(VMTEST_TOOLS)' VM_TIER=ci VM_ARCH=aarch64 VM_LOG_LINK=latest-arm64 ./vm/vmtest.sh

# Benchmarks against libbpf-tools and bpftrace (bench/run.sh): installs the anchors, builds release binaries and
# writes docs/benchmarks.md (about 10 minutes, as root; never part of `make test`). BENCH_REPEAT=N rounds,
# BENCH_ONLY=1,4 some figures, BENCH_QUICK=1 small workloads, BENCH_NO_BUILD=1 use target/release as it is.
.PHONY: bench
bench:
	./bench/run.sh

# Soak and fault test (soak/run.sh): runs every tool of the static binary at once under a mixed workload with faults for
# SOAK_SECONDS (default 600, as root) and writes docs/soak.md; fails on a crash, panic, leak, RSS growth or loss.
.PHONY: soak
soak: static bin-links
	COREBPF_BIN_DIR=$(abspath $(BIN_DIR)) ./soak/run.sh
