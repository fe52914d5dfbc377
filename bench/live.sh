#!/usr/bin/env bash
# Live queries: N live queries (default 1000, over 100 connections) while durable creates commit at a
# steady rate, each run on a fresh foliod:
#   - ranges at RATE (default 1000/s): query k is owner uk's first 20 of view feedByOwner (by owner,
#     then newest), so each write changes one window; the same writes with no subscriber beside it;
#   - at SHARED_RATE (default 100/s), where every write reaches every client: all N queries the same
#     first 20 of the view (one window shared), and N plain event watches of the collection, for the
#     cost of the same delivery; the writes alone beside them.
# Prints delivery latency (foliod: commit to socket; clients: write sent to line received) and
# foliod's CPU.
#
#   bench/live.sh [QUERIES [RATE [SHARED_RATE [SECONDS]]]]
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT).
source "$(dirname "$0")/lib.sh"
QUERIES="${1:-1000}"
RATE="${2:-1000}"
SHARED_RATE="${3:-100}"
SECONDS_RUN="${4:-10}"

build
header "$@"
for run in "none $RATE" "ranges $RATE" "none $SHARED_RATE" "same $SHARED_RATE" "watch $SHARED_RATE"; do
    set -- $run
    rm -rf "$WORK/folio"
    start_foliod
    "$BIN/folio-bench" live --folio-socket "$WORK/folio.sock" --queries "$QUERIES" --rate "$2" --seconds "$SECONDS_RUN" --shape "$1"
    stop_daemons
    echo
done
