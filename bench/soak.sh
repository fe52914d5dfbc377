#!/usr/bin/env bash
# Soak: a fresh foliod under a long mixed load at half its measured maximum (folio-bench soak), with
# its RSS, descriptors, LMDB map use and reader slots sampled every 10 s, then drawn as an SVG.
#
#   bench/soak.sh [MINUTES] [folio-bench soak options]     e.g. bench/soak.sh 2
#
# Writes the samples (tab-separated) and the chart to SOAK_OUT (default bench/results/soak-DATE),
# .tsv and .svg; SOAK_SVG names another path for the chart (docs/soak.svg for the committed one).
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT).
source "$(dirname "$0")/lib.sh"
MINUTES="${1:-30}"
shift || true
OUT="${SOAK_OUT:-bench/results/soak-$(date -u +%Y%m%dT%H%M%SZ)}"
SVG="${SOAK_SVG:-$OUT.svg}"
mkdir -p "$(dirname "$OUT")" "$(dirname "$SVG")"

build
start_foliod
header "$MINUTES" "$@"
set +e
"$BIN/folio-bench" soak --folio-socket "$WORK/folio.sock" --folio-pid "$FOLIO_PID" --minutes "$MINUTES" \
    --samples "$OUT.tsv" "$@"
status=$?
set -e
python3 bench/soak_plot.py "$OUT.tsv" "$SVG" \
    --title "foliod soak, $MINUTES min, $(date -u +%Y-%m-%d), $(nproc) CPUs (shared), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo
echo "samples: $OUT.tsv"
echo "chart:   $SVG"
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
exit "$status"
