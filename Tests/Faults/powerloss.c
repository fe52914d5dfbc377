// powerloss: an LD_PRELOAD library that logs, for the regular files under one directory, every
// write, flush, size change and change of name a process makes, so that powerloss_image.c can
// rebuild afterwards what the disk could hold had the machine lost power at the moment the process
// was killed (docs/POWERLOSS.md). Built like iofault.c:
//
//     cc -shared -fPIC -O2 -o powerloss.so powerloss.c -ldl        (powerloss.h beside it)
//     POWERLOSS_LOG=/tmp/x/log POWERLOSS_PREFIX=/tmp/x/data/ POWERLOSS_EXCLUDE=lock.mdb:blobs/
//     LD_PRELOAD=/tmp/x/powerloss.so foliod --data /tmp/x/data ...   (the same environment)
//
// POWERLOSS_PREFIX is the tracked directory; POWERLOSS_EXCLUDE, colon-separated prefixes of paths
// relative to it that are not tracked. Descriptors are followed from the open that made them (open,
// openat, creat and their 64-bit forms, dup, fcntl F_DUPFD) to close, as in iofault.c, so sockets,
// pipes and files elsewhere are never logged; a descriptor whose file changed under it (closed by
// a path the library does not see, its number reused) is dropped at its next write.
//
// The log (format in powerloss.h) is appended with one writev(2) per record on an O_APPEND
// descriptor, under one lock, so its order is the order of the calls and a record reaches the page
// cache whole, where a SIGKILL of the process leaves it. A write is logged before the real call,
// with its bytes, so the log never lacks a write the file got (a record a SIGKILL cut short at the
// end of the log is of a write not made); a call that did less than it was logged as doing is
// corrected by a PL_RESULT after it. A flush is logged after the real call succeeded, with the
// calls under way when it began: only what had returned by then is sure to be on disk.
//
// POWERLOSS_FAIL_WRITEV=N (optional): about one in N writev(2) calls to `data.mdb` made by foliod's
// writer thread (`folio-writer`; LMDB writes a commit's runs of pages with writev, never its meta
// page) fails with ENOSPC without writing or being logged, so that commits fail after the journal
// got their record (docs/DURABILITY.md: the cancel), while start-up and recovery, which run on
// other threads, go through.
//
// Seen: write, pwrite, writev, pwritev, pwritev2 (and 64-bit forms), O_DSYNC/O_SYNC/RWF_DSYNC
// writes, fsync, fdatasync (of files, and of tracked directories), sync, syncfs, msync(MS_SYNC) of
// a mapped tracked file, ftruncate, truncate, fallocate, posix_fallocate, rename, renameat,
// renameat2, link, linkat, unlink, unlinkat, remove, O_TMPFILE. Not seen (docs/POWERLOSS.md):
// writes through a shared writable mapping (logged as PL_MAPPED), copy_file_range and sendfile
// into a tracked file (PL_UNSEEN), stdio (glibc's fwrite and fopen call write and open inside libc,
// past any preloaded library), io_uring and AIO. sync_file_range only starts write-back: not a flush.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "powerloss.h"

#ifndef RWF_DSYNC
#define RWF_DSYNC 0x00000002
#endif
#ifndef RWF_SYNC
#define RWF_SYNC 0x00000004
#endif
#ifndef RWF_APPEND
#define RWF_APPEND 0x00000010
#endif

#define MAX_FDS 65536
#define MAX_PENDING 1024
#define MAX_MAPS 256
#define MAX_EXCLUDES 32

// What the library knows of an open descriptor.
struct descriptor {
    char *path;      // absolute and normalized; for directories, to resolve paths relative to them
    int tracked;     // a regular file under the prefix, not excluded
    int directory;   // a directory under the prefix (or the prefix itself), not excluded
    int dsync;       // opened with O_DSYNC or O_SYNC: each write is flushed before it returns
    int append;      // opened with O_APPEND
    dev_t dev;
    ino_t ino;
};

// A mapping of a tracked file, for msync.
struct mapping {
    char *start;
    size_t length;
    off_t offset;
    dev_t dev;
    ino_t ino;
};

// Calls logged and not yet returned, for the flushes that begin meanwhile.
struct snapshot {
    uint64_t ref;
    uint64_t count;
    uint64_t seqs[MAX_PENDING];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct descriptor *fds[MAX_FDS];
static struct mapping maps[MAX_MAPS];
static uint64_t pending[MAX_PENDING];
static uint64_t pending_count;
static uint64_t next_seq;
static int log_fd = -1;
static char prefix[PATH_MAX];   // normalized, ends with '/'
static size_t prefix_length;
static char *excludes[MAX_EXCLUDES];
static int exclude_count;

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_close)(int);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_fcntl)(int, int, ...);
static int (*real_fcntl64)(int, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off64_t);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pwritev64v2)(int, const struct iovec *, int, off64_t, int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static void (*real_sync)(void);
static int (*real_syncfs)(int);
static int (*real_msync)(void *, size_t, int);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static void *(*real_mmap64)(void *, size_t, int, int, int, off64_t);
static int (*real_munmap)(void *, size_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off64_t);
static int (*real_truncate)(const char *, off_t);
static int (*real_truncate64)(const char *, off64_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_fallocate64)(int, int, off64_t, off64_t);
static int (*real_posix_fallocate)(int, off_t, off_t);
static int (*real_posix_fallocate64)(int, off64_t, off64_t);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned int);
static int (*real_link)(const char *, const char *);
static int (*real_linkat)(int, const char *, int, const char *, int);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_remove)(const char *);
static ssize_t (*real_copy_file_range)(int, off64_t *, int, off64_t *, size_t, unsigned int);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static ssize_t (*real_sendfile64)(int, int, off64_t *, size_t);

// The next definition of `name` (libc's); resolved at first use, so that calls made before this
// library's constructor ran (by other libraries' constructors) work too.
#define REAL(name) (real_##name ? real_##name : (*(void **)&real_##name = dlsym(RTLD_NEXT, #name), real_##name))

static void die(const char *what) {
    char line[256];
    int length = snprintf(line, sizeof(line), "powerloss: %s: %s\n", what, strerror(errno));
    if (length > 0) REAL(write)(2, line, (size_t)length);
    abort();
}

// `path` made lexically absolute and normalized (no "//", ".", ".."), into `out`; 0 if too long.
static int normalize(const char *base, const char *path, char *out) {
    char joined[PATH_MAX * 2];
    int length = snprintf(joined, sizeof(joined), "%s/%s", path[0] == '/' ? "" : base, path);
    if (length < 0 || length >= (int)sizeof(joined)) return 0;
    size_t used = 0;
    for (char *save = NULL, *part = strtok_r(joined, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, ".")) continue;
        if (!strcmp(part, "..")) {
            while (used > 0 && out[used - 1] != '/') used--;
            if (used > 0) used--;
            continue;
        }
        size_t part_length = strlen(part);
        if (used + 1 + part_length + 1 > PATH_MAX) return 0;
        out[used++] = '/';
        memcpy(out + used, part, part_length);
        used += part_length;
    }
    if (used == 0) out[used++] = '/';
    out[used] = 0;
    return 1;
}

// POWERLOSS_FAIL_WRITEV: one in `fail_every` writev calls of the writer thread to data.mdb fails;
// 0 for never.
static uint64_t fail_every;
static uint64_t fail_state;

// Whether this writev to `file` is to fail (POWERLOSS_FAIL_WRITEV).
static int injected_failure(const struct descriptor *file) {
    if (!fail_every) return 0;
    const char *name = strrchr(file->path, '/');
    if (!name || strcmp(name, "/data.mdb") != 0) return 0;
    char thread[16] = "";
    if (prctl(PR_GET_NAME, thread, 0, 0, 0) != 0 || strcmp(thread, "folio-writer") != 0) return 0;
    pthread_mutex_lock(&lock);
    fail_state ^= fail_state << 13;
    fail_state ^= fail_state >> 7;
    fail_state ^= fail_state << 17;
    int fail = fail_state % fail_every == 0;
    pthread_mutex_unlock(&lock);
    return fail;
}

__attribute__((constructor)) static void setup(void) {
    const char *every = getenv("POWERLOSS_FAIL_WRITEV");
    if (every && *every) {
        fail_every = strtoull(every, NULL, 10);
        fail_state = 0x9E3779B97F4A7C15u ^ (uint64_t)getpid();
    }
    const char *log_path = getenv("POWERLOSS_LOG");
    const char *tracked = getenv("POWERLOSS_PREFIX");
    if (!log_path || !*log_path || !tracked || !*tracked) return;
    if (!normalize("/", tracked, prefix)) return;
    prefix_length = strlen(prefix);
    if (prefix[prefix_length - 1] != '/') {
        prefix[prefix_length++] = '/';
        prefix[prefix_length] = 0;
    }
    const char *exclude = getenv("POWERLOSS_EXCLUDE");
    if (exclude && *exclude) {
        char *list = strdup(exclude);
        for (char *save = NULL, *item = strtok_r(list, ":", &save); item && exclude_count < MAX_EXCLUDES;
             item = strtok_r(NULL, ":", &save))
            excludes[exclude_count++] = item;
    }
    log_fd = REAL(open)(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) die("cannot open POWERLOSS_LOG");
}

// The path of `full` relative to the prefix ("." for the prefix directory itself), or NULL when
// it is outside the prefix or excluded.
static const char *relative(const char *full) {
    if (log_fd < 0) return NULL;
    if (strlen(full) + 1 == prefix_length && !strncmp(full, prefix, prefix_length - 1)) return ".";
    if (strncmp(full, prefix, prefix_length) != 0) return NULL;
    const char *rest = full + prefix_length;
    for (int i = 0; i < exclude_count; i++)
        if (!strncmp(rest, excludes[i], strlen(excludes[i]))) return NULL;
    return rest;
}

// `path` relative to `dirfd` made absolute into `full`; 0 when that cannot be done.
static int full_path(int dirfd, const char *path, char *full) {
    char cwd[PATH_MAX];
    const char *base = "/";
    if (path[0] != '/') {
        if (dirfd == AT_FDCWD) base = getcwd(cwd, sizeof(cwd));
        else if (dirfd >= 0 && dirfd < MAX_FDS && fds[dirfd]) base = fds[dirfd]->path;
        else base = NULL;
    }
    return base && normalize(base, path, full);
}

// Appends one record and its payload with one writev; called with the lock held. Returns its seq.
static uint64_t append(struct powerloss_record *record, const struct iovec *payload, int count) {
    static const uint64_t padding = 0;
    struct iovec vector[IOV_MAX];
    char *joined = NULL;
    int pieces = 1;
    size_t total = sizeof(*record);
    for (int i = 0; i < count; i++) total += payload[i].iov_len;
    size_t pad = (8 - total % 8) % 8;
    record->magic = POWERLOSS_MAGIC;
    record->size = total + pad;
    record->seq = next_seq++;
    record->pid = (uint32_t)getpid();
    vector[0] = (struct iovec){record, sizeof(*record)};
    if (count < IOV_MAX - 1) {
        for (int i = 0; i < count; i++) vector[pieces++] = payload[i];
    } else {
        joined = malloc(total - sizeof(*record));
        if (!joined) die("out of memory for a record");
        size_t at = 0;
        for (int i = 0; i < count; i++) {
            memcpy(joined + at, payload[i].iov_base, payload[i].iov_len);
            at += payload[i].iov_len;
        }
        vector[pieces++] = (struct iovec){joined, at};
    }
    if (pad) vector[pieces++] = (struct iovec){(void *)&padding, pad};
    // Only this process appends, under the lock: the rest of a short write lands right after it.
    struct iovec *rest = vector;
    while (pieces > 0) {
        ssize_t written = REAL(writev)(log_fd, rest, pieces);
        if (written < 0) {
            if (errno == EINTR) continue;
            die("cannot append to POWERLOSS_LOG");
        }
        while (pieces > 0 && (size_t)written >= rest->iov_len) {
            written -= (ssize_t)rest->iov_len;
            rest++;
            pieces--;
        }
        if (pieces > 0) {
            rest->iov_base = (char *)rest->iov_base + written;
            rest->iov_len -= (size_t)written;
        }
    }
    free(joined);
    return record->seq;
}

static void pending_add(uint64_t seq) {
    if (pending_count == MAX_PENDING) {
        errno = EOVERFLOW;
        die("too many calls under way at once");
    }
    pending[pending_count++] = seq;
}

static void pending_remove(uint64_t seq) {
    for (uint64_t i = 0; i < pending_count; i++)
        if (pending[i] == seq) {
            pending[i] = pending[--pending_count];
            return;
        }
}

// What a flush beginning now may not cover: every later record, and the calls under way. Called
// with the lock held.
static void take_snapshot(struct snapshot *snapshot) {
    snapshot->ref = next_seq;
    snapshot->count = pending_count;
    memcpy(snapshot->seqs, pending, pending_count * sizeof(uint64_t));
}

// Logs a flush that succeeded, of what `snapshot` says it covered.
static void log_flush(uint32_t kind, dev_t dev, ino_t ino, uint64_t offset, uint64_t length, const char *path,
                      const struct snapshot *snapshot) {
    struct powerloss_record record = {.kind = kind, .dev = dev, .ino = ino, .offset = offset, .length = length,
                                      .ref = snapshot->ref, .count = snapshot->count};
    struct iovec payload[2] = {{(void *)snapshot->seqs, snapshot->count * sizeof(uint64_t)}};
    int count = 1;
    if (path) payload[count++] = (struct iovec){(void *)path, strlen(path) + 1};
    pthread_mutex_lock(&lock);
    append(&record, payload, count);
    pthread_mutex_unlock(&lock);
}

// A call logged before it runs: its record goes in, and it counts as under way until `finish`.
static uint64_t begin(struct powerloss_record *record, const struct iovec *payload, int count,
                      struct snapshot *before) {
    pthread_mutex_lock(&lock);
    if (before) take_snapshot(before);
    uint64_t seq = append(record, payload, count);
    pending_add(seq);
    pthread_mutex_unlock(&lock);
    return seq;
}

// The call of record `seq` returned, having done `done` of the `asked` it was logged as doing.
static void finish(uint64_t seq, uint64_t asked, uint64_t done) {
    int saved = errno;
    pthread_mutex_lock(&lock);
    pending_remove(seq);
    if (done != asked) {
        struct powerloss_record record = {.kind = PL_RESULT, .ref = seq, .length = done};
        append(&record, NULL, 0);
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
}

// The descriptor if it is a tracked file, still the file it was opened on (else it is dropped).
static struct descriptor *tracked_file(int fd) {
    if (fd < 0 || fd >= MAX_FDS || !fds[fd] || !fds[fd]->tracked) return NULL;
    struct stat status;
    struct descriptor *descriptor = fds[fd];
    if (fstat(fd, &status) == 0 && status.st_dev == descriptor->dev && status.st_ino == descriptor->ino)
        return descriptor;
    pthread_mutex_lock(&lock);
    if (fds[fd] == descriptor) {
        fds[fd] = NULL;
        free(descriptor->path);
        free(descriptor);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static int all_zero(const struct iovec *vector, int count) {
    for (int i = 0; i < count; i++) {
        const unsigned char *bytes = vector[i].iov_base;
        size_t length = vector[i].iov_len;
        if (length > 0 && (bytes[0] != 0 || memcmp(bytes, bytes + 1, length - 1) != 0)) return 0;
    }
    return 1;
}

// A write logged before it runs; `finish_write` after.
struct write_call {
    uint64_t seq;
    uint64_t offset;
    uint64_t length;
    int dsync;
    struct descriptor *file;
    struct snapshot *before;
};

// `offset` -1: at the descriptor's position (or its end, appending).
static void begin_write(struct write_call *call, struct descriptor *file, int fd, const struct iovec *vector, int count,
                        long long offset, int flags) {
    uint64_t length = 0;
    for (int i = 0; i < count; i++) length += vector[i].iov_len;
    if (offset < 0 || (flags & RWF_APPEND)) {
        struct stat status;
        offset = (file->append || (flags & RWF_APPEND)) ? (fstat(fd, &status) == 0 ? (long long)status.st_size : 0)
                                                        : (long long)lseek(fd, 0, SEEK_CUR);
    }
    int zero = all_zero(vector, count);
    call->file = file;
    call->offset = (uint64_t)offset;
    call->length = length;
    call->dsync = file->dsync || (flags & (RWF_DSYNC | RWF_SYNC));
    call->before = call->dsync ? malloc(sizeof(struct snapshot)) : NULL;
    if (call->dsync && !call->before) die("out of memory for a snapshot");
    struct powerloss_record record = {.kind = PL_WRITE, .flags = (zero ? PL_ZERO : 0) | (call->dsync ? PL_DSYNC : 0),
                                      .dev = file->dev, .ino = file->ino, .offset = call->offset, .length = length};
    call->seq = begin(&record, zero ? NULL : vector, zero ? 0 : count, call->before);
}

static ssize_t finish_write(struct write_call *call, ssize_t result) {
    int saved = errno;
    uint64_t done = result > 0 ? (uint64_t)result : 0;
    finish(call->seq, call->length, done);
    if (call->dsync && done > 0) {
        // Flushed before it returned: this write and what had returned before it began.
        call->before->ref = call->seq + 1;
        log_flush(PL_SYNC, call->file->dev, call->file->ino, call->offset, done, NULL, call->before);
    }
    free(call->before);
    errno = saved;
    return result;
}

// Starts following `fd`, opened on the absolute path `full`. Logs the open of a tracked file.
static void track(int fd, const char *full, int flags, int created) {
    if (fd < 0 || fd >= MAX_FDS) return;
    struct stat status;
    if (fstat(fd, &status) != 0 || !(S_ISREG(status.st_mode) || S_ISDIR(status.st_mode))) return;
    struct descriptor *descriptor = calloc(1, sizeof(*descriptor));
    if (!descriptor) return;
    const char *name = relative(full);
    int unnamed = (flags & O_TMPFILE) == O_TMPFILE;
    descriptor->path = strdup(full);
    descriptor->tracked = S_ISREG(status.st_mode) && name != NULL;
    descriptor->directory = S_ISDIR(status.st_mode) && name != NULL;
    descriptor->dsync = (flags & O_DSYNC) != 0;
    descriptor->append = (flags & O_APPEND) != 0;
    descriptor->dev = status.st_dev;
    descriptor->ino = status.st_ino;
    pthread_mutex_lock(&lock);
    struct descriptor *old = fds[fd];
    fds[fd] = descriptor;
    if (descriptor->tracked) {
        // An O_TMPFILE file has no name until linkat gives it one.
        const char *path = unnamed ? "" : name;
        struct powerloss_record record = {
            .kind = PL_OPEN, .dev = status.st_dev, .ino = status.st_ino, .offset = (uint64_t)status.st_size,
            .flags = (created || unnamed ? PL_CREATED : 0) |
                     ((flags & O_TRUNC) && !created && (flags & O_ACCMODE) != O_RDONLY ? PL_TRUNCATED : 0)};
        struct iovec payload = {(void *)path, strlen(path) + 1};
        append(&record, &payload, 1);
    }
    pthread_mutex_unlock(&lock);
    if (old) {
        free(old->path);
        free(old);
    }
}

static void untrack(int fd) {
    if (fd < 0 || fd >= MAX_FDS || !fds[fd]) return;
    pthread_mutex_lock(&lock);
    struct descriptor *old = fds[fd];
    fds[fd] = NULL;
    pthread_mutex_unlock(&lock);
    if (old) {
        free(old->path);
        free(old);
    }
}

// `copy` now refers to what `fd` does.
static void duplicated(int fd, int copy) {
    if (copy < 0 || copy >= MAX_FDS || copy == fd) return;
    untrack(copy);
    if (fd < 0 || fd >= MAX_FDS || !fds[fd]) return;
    struct descriptor *descriptor = malloc(sizeof(*descriptor));
    if (!descriptor) return;
    pthread_mutex_lock(&lock);
    if (fds[fd]) {
        *descriptor = *fds[fd];
        descriptor->path = strdup(fds[fd]->path);
        fds[copy] = descriptor;
        descriptor = NULL;
    }
    pthread_mutex_unlock(&lock);
    free(descriptor);
}

typedef int (*open_function)(int, const char *, int, ...);

static uint64_t begin_size(uint32_t kind, const struct descriptor *file, int mode, long long offset, long long length);
static int tracked_path(const char *path, struct descriptor *file, struct stat *status);

static int opened(int dirfd, const char *path, int flags, mode_t mode, open_function real) {
    char full[PATH_MAX];
    int known = log_fd >= 0 && path && full_path(dirfd, path, full);
    // Whether this open makes the file: it did not exist just before (the process is the only writer).
    int creating = known && (flags & O_CREAT) && relative(full) && faccessat(dirfd, path, F_OK, AT_EACCESS) != 0;
    // An open that truncates a tracked file empties it before track() can log the open: log the
    // file's open as it is and its truncation first, as truncate() does, so that a kill between
    // the two leaves a size the log gives (a crash loop found a 0-byte journal.new the log had
    // never emptied).
    struct descriptor existing;
    struct stat status;
    int truncating =
        known && !creating && (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY && tracked_path(full, &existing, &status);
    uint64_t truncation = 0;
    if (truncating) {
        const char *name = relative(full);
        struct powerloss_record record = {
            .kind = PL_OPEN, .dev = status.st_dev, .ino = status.st_ino, .offset = (uint64_t)status.st_size};
        struct iovec payload = {(void *)name, strlen(name) + 1};
        pthread_mutex_lock(&lock);
        append(&record, &payload, 1);
        pthread_mutex_unlock(&lock);
        truncation = begin_size(PL_TRUNCATE, &existing, 0, 0, 0);
    }
    int fd = real(dirfd, path, flags, mode);
    if (truncating) finish(truncation, 1, fd >= 0);
    if (fd >= 0 && known) {
        int saved = errno;
        track(fd, full, flags, creating);
        errno = saved;
    }
    return fd;
}

static mode_t mode_argument(int flags, va_list arguments) {
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(arguments, int) : 0;
}

static int open_at_cwd(int dirfd, const char *path, int flags, ...) {
    (void)dirfd;
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return REAL(open)(path, flags, mode);
}

static int open64_at_cwd(int dirfd, const char *path, int flags, ...) {
    (void)dirfd;
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return REAL(open64)(path, flags, mode);
}

static int real_openat_function(int dirfd, const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return REAL(openat)(dirfd, path, flags, mode);
}

static int real_openat64_function(int dirfd, const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return REAL(openat64)(dirfd, path, flags, mode);
}

int open(const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return opened(AT_FDCWD, path, flags, mode, open_at_cwd);
}

int open64(const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return opened(AT_FDCWD, path, flags, mode, open64_at_cwd);
}

int openat(int dirfd, const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return opened(dirfd, path, flags, mode, real_openat_function);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return opened(dirfd, path, flags, mode, real_openat64_function);
}

int creat(const char *path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

int creat64(const char *path, mode_t mode) { return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

int close(int fd) {
    untrack(fd);
    return REAL(close)(fd);
}

int dup(int fd) {
    int copy = REAL(dup)(fd);
    if (copy >= 0) duplicated(fd, copy);
    return copy;
}

int dup2(int fd, int copy) {
    int result = REAL(dup2)(fd, copy);
    if (result >= 0) duplicated(fd, result);
    return result;
}

int dup3(int fd, int copy, int flags) {
    int result = REAL(dup3)(fd, copy, flags);
    if (result >= 0) duplicated(fd, result);
    return result;
}

static int controlled(int fd, int command, void *argument, int (*real)(int, int, ...)) {
    int result = real(fd, command, argument);
    if (result >= 0 && (command == F_DUPFD || command == F_DUPFD_CLOEXEC)) duplicated(fd, result);
    if (result >= 0 && command == F_SETFL && fd >= 0 && fd < MAX_FDS && fds[fd])
        fds[fd]->append = ((long)argument & O_APPEND) != 0;
    return result;
}

int fcntl(int fd, int command, ...) {
    va_list arguments;
    va_start(arguments, command);
    void *argument = va_arg(arguments, void *);
    va_end(arguments);
    return controlled(fd, command, argument, REAL(fcntl));
}

int fcntl64(int fd, int command, ...) {
    va_list arguments;
    va_start(arguments, command);
    void *argument = va_arg(arguments, void *);
    va_end(arguments);
    return controlled(fd, command, argument, REAL(fcntl64));
}

ssize_t write(int fd, const void *buffer, size_t count) {
    struct descriptor *file = count ? tracked_file(fd) : NULL;
    if (!file) return REAL(write)(fd, buffer, count);
    struct iovec vector = {(void *)buffer, count};
    struct write_call call;
    begin_write(&call, file, fd, &vector, 1, -1, 0);
    return finish_write(&call, REAL(write)(fd, buffer, count));
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    struct descriptor *file = count ? tracked_file(fd) : NULL;
    if (!file) return REAL(pwrite)(fd, buffer, count, offset);
    struct iovec vector = {(void *)buffer, count};
    struct write_call call;
    begin_write(&call, file, fd, &vector, 1, offset, 0);
    return finish_write(&call, REAL(pwrite)(fd, buffer, count, offset));
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off64_t offset) {
    struct descriptor *file = count ? tracked_file(fd) : NULL;
    if (!file) return REAL(pwrite64)(fd, buffer, count, offset);
    struct iovec vector = {(void *)buffer, count};
    struct write_call call;
    begin_write(&call, file, fd, &vector, 1, offset, 0);
    return finish_write(&call, REAL(pwrite64)(fd, buffer, count, offset));
}

ssize_t writev(int fd, const struct iovec *vector, int count) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(writev)(fd, vector, count);
    if (injected_failure(file)) {
        errno = ENOSPC;
        return -1;
    }
    struct write_call call;
    begin_write(&call, file, fd, vector, count, -1, 0);
    return finish_write(&call, REAL(writev)(fd, vector, count));
}

ssize_t pwritev(int fd, const struct iovec *vector, int count, off_t offset) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(pwritev)(fd, vector, count, offset);
    struct write_call call;
    begin_write(&call, file, fd, vector, count, offset, 0);
    return finish_write(&call, REAL(pwritev)(fd, vector, count, offset));
}

ssize_t pwritev64(int fd, const struct iovec *vector, int count, off64_t offset) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(pwritev64)(fd, vector, count, offset);
    struct write_call call;
    begin_write(&call, file, fd, vector, count, offset, 0);
    return finish_write(&call, REAL(pwritev64)(fd, vector, count, offset));
}

ssize_t pwritev2(int fd, const struct iovec *vector, int count, off_t offset, int flags) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(pwritev2)(fd, vector, count, offset, flags);
    struct write_call call;
    begin_write(&call, file, fd, vector, count, offset, flags);
    return finish_write(&call, REAL(pwritev2)(fd, vector, count, offset, flags));
}

ssize_t pwritev64v2(int fd, const struct iovec *vector, int count, off64_t offset, int flags) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(pwritev64v2)(fd, vector, count, offset, flags);
    struct write_call call;
    begin_write(&call, file, fd, vector, count, offset, flags);
    return finish_write(&call, REAL(pwritev64v2)(fd, vector, count, offset, flags));
}

// fsync and fdatasync: of a tracked file, a PL_SYNC of all of it; of a tracked directory, a
// PL_DIRSYNC. (Both put the file's size on disk, which is all of its metadata that matters here.)
static int flushed(int fd, int (*real)(int)) {
    struct descriptor *file = tracked_file(fd);
    struct descriptor *directory = !file && fd >= 0 && fd < MAX_FDS && fds[fd] && fds[fd]->directory ? fds[fd] : NULL;
    if (!file && !directory) return real(fd);
    struct snapshot *before = malloc(sizeof(*before));
    if (!before) die("out of memory for a snapshot");
    pthread_mutex_lock(&lock);
    take_snapshot(before);
    pthread_mutex_unlock(&lock);
    int result = real(fd);
    if (result == 0) {
        int saved = errno;
        if (file) log_flush(PL_SYNC, file->dev, file->ino, 0, 0, NULL, before);
        else log_flush(PL_DIRSYNC, directory->dev, directory->ino, 0, 0, relative(directory->path), before);
        errno = saved;
    }
    free(before);
    return result;
}

int fsync(int fd) { return flushed(fd, REAL(fsync)); }

int fdatasync(int fd) { return flushed(fd, REAL(fdatasync)); }

void sync(void) {
    if (log_fd < 0) {
        REAL(sync)();
        return;
    }
    struct snapshot *before = malloc(sizeof(*before));
    if (!before) die("out of memory for a snapshot");
    pthread_mutex_lock(&lock);
    take_snapshot(before);
    pthread_mutex_unlock(&lock);
    REAL(sync)();
    log_flush(PL_SYNC_ALL, 0, 0, 0, 0, NULL, before);
    free(before);
}

int syncfs(int fd) {
    if (log_fd < 0) return REAL(syncfs)(fd);
    struct snapshot *before = malloc(sizeof(*before));
    if (!before) die("out of memory for a snapshot");
    pthread_mutex_lock(&lock);
    take_snapshot(before);
    pthread_mutex_unlock(&lock);
    int result = REAL(syncfs)(fd);
    if (result == 0) {
        int saved = errno;
        log_flush(PL_SYNC_ALL, 0, 0, 0, 0, NULL, before);
        errno = saved;
    }
    free(before);
    return result;
}

// Logs a record that needs no result (PL_MAPPED, PL_UNSEEN).
static void note(uint32_t kind, const struct descriptor *file) {
    struct powerloss_record record = {.kind = kind, .dev = file->dev, .ino = file->ino};
    pthread_mutex_lock(&lock);
    append(&record, NULL, 0);
    pthread_mutex_unlock(&lock);
}

static void mapped(void *start, size_t length, int protection, int flags, int fd, long long offset) {
    struct descriptor *file = start != MAP_FAILED ? tracked_file(fd) : NULL;
    if (!file) return;
    int saved = errno;
    if ((flags & MAP_SHARED) && (protection & PROT_WRITE)) note(PL_MAPPED, file);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_MAPS; i++)
        if (!maps[i].start) {
            maps[i] = (struct mapping){start, length, (off_t)offset, file->dev, file->ino};
            break;
        }
    pthread_mutex_unlock(&lock);
    errno = saved;
}

void *mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset) {
    void *start = REAL(mmap)(address, length, protection, flags, fd, offset);
    if (fd >= 0) mapped(start, length, protection, flags, fd, offset);
    return start;
}

void *mmap64(void *address, size_t length, int protection, int flags, int fd, off64_t offset) {
    void *start = REAL(mmap64)(address, length, protection, flags, fd, offset);
    if (fd >= 0) mapped(start, length, protection, flags, fd, offset);
    return start;
}

int munmap(void *address, size_t length) {
    int result = REAL(munmap)(address, length);
    if (result == 0 && log_fd >= 0) {
        char *start = address;
        pthread_mutex_lock(&lock);
        for (int i = 0; i < MAX_MAPS; i++)
            if (maps[i].start && maps[i].start >= start && maps[i].start + maps[i].length <= start + length)
                maps[i].start = NULL;
        pthread_mutex_unlock(&lock);
    }
    return result;
}

// msync(MS_SYNC) flushes the file's pages of the range: a PL_SYNC of those bytes of each mapped file.
int msync(void *address, size_t length, int flags) {
    if (log_fd < 0 || !(flags & MS_SYNC)) return REAL(msync)(address, length, flags);
    char *start = address;
    struct mapping hit[MAX_MAPS];
    int hits = 0;
    struct snapshot *before = malloc(sizeof(*before));
    if (!before) die("out of memory for a snapshot");
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_MAPS; i++) {
        if (!maps[i].start || maps[i].start >= start + length || maps[i].start + maps[i].length <= start) continue;
        char *from = maps[i].start > start ? maps[i].start : start;
        char *to = maps[i].start + maps[i].length < start + length ? maps[i].start + maps[i].length : start + length;
        hit[hits++] = (struct mapping){from, (size_t)(to - from), maps[i].offset + (from - maps[i].start), maps[i].dev, maps[i].ino};
    }
    take_snapshot(before);
    pthread_mutex_unlock(&lock);
    int result = REAL(msync)(address, length, flags);
    if (result == 0) {
        int saved = errno;
        for (int i = 0; i < hits; i++)
            log_flush(PL_SYNC, hit[i].dev, hit[i].ino, (uint64_t)hit[i].offset, hit[i].length, NULL, before);
        errno = saved;
    }
    free(before);
    return result;
}

// A size change logged before it is made.
static uint64_t begin_size(uint32_t kind, const struct descriptor *file, int mode, long long offset, long long length) {
    struct powerloss_record record = {.kind = kind, .flags = (uint32_t)mode, .dev = file->dev, .ino = file->ino,
                                      .offset = (uint64_t)offset, .length = (uint64_t)length};
    return begin(&record, NULL, 0, NULL);
}

int ftruncate(int fd, off_t length) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(ftruncate)(fd, length);
    uint64_t seq = begin_size(PL_TRUNCATE, file, 0, length, 0);
    int result = REAL(ftruncate)(fd, length);
    finish(seq, 1, result == 0);
    return result;
}

int ftruncate64(int fd, off64_t length) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(ftruncate64)(fd, length);
    uint64_t seq = begin_size(PL_TRUNCATE, file, 0, length, 0);
    int result = REAL(ftruncate64)(fd, length);
    finish(seq, 1, result == 0);
    return result;
}

// The tracked file at `path`, as a descriptor that is not one (for truncate by name).
// Whether `path` is a tracked regular file: then `file` names it, and `status` (if given) is its stat.
static int tracked_path(const char *path, struct descriptor *file, struct stat *status) {
    char full[PATH_MAX];
    struct stat own;
    if (!status) status = &own;
    if (log_fd < 0 || !full_path(AT_FDCWD, path, full) || !relative(full) || stat(path, status) != 0 ||
        !S_ISREG(status->st_mode))
        return 0;
    *file = (struct descriptor){.dev = status->st_dev, .ino = status->st_ino};
    return 1;
}

int truncate(const char *path, off_t length) {
    struct descriptor file;
    if (!tracked_path(path, &file, NULL)) return REAL(truncate)(path, length);
    uint64_t seq = begin_size(PL_TRUNCATE, &file, 0, length, 0);
    int result = REAL(truncate)(path, length);
    finish(seq, 1, result == 0);
    return result;
}

int truncate64(const char *path, off64_t length) {
    struct descriptor file;
    if (!tracked_path(path, &file, NULL)) return REAL(truncate64)(path, length);
    uint64_t seq = begin_size(PL_TRUNCATE, &file, 0, length, 0);
    int result = REAL(truncate64)(path, length);
    finish(seq, 1, result == 0);
    return result;
}

int fallocate(int fd, int mode, off_t offset, off_t length) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(fallocate)(fd, mode, offset, length);
    uint64_t seq = begin_size(PL_ALLOCATE, file, mode, offset, length);
    int result = REAL(fallocate)(fd, mode, offset, length);
    finish(seq, 1, result == 0);
    return result;
}

int fallocate64(int fd, int mode, off64_t offset, off64_t length) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(fallocate64)(fd, mode, offset, length);
    uint64_t seq = begin_size(PL_ALLOCATE, file, mode, offset, length);
    int result = REAL(fallocate64)(fd, mode, offset, length);
    finish(seq, 1, result == 0);
    return result;
}

// posix_fallocate returns an error number rather than setting errno.
int posix_fallocate(int fd, off_t offset, off_t length) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(posix_fallocate)(fd, offset, length);
    uint64_t seq = begin_size(PL_ALLOCATE, file, 0, offset, length);
    int result = REAL(posix_fallocate)(fd, offset, length);
    finish(seq, 1, result == 0);
    return result;
}

int posix_fallocate64(int fd, off64_t offset, off64_t length) {
    struct descriptor *file = tracked_file(fd);
    if (!file) return REAL(posix_fallocate64)(fd, offset, length);
    uint64_t seq = begin_size(PL_ALLOCATE, file, 0, offset, length);
    int result = REAL(posix_fallocate64)(fd, offset, length);
    finish(seq, 1, result == 0);
    return result;
}

#define NO_RECORD UINT64_MAX

// A change of names logged before it is made, if it names a tracked regular file: `old_path` (at
// `old_dirfd`) is the file's name, `new_path` (NULL for unlink) the name it gets. With AT_EMPTY_PATH
// (linkat of an O_TMPFILE file), `old_dirfd` is the file itself.
static uint64_t begin_names(uint32_t kind, int old_dirfd, const char *old_path, int new_dirfd, const char *new_path,
                            int at_flags, unsigned int rename_flags) {
    if (log_fd < 0) return NO_RECORD;
    char old_full[PATH_MAX], new_full[PATH_MAX];
    struct stat status;
    int empty = (at_flags & AT_EMPTY_PATH) && old_path && !*old_path;
    const char *old_name = empty ? NULL : full_path(old_dirfd, old_path, old_full) ? relative(old_full) : NULL;
    const char *new_name = new_path && full_path(new_dirfd, new_path, new_full) ? relative(new_full) : NULL;
    if (!old_name && !new_name && !empty) return NO_RECORD;
    int found = empty ? fstat(old_dirfd, &status)
                      : fstatat(old_dirfd, old_path, &status, (at_flags & AT_SYMLINK_FOLLOW) ? 0 : AT_SYMLINK_NOFOLLOW);
    if (found != 0 || !S_ISREG(status.st_mode)) return NO_RECORD;
    if (empty && !(old_dirfd >= 0 && old_dirfd < MAX_FDS && fds[old_dirfd] && fds[old_dirfd]->tracked)) return NO_RECORD;
    struct powerloss_record record = {.kind = kind, .flags = rename_flags, .dev = status.st_dev, .ino = status.st_ino};
    struct iovec payload[2] = {{(void *)(old_name ? old_name : ""), strlen(old_name ? old_name : "") + 1}};
    if (new_path) payload[1] = (struct iovec){(void *)(new_name ? new_name : ""), strlen(new_name ? new_name : "") + 1};
    return begin(&record, payload, new_path ? 2 : 1, NULL);
}

static int named(uint64_t seq, int result) {
    if (seq != NO_RECORD) finish(seq, 1, result == 0);
    return result;
}

int rename(const char *old_path, const char *new_path) {
    uint64_t seq = begin_names(PL_RENAME, AT_FDCWD, old_path, AT_FDCWD, new_path, 0, 0);
    return named(seq, REAL(rename)(old_path, new_path));
}

int renameat(int old_dirfd, const char *old_path, int new_dirfd, const char *new_path) {
    uint64_t seq = begin_names(PL_RENAME, old_dirfd, old_path, new_dirfd, new_path, 0, 0);
    return named(seq, REAL(renameat)(old_dirfd, old_path, new_dirfd, new_path));
}

int renameat2(int old_dirfd, const char *old_path, int new_dirfd, const char *new_path, unsigned int flags) {
    uint64_t seq = begin_names(PL_RENAME, old_dirfd, old_path, new_dirfd, new_path, 0, flags);
    return named(seq, REAL(renameat2)(old_dirfd, old_path, new_dirfd, new_path, flags));
}

int link(const char *old_path, const char *new_path) {
    uint64_t seq = begin_names(PL_LINK, AT_FDCWD, old_path, AT_FDCWD, new_path, 0, 0);
    return named(seq, REAL(link)(old_path, new_path));
}

int linkat(int old_dirfd, const char *old_path, int new_dirfd, const char *new_path, int flags) {
    uint64_t seq = begin_names(PL_LINK, old_dirfd, old_path, new_dirfd, new_path, flags, 0);
    return named(seq, REAL(linkat)(old_dirfd, old_path, new_dirfd, new_path, flags));
}

int unlink(const char *path) {
    uint64_t seq = begin_names(PL_UNLINK, AT_FDCWD, path, AT_FDCWD, NULL, 0, 0);
    return named(seq, REAL(unlink)(path));
}

int unlinkat(int dirfd, const char *path, int flags) {
    uint64_t seq = (flags & AT_REMOVEDIR) ? NO_RECORD : begin_names(PL_UNLINK, dirfd, path, AT_FDCWD, NULL, 0, 0);
    return named(seq, REAL(unlinkat)(dirfd, path, flags));
}

// glibc's remove calls unlink inside libc, where this library does not see it.
int remove(const char *path) {
    uint64_t seq = begin_names(PL_UNLINK, AT_FDCWD, path, AT_FDCWD, NULL, 0, 0);
    return named(seq, REAL(remove)(path));
}

ssize_t copy_file_range(int in, off64_t *in_offset, int out, off64_t *out_offset, size_t length, unsigned int flags) {
    struct descriptor *file = tracked_file(out);
    if (file) note(PL_UNSEEN, file);
    return REAL(copy_file_range)(in, in_offset, out, out_offset, length, flags);
}

ssize_t sendfile(int out, int in, off_t *offset, size_t count) {
    struct descriptor *file = tracked_file(out);
    if (file) note(PL_UNSEEN, file);
    return REAL(sendfile)(out, in, offset, count);
}

ssize_t sendfile64(int out, int in, off64_t *offset, size_t count) {
    struct descriptor *file = tracked_file(out);
    if (file) note(PL_UNSEEN, file);
    return REAL(sendfile64)(out, in, offset, count);
}
