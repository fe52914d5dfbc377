#!/usr/bin/env bash
# Builds the libFuzzer executables (fuzz/Package.swift, with -sanitize=fuzzer,address, the C kernels
# too) and runs each
# target for FUZZ_SECONDS (FUZZ_JOBS at a time), starting from seeds made from proto/PROTOCOL.md plus
# whatever corpus earlier runs kept in .build/fuzz-work/. Prints executions per second and in total
# for each target, and exits non-zero if any target crashed, timed out, leaked or ran out of memory;
# the input that did it is left in .build/fuzz-work/artifacts/<target>/ (copy it into
# fuzz/regressions/<target>/ once fixed, so that `swift test` replays it).
#
#   FUZZ_SECONDS   seconds per target (default 300)
#   FUZZ_TARGETS   which targets, e.g. "json-parser query" (default: all seven, the decoder twice:
#                  request-decoder, and request-decoder-large on inputs up to 1 MiB)
#   FUZZ_MAX_LEN   longest input in bytes (default: 1 MiB for request-decoder-large, 1 KiB for
#                  page-cursor, 2 KiB for tree-record, 4 KiB for event-decoder, 16 KiB for
#                  export-reader, 64 KiB for the others)
#   FUZZ_JOBS      targets run at once (default 1)
#   FUZZ_RUNS      stop a target after this many executions instead (FUZZ_SECONDS still bounds it)
#   FUZZ_ARGS      more libFuzzer flags
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-300}
TARGETS=${FUZZ_TARGETS:-request-decoder request-decoder-large json-parser query page-cursor export-reader event-decoder tree-record}
WORK=$PWD/.build/fuzz-work
BIN=$PWD/.build/fuzz/release

"$SWIFT" build -c release --package-path fuzz --scratch-path "$PWD/.build/fuzz" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -g -Xcc -fsanitize=fuzzer-no-link,address 2>&1 | grep -v "Cannot export local symbol" || true
rm -rf "$WORK/seeds"
python3 fuzz/seeds.py proto/PROTOCOL.md "$WORK/seeds" >/dev/null

executable() {
    case "$1" in
        request-decoder | request-decoder-large) echo FuzzRequestDecoder ;;
        json-parser) echo FuzzJSONParser ;;
        query) echo FuzzQuery ;;
        page-cursor) echo FuzzPageCursor ;;
        export-reader) echo FuzzExportReader ;;
        event-decoder) echo FuzzEventDecoder ;;
        tree-record) echo FuzzTreeRecord ;;
        *) echo "unknown fuzz target $1" >&2; exit 64 ;;
    esac
}

# Runs one target; its summary line goes to $WORK/results/<target>.
fuzz_target() {
    local target=$1 exe default_len corpus artifacts log status executions rate rss result
    exe=$BIN/$(executable "$target")
    [ -x "$exe" ] || { echo "$exe was not built" >&2; return 1; }
    # request-decoder-large is the decoder on inputs up to 1 MiB, from seeds near that size: up to
    # ~0.5 s each with ASan and coverage (a quadratic cost would take minutes), so a 5 s timeout.
    local timeout=2 regressions=fuzz/regressions/${target%-large}
    case "$target" in
        request-decoder-large) default_len=1048576 timeout=5 ;;
        page-cursor) default_len=1024 ;; # a view's cursor: at most 17 + 512 bytes, 706 in base64
        export-reader) default_len=16384 ;;
        event-decoder) default_len=4096 ;;
        tree-record) default_len=2048 ;; # a node is at most 1,900 bytes (CountedTree.maxNodeBytes)
        *) default_len=65536 ;;
    esac
    corpus=$WORK/corpus/$target
    artifacts=$WORK/artifacts/$target
    log=$WORK/logs/$target-$(date -u +%Y%m%dT%H%M%SZ).log
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")" "$WORK/results"
    local inputs=("$corpus" "$WORK/seeds/$target")
    [ "$target" = request-decoder-large ] && inputs+=("$WORK/seeds/request-decoder")
    [ -d "$regressions" ] && inputs+=("$regressions")
    local runs=()
    [ -n "${FUZZ_RUNS:-}" ] && runs=(-runs="$FUZZ_RUNS")
    echo "== $target: ${SECONDS_PER_TARGET}s, log $log"
    status=0
    # -timeout: an input that takes longer is a finding (bounded cost); -rss_limit_mb and
    # -malloc_limit_mb: so is one that needs over 2 GiB, or one allocation over 512 MiB.
    # shellcheck disable=SC2086
    "$exe" "${inputs[@]}" \
        -dict=fuzz/folio.dict -max_total_time="$SECONDS_PER_TARGET" "${runs[@]}" \
        -max_len="${FUZZ_MAX_LEN:-$default_len}" -timeout="$timeout" -rss_limit_mb=2048 -malloc_limit_mb=512 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 ${FUZZ_ARGS:-} >"$log" 2>&1 || status=$?
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
    result=ok
    if [ "$status" != 0 ]; then
        result="FAILED (exit $status): $(grep -m1 -E 'ERROR: libFuzzer|ERROR: AddressSanitizer|ERROR: LeakSanitizer|Fatal error|SUMMARY' "$log" || echo 'see log')"
        grep -E '^artifact_prefix|Test unit written to' "$log" || true
    fi
    printf '%-16s %12s exec/s %14s executions  peak RSS %5s MB  %s\n' \
        "$target" "${rate:-?}" "${executions:-?}" "${rss:-?}" "$result" >"$WORK/results/$target"
}

# FUZZ_JOBS targets at a time (default 1; on 2 cores, 2 halves the wall time of a run).
rm -rf "$WORK/results"
for target in $TARGETS; do
    while [ "$(jobs -rp | wc -l)" -ge "${FUZZ_JOBS:-1}" ]; do wait -n || true; done
    fuzz_target "$target" &
done
wait || true
echo
failed=0
for target in $TARGETS; do
    if [ -f "$WORK/results/$target" ]; then cat "$WORK/results/$target"; else echo "$target: no result"; failed=1; fi
    grep -q FAILED "$WORK/results/$target" 2>/dev/null && failed=1
done
exit $failed
