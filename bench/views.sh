#!/usr/bin/env bash
# Materialized views against a Redis sorted set: loads N objects (default 1,000,000) into a fresh
# foliod and their ranks into redis-server, then times view building, count and pages at any
# offset or cursor, a scan, and writes with five views against none.
#
#   bench/views.sh [--objects N] [--samples N] [--write-seconds S] [--write-rounds R] [--write-preload N] [--write-views N]
#                  [--markdown FILE]
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT).
source "$(dirname "$0")/lib.sh"

build
start_redis
start_foliod
header "$@"
"$BIN/folio-bench" views --folio-socket "$WORK/folio.sock" --redis-socket "$WORK/redis.sock" \
    --folio-pid "$FOLIO_PID" --redis-pid "$REDIS_PID" "$@"
