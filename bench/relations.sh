#!/usr/bin/env bash
# References against Redis sorted sets, then plain creates and gets against a foliod built before the
# relations work:
#  1. `folio-bench relations` on a fresh foliod and redis-server: pages of backlinks and of a view range
#     over 1,000,000 items under one target (beside ZRANGE, ZRANGEBYLEX, ZRANGEBYSCORE, under each CPU
#     placement), atomic batches of 100 creates against separate creates, deletes cascading over owned
#     objects with another client's gets meanwhile;
#  2. bench/run.sh's create and get scenarios on a fresh foliod of this tree and one built from $BASELINE,
#     alternating who goes first, scenario by scenario and round by round.
#
#   bench/relations.sh [folio-bench relations options]    e.g. bench/relations.sh --items 100000 --samples 200
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT), and
#   BASELINE      the commit of part 2 (default e43aed0: main just before the relations work); empty skips it
#   BASELINE_DIR  where its source and build go (default $TMPDIR/folio-baseline-COMMIT, kept between runs)
#   PLAIN_ARGS    folio-bench options of part 2 (default below)
source "$(dirname "$0")/lib.sh"

BASELINE="${BASELINE-e43aed0}"
PLAIN_ARGS="${PLAIN_ARGS:---only create-1,create-16,create-64,get-1,get-16,pipelined-16 --rounds 4 --duration 3 --warmup 1}"

build
BASELINE_FOLIOD=""
[ -z "$BASELINE" ] || BASELINE_FOLIOD="$(build_baseline "$BASELINE")"
start_redis
start_foliod
header "$@"
"$BIN/folio-bench" relations --folio-socket "$WORK/folio.sock" --redis-socket "$WORK/redis.sock" \
    --folio-pid "$FOLIO_PID" --redis-pid "$REDIS_PID" "$@"
stop_daemons
rm -rf "$WORK/folio" "$WORK/redis"
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after part 1"
[ -n "$BASELINE_FOLIOD" ] || exit 0

echo
echo "Plain creates and gets, no refs or schemas: foliod of this tree against foliod at $BASELINE"
start_foliod "$WORK/folio-plain"
launch_foliod "$BASELINE_FOLIOD" "$WORK/folio-baseline" "$WORK/baseline.sock"
BASELINE_PID=$LAUNCHED_PID
# shellcheck disable=SC2086 # PLAIN_ARGS is a list of options
"$BIN/folio-bench" --folio-socket "$WORK/folio.sock" --folio-pid "$FOLIO_PID" \
    --baseline-socket "$WORK/baseline.sock" --baseline-pid "$BASELINE_PID" --baseline-name "Folio $BASELINE" \
    --sync-probe "$WORK" $PLAIN_ARGS
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
