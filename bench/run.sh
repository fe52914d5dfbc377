#!/usr/bin/env bash
# Compares foliod with redis-server and SQLite: starts both daemons on Unix sockets in a fresh
# temporary directory, runs folio-bench against them and against SQLite in its own process on two
# database files in the same directory (WAL with synchronous=FULL, and with NORMAL; each file starts
# empty), scenario by scenario, alternating, stops both daemons, removes the directory.
#
#   bench/run.sh [folio-bench options]      e.g. bench/run.sh --duration 1 --warmup 0.5 --only get-1,create-16
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT), and BASELINE: a commit whose foliod
# (built as bench/lib.sh's build_baseline does) runs as a fourth peer, "Folio BASELINE", so that a
# change is measured before and after in the same run (`make bench BENCH_BASELINE=5539dd1`); or
# PEER_ARGS: this tree's foliod runs a second time as that peer, with these options in place of
# $FOLIOD_ARGS, so that two configurations meet in one run
# (`FOLIOD_ARGS="--journal on" PEER_ARGS="--journal off" bench/run.sh ...`).
source "$(dirname "$0")/lib.sh"

build
baseline=()
if [ -n "${BASELINE:-}" ]; then
    BASELINE_FOLIOD="$(build_baseline "$BASELINE")"
    launch_foliod "$BASELINE_FOLIOD" "$WORK/folio-baseline" "$WORK/baseline.sock"
    BASELINE_PID=$LAUNCHED_PID
    baseline=(--baseline-socket "$WORK/baseline.sock" --baseline-pid "$BASELINE_PID" --baseline-name "Folio $BASELINE")
elif [ -n "${PEER_ARGS:-}" ]; then
    FOLIOD_ARGS="$PEER_ARGS" launch_foliod "$BIN/foliod" "$WORK/folio-peer" "$WORK/baseline.sock"
    BASELINE_PID=$LAUNCHED_PID
    baseline=(--baseline-socket "$WORK/baseline.sock" --baseline-pid "$BASELINE_PID" --baseline-name "Folio $PEER_ARGS")
fi
start_redis
start_foliod
header "$@"
"$BIN/folio-bench" --folio-socket "$WORK/folio.sock" --folio-pid "$FOLIO_PID" \
    --redis-socket "$WORK/redis.sock" --redis-pid "$REDIS_PID" "${baseline[@]}" \
    --sqlite-database "$WORK/sqlite-full.db" --sqlite-normal-database "$WORK/sqlite-normal.db" \
    --sync-probe "$WORK" "$@"
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
