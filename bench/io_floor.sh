#!/usr/bin/env bash
# The disk's floor under one client's durable creates (bench/io_floor.c): the I/O of a Redis SET
# with `appendfsync always`, of foliod's journal alone, and of foliod's journal after a commit's
# pages, with no other work, alternating on the same disk. The pages go in one run, in RUNS runs
# placed as LMDB places them, and as a real foliod wrote them: this script first runs one client's
# creates against a fresh foliod for a few seconds, records where its writer put each commit's pages
# (`strace` of its `pwrite`s and `writev`s into data.mdb), and replays those commits.
#
#   bench/io_floor.sh [SECONDS [ROUNDS [MODES]]]     defaults 3, 4 and 17,17/7,8/4,trace
#
# Environment: see bench/lib.sh.
source "$(dirname "$0")/lib.sh"
SECONDS_EACH="${1:-3}"
ROUNDS="${2:-4}"
MODES="${3:-17,17/7,8/4,trace}"
need strace

build
header "$@"
"${CC:-cc}" -O2 -Wall -o "$WORK/io_floor" bench/io_floor.c -lpthread

# One client's creates into a fresh foliod for 12 s; its writer traced from the 8th to the 10th. Where
# LMDB puts a commit's pages depends on the store's past: a fresh store's first commits append one
# run at the file's end; once checkpoints have let LMDB reuse freed pages, a commit's pages scatter
# into more runs (3 a commit over the first second here, 5 to 8 after some seconds).
start_foliod
writer=$(grep -l '^folio-writer$' /proc/"$FOLIO_PID"/task/*/comm | cut -d/ -f5)
"$BIN/folio-bench" --folio-socket "$WORK/folio.sock" --only create-1 --duration 12 --warmup 0 --keys 10 >"$WORK/load.txt" 2>&1 &
LOAD_PID=$!
sleep 8
timeout 2 strace -qq -e trace=pwrite64,writev,lseek -e abbrev=all -e verbose=none -s 0 -p "$writer" -o "$WORK/writer.strace" || true
wait "$LOAD_PID"
stop_daemons
# data.mdb's descriptor: the one its 120-byte meta page writes go to.
data_fd=$(sed -n '/^pwrite64([0-9]*, .*, 120, [0-9]*)/{s/^pwrite64(\([0-9]*\),.*/\1/p;q}' "$WORK/writer.strace")
[ -n "$data_fd" ] || { echo "bench: no commit of foliod's writer in the trace" >&2; exit 1; }
# A commit: its runs (lseek + writev, or pwrite of whole pages) up to its meta page's write.
awk -v fd="$data_fd" 'BEGIN { position = -1 }
    $0 !~ /= [0-9]+$/ { next }
    $0 ~ "^lseek\\(" fd ", " { split($0, a, /[(,]/); position = a[3] + 0; next }
    $0 ~ "^writev\\(" fd ", " { if (position >= 0) { n = $0; sub(/.*= /, "", n); print position, int(n / 4096); runs++ }; position = -1; next }
    $0 ~ "^pwrite64\\(" fd ", " {
        n = $0; sub(/\) *=.*/, "", n); count = split(n, a, ", "); offset = a[count] + 0; bytes = a[count - 1] + 0
        if (bytes == 120) { if (runs > 0) print ""; runs = 0 } else if (bytes % 4096 == 0) { print offset, bytes / 4096; runs++ }
    }
' "$WORK/writer.strace" > "$WORK/commits.txt"
commits=$(grep -c '^$' "$WORK/commits.txt" || true)
awk 'NF == 2 { pages += $2; runs++ } NF == 0 { commits++ } END { if (commits) printf "foliod under one client: %d commits traced, %.1f pages and %.1f runs a commit\n", commits, pages / commits, runs / commits }' "$WORK/commits.txt"
[ "$commits" -gt 10 ] || { echo "bench: only $commits commits traced" >&2; exit 1; }
"$WORK/io_floor" "$WORK" "$SECONDS_EACH" "$ROUNDS" "$MODES" "$WORK/commits.txt"
