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
BASELINE_PID=""

stop_daemons() {
    for pid in $FOLIO_PID $BASELINE_PID $REDIS_PID; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in $FOLIO_PID $BASELINE_PID $REDIS_PID; do
        wait "$pid" 2>/dev/null || true
    done
    FOLIO_PID=""
    BASELINE_PID=""
    REDIS_PID=""
}

finish() {
    local status=$?
    trap - EXIT INT TERM
    # A script with daemons of its own (bench/cluster.sh: nodes and PostgreSQL) stops them here.
    if declare -F stop_own_daemons >/dev/null; then stop_own_daemons; fi
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

# Installs the Debian package $2 (default $1) when there is no command $1.
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "bench: installing ${2:-$1}" >&2
    $SUDO apt-get update -q && $SUDO apt-get install -y -q "${2:-$1}"
}

# Redis with one configuration for every scenario: appendonly yes, appendfsync always (each write on
# disk before its reply, like Folio's default durability), no RDB snapshots.
start_redis() {
    need redis-server
    mkdir -p "$WORK/redis"
    redis-server --unixsocket "$WORK/redis.sock" --unixsocketperm 700 --port 0 \
        --appendonly yes --appendfsync always --dir "$WORK/redis" --save '' \
        --daemonize no --logfile "$WORK/redis.log" &
    REDIS_PID=$!
}

# foliod on its defaults (plus $FOLIOD_ARGS), data in $WORK/folio (or $1), socket $WORK/folio.sock.
start_foliod() {
    launch_foliod "$BIN/foliod" "${1:-$WORK/folio}" "$WORK/folio.sock"
    FOLIO_PID=$LAUNCHED_PID
}

# The foliod binary $1 on its defaults (plus $FOLIOD_ARGS), data in $2, socket $3; returns once it
# answers, its pid in LAUNCHED_PID. The caller keeps the pid where stop_daemons finds it.
launch_foliod() {
    # shellcheck disable=SC2086 # FOLIOD_ARGS is a list of options
    "$1" --data "$2" --socket "$3" ${FOLIOD_ARGS:-} 2>>"$WORK/foliod.log" &
    LAUNCHED_PID=$!
    for _ in $(seq 100); do
        FOLIO_SOCKET="$3" "$BIN/folio" hello >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "bench: foliod ($1) did not start" >&2
    return 1
}

# foliod built in release mode from commit $1, in a directory outside the worktree ($BASELINE_DIR,
# default $TMPDIR/folio-baseline-COMMIT) that is kept, so a second run only checks the build. The
# source comes from `git archive`, so the repository gains no worktree. Prints the binary's path.
# (Called in $(...), where bash drops `set -e`: each step returns on failure itself.)
build_baseline() {
    local commit dir
    commit="$(git rev-parse --short=7 "$1^{commit}")" || return 1
    dir="${BASELINE_DIR:-${TMPDIR:-/tmp}/folio-baseline-$commit}"
    if [ ! -d "$dir/src" ]; then
        rm -rf "$dir/src.partial" && mkdir -p "$dir/src.partial" || return 1
        git archive "$commit" | tar -x -C "$dir/src.partial" || return 1
        mv "$dir/src.partial" "$dir/src" || return 1
    fi
    (cd "$dir/src" && "$SWIFT" build -c release --product foliod >&2) || return 1
    echo "$dir/src/.build/release/foliod"
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
