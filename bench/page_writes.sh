#!/usr/bin/env bash
# Which LMDB pages a durable create writes, by database, and the bytes the disk took a commit:
# foliod (this tree, its defaults plus $FOLIOD_ARGS) runs with bench/page_writes.c preloaded, which
# records every page written into data.mdb with its first key; `folio-bench --only create-C` loads
# it for DURATION seconds; each page is then put down to its database by that key (8-byte keys that
# start with four zero bytes are `events` sequences, other 8-byte keys LMDB's free list, 12-byte
# keys `trees`, keys that start with the collection's name `objects`, the named databases' names the
# main database) and counted per commit (`folio_commits_total`). The disk's sectors
# (/sys/block/*/stat) are the whole machine's: run it on a quiet one.
#
#   bench/page_writes.sh [CLIENTS...]     default: 1 16
#
# Environment: see bench/lib.sh, and DURATION (default 4), FILL (objects created first, not counted;
# default 10000), FOLIOD_ARGS.
source "$(dirname "$0")/lib.sh"

DURATION="${DURATION:-4}"
FILL="${FILL:-10000}"
CLIENTS=("$@")
[ ${#CLIENTS[@]} -gt 0 ] || CLIENTS=(1 16)

build
"${CC:-cc}" -O2 -Wall -shared -fPIC -o "$WORK/page_writes.so" bench/page_writes.c -ldl

sectors() { awk '$0 !~ /^ *$/ { total += $7 } END { printf "%.0f\n", total }' /sys/block/*/stat; }

header "${CLIENTS[@]}"
echo "load:    durable creates from each number of clients for ${DURATION} s (plus 1 s of warm-up), on a fresh foliod holding ${FILL} objects"
echo
for clients in "${CLIENTS[@]}"; do
    data="$WORK/data-$clients"
    pages="$WORK/pages-$clients"
    PAGE_WRITES_OUT="$pages" LD_PRELOAD="$WORK/page_writes.so" launch_foliod "$BIN/foliod" "$data" "$WORK/folio.sock"
    FOLIO_PID=$LAUNCHED_PID
    # The fill: folio-bench's keys, created before its scenario; not counted.
    "$BIN/folio-bench" --folio-socket "$WORK/folio.sock" --only create-1 --keys "$FILL" --duration 0.2 --warmup 0 >/dev/null
    metric() { FOLIO_SOCKET="$WORK/folio.sock" "$BIN/folio" metrics | awk -v name="$1" '$1 == name { print $2 }'; }
    commits0="$(metric folio_commits_total)"
    writes0="$(metric folio_writer_batch_writes_sum)"
    pages0="$(wc -l <"$pages")"
    before="$(sectors)"
    "$BIN/folio-bench" --folio-socket "$WORK/folio.sock" --only "create-$clients" --keys 1 --duration "$DURATION" --warmup 1 >"$WORK/bench-$clients"
    after="$(sectors)"
    commits="$(awk -v a="$(metric folio_commits_total)" -v b="$commits0" 'BEGIN { print a - b }')"
    writes="$(awk -v a="$(metric folio_writer_batch_writes_sum)" -v b="$writes0" 'BEGIN { print a - b }')"
    stop_daemons
    rate="$(awk -F'|' '/^\| durable create/ { gsub(/ /, "", $4); print $4; exit }' "$WORK/bench-$clients")"
    echo "## $clients client(s): $rate creates/s, $commits commits, $(awk -v w="$writes" -v c="$commits" 'BEGIN { printf "%.2f", w / c }') creates a commit;" \
        "the machine's disks took $(awk -v s="$((after - before))" -v c="$commits" 'BEGIN { printf "%.1f", s / 2 / c }') KiB a commit"
    echo
    awk -v commits="$commits" '
        {
            kind = $1 == 1 ? "branch" : ($1 == 2 ? "leaf" : "other")
            size = $2; key = $3
            if (size == 12) db = "trees"
            else if (size == 8 && substr(key, 1, 8) == "00000000") db = "events"
            else if (size == 8) db = "free list"
            else if (key ~ /^(63617461|6576656e|66696c65|6d657461|6f626a65|72657175|74726565)/ && size <= 8) db = "main"
            else if (substr(key, 1, 10) == "42656e6368") db = "objects"
            else db = "other"
            pages[db] += 1; byKind[db, kind] += 1; total += 1
        }
        END {
            print "| database | leaf pages a commit | branch pages a commit | pages a commit |"
            print "| --- | ---: | ---: | ---: |"
            split("trees|events|objects|free list|main|other", names, "|")
            for (i = 1; i <= 6; i++) {
                db = names[i]
                if (!(db in pages)) continue
                printf "| %s | %.2f | %.2f | %.2f |\n", db, byKind[db, "leaf"] / commits, byKind[db, "branch"] / commits, pages[db] / commits
            }
            printf "| in all | | | %.2f (%.1f KiB) |\n", total / commits, total * 4 / commits
        }' <(tail -n +"$((pages0 + 1))" "$pages")
    echo
done
