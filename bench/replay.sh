#!/usr/bin/env bash
# Replay and audit: writes N events (default 1,000,000) into a fresh foliod, then times `folio export`,
# online `folio verify`, and with the daemon stopped `foliod rebuild`, `foliod verify` and
# `foliod import` of the export; checks that every digest agrees; and prints each rate as a ratio to
# raw LMDB ingest of the same export on the same disk (bench/lmdb_ingest.c: each event appended to a
# log and put as a state record, commits of 10,000, no decoding, hashing or views). Then it defines
# 10 views over the objects, tops them up to N objects, kills foliod with SIGKILL (idle, then
# under a durable write load, then under the load and started as on another boot, as after an OS
# crash) and times each restart to the first answer. Then watch delivery latency:
# 100 watchers on a fresh foliod under a steady durable write load.
#
#   bench/replay.sh [EVENTS]
#
# ANOTHER_BOOT_KILLS=N repeats the last kill N more times, each 1 to 5 s into the load.
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT).
source "$(dirname "$0")/lib.sh"
EVENTS="${1:-1000000}"

rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f events/s", n / s }'; }
# The events/s figure of a line ("... 91199 events/s ...").
per_second() { sed -n 's/.*[^0-9]\([0-9][0-9]*\) events\/s.*/\1/p' | head -n 1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }
digest_of() { sed -n 's/^digest *//p'; }

build
header "$@"
start_foliod
"$BIN/folio-bench" populate --folio-socket "$WORK/folio.sock" --events "$EVENTS"
export FOLIO_SOCKET="$WORK/folio.sock"
LIVE_DIGEST=$("$BIN/folio" stats | sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p')

start=$(date +%s%N); "$BIN/folio" export > "$WORK/events.jsonl"; end=$(date +%s%N)
s=$(elapsed "$start" "$end"); EXPORT_LINE="export (folio export, over the socket): $EVENTS events in $s s: $(rate "$EVENTS" "$s"), $(du -h "$WORK/events.jsonl" | cut -f1)"
echo "$EXPORT_LINE"

start=$(date +%s%N); "$BIN/folio" verify > "$WORK/verify-online.json"; end=$(date +%s%N)
s=$(elapsed "$start" "$end"); VERIFY_ONLINE_LINE="verify online (folio verify, daemon serving): $EVENTS events in $s s: $(rate "$EVENTS" "$s"), ok: $(grep -o '"ok":[a-z]*' "$WORK/verify-online.json")"
echo "$VERIFY_ONLINE_LINE"
stop_daemons

REBUILD_LINE="$("$BIN/foliod" rebuild --data "$WORK/folio" | head -n 1)"
echo "rebuild:        $REBUILD_LINE"
REBUILT=$("$BIN/foliod" verify --data "$WORK/folio" | tee "$WORK/verify.txt" | digest_of)
VERIFY_LINE="$(grep -m 1 "events/s" "$WORK/verify.txt")"
echo "verify offline: $(head -n 1 "$WORK/verify.txt"); $(tail -n 1 "$WORK/verify.txt")"
"$BIN/foliod" import --data "$WORK/imported" "$WORK/events.jsonl" > "$WORK/import.txt"
echo "import:         $(head -n 1 "$WORK/import.txt")"
cc -O2 -o "$WORK/lmdb_ingest" bench/lmdb_ingest.c -llmdb
RAW_LINE="$("$WORK/lmdb_ingest" "$WORK/events.jsonl" "$WORK/raw")"
rm -rf "$WORK/raw"
echo "raw LMDB ingest (bench/lmdb_ingest.c): $RAW_LINE"
RAW=$(echo "$RAW_LINE" | per_second)
for figure in "export:$EXPORT_LINE" "verify online:$VERIFY_ONLINE_LINE" "rebuild:$REBUILD_LINE" "verify offline:$VERIFY_LINE" \
    "import:$(head -n 1 "$WORK/import.txt")"; do
    name=${figure%%:*}
    echo "  $name: $(ratio "$(echo "${figure#*:}" | per_second)" "$RAW")x raw LMDB ingest"
done
IMPORTED=$(digest_of < "$WORK/import.txt")
echo "digests: live $LIVE_DIGEST, after rebuild $REBUILT, imported $IMPORTED"
[ "$LIVE_DIGEST" = "$REBUILT" ] && [ "$LIVE_DIGEST" = "$IMPORTED" ] || { echo "bench: digests differ" >&2; exit 1; }

# Restart to serving after kill -9: the rebuilt store (its objects) with 10 views over them, topped
# up through the views to as many objects as EVENTS (1,000,000 by default), then killed twice: once idle right after the last write,
# once under a durable write load, when the journal holds records past the last checkpoint and the
# views' buffer holds ops not yet merged. Each restart is timed to the first answer and to a page from
# the middle of a view, and `folio verify` must then find the store equal to its log.
echo
rm -rf "$WORK/imported" "$WORK/events.jsonl"
start_foliod
views_start=$(date +%s%N)
for view in "title:--sort title" "n:--sort n" "nDown:--sort -n" "due:--sort due" "doneN:--sort done,n" \
    "openByTitle:--where {\"done\":false} --sort title" "doneByN:--where {\"done\":true} --sort n" \
    "bigN:--where {\"n\":{\"\$gte\":500}} --sort n" "tagsTitle:--sort tags,title" "dueTitle:--sort due,title"; do
    # shellcheck disable=SC2086 # the view's options are words
    "$BIN/folio" view define "${view%%:*}" Task ${view#*:} >/dev/null
done
views_end=$(date +%s%N)
OBJECTS=$("$BIN/folio" count Task | sed -n 's/.*"count":\([0-9]*\).*/\1/p')
echo "10 views over $OBJECTS objects defined in $(elapsed "$views_start" "$views_end") s"
TOP_UP=$(( (EVENTS - OBJECTS) * 5 / 4 ))  # as many objects as the log had events
if [ "$TOP_UP" -gt 0 ]; then
    echo "through the 10 views: $("$BIN/folio-bench" populate --folio-socket "$WORK/folio.sock" --events "$TOP_UP" --first "$OBJECTS")"
    OBJECTS=$("$BIN/folio" count Task | sed -n 's/.*"count":\([0-9]*\).*/\1/p')
fi

# Kills foliod with SIGKILL, starts it again on the same data and times it; $1 says how it was killed.
# With $2, foliod starts with that boot id (FOLIO_BOOT_ID), as after an OS crash: it goes back to
# the last checkpoint and applies the journal instead of resuming at LMDB's last commit.
restart() {
    local log_lines restart_start restart_end page_end items recovered worked_out
    kill -KILL "$FOLIO_PID"
    wait "$FOLIO_PID" 2>/dev/null || true
    FOLIO_PID=""
    log_lines=$(wc -l < "$WORK/foliod.log")
    restart_start=$(date +%s%N)
    FOLIO_BOOT_ID="${2:-$(cat /proc/sys/kernel/random/boot_id)}" \
        "$BIN/foliod" --data "$WORK/folio" --socket "$WORK/folio.sock" 2>>"$WORK/foliod.log" &
    FOLIO_PID=$!
    until "$BIN/folio" hello >/dev/null 2>&1; do sleep 0.005; done
    restart_end=$(date +%s%N)
    # The first read of data: a page of 20 from the middle of a view.
    "$BIN/folio" list --view n --limit 20 --offset $((OBJECTS / 2)) >"$WORK/page.jsonl"
    page_end=$(date +%s%N)
    items=$(grep -o '"createdAt"' "$WORK/page.jsonl" | wc -l)
    [ "$items" = 20 ] || { echo "bench: the page read after the restart holds $items objects, not 20" >&2; exit 1; }
    recovered=$(tail -n +"$((log_lines + 1))" "$WORK/foliod.log" | grep -oE '(recovered from the checkpoint|resumed at LMDB).*' | head -n 1 || true)
    worked_out=$(tail -n +"$((log_lines + 1))" "$WORK/foliod.log" | grep -o 'views: .* worked out in [0-9]* ms' | head -n 1 || true)
    echo "restart after kill -9 $1 to the first answer: $(awk -v a="$restart_start" -v b="$restart_end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }') s," \
        "to a page of 20 at offset $((OBJECTS / 2)) of view n: $(awk -v a="$restart_start" -v b="$page_end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }') s" \
        "($("$BIN/folio" count Task | sed -n 's/.*"count":\([0-9]*\).*/\1/p') objects, 10 views; ${recovered:-no recovery line in the log}${worked_out:+; $worked_out})"
}
restart "idle"
# A durable write load through the 10 views (4 pipelining connections), killed 3 s in: each write it
# had answered is on disk, and the store it leaves must verify.
"$BIN/folio-bench" populate --folio-socket "$WORK/folio.sock" --events 100000000 --first 2000000 >/dev/null 2>&1 &
LOAD_PID=$!
sleep 3
restart "under a durable write load"
wait "$LOAD_PID" 2>/dev/null || true
# The same, started as after an OS crash (another boot id): back to the checkpoint, the journal applied.
"$BIN/folio-bench" populate --folio-socket "$WORK/folio.sock" --events 100000000 --first 4000000 >/dev/null 2>&1 &
LOAD_PID=$!
sleep 3
restart "under a durable write load, started as on another boot" "bench-another-boot"
wait "$LOAD_PID" 2>/dev/null || true
# ANOTHER_BOOT_KILLS more of those (default 0), each 1 to 5 s into the load, for the worst case of a
# start that goes back to the checkpoint (after an OS crash, or a kill during a checkpoint's flush).
for kill_number in $(seq "${ANOTHER_BOOT_KILLS:-0}"); do
    "$BIN/folio-bench" populate --folio-socket "$WORK/folio.sock" --events 100000000 --first $((5000000 + kill_number * 1000000)) >/dev/null 2>&1 &
    LOAD_PID=$!
    sleep $((1 + RANDOM % 5))
    restart "under a durable write load, started as on another boot (kill $kill_number)" "bench-another-boot-$kill_number"
    wait "$LOAD_PID" 2>/dev/null || true
done
"$BIN/folio" verify > "$WORK/verify-restart.json"
grep -q '"ok":true' "$WORK/verify-restart.json" || { echo "bench: verify after the restarts: $(head -c 500 "$WORK/verify-restart.json")" >&2; exit 1; }
echo "verify after the restarts: ok"
stop_daemons

echo
rm -rf "$WORK/folio"
start_foliod
"$BIN/folio-bench" watch --folio-socket "$WORK/folio.sock" --watchers 100 --rate 1000 --seconds 10
