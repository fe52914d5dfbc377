#!/usr/bin/env bash
# What a pipelined get costs foliod in instructions, counted by valgrind's callgrind: immune to the
# noise of a shared machine, which moves the timed figures of bench/access.sh by ±15%. For this
# tree with an admin peer (root: no policy lookup) and with an unprivileged peer whose role comes
# from the access policy (`write Bench`), and for foliod built from $BASELINE (default 61ec72b, main
# before access control, limits and metrics): each daemon runs under callgrind twice, once for the
# set-up alone (start, 1,000 creates, stop) and once with GETS pipelined gets more (batches of 32,
# bench/pipelined_gets.py); the difference divided by GETS is the figure. Durability none: writes
# are only the set-up.
#
#   bench/instructions.sh [GETS]          default 64000 (about a minute in all)
#
# Environment: see bench/lib.sh, and BASELINE, BASELINE_DIR, PEER_USER (default nobody) as in
# bench/access.sh.
source "$(dirname "$0")/lib.sh"

GETS="${1:-64000}"
BASELINE="${BASELINE-61ec72b}"
PEER_USER="${PEER_USER:-nobody}"
PYTHON="$(command -v python3)"
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3 # readable by $PEER_USER, unlike a pyenv shim
need valgrind

build
BASELINE_FOLIOD="$(build_baseline "$BASELINE")"
chmod 0755 "$WORK"
cp bench/pipelined_gets.py bench/pipeline.py "$WORK/"
printf 'access.user.%s = write Bench\n' "$PEER_USER" >"$WORK/policy.conf"

# count FOLIOD AS_USER POLICY(yes|no) GETS: instructions foliod executed, from start to exit.
count() {
    local foliod=$1 user=$2 policy=$3 gets=$4 dir args=(--durability none)
    dir="$(mktemp -d "$WORK/run.XXXXXX")"
    chmod 0755 "$dir"
    [ "$policy" = yes ] && args+=(--config "$WORK/policy.conf" --socket-mode 0666)
    valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
        "$foliod" --data "$dir/data" --socket "$dir/s.sock" "${args[@]}" 2>"$dir/log" &
    local pid=$!
    for _ in $(seq 300); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
    chmod 0666 "$dir/s.sock"
    setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups "$PYTHON" "$WORK/pipelined_gets.py" "$dir/s.sock" "$gets"
    kill -TERM "$pid"
    wait "$pid"
    sed -n 's/^summary: //p' "$dir/callgrind.out"
}

# per_get FOLIOD AS_USER POLICY: instructions per get.
per_get() {
    local setup total
    setup="$(count "$1" "$2" "$3" 0)"
    total="$(count "$1" "$2" "$3" "$GETS")"
    echo $(((total - setup) / GETS))
}

header "$GETS"
echo "load:    $GETS pipelined gets (batches of 32) of 1,000 objects of ~100 bytes, one connection"
echo
admin=$(per_get "$BIN/foliod" root no)
peer=$(per_get "$BIN/foliod" "$PEER_USER" yes)
base=$(per_get "$BASELINE_FOLIOD" "$PEER_USER" no)
printf '| foliod | peer | instructions per get | ratio to %s |\n| --- | --- | ---: | ---: |\n' "$BASELINE"
printf '| this tree | root (admin, no policy lookup) | %s | %s |\n' "$admin" "$(awk -v a="$admin" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
printf '| this tree | %s, `write Bench` from the policy | %s | %s |\n' "$PEER_USER" "$peer" "$(awk -v a="$peer" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
printf '| %s | %s (no access control) | %s | 1.000 |\n' "$BASELINE" "$PEER_USER" "$base"
