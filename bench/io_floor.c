// The disk's floor under one client's durable writes: the I/O a write of foliod (journal on, the
// default) and a write of Redis (`appendfsync always`) make, with no other work, one write at a
// time, alternating in rounds on the same disk. What it says: how fast one client's durable
// creates could go on this disk if the CPU work were free, for each design.
//
//   aof       Redis: `write` of a 130-byte command to a growing append-only file, `fdatasync`.
//   journal   foliod's journal alone: a 4 KiB `O_DIRECT` write into a ring file written once
//             beforehand (no size or extent change), `fdatasync`.
//   foliod    the journal's write and sync, after PAGES pages of 4 KiB written (buffered) into a
//             data file at the next free offsets, as an LMDB commit without a sync writes its
//             copy-on-write pages; another thread starts their write-back every millisecond
//             (`sync_file_range`) and flushes the file every 250 ms, as foliod's checkpointer does.
//             PAGES/RUNS writes them as RUNS runs, as LMDB does: one at the file's end, the others
//             a page each, half of them a few pages past the one before, half up to 1,024 pages
//             back (pages freed before the last checkpoint, reused). `strace` of foliod's writer
//             under one client's creates: 7 runs a commit at the median, 5 pages apart at the
//             median and 780 at the 90th percentile.
//   trace     the same with the commits of a real foliod: TRACE is a file of lines "OFFSET PAGES",
//             one per run (a `writev` or `pwrite` of LMDB's), a blank line after each commit, as
//             bench/io_floor.sh takes them from `strace` of foliod's writer. They are written in
//             turn at their offsets, and again from the first, 96 MiB further on, once all are.
//
// The data file is written with zeros first (foliod keeps zeros past LMDB's last page), so the
// pages land in allocated blocks, as foliod's do.
//
//     cc -O2 -Wall -o io_floor bench/io_floor.c -lpthread
//     ./io_floor DIR [SECONDS] [ROUNDS] [PAGES[/RUNS]|trace[,...]] [TRACE]   (bench/io_floor.sh)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define DATA_BYTES (512LL << 20)
#define RING_BYTES (8LL << 20)

static int data_fd = -1;

static void die(const char *what);

// A foliod's commits (the `trace` mode): each run's offset and pages, and where each commit ends.
#define TRACE_MODE 0x7fffffff
static long long *trace_offsets;
static int *trace_pages, *trace_commit_ends;
static int trace_commits;

static void load_trace(const char *path) {
    FILE *file = fopen(path, "r");
    if (!file) die(path);
    size_t capacity = 1 << 16, runs = 0;
    trace_offsets = malloc(capacity * sizeof *trace_offsets);
    trace_pages = malloc(capacity * sizeof *trace_pages);
    trace_commit_ends = malloc(capacity * sizeof *trace_commit_ends);
    char line[128];
    while (fgets(line, sizeof line, file) && runs < capacity && (size_t)trace_commits < capacity) {
        long long offset;
        int pages;
        if (sscanf(line, "%lld %d", &offset, &pages) == 2) {
            if (pages < 1 || pages > 64 || offset < 0 || offset % PAGE) {
                fprintf(stderr, "io_floor: %s: a run of %d pages at %lld\n", path, pages, offset);
                exit(1);
            }
            trace_offsets[runs] = offset;
            trace_pages[runs++] = pages;
        } else if (runs > 0 && (trace_commits == 0 || (size_t)trace_commit_ends[trace_commits - 1] < runs)) {
            trace_commit_ends[trace_commits++] = (int)runs;
        }
    }
    if (runs > 0 && (trace_commits == 0 || (size_t)trace_commit_ends[trace_commits - 1] < runs)) trace_commit_ends[trace_commits++] = (int)runs;
    fclose(file);
    if (trace_commits == 0) {
        fprintf(stderr, "io_floor: %s holds no commit\n", path);
        exit(1);
    }
}
static atomic_int stop_background;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "io_floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void fill_zeros(int fd, long long bytes) {
    static char zeros[1 << 20];
    for (long long at = 0; at < bytes; at += sizeof zeros)
        if (pwrite(fd, zeros, sizeof zeros, at) != (ssize_t)sizeof zeros) die("pwrite zeros");
    if (fdatasync(fd) != 0) die("fdatasync zeros");
}

// The checkpointer: write-back every millisecond, a flush every 250 ms.
static void *checkpointer(void *unused) {
    (void)unused;
    uint64_t last_flush = now_ns();
    while (!atomic_load(&stop_background)) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        if (sync_file_range(data_fd, 0, 0, SYNC_FILE_RANGE_WRITE) != 0) die("sync_file_range");
        if (now_ns() - last_flush >= 250000000u) {
            if (fdatasync(data_fd) != 0) die("fdatasync data");
            last_flush = now_ns();
        }
    }
    return NULL;
}

struct result {
    double ops_per_second;
    double p50_us, p99_us;
};

// Runs one mode for `seconds`; pages < 0 is the AOF, 0 the journal alone, > 0 foliod (in `runs` runs).
static struct result run(const char *dir, int pages, int runs, double seconds) {
    char path[4096];
    static uint64_t latencies[4 << 20];
    size_t count = 0;
    int fd;
    void *block;
    size_t block_pages = pages == TRACE_MODE ? 64 : (size_t)(pages > 0 ? pages : 1);
    if (posix_memalign(&block, PAGE, block_pages * PAGE) != 0) die("posix_memalign");
    memset(block, 'x', block_pages * PAGE);
    int commit = 0;
    long long lap = 0;
    pthread_t background;
    long long data_offset = 2048LL * PAGE;
    if (pages < 0) {
        snprintf(path, sizeof path, "%s/appendonly.aof", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
        if (fd < 0) die("open aof");
    } else {
        snprintf(path, sizeof path, "%s/journal", dir);
        fd = open(path, O_WRONLY | O_DIRECT);
        if (fd < 0) die("open journal");
        if (pages > 0) {
            atomic_store(&stop_background, 0);
            if (pthread_create(&background, NULL, checkpointer, NULL) != 0) die("pthread_create");
        }
    }
    long long ring_at = 0;
    uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9);
    for (;;) {
        uint64_t t0 = now_ns();
        if (t0 >= end || count == sizeof latencies / sizeof latencies[0]) break;
        if (pages < 0) {
            if (write(fd, block, 130) != 130) die("write aof");
        } else {
            if (pages == TRACE_MODE) {
                int from = commit == 0 ? 0 : trace_commit_ends[commit - 1];
                for (int k = from; k < trace_commit_ends[commit]; k++) {
                    long long at = (trace_offsets[k] + lap) % (DATA_BYTES - 64 * PAGE);
                    at -= at % PAGE;
                    if (pwrite(data_fd, block, (size_t)trace_pages[k] * PAGE, at) != (ssize_t)trace_pages[k] * PAGE) die("pwrite data");
                }
                if (++commit == trace_commits) {
                    commit = 0;
                    lap += 96LL << 20;
                }
            } else if (pages > 0) {
                int singles = runs > 1 ? runs - 1 : 0, appended = pages - singles;
                if (data_offset + (long long)pages * PAGE > DATA_BYTES) data_offset = 2048LL * PAGE;
                if (pwrite(data_fd, block, (size_t)appended * PAGE, data_offset) != (ssize_t)appended * PAGE) die("pwrite data");
                long long at = data_offset;
                data_offset += (long long)appended * PAGE;
                for (int k = 0; k < singles; k++) {
                    if (random() % 2) at += (1 + random() % 8) * PAGE;
                    else at -= (long long)(random() % 1024) * PAGE;
                    if (at < 0) at = 0;
                    if (pwrite(data_fd, block, PAGE, at) != PAGE) die("pwrite data");
                }
            }
            if (pwrite(fd, block, PAGE, ring_at) != PAGE) die("pwrite journal");
            ring_at = (ring_at + PAGE) % RING_BYTES;
        }
        if (fdatasync(fd) != 0) die("fdatasync");
        latencies[count++] = now_ns() - t0;
    }
    double elapsed = (now_ns() - start) / 1e9;
    if (pages > 0) {
        atomic_store(&stop_background, 1);
        pthread_join(background, NULL);
    }
    close(fd);
    free(block);
    qsort(latencies, count, sizeof latencies[0], compare);
    struct result r = {count / elapsed, latencies[count / 2] / 1e3, latencies[count * 99 / 100] / 1e3};
    return r;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: io_floor DIR [SECONDS] [ROUNDS] [PAGES[/RUNS]|trace[,...]] [TRACE]\n");
        return 64;
    }
    const char *dir = argv[1];
    double seconds = argc > 2 ? atof(argv[2]) : 3;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    int modes[16] = {-1, 0}, run_counts[16] = {1, 1}, mode_count = 2;
    char *list = strdup(argc > 4 ? argv[4] : "17,17/7");
    if (argc > 5) load_trace(argv[5]);
    for (char *item = strtok(list, ","); item && mode_count < 16; item = strtok(NULL, ",")) {
        if (strcmp(item, "trace") == 0) {
            if (argc <= 5) {
                fprintf(stderr, "io_floor: the trace mode needs a TRACE file\n");
                return 64;
            }
            run_counts[mode_count] = 1;
            modes[mode_count++] = TRACE_MODE;
            continue;
        }
        char *slash = strchr(item, '/');
        run_counts[mode_count] = slash ? atoi(slash + 1) : 1;
        modes[mode_count++] = atoi(item);
        if (modes[mode_count - 1] < 1 || run_counts[mode_count - 1] < 1 || run_counts[mode_count - 1] > modes[mode_count - 1]) {
            fprintf(stderr, "io_floor: %s: give PAGES or PAGES/RUNS, 1 <= RUNS <= PAGES\n", item);
            return 64;
        }
    }

    char path[4096];
    snprintf(path, sizeof path, "%s/journal", dir);
    int ring = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (ring < 0) die("create journal");
    fill_zeros(ring, RING_BYTES);
    close(ring);
    snprintf(path, sizeof path, "%s/data", dir);
    data_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (data_fd < 0) die("create data");
    fill_zeros(data_fd, DATA_BYTES);

    printf("%-26s %6s %12s %10s %10s %14s\n", "mode", "round", "writes/s", "p50 µs", "p99 µs", "÷ aof (round)");
    double sums[16] = {0};
    for (int round = 0; round < rounds; round++) {
        struct result results[16];
        for (int k = 0; k < mode_count; k++) {
            // Alternate the order each round, so that neither side always follows the other.
            int m = round % 2 == 0 ? k : mode_count - 1 - k;
            results[m] = run(dir, modes[m], run_counts[m], seconds);
        }
        for (int m = 0; m < mode_count; m++) {
            char name[64];
            if (modes[m] < 0) snprintf(name, sizeof name, "aof (Redis)");
            else if (modes[m] == 0) snprintf(name, sizeof name, "journal alone");
            else if (modes[m] == TRACE_MODE) snprintf(name, sizeof name, "foliod, its commits");
            else if (run_counts[m] > 1) snprintf(name, sizeof name, "foliod, %d pages/%d runs", modes[m], run_counts[m]);
            else snprintf(name, sizeof name, "foliod, %d pages", modes[m]);
            double ratio = results[m].ops_per_second / results[0].ops_per_second;
            sums[m] += ratio;
            printf("%-26s %6d %12.0f %10.1f %10.1f %14.2f\n", name, round + 1, results[m].ops_per_second, results[m].p50_us, results[m].p99_us, ratio);
        }
    }
    printf("mean ratio to aof over %d rounds:", rounds);
    for (int m = 1; m < mode_count; m++) {
        if (modes[m] == 0) printf(" journal alone %.2f", sums[m] / rounds);
        else if (modes[m] == TRACE_MODE) printf(", foliod's own commits %.2f", sums[m] / rounds);
        else if (run_counts[m] > 1) printf(", foliod with %d pages in %d runs %.2f", modes[m], run_counts[m], sums[m] / rounds);
        else printf(", foliod with %d pages %.2f", modes[m], sums[m] / rounds);
    }
    printf("\n");
    close(data_fd);
    snprintf(path, sizeof path, "%s/data", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/journal", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/appendonly.aof", dir);
    unlink(path);
    return 0;
}
