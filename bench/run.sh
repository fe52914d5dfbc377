#!/usr/bin/env bash
# Compares foliod with redis-server: starts both on Unix sockets in a fresh temporary directory,
# runs folio-bench against both (scenario by scenario, alternating), stops both, removes the directory.
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
    --redis-socket "$WORK/redis.sock" --redis-pid "$REDIS_PID" --sync-probe "$WORK" "$@"
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
