# Set-up and everyday commands. `make run` and `make test` install what is missing first.
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := $(SUDO) apt-get install -y -q

# Crash cycles of `make chaos`, and of the short crash loop that `make test` ends with.
CYCLES ?= 1000
TEST_CYCLES ?= 20
# Smaller stores and shorter workloads keep the debug build's checks within about a minute.
TEST_CHAOS_ARGS ?= --cycles-per-store 5 --workload-ms 600

.PHONY: deps run build test chaos faults bench bench-views bench-relations bench-replay clean

# System libraries the package links, from Debian packages (found with pkg-config), and lmdb-utils,
# whose mdb_dump the crash loop kills in mid-read.
deps:
	@pkg-config --exists lmdb libcrypto || ($(SUDO) apt-get update -q && $(APT_INSTALL) liblmdb-dev libssl-dev pkg-config)
	@command -v mdb_dump >/dev/null || ($(SUDO) apt-get update -q && $(APT_INSTALL) lmdb-utils)

build: deps
	$(SWIFT) build -c release

# Builds and starts foliod in the foreground on its default socket and data directory.
run: build
	.build/release/foliod

# Every test: unit tests of each layer and integration tests against the real foliod binary, then
# TEST_CYCLES cycles of the crash loop (about a minute).
test: deps
	$(SWIFT) build
	$(SWIFT) test
	"$$($(SWIFT) build --show-bin-path)/folio-chaos" --cycles $(TEST_CYCLES) $(TEST_CHAOS_ARGS)

# The crash loop (docs/RELIABILITY.md): CYCLES kill -9 cycles of a release foliod, each checked against
# the history of requests and answers. CHAOS_ARGS go to folio-chaos, e.g. CHAOS_ARGS='--seed 7'.
chaos: deps
	$(SWIFT) build -c release
	"$$($(SWIFT) build -c release --show-bin-path)/folio-chaos" --cycles $(CYCLES) $(CHAOS_ARGS)

# The long fault sweep (docs/RELIABILITY.md): every I/O fault on its 1st ... FAULT_CALLS-th call and
# every crash failpoint on passes 1 ... FAULT_CALLS, each followed by the checks of the fault tests.
FAULT_CALLS ?= 40
faults: deps
	$(SWIFT) build
	FOLIO_FAULT_SWEEP=$(FAULT_CALLS) $(SWIFT) test --filter FaultSweepTests

# Compares foliod with redis-server on Unix sockets in a temporary directory (installs redis-server if
# missing); prints one table. BENCH_ARGS go to folio-bench, e.g. BENCH_ARGS='--duration 1'.
bench: deps
	SWIFT="$(SWIFT)" bench/run.sh $(BENCH_ARGS)

# Views over 1,000,000 objects against a Redis sorted set (bench/views.sh).
bench-views: deps
	SWIFT="$(SWIFT)" bench/views.sh $(BENCH_ARGS)

# References over 1,000,000 items against Redis sorted sets, atomic batches, cascading deletes; then
# plain creates and gets against foliod built from BASELINE, main before the relations work (bench/relations.sh).
BASELINE ?= e43aed0
bench-relations: deps
	SWIFT="$(SWIFT)" BASELINE="$(BASELINE)" bench/relations.sh $(BENCH_ARGS)

# Export, verify, rebuild, import of 1,000,000 events, and watch delivery latency (bench/replay.sh).
bench-replay: deps
	SWIFT="$(SWIFT)" bench/replay.sh $(BENCH_ARGS)

clean:
	rm -rf .build
