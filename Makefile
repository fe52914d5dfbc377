# Set-up and everyday commands. `make run` and `make test` install what is missing first.
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := $(SUDO) apt-get install -y -q

# Crash cycles of `make chaos`, and of the short crash loop that `make test` ends with.
CYCLES ?= 1000
TEST_CYCLES ?= 20
# Smaller stores and shorter workloads keep the debug build's checks within about a minute.
TEST_CHAOS_ARGS ?= --cycles-per-store 5 --workload-ms 600
# The crash loop on a cluster (`folio-chaos --cluster NODES`): cycles of `make chaos-cluster` and of
# `make test` (about 20 s).
NODES ?= 3
TEST_CLUSTER_CYCLES ?= 8

.PHONY: deps run build format lint test test-python test-protocol test-asan test-tsan fuzz ci-fuzz chaos chaos-cluster power-loss power-loss-tools vm-power-cut faults relations bench bench-views bench-relations bench-access bench-instructions bench-write-instructions bench-replay bench-files bench-live bench-cluster storms soak install uninstall clean

# System libraries the package links, from Debian packages (found with pkg-config), lmdb-utils,
# whose mdb_dump the crash loop kills in mid-read, prometheus_client (PyPI), whose parser the
# metrics test reads foliod's metrics with, and jsonschema (PyPI), which test-protocol validates with.
deps:
	@pkg-config --exists lmdb libcrypto sqlite3 || ($(SUDO) apt-get update -q && $(APT_INSTALL) liblmdb-dev libssl-dev libsqlite3-dev pkg-config)
	@command -v mdb_dump >/dev/null || ($(SUDO) apt-get update -q && $(APT_INSTALL) lmdb-utils)
	@pkg-config --exists libpq && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ($(SUDO) apt-get update -q && $(APT_INSTALL) libpq-dev postgresql)
	@python3 -c 'import prometheus_client' 2>/dev/null || python3 -m pip install -q prometheus_client
	@python3 -c 'import jsonschema, referencing' 2>/dev/null || python3 -m pip install -q 'jsonschema>=4.18'

build: deps
	$(SWIFT) build -c release

# Builds and starts foliod in the foreground on its default socket and data directory.
run: build
	.build/release/foliod

# The house format (.swift-format: 4 spaces, 120 columns), kept by `swift format` from the toolchain.
# `make format` rewrites the Swift files in place; `make lint`, where `make test` starts, fails on
# any difference.
SWIFT_SOURCES := Package.swift Sources Tests Examples bench/foliokit-bench fuzz
format:
	$(SWIFT) format format --in-place --parallel --recursive $(SWIFT_SOURCES)

lint:
	$(SWIFT) format lint --strict --parallel --recursive $(SWIFT_SOURCES)

# Every test (after `make lint`): unit tests of each layer and integration tests against the real foliod binary (whose
# lines go to the wire log WIRE_LOG), the protocol's examples and schema (test-protocol), then
# TEST_CYCLES cycles of the crash loop (about a minute) and TEST_CLUSTER_CYCLES of it on three cluster
# nodes, and the tests again under AddressSanitizer
# (test-asan). The fuzz targets run behind their own targets (fuzz, ci-fuzz): with them, a clean
# clone's make test took 28 of CI's 30 minutes on 2026-12-03; `swift test` replays the inputs that
# once found a defect (fuzz/regressions/).
test: deps lint
	$(SWIFT) build
	rm -rf $(WIRE_LOG) && mkdir -p $(WIRE_LOG)
	FOLIO_WIRE_LOG="$(abspath $(WIRE_LOG))" $(SWIFT) test
	$(MAKE) test-python
	$(MAKE) test-protocol
	FOLIO_TIMING_TESTS=1 $(SWIFT) test --filter BoundedCostTests
	"$$($(SWIFT) build --show-bin-path)/folio-chaos" --cycles $(TEST_CYCLES) $(TEST_CHAOS_ARGS)
	"$$($(SWIFT) build --show-bin-path)/folio-chaos" --cluster 3 --cycles $(TEST_CLUSTER_CYCLES) $(TEST_CHAOS_ARGS)
	$(MAKE) test-asan

# The Python client (clients/python): installs it and pytest, then runs its tests against the debug
# foliod, live queries included (-m live selects those, PYTEST_ARGS='-m "not live"' leaves them out).
PYTEST_ARGS ?=
test-python:
	$(SWIFT) build --product foliod
	python3 -m pip install -q ./clients/python pytest
	FOLIOD="$$($(SWIFT) build --show-bin-path)/foliod" python3 -m pytest -q clients/python/tests Tests/VM $(PYTEST_ARGS)

# The protocol against its schema and examples (proto/examples/README.md): every example replayed
# against a fresh debug foliod, PROTOCOL.md's examples and schema-cases.jsonl (what no replay shows:
# live queries, another uid's refusals) validated against proto/schema, and, if the
# directory exists, the wire log of the last `make test`, every line the integration tests sent or
# received (validate-log).
WIRE_LOG ?= .build/wire-log
test-protocol: deps
	$(SWIFT) build --product foliod
	FOLIOD="$$($(SWIFT) build --show-bin-path)/foliod" python3 proto/check/protocol_check.py replay
	python3 proto/check/protocol_check.py validate-doc
	python3 proto/check/protocol_check.py schema-cases
	if [ -d "$(WIRE_LOG)" ]; then python3 proto/check/protocol_check.py validate-log "$(WIRE_LOG)"; fi

# The crash loop (docs/RELIABILITY.md): CYCLES kill -9 cycles of a release foliod, each checked against
# the history of requests and answers. CHAOS_ARGS go to folio-chaos, e.g. CHAOS_ARGS='--seed 7'.
chaos: deps
	$(SWIFT) build -c release
	"$$($(SWIFT) build -c release --show-bin-path)/folio-chaos" --cycles $(CYCLES) $(CHAOS_ARGS)

# The crash loop on NODES cluster nodes sharing one PostgreSQL log (docs/RELIABILITY.md, "Several
# nodes"): each cycle kills one node, every node, or stops PostgreSQL with -m immediate mid-workload.
chaos-cluster: deps
	$(SWIFT) build -c release
	"$$($(SWIFT) build -c release --show-bin-path)/folio-chaos" --cluster $(NODES) --cycles $(CYCLES) $(CHAOS_ARGS)

# The crash loop with every kill a power loss (docs/POWERLOSS.md): foliod runs under the shim of
# Tests/Faults/powerloss.c, and after each kill its data directory holds what a disk could: what was
# flushed, and of each page written since, any one of its versions. POWERLOSS_ARGS go to folio-chaos,
# e.g. POWERLOSS_ARGS='--durability relaxed' (which must report lost writes) or '--power-loss-unit 512'.
POWERLOSS_TOOLS = .build/powerloss
power-loss-tools: Tests/Faults/powerloss.c Tests/Faults/powerloss_image.c Tests/Faults/powerloss.h
	mkdir -p $(POWERLOSS_TOOLS)
	$(CC) -shared -fPIC -O2 -Wall -o $(POWERLOSS_TOOLS)/powerloss.so Tests/Faults/powerloss.c -ldl
	$(CC) -O2 -Wall -o $(POWERLOSS_TOOLS)/powerloss_image Tests/Faults/powerloss_image.c

power-loss: deps power-loss-tools
	$(SWIFT) build -c release
	"$$($(SWIFT) build -c release --show-bin-path)/folio-chaos" --cycles $(CYCLES) --power-loss $(POWERLOSS_TOOLS)/powerloss.so $(POWERLOSS_ARGS)

# Power cuts of a real VM (docs/POWERLOSS.md, "Power cuts of a VM"): VM_CYCLES times, a Debian VM
# under qemu writing through foliod is killed at a random moment, its disk's write cache lost
# (Tests/VM/volatile_disk.py), and booted again, and every write acknowledged so far is checked,
# with verify. Root, qemu and debootstrap (installed when missing);
# the VM's root file system is made once in .build/vm (a few minutes); about 3 minutes a cycle under
# software emulation. VM_ARGS go to Tests/VM/vm_power_cut.py, e.g. VM_ARGS='--accel kvm --seed 7'
# or the control VM_ARGS='--durability none', which must report lost writes.
VM_CYCLES ?= 20
vm-power-cut: deps
	$(SWIFT) build -c release --product foliod
	python3 Tests/VM/vm_power_cut.py --cycles $(VM_CYCLES) --foliod "$$($(SWIFT) build -c release --show-bin-path)/foliod" $(VM_ARGS)

# The long fault sweep (docs/RELIABILITY.md): every I/O fault on its 1st ... FAULT_CALLS-th call and
# every crash failpoint on passes 1 ... FAULT_CALLS, each followed by the checks of the fault tests.
FAULT_CALLS ?= 40
faults: deps
	$(SWIFT) build
	FOLIO_FAULT_SWEEP=$(FAULT_CALLS) $(SWIFT) test --filter FaultSweepTests

# The test suite under a sanitizer. Each has a build directory of its own, so the foliod and folio that
# the integration tests start (found next to the test bundle) are sanitized builds too; a foliod that
# ends with a sanitizer's report fails the test that ran it.
test-asan: deps
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build/asan
	FOLIO_SANITIZER=address LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan-suppressions.txt $(SWIFT) test --skip-build --sanitize=address --scratch-path .build/asan

test-tsan: deps
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan
	FOLIO_SANITIZER=thread TSAN_OPTIONS=suppressions=$(CURDIR)/Tests/tsan-suppressions.txt $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build/tsan

# Each libFuzzer target (fuzz/) for FUZZ_SECONDS (default 300); see fuzz/run.sh for the other knobs.
# ci-fuzz: 30 s each, two at a time (about 1.5 minutes and a build of 2: no longer in make test, which
# must stay under CI's 30 minutes on 2 cores); `make fuzz` runs them at length.
FUZZ_SECONDS ?= 300
fuzz: deps
	SWIFT="$(SWIFT)" FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

ci-fuzz: deps
	SWIFT="$(SWIFT)" FUZZ_SECONDS=30 FUZZ_JOBS=2 fuzz/run.sh

# The relations model test (Tests/IntegrationTests/RelationModelTests.swift) at length: MODEL_STEPS
# random writes with references, each checked against the model, for each seed of MODEL_SEEDS.
MODEL_STEPS ?= 20000
MODEL_SEEDS ?= 1 2 3
relations: deps
	$(SWIFT) build
	for seed in $(MODEL_SEEDS); do \
		FOLIO_MODEL_SEED=$$seed FOLIO_MODEL_STEPS=$(MODEL_STEPS) $(SWIFT) test --filter RelationModelTests || exit 1; \
	done

# Compares foliod with redis-server on Unix sockets in a temporary directory (installs redis-server if
# missing); prints one table. BENCH_ARGS go to folio-bench, e.g. BENCH_ARGS='--duration 1';
# BENCH_BASELINE=COMMIT adds foliod built from COMMIT as a fourth peer (before and after a change).
bench: deps
	SWIFT="$(SWIFT)" BASELINE="$(BENCH_BASELINE)" bench/run.sh $(BENCH_ARGS)

# Context switches and system calls a get at 16 clients: foliod with two event loops, with one, and
# Redis (bench/switches.sh).
.PHONY: bench-switches
bench-switches: deps
	SWIFT="$(SWIFT)" bench/switches.sh $(BENCH_ARGS)

# What the hand-overs between foliod's threads on a write's path cost without any work (bench/handoff.c).
.PHONY: bench-handoff
bench-handoff:
	@dir="$$(mktemp -d /tmp/folio-handoff.XXXXXX)"; $(CC) -O2 -Wall -o "$$dir/handoff" bench/handoff.c -lpthread && "$$dir/handoff" $(BENCH_ARGS); status=$$?; rm -rf "$$dir"; exit $$status

# The disk's floor under one client's durable writes: the I/O of a foliod create (the journal's
# write and sync after a commit's pages, written back every millisecond; the pages as a real foliod
# wrote them among the modes) against Redis's AOF append and sync, with no other work, alternating
# on the same disk (bench/io_floor.sh, bench/io_floor.c).
.PHONY: bench-io-floor
bench-io-floor: deps
	SWIFT="$(SWIFT)" bench/io_floor.sh $(BENCH_ARGS)

# Which LMDB pages a durable create writes, by database, from 1 and 16 clients (bench/page_writes.sh,
# with the pwrite/writev shim bench/page_writes.c preloaded into foliod).
.PHONY: bench-page-writes
bench-page-writes: deps
	SWIFT="$(SWIFT)" bench/page_writes.sh $(BENCH_ARGS)

# Views over 1,000,000 objects against a Redis sorted set (bench/views.sh).
bench-views: deps
	SWIFT="$(SWIFT)" bench/views.sh $(BENCH_ARGS)

# References over 1,000,000 items against Redis sorted sets, atomic batches, cascading deletes; then
# plain creates and gets against foliod built from BASELINE, main before the relations work (bench/relations.sh).
BASELINE ?= e43aed0
bench-relations: deps
	SWIFT="$(SWIFT)" BASELINE="$(BASELINE)" bench/relations.sh $(BENCH_ARGS)

# What access control costs: creates and gets from an unprivileged peer whose role comes from the
# policy, against foliod built from ACCESS_BASELINE, main before access control (bench/access.sh).
ACCESS_BASELINE ?= 61ec72b
bench-access: deps
	SWIFT="$(SWIFT)" BASELINE="$(ACCESS_BASELINE)" bench/access.sh $(BENCH_ARGS)

# Instructions per pipelined get (callgrind) against the same baseline (bench/instructions.sh).
bench-instructions: deps
	SWIFT="$(SWIFT)" BASELINE="$(ACCESS_BASELINE)" bench/instructions.sh $(BENCH_ARGS)

# Instructions per create (no views, five views) and per rebuilt event, counted by callgrind, against
# foliod built from WRITE_BASELINE (bench/write_instructions.sh).
WRITE_BASELINE ?= 8eafad8
bench-write-instructions: deps
	SWIFT="$(SWIFT)" BASELINE="$(WRITE_BASELINE)" bench/write_instructions.sh $(BENCH_ARGS)

# Files through inline base64, pieces and descriptor passing against cp on the same disk (bench/files.sh).
bench-files: deps
	SWIFT="$(SWIFT)" bench/files.sh $(BENCH_ARGS)

# 1,000 live queries (one shared window, then 1,000 ranges of a view) and 1,000 event watches under
# 1,000 durable writes/s: delivery latency and foliod's CPU (bench/live.sh).
bench-live: deps
	SWIFT="$(SWIFT)" bench/live.sh $(BENCH_ARGS)

# Export, verify, rebuild, import of 1,000,000 events, and watch delivery latency (bench/replay.sh).
bench-replay: deps
	SWIFT="$(SWIFT)" bench/replay.sh $(BENCH_ARGS)

# Cluster mode on one PostgreSQL (bench/cluster.sh): durable creates and gets with 1, 2 and 3 nodes
# against a single node, apply lag between nodes, 1,000,000 events filled in batches and a fresh
# node catching up with them. PostgreSQL (installed by deps) runs in a temporary directory.
bench-cluster: deps
	SWIFT="$(SWIFT)" bench/cluster.sh $(BENCH_ARGS)

# FolioKit's overhead (docs/BENCHMARKS.md): sequential gets through the Swift SDK against raw lines, one
# connection each, to a release foliod in a temporary directory. SDK_BENCH_ARGS go to foliokit-bench.
SDK_BENCH_ARGS ?= --count 5000 --rounds 20
.PHONY: bench-sdk
bench-sdk: deps
	$(SWIFT) build -c release --product foliod
	$(SWIFT) build -c release --product foliokit-bench
	@bin="$$($(SWIFT) build -c release --show-bin-path)"; dir="$$(mktemp -d /tmp/folio-sdk-bench.XXXXXX)"; \
	"$$bin/foliod" --data "$$dir/data" --socket "$$dir/folio.sock" 2>"$$dir/foliod.log" & pid=$$!; \
	for i in $$(seq 200); do [ -S "$$dir/folio.sock" ] && break; sleep 0.05; done; \
	"$$bin/foliokit-bench" --socket "$$dir/folio.sock" $(SDK_BENCH_ARGS); status=$$?; \
	kill $$pid; wait $$pid; rm -rf "$$dir"; exit $$status

# Installs foliod and folio with their systemd units, sysusers and tmpfiles entries, configuration
# file, man pages and shell completions (tools/install.sh). DESTDIR and PREFIX as usual; BINARIES, a
# directory with foliod and folio already built, is installed instead of the release build.
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
INSTALL_VARIABLES = PREFIX="$(PREFIX)" SYSCONFDIR="$(SYSCONFDIR)" DESTDIR="$(DESTDIR)" BINARIES="$(BINARIES)" SWIFT="$(SWIFT)" \
	SYSTEMD_SETUP="$(SYSTEMD_SETUP)"
install:
	$(INSTALL_VARIABLES) tools/install.sh install

uninstall:
	$(INSTALL_VARIABLES) tools/install.sh uninstall

# Hostile and extreme clients against a fresh foliod (bench/storms.sh): 10,000 idle connections,
# 500 slowloris and 100 over-long-line clients, watchers that never read, 100,000 connects and
# disconnects, long writes abandoned; one table, exit status 1 if a bound broke. STORMS_ARGS go to
# folio-bench storms.
storms: deps
	SWIFT="$(SWIFT)" bench/storms.sh $(STORMS_ARGS)

# A mixed load at half the measured maximum for SOAK_MINUTES, foliod sampled every 10 s and drawn
# as an SVG in bench/results/ (bench/soak.sh); SOAK_SVG=docs/soak.svg replaces the committed chart.
SOAK_MINUTES ?= 30
soak: deps
	SWIFT="$(SWIFT)" SOAK_SVG="$(SOAK_SVG)" bench/soak.sh $(SOAK_MINUTES) $(SOAK_ARGS)

clean:
	rm -rf .build
