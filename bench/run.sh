#!/usr/bin/env bash
# Compares foliod with redis-server: starts both on Unix sockets in a fresh temporary directory,
# runs folio-bench against both (scenario by scenario, alternating), stops both, removes the directory.
#
#   bench/run.sh [folio-bench options]      e.g. bench/run.sh --duration 1 --warmup 0.5 --only get-1,create-16
#
# Environment:
#   SCRATCH      SwiftPM build directory (default .build): `swift build --scratch-path`
#   BENCH_TMPDIR where the temporary directory goes (default $TMPDIR or /tmp). Durable writes are only
#                durable on a real disk: on tmpfs fsync costs nothing and both daemons look faster.
#   SWIFT        the swift driver (default swift)
#
# Redis runs with one configuration for every scenario: appendonly yes, appendfsync always (each
# write on disk before its reply, like Folio's default durability), no RDB snapshots.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT="${SWIFT:-swift}"
SCRATCH="${SCRATCH:-.build}"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

if ! command -v redis-server >/dev/null 2>&1; then
    echo "bench: installing redis-server" >&2
    $SUDO apt-get update -q && $SUDO apt-get install -y -q redis-server
fi

"$SWIFT" build -c release --scratch-path "$SCRATCH" --product foliod >&2
"$SWIFT" build -c release --scratch-path "$SCRATCH" --product folio-bench >&2
BIN="$SCRATCH/release"

WORK="$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/folio-bench.XXXXXX")"
REDIS_PID=""
FOLIO_PID=""

stop() {
    local status=$?
    trap - EXIT INT TERM
    for pid in $FOLIO_PID $REDIS_PID; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in $FOLIO_PID $REDIS_PID; do
        wait "$pid" 2>/dev/null || true
    done
    if [ "$status" != 0 ]; then
        echo "bench: failed (status $status); daemon logs:" >&2
        tail -n 20 "$WORK/foliod.log" "$WORK/redis.log" >&2 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$WORK/redis" "$WORK/folio"
redis-server --unixsocket "$WORK/redis.sock" --unixsocketperm 700 --port 0 \
    --appendonly yes --appendfsync always --dir "$WORK/redis" --save '' \
    --daemonize no --logfile "$WORK/redis.log" &
REDIS_PID=$!
"$BIN/foliod" --data "$WORK/folio" --socket "$WORK/folio.sock" 2>"$WORK/foliod.log" &
FOLIO_PID=$!

echo "date:    $(date -u)"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)," \
    "$(awk '/^MemTotal/ { printf "%.1f GiB RAM", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
echo "storage: $WORK on $(df -T "$WORK" | awk 'NR == 2 { print $1 " (" $2 ")" }')"
echo "command: bench/run.sh $*"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "source:  commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- Sources ':!Sources/folio-bench' || echo ', with uncommitted changes in Sources/')"
fi
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) before"
echo

"$BIN/folio-bench" --folio-socket "$WORK/folio.sock" --folio-pid "$FOLIO_PID" \
    --redis-socket "$WORK/redis.sock" --redis-pid "$REDIS_PID" --sync-probe "$WORK" "$@"
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
