#!/usr/bin/env bash
# Storms: hostile and extreme clients against one fresh foliod, each storm measured before, during
# and after (folio-bench storms): 10,000 idle connections beside ordinary clients, 500 slowloris and
# 100 over-long-line clients, a watcher that never reads, 100,000 connects and disconnects. Prints
# one table; exit status 1 if a bound broke.
#
#   bench/storms.sh [folio-bench storms options]     e.g. bench/storms.sh --only idle,churn
#
# foliod runs on its defaults except --max-connections (STORMS_MAX_CONNECTIONS, default 10240) and
# --partial-line-timeout (STORMS_LINE_TIMEOUT, default 10 s, so that the
# slowloris storm sees the timeout act within its 30 s). The descriptor limit of foliod and
# folio-bench is raised to 65536 where allowed, otherwise to the hard limit (10,000 idle
# connections need about 10,100).
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT).
source "$(dirname "$0")/lib.sh"
LINE_TIMEOUT="${STORMS_LINE_TIMEOUT:-10}"
# The idle storm holds 10,000 connections beside its clients: more than the default 4,096.
MAX_CONNECTIONS="${STORMS_MAX_CONNECTIONS:-10240}"

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
build
FOLIOD_ARGS="--partial-line-timeout $LINE_TIMEOUT --max-connections $MAX_CONNECTIONS" start_foliod
header "$@"
echo "foliod:  --partial-line-timeout $LINE_TIMEOUT --max-connections $MAX_CONNECTIONS, other limits at their defaults; descriptor limit $(ulimit -n)"
echo
"$BIN/folio-bench" storms --folio-socket "$WORK/folio.sock" --folio-pid "$FOLIO_PID" --line-timeout "$LINE_TIMEOUT" "$@"
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
