#!/usr/bin/env bash
# Live queries: N live queries (default 1000, over 100 connections) while durable creates commit at a
# steady rate (default 1000/s), each shape on a fresh foliod: every query the same window of a view
# (shared; every write changes it), each query a range of the view of its own (a write changes one),
# and, for the cost, as many plain event watches of the collection under the same load. Prints
# delivery latency (foliod: commit to socket; clients: write sent to line received) and foliod's CPU.
#
#   bench/live.sh [QUERIES [RATE [SECONDS]]]
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT).
source "$(dirname "$0")/lib.sh"
QUERIES="${1:-1000}"
RATE="${2:-1000}"
SECONDS_RUN="${3:-10}"

build
header "$@"
for shape in same ranges watch; do
    rm -rf "$WORK/folio"
    start_foliod
    "$BIN/folio-bench" live --folio-socket "$WORK/folio.sock" --queries "$QUERIES" --rate "$RATE" --seconds "$SECONDS_RUN" --shape "$shape"
    stop_daemons
    echo
done
