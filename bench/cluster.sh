#!/usr/bin/env bash
# Cluster mode (docs/CLUSTER.md) on this machine, every figure beside a single-node foliod (default
# durability full) in the same run:
#  1. durable creates/s with 1, 2 and 3 nodes at 16 and 64 clients (spread over the nodes' sockets in
#     turn), p50/p99, and the ratio cluster / single node, each cluster and its single node alternating
#     round by round;
#  2. gets by id with 1, 2 and 3 nodes at 16 and 64 clients, the same way;
#  3. apply lag on 3 nodes: from a write's answer on node 1 to its event arriving at a watch on nodes 2
#     and 3, under LAG_RATE durable creates/s;
#  4. EVENTS events (default 1,000,000) written through 3 nodes in atomic batches of 1000 creates (and
#     the same into a single node), then a fresh fourth node joining: its catch-up rate; then durable
#     creates again on the 3 nodes of that log against the single node holding as many objects.
# PostgreSQL runs in the temporary directory with its defaults (fsync on, synchronous_commit on), on a
# Unix socket only; each scenario has a database of its own and nodes on empty data directories. Its
# only other setting, track_functions = pl on each database, counts folio_append's calls and time.
# The fill ends with a CHECKPOINT (timed), so that what follows does not measure PostgreSQL writing
# the fill back. A failed request does not stop the run: the tables count it, and the exit status is 1.
#
#   bench/cluster.sh [EVENTS]
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT), and
#   ROUNDS, DURATION, WARMUP  of folio-bench's write and read scenarios (default 2, 5 s, 1 s)
#   LAG_RATE                  writes/s of part 3 (default 500)
#   FILL_CONNECTIONS          connections of part 4, over the 3 nodes in turn (default 6)
#   PG_BIN                    the directory of initdb and pg_ctl (default the newest /usr/lib/postgresql/*/bin)
source "$(dirname "$0")/lib.sh"
EVENTS="${1:-1000000}"
ROUNDS="${ROUNDS:-2}"
DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-1}"
LAG_RATE="${LAG_RATE:-500}"
FILL_CONNECTIONS="${FILL_CONNECTIONS:-6}"

PG_DIR="$WORK/pg"
PG_PID=""
NODE_PIDS=()
NODE_SOCKETS=()
SINGLE_PID=""
SUMMARY="$WORK/summary.txt"
FAILED=""

# PostgreSQL refuses to run as root: then its directory belongs to the postgres user, and its programs
# run through runuser.
as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

psql_run() {
    psql -X -At -v ON_ERROR_STOP=1 -h "$PG_DIR" -p 5432 -U postgres -d "${2:-postgres}" -c "$1"
}

start_postgres() {
    if [ -z "${PG_BIN:-}" ]; then
        PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
        [ -n "$PG_BIN" ] || PG_BIN="$(dirname "$(command -v initdb)")"
    fi
    mkdir -p "$PG_DIR"
    if [ "$(id -u)" = 0 ]; then
        chmod 711 "$WORK"
        chown postgres: "$PG_DIR"
    fi
    as_postgres "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres -E UTF8 --locale=C >"$WORK/initdb.log" 2>&1 ||
        { cat "$WORK/initdb.log" >&2; return 1; }
    # Only where it listens: every setting of durability stays PostgreSQL's default.
    printf "listen_addresses = ''\nunix_socket_directories = '%s'\nport = 5432\n" "$PG_DIR" >>"$PG_DIR/data/postgresql.conf"
    as_postgres "$PG_BIN/pg_ctl" start -w -t 60 -s -D "$PG_DIR/data" -l "$PG_DIR/server.log" ||
        { tail -n 20 "$PG_DIR/server.log" >&2; return 1; }
    PG_PID="$(head -n 1 "$PG_DIR/data/postmaster.pid")"
}

stop_postgres() {
    [ -n "$PG_PID" ] || return 0
    as_postgres "$PG_BIN/pg_ctl" stop -w -t 60 -s -D "$PG_DIR/data" -m fast || kill -QUIT "$PG_PID" 2>/dev/null || true
    PG_PID=""
}

# A fresh database for the next scenario; its nodes start on empty data directories.
DB=""
new_database() {
    DB="$1"
    psql_run "CREATE DATABASE $DB" >/dev/null
    psql_run "ALTER DATABASE $DB SET track_functions = 'pl'" >/dev/null
}

# folio_append's calls and milliseconds so far (pg_stat_user_functions), and the log's head: "CALLS MS HEAD".
append_totals() {
    psql_run "SELECT coalesce(max(calls), 0) || ' ' || coalesce(max(total_time), 0) || ' ' || (SELECT seq FROM folio_head)
        FROM pg_stat_user_functions WHERE funcname = 'folio_append'" "$DB"
}

# What PostgreSQL did between two append_totals: the calls, their mean time (the wait for the head
# row's lock included) and the events per call. Sessions report their counts within a second.
append_calls() {
    awk -v before="$1" -v after="$2" 'BEGIN {
        split(before, b, " "); split(after, a, " ")
        calls = a[1] - b[1]
        if (calls > 0) printf "%d folio_append calls, mean %.2f ms, %.1f events a call", calls, (a[2] - b[2]) / calls, (a[3] - b[3]) / calls
        else printf "no folio_append call"
    }'
}

conninfo() { echo "host=$PG_DIR port=5432 user=postgres dbname=$DB"; }

# Node $1 of the cluster on database $DB, data in $WORK/node$1, socket $WORK/node$1.sock, log
# $WORK/node$1.log; returns once it answers (after catching up), within $2 seconds (default 30).
start_node() {
    local socket="$WORK/node$1.sock"
    "$BIN/foliod" --data "$WORK/node$1" --socket "$socket" --log "postgres:$(conninfo)" 2>>"$WORK/node$1.log" &
    NODE_PIDS+=("$!")
    NODE_SOCKETS+=("$socket")
    local deadline=$((SECONDS + ${2:-30}))
    until FOLIO_SOCKET="$socket" "$BIN/folio" hello >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ] || ! kill -0 "${NODE_PIDS[-1]}" 2>/dev/null; then
            echo "bench: cluster node $1 did not start" >&2
            tail -n 20 "$WORK/node$1.log" >&2
            return 1
        fi
        sleep 0.05
    done
}

start_nodes() {
    local n
    for n in $(seq "$1"); do start_node "$n"; done
}

start_single() {
    launch_foliod "$BIN/foliod" "$WORK/single" "$WORK/single.sock"
    SINGLE_PID=$LAUNCHED_PID
}

# Stops every node and the single foliod.
stop_foliods() {
    local pid
    for pid in "${NODE_PIDS[@]}" $SINGLE_PID; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${NODE_PIDS[@]}" $SINGLE_PID; do wait "$pid" 2>/dev/null || true; done
    NODE_PIDS=()
    NODE_SOCKETS=()
    SINGLE_PID=""
}

stop_own_daemons() {
    stop_foliods
    stop_postgres
}

# Stops every foliod and removes their data; drops the scenario's database.
end_scenario() {
    stop_foliods
    rm -rf "$WORK"/node* "$WORK/single" "$WORK/single.sock"
    [ -z "$DB" ] || psql_run "DROP DATABASE $DB" >/dev/null
    DB=""
}

joined() { local IFS=,; echo "$*"; }

# The cluster's processes for CPU time: the nodes, the postmaster and its children (a backend per
# node connection, the WAL writer, the checkpointer...), as they are now.
cluster_pids() {
    joined "${NODE_PIDS[@]}" "$PG_PID" $(pgrep -P "$PG_PID")
}

# folio-bench with the cluster's nodes as the measured target and the single node as the baseline;
# prints its tables (not their Markdown copy) and keeps each row of the first table in $SUMMARY.
compare() {
    local nodes=$1 before
    shift
    before="$(append_totals)"
    "$BIN/folio-bench" --folio-socket "$(joined "${NODE_SOCKETS[@]}")" --folio-pid "$(cluster_pids)" \
        --folio-name "$nodes node$([ "$nodes" = 1 ] || echo s)" \
        --baseline-socket "$WORK/single.sock" --baseline-pid "$SINGLE_PID" --baseline-name "single node" \
        --rounds "$ROUNDS" --duration "$DURATION" --warmup "$WARMUP" "$@" >"$WORK/compare.txt" ||
        FAILED="$FAILED $nodes node(s) $*;"
    sed '/^Markdown:/,$d' "$WORK/compare.txt"
    sleep 1.5
    echo "PostgreSQL, during the cluster's runs (warm-ups and key creation included): $(append_calls "$before" "$(append_totals)")"
    # The first table's rows (scenario, clients, cluster ops/s, single ops/s, ratio, p50 / p99 of each)
    # with the second's failures of each.
    awk -v nodes="${SUMMARY_NODES:-$nodes}" -F '  +' '
        /^scenario/ { table++ }
        table == 1 && /^(durable create|get by id) / { row[++rows] = "| " $1 " | " $2 " | " nodes " | " $3 " | " $4 " | " $5 " | " $6 " | " $7 }
        table == 2 && /^(durable create|get by id) / { failed[++failures] = $3 " / " $4 }
        END { for (i = 1; i <= rows; i++) print row[i] " | " failed[i] " |" }' \
        "$WORK/compare.txt" >>"$SUMMARY"
}

build
header "$@"
start_postgres
echo "PostgreSQL: $("$PG_BIN/postgres" --version), in $PG_DIR on a Unix socket; settings:" \
    "$(psql_run "SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_settings WHERE name IN
        ('fsync', 'synchronous_commit', 'wal_sync_method', 'full_page_writes', 'shared_buffers', 'max_wal_size', 'wal_level')")"
echo "foliod: $("$BIN/foliod" --version 2>/dev/null | head -n 1)"
: >"$SUMMARY"

echo
echo "== 1. Durable creates: 1, 2, 3 nodes against a single node, each pair alternating"
for nodes in 1 2 3; do
    for clients in 16 64; do
        echo
        echo "-- $nodes node(s), $clients clients (database c${nodes}_$clients)"
        new_database "c${nodes}_$clients"
        start_nodes "$nodes"
        start_single
        compare "$nodes" --only "create-$clients" --keys 1
        end_scenario
    done
done

echo
echo "== 2. Gets by id: 1, 2, 3 nodes against a single node"
for nodes in 1 2 3; do
    echo
    echo "-- $nodes node(s) (database r$nodes)"
    new_database "r$nodes"
    start_nodes "$nodes"
    start_single
    compare "$nodes" --only "get-16,get-64"
    end_scenario
done

echo
echo "== 3. Apply lag on 3 nodes: writes to node 1, watches on nodes 2 and 3 (database lag)"
new_database lag
start_nodes 3
"$BIN/folio-bench" apply-lag --writer-socket "${NODE_SOCKETS[0]}" --watch-socket "${NODE_SOCKETS[1]},${NODE_SOCKETS[2]}" \
    --rate "$LAG_RATE" --writers 8 --seconds 10 | tee "$WORK/lag.txt"
end_scenario

echo
echo "== 4. $EVENTS events in atomic batches of 1000 creates: through 3 nodes, into a single node; then a fourth node joins"
new_database fill
start_nodes 3
start_single
SINGLE_FILL="$("$BIN/folio-bench" fill --folio-socket "$WORK/single.sock" --events "$EVENTS" --connections "$FILL_CONNECTIONS")"
echo "single node: $SINGLE_FILL"
before="$(append_totals)"
CLUSTER_FILL="$("$BIN/folio-bench" fill --folio-socket "$(joined "${NODE_SOCKETS[@]}")" --events "$EVENTS" --connections "$FILL_CONNECTIONS")"
echo "3 nodes:     $CLUSTER_FILL"
sleep 1.5
echo "PostgreSQL, during the fill: $(append_calls "$before" "$(append_totals)")"
checkpoint_start=$(date +%s%N)
psql_run CHECKPOINT >/dev/null
echo "CHECKPOINT after the fill: $(awk -v a="$checkpoint_start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }') s"
events_per_second() { sed -n 's/.*: \([0-9]*\) events\/s.*/\1/p'; }
FILL_RATIO=$(awk -v a="$(echo "$CLUSTER_FILL" | events_per_second)" -v b="$(echo "$SINGLE_FILL" | events_per_second)" 'BEGIN { printf "%.2f", a / b }')
echo "ratio 3 nodes / single node: $FILL_RATIO"
HEAD=$(psql_run "SELECT seq FROM folio_head" "$DB")
echo "log head in PostgreSQL: event $HEAD; database size $(psql_run "SELECT pg_size_pretty(pg_database_size('$DB'))")"
# The joining node: every other node idle; from its start to its first answer it catches up.
join_start=$(date +%s%N)
start_node 4 3600
join_end=$(date +%s%N)
JOIN_SECONDS=$(awk -v a="$join_start" -v b="$join_end" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
JOIN_RATE=$(awk -v n="$HEAD" -v s="$JOIN_SECONDS" 'BEGIN { printf "%.0f", n / s }')
echo "node 4, empty data directory: first answer after $JOIN_SECONDS s, $JOIN_RATE events/s from start to serving"
echo "its log:"
sed 's/^/  /' "$WORK/node4.log"
kill -TERM "${NODE_PIDS[3]}"
wait "${NODE_PIDS[3]}" || true
unset 'NODE_PIDS[3]' 'NODE_SOCKETS[3]'

echo
echo "-- durable creates on this log of $HEAD events: its 3 nodes against the single node holding as many objects"
SUMMARY_NODES="3, log of $HEAD" compare 3 --only "create-16,create-64" --keys 1
end_scenario

echo
echo "== Summary"
echo
echo "| scenario | clients | nodes | cluster ops/s | single node ops/s | cluster / single | cluster p50 / p99 | single node p50 / p99 | failed (cluster / single) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
cat "$SUMMARY"
echo
grep -E 'apply lag|sent to|watch on|durable creates to' "$WORK/lag.txt"
echo "fill in atomic batches of 1000 creates: 3 nodes $(echo "$CLUSTER_FILL" | events_per_second) events/s," \
    "single node $(echo "$SINGLE_FILL" | events_per_second) events/s, 3 nodes / single node $FILL_RATIO"
echo "catch-up of node 4: $HEAD events in $JOIN_SECONDS s, $JOIN_RATE events/s"
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
if [ -n "$FAILED" ]; then
    echo "bench: requests failed in:$FAILED see the tables above" >&2
    exit 1
fi
