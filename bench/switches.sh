#!/usr/bin/env bash
# Where a get's kernel time goes at 16 clients: context switches. Runs `folio-bench --only get-16`
# against foliod with its two event loops, foliod with one (`--threads 1`), and Redis, each alone
# and fresh, ROUNDS times in turn, and prints for each run the gets a second, the CPU a get (from
# folio-bench), the daemon's involuntary and voluntary context switches a get (its threads'
# /proc/PID/task/*/status over the middle SECONDS of the run) and its system calls a get (`perf
# stat -e raw_syscalls:sys_enter` over the same seconds, when perf can count them; "-" otherwise).
#
#   bench/switches.sh                  ROUNDS=2 SECONDS_MEASURED=4 by default
#
# Environment: see bench/lib.sh.
source "$(dirname "$0")/lib.sh"

ROUNDS="${ROUNDS:-2}"
MEASURED="${SECONDS_MEASURED:-4}"
build

# The daemon's threads' voluntary and involuntary switches so far, summed.
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt/ {v += $2} /^nonvoluntary_ctxt/ {n += $2} END {print v + 0, n + 0}'; }

# run NAME KIND [foliod options]: one measured run against a fresh daemon, one line of figures.
run() {
    local name=$1 kind=$2 pid args before after calls
    shift 2
    rm -rf "$WORK/folio" "$WORK/redis" "$WORK/folio.sock" "$WORK/redis.sock"
    if [ "$kind" = folio ]; then
        FOLIOD_ARGS="$*" start_foliod
        pid=$FOLIO_PID
        args=(--folio-socket "$WORK/folio.sock" --folio-pid "$pid")
    else
        start_redis
        pid=$REDIS_PID
        for _ in $(seq 100); do [ -S "$WORK/redis.sock" ] && break; sleep 0.1; done
        args=(--redis-socket "$WORK/redis.sock" --redis-pid "$pid")
    fi
    "$BIN/folio-bench" "${args[@]}" --only get-16 --duration $((MEASURED + 4)) --warmup 1 >"$WORK/run.txt" 2>&1 &
    local bench=$!
    sleep 3
    before=$(switches "$pid")
    if perf stat -x, -p "$pid" -e raw_syscalls:sys_enter -- sleep "$MEASURED" 2>"$WORK/perf.txt" >/dev/null; then
        calls=$(cut -d, -f1 "$WORK/perf.txt" | grep -E '^[0-9]+$' | head -1 || true)
    else
        sleep "$MEASURED"
        calls=""
    fi
    after=$(switches "$pid")
    wait "$bench"
    local ops cpu
    ops=$(grep -oE '[0-9,]+ ops/s' "$WORK/run.txt" | head -1 | tr -d ', ops/')
    cpu=$(grep -oE 'CPU/op [0-9.]+ µs' "$WORK/run.txt" | head -1 | awk '{print $2}')
    stop_daemons
    set -- $before $after
    awk -v name="$name" -v ops="$ops" -v cpu="$cpu" -v vol=$(($3 - $1)) -v inv=$(($4 - $2)) -v calls="${calls:-}" -v s="$MEASURED" 'BEGIN {
        printf "| %s | %d | %s µs | %.2f | %.3f | %s |\n", name, ops, cpu, inv / s / ops, vol / s / ops, calls == "" ? "-" : sprintf("%.2f", calls / s / ops)
    }'
}

header "(ROUNDS=$ROUNDS SECONDS_MEASURED=$MEASURED: folio-bench --only get-16, switches counted over the middle $MEASURED s of each run)"
echo "| daemon | gets/s | CPU a get | involuntary switches a get | voluntary a get | system calls a get |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for _ in $(seq "$ROUNDS"); do
    run "foliod, 2 event loops" folio --threads 2
    run "foliod, --threads 1" folio --threads 1
    run "Redis" redis
done
