#!/usr/bin/env bash
# What a write and a replayed event cost foliod in instructions, counted by valgrind's callgrind
# (immune to the noise of a shared machine, unlike the timed benchmarks), for this tree and for
# foliod built from $BASELINE (default 8eafad8, main before the apply-path work of 2026-12-02
# afternoon), durability none (the syncs are the kernel's work, not counted):
#
#   - a create, pipelined 16 at a time into a collection without views (bench/pipelined_creates.py);
#   - the same into a collection with five views (bench/views.sh's five);
#   - a rebuild (`foliod rebuild`) of EVENTS events written by `folio-bench populate` (80% creates,
#     20% updates): instructions per event of the whole process and of its busiest thread (the
#     one applying; a second thread reads and decodes the log), which bounds the rate.
#
# Each create figure is (instructions with CREATES creates − instructions of the set-up alone) /
# CREATES, each foliod started and stopped under callgrind.
#
#   bench/write_instructions.sh [CREATES [EVENTS]]     defaults 16000 and 50000 (about 6 minutes)
#
# Environment: see bench/lib.sh, and BASELINE, BASELINE_DIR as in bench/access.sh.
source "$(dirname "$0")/lib.sh"

CREATES="${1:-16000}"
EVENTS="${2:-50000}"
BASELINE="${BASELINE-8eafad8}"
need valgrind

build
BASELINE_FOLIOD="$(build_baseline "$BASELINE")"

# count FOLIOD CREATES COLLECTION: instructions foliod executed, from start to exit.
count() {
    local dir pid
    dir="$(mktemp -d "$WORK/run.XXXXXX")"
    valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
        "$1" --data "$dir/data" --socket "$dir/s.sock" --durability none 2>"$dir/log" &
    pid=$!
    for _ in $(seq 300); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    python3 bench/pipelined_creates.py "$dir/s.sock" "$2" "$3"
    kill -TERM "$pid"
    wait "$pid"
    sed -n 's/^summary: //p' "$dir/callgrind.out"
    rm -rf "$dir"
}

# per_create FOLIOD COLLECTION
per_create() {
    local setup total
    setup="$(count "$1" 0 "$2")"
    total="$(count "$1" "$CREATES" "$2")"
    echo $(((total - setup) / CREATES))
}

# per_event FOLIOD: "WHOLE BUSIEST", instructions per event of a rebuild of EVENTS events.
per_event() {
    local dir pid whole=0 busiest=0 n
    dir="$(mktemp -d "$WORK/rebuild.XXXXXX")"
    "$1" --data "$dir/data" --socket "$dir/s.sock" --durability none 2>"$dir/log" &
    pid=$!
    for _ in $(seq 300); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    "$BIN/folio-bench" populate --folio-socket "$dir/s.sock" --events "$EVENTS" >/dev/null
    kill -TERM "$pid"
    wait "$pid"
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$dir/callgrind.out" \
        "$1" rebuild --data "$dir/data" >/dev/null 2>"$dir/log"
    for file in "$dir"/callgrind.out-*; do
        n="$(sed -n 's/^summary: //p' "$file")"
        whole=$((whole + n))
        [ "$n" -gt "$busiest" ] && busiest=$n
    done
    echo "$((whole / EVENTS)) $((busiest / EVENTS))"
    rm -rf "$dir"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

header "$CREATES" "$EVENTS"
echo "load:    $CREATES creates pipelined 16 at a time; a rebuild of $EVENTS events; durability none"
echo
plain=$(per_create "$BIN/foliod" Plain)
plain_base=$(per_create "$BASELINE_FOLIOD" Plain)
five=$(per_create "$BIN/foliod" Five)
five_base=$(per_create "$BASELINE_FOLIOD" Five)
read -r whole busiest <<<"$(per_event "$BIN/foliod")"
read -r whole_base busiest_base <<<"$(per_event "$BASELINE_FOLIOD")"
printf '| instructions | this tree | %s | ratio |\n| --- | ---: | ---: | ---: |\n' "$BASELINE"
printf '| a create, no views | %s | %s | %s |\n' "$plain" "$plain_base" "$(ratio "$plain" "$plain_base")"
printf '| a create, five views | %s | %s | %s |\n' "$five" "$five_base" "$(ratio "$five" "$five_base")"
printf '| five views against none | %s | %s | |\n' "$(ratio "$five" "$plain")" "$(ratio "$five_base" "$plain_base")"
printf '| a rebuilt event, whole process | %s | %s | %s |\n' "$whole" "$whole_base" "$(ratio "$whole" "$whole_base")"
printf '| a rebuilt event, busiest thread | %s | %s | %s |\n' "$busiest" "$busiest_base" "$(ratio "$busiest" "$busiest_base")"
