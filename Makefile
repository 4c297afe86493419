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
