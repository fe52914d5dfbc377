#!/usr/bin/env bash
# Compares foliod with redis-server and SQLite: starts both daemons on Unix sockets in a fresh
# temporary directory, runs folio-bench against them and against SQLite in its own process on two
# database files in the same directory (WAL with synchronous=FULL, and with NORMAL; each file starts
# empty), scenario by scenario, alternating, stops both daemons, removes the directory.
#
#   bench/run.sh [folio-bench options]      e.g. bench/run.sh --duration 1 --warmup 0.5 --only get-1,create-16
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT).
source "$(dirname "$0")/lib.sh"

build
start_redis
start_foliod
header "$@"
"$BIN/folio-bench" --folio-socket "$WORK/folio.sock" --folio-pid "$FOLIO_PID" \
    --redis-socket "$WORK/redis.sock" --redis-pid "$REDIS_PID" \
    --sqlite-database "$WORK/sqlite-full.db" --sqlite-normal-database "$WORK/sqlite-normal.db" \
    --sync-probe "$WORK" "$@"
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
