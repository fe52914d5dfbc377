#!/usr/bin/env bash
# What access control costs: bench/run.sh's create and get scenarios sent by an unprivileged peer
# ($PEER_USER, default nobody) whose role comes from the access policy (`write Bench`: every request
# is checked against the collection), on foliod of this tree, and the same on foliod built from
# $BASELINE (default 61ec72b: main just before access control), which checks nothing; the two
# alternate, scenario by scenario and round by round (folio-bench --baseline-socket).
#
#   bench/access.sh [folio-bench options]     default: the options in PLAIN_ARGS below
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT), and
#   BASELINE      the commit to compare with (default 61ec72b)
#   BASELINE_DIR  where its source and build go (default $TMPDIR/folio-baseline-COMMIT, kept between runs)
#   PEER_USER     the user folio-bench runs as (needs setpriv and root to switch to it)
source "$(dirname "$0")/lib.sh"

BASELINE="${BASELINE-61ec72b}"
PEER_USER="${PEER_USER:-nobody}"
PLAIN_ARGS="--only create-1,create-16,create-64,get-1,get-16,pipelined-16 --rounds 4 --duration 3 --warmup 1"
[ $# -eq 0 ] || PLAIN_ARGS="$*"

build
BASELINE_FOLIOD="$(build_baseline "$BASELINE")"
chmod 0755 "$WORK"
printf 'access.user.%s = write Bench\n' "$PEER_USER" >"$WORK/foliod.conf"
FOLIOD_ARGS="--config $WORK/foliod.conf --socket-mode 0666" start_foliod "$WORK/folio-plain"
launch_foliod "$BASELINE_FOLIOD" "$WORK/folio-baseline" "$WORK/baseline.sock"
BASELINE_PID=$LAUNCHED_PID
chmod 0666 "$WORK/baseline.sock"
header "$PLAIN_ARGS"
echo "peer:    $PEER_USER (uid $(id -u "$PEER_USER")), role write on Bench from $WORK/foliod.conf; foliod at $BASELINE has no access control"
# shellcheck disable=SC2086 # PLAIN_ARGS is a list of options
setpriv --reuid="$PEER_USER" --regid="$(id -g "$PEER_USER")" --clear-groups \
    "$BIN/folio-bench" --folio-socket "$WORK/folio.sock" --folio-pid "$FOLIO_PID" \
    --baseline-socket "$WORK/baseline.sock" --baseline-pid "$BASELINE_PID" --baseline-name "Folio $BASELINE" $PLAIN_ARGS
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
