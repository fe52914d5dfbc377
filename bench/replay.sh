#!/usr/bin/env bash
# Replay and audit: writes N events (default 1,000,000) into a fresh foliod, then times `folio export`,
# online `folio verify`, and with the daemon stopped `foliod rebuild`, `foliod verify` and
# `foliod import` of the export; checks that every digest agrees. Then watch delivery latency: 100
# watchers on a fresh foliod under a steady durable write load.
#
#   bench/replay.sh [EVENTS]
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT).
source "$(dirname "$0")/lib.sh"
EVENTS="${1:-1000000}"

rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f events/s", n / s }'; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }
digest_of() { sed -n 's/^digest *//p'; }

build
header "$@"
start_foliod
"$BIN/folio-bench" populate --folio-socket "$WORK/folio.sock" --events "$EVENTS"
export FOLIO_SOCKET="$WORK/folio.sock"
LIVE_DIGEST=$("$BIN/folio" stats | sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p')

start=$(date +%s%N); "$BIN/folio" export > "$WORK/events.jsonl"; end=$(date +%s%N)
s=$(elapsed "$start" "$end"); echo "export (folio export, over the socket): $EVENTS events in $s s: $(rate "$EVENTS" "$s"), $(du -h "$WORK/events.jsonl" | cut -f1)"

start=$(date +%s%N); "$BIN/folio" verify > "$WORK/verify-online.json"; end=$(date +%s%N)
s=$(elapsed "$start" "$end"); echo "verify online (folio verify, daemon serving): $EVENTS events in $s s: $(rate "$EVENTS" "$s"), ok: $(grep -o '"ok":[a-z]*' "$WORK/verify-online.json")"
stop_daemons

echo "rebuild:        $("$BIN/foliod" rebuild --data "$WORK/folio" | head -n 1)"
REBUILT=$("$BIN/foliod" verify --data "$WORK/folio" | tee "$WORK/verify.txt" | digest_of)
echo "verify offline: $(head -n 1 "$WORK/verify.txt"); $(tail -n 1 "$WORK/verify.txt")"
"$BIN/foliod" import --data "$WORK/imported" "$WORK/events.jsonl" > "$WORK/import.txt"
echo "import:         $(head -n 1 "$WORK/import.txt")"
IMPORTED=$(digest_of < "$WORK/import.txt")
echo "digests: live $LIVE_DIGEST, after rebuild $REBUILT, imported $IMPORTED"
[ "$LIVE_DIGEST" = "$REBUILT" ] && [ "$LIVE_DIGEST" = "$IMPORTED" ] || { echo "bench: digests differ" >&2; exit 1; }

echo
rm -rf "$WORK/folio" "$WORK/imported" "$WORK/events.jsonl"
start_foliod
"$BIN/folio-bench" watch --folio-socket "$WORK/folio.sock" --watchers 100 --rate 1000 --seconds 10
