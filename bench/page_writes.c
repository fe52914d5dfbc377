// Which pages LMDB writes into data.mdb, for bench/page_writes.sh: an LD_PRELOAD shim over
// pwrite/pwrite64/writev that, for every whole 4 KiB page written to a file named data.mdb,
// prints one line to $PAGE_WRITES_OUT: the page's flags (LMDB's page header: 1 branch, 2 leaf,
// 4 overflow) and the size and hex bytes (up to 24) of the page's first key (a branch's second:
// its first is empty), which tell which database the page belongs to. Diagnostics only: it takes a
// lock and a readlink per write.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static FILE *out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int is_data_file(int fd) {
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    size_t length = (size_t)n;
    return length >= 9 && strcmp(target + length - 9, "/data.mdb") == 0;
}

static void record(const unsigned char *bytes, size_t length) {
    pthread_mutex_lock(&lock);
    if (!out) {
        const char *path = getenv("PAGE_WRITES_OUT");
        out = fopen(path ? path : "/dev/null", "w");
    }
    for (size_t at = 0; out && at + 4096 <= length; at += 4096) {
        const unsigned char *page = bytes + at;
        uint16_t flags, lower;
        memcpy(&flags, page + 10, 2);
        memcpy(&lower, page + 12, 2);
        char key[49] = "-";
        unsigned size = 0;
        unsigned entries = lower >= 16 ? (lower - 16u) / 2u : 0;
        if ((flags & 3) && entries > 0) {
            unsigned index = (flags & 1) && entries > 1 ? 1 : 0;
            uint16_t node;
            memcpy(&node, page + 16 + 2 * index, 2);
            if (node + 8u <= 4096u) {
                uint16_t keySize;
                memcpy(&keySize, page + node + 6, 2);
                size = keySize;
                unsigned shown = 0;
                for (; shown < size && shown < 24 && node + 8u + shown < 4096u; shown++)
                    snprintf(key + 2 * shown, 3, "%02x", page[node + 8 + shown]);
                if (shown == 0) strcpy(key, "-");
            }
        }
        fprintf(out, "%u %u %s\n", flags & 0x7, size, key);
    }
    pthread_mutex_unlock(&lock);
}

ssize_t pwrite64(int fd, const void *bytes, size_t length, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    if (length >= 4096 && is_data_file(fd)) record(bytes, length);
    return real(fd, bytes, length, offset);
}

ssize_t pwrite(int fd, const void *bytes, size_t length, off_t offset) { return pwrite64(fd, bytes, length, offset); }

ssize_t writev(int fd, const struct iovec *vector, int count) {
    static ssize_t (*real)(int, const struct iovec *, int);
    if (!real) real = (ssize_t (*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    if (is_data_file(fd))
        for (int i = 0; i < count; i++)
            if (vector[i].iov_len >= 4096) record(vector[i].iov_base, vector[i].iov_len);
    return real(fd, vector, count);
}
