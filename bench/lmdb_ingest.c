// The baseline of bench/replay.sh: what LMDB itself allows for ingesting a log on this disk. Reads
// an export (one JSON event per line, then an end line) and, for each event, appends it to a log
// database under its 8-byte big-endian sequence number (MDB_APPEND) and puts it as the state record
// of its collection/id, in commits of 10,000 events, then flushes. No decoding, no hashing, no
// views: the floor under any replay of the same events.
//
//   cc -O2 -o lmdb_ingest bench/lmdb_ingest.c -llmdb && ./lmdb_ingest events.jsonl DIR
//
// Prints "N events in S s: R events/s".
#define _GNU_SOURCE
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void check(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "lmdb_ingest: %s: %s\n", what, mdb_strerror(rc));
        exit(1);
    }
}

// The string value of "key":"..." in the line (no escapes in collections and ids).
static int field(const char *line, const char *key, const char **start, size_t *length) {
    const char *found = strstr(line, key);
    if (!found) return 0;
    *start = found + strlen(key);
    const char *end = strchr(*start, '"');
    if (!end) return 0;
    *length = (size_t)(end - *start);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: lmdb_ingest EXPORT DIR\n");
        return 64;
    }
    FILE *input = fopen(argv[1], "r");
    if (!input) {
        perror(argv[1]);
        return 1;
    }
    mkdir(argv[2], 0700);
    MDB_env *env;
    check(mdb_env_create(&env), "mdb_env_create");
    check(mdb_env_set_mapsize(env, (size_t)16 << 30), "mdb_env_set_mapsize");
    check(mdb_env_set_maxdbs(env, 4), "mdb_env_set_maxdbs");
    check(mdb_env_open(env, argv[2], MDB_NOSYNC, 0600), "mdb_env_open");
    MDB_txn *txn;
    MDB_dbi log, state;
    check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
    check(mdb_dbi_open(txn, "log", MDB_CREATE, &log), "mdb_dbi_open log");
    check(mdb_dbi_open(txn, "state", MDB_CREATE, &state), "mdb_dbi_open state");

    struct timespec begin, end;
    clock_gettime(CLOCK_MONOTONIC, &begin);
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    uint64_t events = 0;
    char key[512];
    while ((length = getline(&line, &capacity, input)) > 0) {
        const char *collection, *id;
        size_t collectionLength, idLength;
        if (strncmp(line, "{\"seq\":", 7) != 0) continue;  // the end line
        uint64_t sequence = strtoull(line + 7, NULL, 10);
        uint8_t sequenceKey[8];
        for (int i = 0; i < 8; i++) sequenceKey[i] = (uint8_t)(sequence >> (56 - 8 * i));
        MDB_val k = {8, sequenceKey}, v = {(size_t)length, line};
        check(mdb_put(txn, log, &k, &v, MDB_APPEND), "mdb_put log");
        if (field(line, "\"collection\":\"", &collection, &collectionLength) && field(line, "\"id\":\"", &id, &idLength) &&
            collectionLength + idLength + 1 <= sizeof(key)) {
            memcpy(key, collection, collectionLength);
            key[collectionLength] = 0;
            memcpy(key + collectionLength + 1, id, idLength);
            MDB_val sk = {collectionLength + 1 + idLength, key};
            check(mdb_put(txn, state, &sk, &v, 0), "mdb_put state");
        }
        if (++events % 10000 == 0) {
            check(mdb_txn_commit(txn), "mdb_txn_commit");
            check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
        }
    }
    check(mdb_txn_commit(txn), "mdb_txn_commit");
    check(mdb_env_sync(env, 1), "mdb_env_sync");
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (double)(end.tv_sec - begin.tv_sec) + (double)(end.tv_nsec - begin.tv_nsec) / 1e9;
    printf("%llu events in %.2f s: %.0f events/s\n", (unsigned long long)events, seconds, (double)events / seconds);
    mdb_env_close(env);
    free(line);
    fclose(input);
    return 0;
}
