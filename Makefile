# Set-up and everyday commands. `make run` and `make test` install what is missing first.
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := $(SUDO) apt-get install -y -q

.PHONY: deps run build test bench bench-views bench-replay storms soak clean

# System libraries the package links, from Debian packages (found with pkg-config).
deps:
	@pkg-config --exists lmdb libcrypto || ($(SUDO) apt-get update -q && $(APT_INSTALL) liblmdb-dev libssl-dev pkg-config)

build: deps
	$(SWIFT) build -c release

# Builds and starts foliod in the foreground on its default socket and data directory.
run: build
	.build/release/foliod

# Every test: unit tests of each layer and integration tests against the real foliod binary.
test: deps
	$(SWIFT) build
	$(SWIFT) test

# Compares foliod with redis-server on Unix sockets in a temporary directory (installs redis-server if
# missing); prints one table. BENCH_ARGS go to folio-bench, e.g. BENCH_ARGS='--duration 1'.
bench: deps
	SWIFT="$(SWIFT)" bench/run.sh $(BENCH_ARGS)

# Views over 1,000,000 objects against a Redis sorted set (bench/views.sh).
bench-views: deps
	SWIFT="$(SWIFT)" bench/views.sh $(BENCH_ARGS)

# Export, verify, rebuild, import of 1,000,000 events, and watch delivery latency (bench/replay.sh).
bench-replay: deps
	SWIFT="$(SWIFT)" bench/replay.sh $(BENCH_ARGS)

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
