# One target per thing a person does. Non-Rust tools live in a pinned virtual environment
# (.venv), installed on first use; nothing is installed globally. requirements.txt is what
# `make demo` and `make test` need; requirements-bench.txt adds the benchmark peer and zig, for
# the targets that use them (bench, bench-quick, build, build-zip).
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= .venv
VENV_BIN    := $(CURDIR)/$(VENV)/bin
VENV_STAMP  := $(VENV)/.installed-$(shell cat requirements.txt | cksum | cut -d' ' -f1)
# The extras' stamp covers both files: a change in either reinstalls them.
BENCH_STAMP := $(VENV)/.installed-bench-$(shell cat requirements.txt requirements-bench.txt | cksum | cut -d' ' -f1)
export PATH := $(VENV_BIN):$(PATH)
# moto's server binary for the integration tests (crates/receiver/tests/support starts one per test).
export MOTO_SERVER := $(VENV_BIN)/moto_server

EVENT ?= events/clean-batch.json
WATCH_PORT ?= 9000
# Debian's Chromium for the viewer's browser tests (tests/e2e/test_ui_browser.py), pinned as the
# Python tools are: `apt-cache policy chromium` lists the versions the package registry holds.
CHROMIUM_VERSION ?= 156.0.8078.108-1~deb12u1
TABLE_NAME ?= AuditMessages

.PHONY: bench-ocsf bench-prove bench-ui chromium help venv venv-bench peers fmt-check lint test test-suites test-build test-rust unit build build-zip bench bench-quick bench-seal bench-verify bench-evidence watch invoke clean

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

# cargo-lambda's wheel requires ziglang (about 380 MB, unpinned), which only cross-compiling
# needs (`make build`); `cargo lambda watch` and `invoke` run without it. So cargo-lambda is
# installed without dependencies and the rest of requirements.txt as usual.
$(VENV_STAMP): requirements.txt
	python3 -m venv $(VENV)
	$(VENV_BIN)/pip install --disable-pip-version-check -q --no-deps $$(grep -E '^cargo-lambda==' requirements.txt)
	grep -vE '^cargo-lambda==' requirements.txt | $(VENV_BIN)/pip install --disable-pip-version-check -q -r /dev/stdin
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(VENV_STAMP) ## install the pinned Python tools (moto, cargo-lambda) into .venv

chromium: ## Debian's chromium, pinned (CHROMIUM_VERSION), for the viewer's browser tests
	@if [ "$$(dpkg-query -W -f='$${Version}' chromium 2>/dev/null)" != "$(CHROMIUM_VERSION)" ]; then \
	  apt-get update -qq && { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium=$(CHROMIUM_VERSION) || { \
	    echo "chromium $(CHROMIUM_VERSION) is no longer in the package registry (Debian keeps only its newest security update): installing $$(apt-cache policy chromium | awk '/Candidate/ {print $$2}') instead; set CHROMIUM_VERSION to it" >&2; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }; }; fi

# Installing requirements.txt again removes every stamp, this one included.
$(BENCH_STAMP): $(VENV_STAMP) requirements-bench.txt
	$(VENV_BIN)/pip install --disable-pip-version-check -q -r requirements-bench.txt
	rm -f $(VENV)/.installed-bench-*
	touch $@

# The TypeScript benchmark peer (bench/peer-ts): its pinned node_modules, from package-lock.json
# with `npm ci` (Node >= 20 and npm on PATH). The stamp lives in node_modules, which `npm ci`
# replaces whole, so a changed lock file reinstalls it.
PEER_TS       := bench/peer-ts
PEER_TS_STAMP := $(PEER_TS)/node_modules/.installed-$(shell cat $(PEER_TS)/package-lock.json | cksum | cut -d' ' -f1)

$(PEER_TS_STAMP): $(PEER_TS)/package-lock.json $(PEER_TS)/package.json
	npm ci --no-audit --no-fund --prefix $(PEER_TS)
	touch $@

venv-bench: $(BENCH_STAMP) ## add the benchmark peer (Powertools Python) and zig (arm64 builds) to .venv

peers: venv-bench $(PEER_TS_STAMP) ## the benchmark peers: Powertools Python (.venv) and TypeScript (bench/peer-ts)

fmt-check: ## cargo fmt --check
	cargo fmt --all -- --check

lint: fmt-check ## fmt and clippy, warnings are errors
	cargo clippy --workspace --all-targets -- -D warnings

unit: ## unit tests only (no local AWS endpoint needed)
	cargo test --workspace --lib --bins

# Other make files add their suites here (TEST_EXTRA += e2e).
TEST_EXTRA ?=

test: venv fmt-check ## everything: fmt, clippy, unit, integration (moto), cargo lambda watch, end-to-end
	$(VENV_BIN)/python -m local.canary -- $(MAKE) --no-print-directory test-suites

# The suites themselves; `make test` runs them under local/canary.py, which proves that they
# signalled no process outside their own and left none behind. Everything is built first (the
# tests, and the binaries the end-to-end stacks run), then the Rust suites and the end-to-end
# suites run side by side: the end-to-end tests mostly wait on their stacks' schedules, and no
# build holds cargo's lock while they start their functions. Each side's output is printed whole
# when it ends (make -O). clippy runs on the Rust side after the cargo tests, in a target
# directory of its own (CLIPPY_TARGET_DIR: its lock is not the one `cargo lambda watch` takes when
# a stack starts a function), on the CPU the end-to-end tests leave while they wait.
RUST_TESTS := --workspace --lib --bins --tests
CLIPPY_TARGET_DIR ?= $(CURDIR)/target/clippy

test-suites: test-build
	$(MAKE) --no-print-directory -j2 -Otarget test-rust $(TEST_EXTRA)

test-build:
	@if command -v cargo-nextest >/dev/null; then cargo nextest run $(RUST_TESTS) --no-run; else cargo test $(RUST_TESTS) --no-run; fi
	cargo build --bins

# Both run whatever the first gives; the target fails when either did.
test-rust:
	@status=0; \
	if command -v cargo-nextest >/dev/null; then cargo nextest run $(RUST_TESTS) --no-fail-fast || status=$$?; \
	else cargo test $(RUST_TESTS) --no-fail-fast || status=$$?; fi; \
	echo "clippy: cargo clippy --workspace --all-targets -- -D warnings (in $(CLIPPY_TARGET_DIR))"; \
	CARGO_TARGET_DIR=$(CLIPPY_TARGET_DIR) cargo clippy --workspace --all-targets -- -D warnings || status=$$?; \
	exit $$status

build: venv-bench ## the arm64 Lambda artefact (target/lambda/audit-receiver/bootstrap)
	cargo lambda build --release --arm64 --bin audit-receiver

build-zip: venv-bench ## the arm64 artefact zipped, as Lambda receives it (target/lambda/audit-receiver/bootstrap.zip)
	cargo lambda build --release --arm64 --bin audit-receiver --output-format zip

# The load bench measures the function inside cgroups with each Lambda memory size's CPU share
# (root, cgroup v1 cpu controller; rows are marked skipped where it cannot write them), and builds
# the naive Rust peer (bench/naive_peer.rs) itself with `cargo bench --no-run`.
bench: build-zip peers ## benchmarks next to the peers (Powertools TS and Python, naive Rust); writes BENCHMARKS.md and its charts (about 10 minutes)
	mkdir -p target/bench
	cargo build --release --bin audit-receiver
	cargo bench -p audit-bench --bench cpu | tee target/bench/cpu.md
	PEER_PYTHON=$(VENV_BIN)/python cargo bench -p audit-bench --bench load

bench-quick: peers ## a shorter benchmark run (smaller sizes, no package build); writes BENCHMARKS.md
	mkdir -p target/bench
	cargo build --release --bin audit-receiver
	cargo bench -p audit-bench --bench cpu | tee target/bench/cpu.md
	PEER_PYTHON=$(VENV_BIN)/python cargo bench -p audit-bench --bench load -- --quick

bench-seal: ## the sealer over simulated hours (4 and 64 shards, 100 to 30,000 events/s, 20 ms a request) on a simulated clock: one line per configuration (docs/scaling.md; a few minutes)
	cargo bench -p audit-archiver --bench seal

bench-ocsf: ## the OCSF copy's CPU and bytes per event: 100,000 sample events mapped and written as Parquet in the writer's batches (docs/ocsf.md "Figures"; a release build, then seconds)
	cargo bench -p audit-ocsf --bench encode

bench-verify: venv ## auditctl verify over 100,000 and 1,000,000 archived events on moto, next to sha256sum of the same bytes, with prove and check-proof (BENCHMARKS.md "Proving the trail"; run by hand, about 10 minutes)
	cargo build --release --bin auditctl
	cargo bench -p audit-bench --bench verify -- --events 100000,1000000 --prove 20

bench-evidence: venv ## auditctl export --evidence of 100,000 archived events on moto into a directory, a .zip and a .tar.gz, each checked offline with check-proof (BENCHMARKS.md "An evidence bundle of 100,000 events"; run by hand, about 3 minutes after the release build, 0.9 GB of memory)
	cargo build --release --bin auditctl
	cargo bench -p audit-bench --bench verify -- --events 100000 --evidence-only

bench-prove: venv ## auditctl prove and check-proof over 10,000,000 archived events sealed by the real sealer on moto (BENCHMARKS.md "Proving one event"; run by hand, about 30 minutes, 6 GB of memory)
	cargo build --release --bin auditctl
	cargo bench -p audit-bench --bench verify -- --events 10000000 --objects-per-period 2 --prove 20 --prove-only

bench-ui: ## the viewer's page times at 100,000 events on the stand-in (BENCHMARKS.md "The viewer's pages")
	cargo build --bin auditctl
	python3 bench/ui.py

watch: venv ## run the function locally (cargo lambda watch) against AWS_ENDPOINT_URL
	TABLE_NAME=$(TABLE_NAME) cargo lambda watch --invoke-address 127.0.0.1 --invoke-port $(WATCH_PORT)

invoke: venv ## invoke the running function: make invoke EVENT=events/<file>
	cargo lambda invoke audit-receiver --invoke-address 127.0.0.1 --invoke-port $(WATCH_PORT) --data-file $(EVENT)

clean: ## remove build output and the virtual environment
	cargo clean
	rm -rf $(VENV)

# Deployment (template.yaml, sam) and the local stack / demo live in their own files.
-include mk/*.mk
