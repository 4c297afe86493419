# corebpf-tools: build, test and install the tools.
#
#   make            build every tool (release)
#   make test       unit and integration tests (as root: they load BPF programs)
#   make deps       install build and test dependencies (Debian/Ubuntu, as root)
#   make lint       clippy and rustfmt checks

CARGO ?= cargo
PREFIX ?= /usr/local
DESTDIR ?=
APP_PREFIX ?=
TOOLS := $(notdir $(wildcard tools/*))
RELEASE_DIR := target/release

.PHONY: all build test deps lint fmt clean tools

all: build

build:
	$(CARGO) build --release --bins

tools:
	@echo $(TOOLS)

test: build
	$(CARGO) test --release --workspace

deps:
	./scripts/deps.sh

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean

# The kernel matrix (vm/vmtest.sh): the tools' integration tests, built static, on Debian's 5.10, 6.1 and 6.12
# kernels in QEMU, with a table tool x kernel. Kernels are cached in VM_CACHE (default ~/.cache/corebpf-vm).
#   make vmtest [KERNELS=5.10,6.1,6.12,host] [TOOLS=biolatency,...]
#   make vmtest-selfcheck   deliberately broken fallbacks must fail the matrix with readable reasons
.PHONY: vmtest vmtest-selfcheck
vmtest:
	KERNELS='$(KERNELS)' TOOLS='$(TOOLS)' ./vm/vmtest.sh

vmtest-selfcheck:
	KERNELS='$(KERNELS)' ./vm/selfcheck.sh

# Benchmarks against libbpf-tools and bpftrace (bench/run.sh): installs the anchors, builds release binaries and
# writes docs/benchmarks.md (about 10 minutes, as root; never part of `make test`). BENCH_REPEAT=N rounds,
# BENCH_ONLY=1,4 some figures, BENCH_QUICK=1 small workloads, BENCH_NO_BUILD=1 use target/release as it is.
.PHONY: bench
bench:
	./bench/run.sh
