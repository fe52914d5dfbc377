# Shared by the bench scripts: build, a fresh temporary directory, daemons started in it and stopped
# (and the directory removed) on exit, and a header saying where and when the figures were taken.
#
# Environment:
#   SCRATCH      SwiftPM build directory (default .build): `swift build --scratch-path`
#   BENCH_TMPDIR where the temporary directory goes (default $TMPDIR or /tmp). Durable writes are only
#                durable on a real disk: on tmpfs fsync costs nothing and both daemons look faster.
#   SWIFT        the swift driver (default swift)
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT="${SWIFT:-swift}"
SCRATCH="${SCRATCH:-.build}"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
BIN="$SCRATCH/release"
WORK="$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/folio-bench.XXXXXX")"
REDIS_PID=""
FOLIO_PID=""

stop_daemons() {
    for pid in $FOLIO_PID $REDIS_PID; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in $FOLIO_PID $REDIS_PID; do
        wait "$pid" 2>/dev/null || true
    done
    FOLIO_PID=""
    REDIS_PID=""
}

finish() {
    local status=$?
    trap - EXIT INT TERM
    stop_daemons
    if [ "$status" != 0 ]; then
        echo "bench: failed (status $status); daemon logs:" >&2
        tail -n 20 "$WORK/foliod.log" "$WORK/redis.log" >&2 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build() {
    "$SWIFT" build -c release --scratch-path "$SCRATCH" --product foliod >&2
    "$SWIFT" build -c release --scratch-path "$SCRATCH" --product folio >&2
    "$SWIFT" build -c release --scratch-path "$SCRATCH" --product folio-bench >&2
}

# Redis with one configuration for every scenario: appendonly yes, appendfsync always (each write on
# disk before its reply, like Folio's default durability), no RDB snapshots.
start_redis() {
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "bench: installing redis-server" >&2
        $SUDO apt-get update -q && $SUDO apt-get install -y -q redis-server
    fi
    mkdir -p "$WORK/redis"
    redis-server --unixsocket "$WORK/redis.sock" --unixsocketperm 700 --port 0 \
        --appendonly yes --appendfsync always --dir "$WORK/redis" --save '' \
        --daemonize no --logfile "$WORK/redis.log" &
    REDIS_PID=$!
}

# foliod on its defaults (plus $FOLIOD_ARGS), data in $WORK/folio (or $1), socket $WORK/folio.sock.
start_foliod() {
    # shellcheck disable=SC2086 # FOLIOD_ARGS is a list of options
    "$BIN/foliod" --data "${1:-$WORK/folio}" --socket "$WORK/folio.sock" ${FOLIOD_ARGS:-} 2>>"$WORK/foliod.log" &
    FOLIO_PID=$!
    for _ in $(seq 100); do
        FOLIO_SOCKET="$WORK/folio.sock" "$BIN/folio" hello >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "bench: foliod did not start" >&2
    return 1
}

header() {
    echo "date:    $(date -u)"
    echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)," \
        "$(awk '/^MemTotal/ { printf "%.1f GiB RAM", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
    echo "storage: $WORK on $(df -T "$WORK" | awk 'NR == 2 { print $1 " (" $2 ")" }')"
    echo "command: $0 $*"
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        echo "source:  commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- Sources ':!Sources/folio-bench' || echo ', with uncommitted changes in Sources/')"
    fi
    echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) before"
    echo
}
