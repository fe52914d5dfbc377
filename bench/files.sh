#!/usr/bin/env bash
# Files: puts and reads of 1 KiB, 1 MiB and 100 MiB through inline base64, pieces and descriptor
# passing, against cp (and cp with fsync) of the same file on the same disk in the same run; a
# deduplicated put; foliod's RSS while 8 clients upload 100 MiB each (bench/files.py).
#
#   bench/files.sh [bench/files.py options]     e.g. --sizes 1K,1M --uploaders 4
#
# Environment: see bench/lib.sh (SCRATCH, BENCH_TMPDIR, SWIFT). foliod runs with --max-line 2 MiB,
# so that a 1 MiB file fits one inline put, and --file-grace 1, so that 100 MiB blobs do not pile up.
source "$(dirname "$0")/lib.sh"

build
FOLIOD_ARGS="--max-line 2097152 --file-grace 1" start_foliod "$WORK/data"
header "$@"
FOLIO_BIN="$BIN/folio" python3 bench/files.py "$WORK/folio.sock" "$WORK" "$FOLIO_PID" "$@"
echo
echo "load:    $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after"
