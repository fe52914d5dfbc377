// iofault: an LD_PRELOAD library that makes chosen file system calls of a process fail, for tests of
// what a program does on I/O errors and a full disk. Built by the tests themselves:
//
//     cc -shared -fPIC -O2 -o iofault.so iofault.c -ldl
//     IOFAULT_CONTROL=/tmp/x/faults IOFAULT_LOG=/tmp/x/faults.log LD_PRELOAD=/tmp/x/iofault.so foliod ...
//
// The control file holds the faults in force, one a line (`#` starts a comment):
//
//     <calls> <n> <errno> <once|sticky> <path prefix> [from=<offset>] [below=<offset>]
//     e.g.  write 3 ENOSPC sticky /tmp/x/data
//           fdatasync 1 EIO once /tmp/x/data/data.mdb
//           write 1 EIO once /tmp/x/data/data.mdb below=8192     (LMDB's meta pages)
//
// <calls> is a comma-separated list of: write (write, pwrite, writev, pwritev and their 64-bit
// forms), fdatasync, fsync, sync (both), ftruncate, fallocate, open (open, openat, creat and their
// 64-bit forms). Only calls on files whose path starts with the prefix count (descriptors are
// followed from the open that made them), so sockets, pipes and logs are never touched. Two more
// are calls on a listening Unix socket, whose path is the one it is bound to: accept (accept,
// accept4) and watch (epoll_ctl adding it to an epoll set). The n-th
// counted call fails with <errno> (EIO, ENOSPC, EDQUOT or a number) without doing anything; `once`
// fails that call only, `sticky` it and every later one. With `from=` and `below=`, only writes
// that start at or past, and below, those offsets count. Counting starts when the file is (re)read:
// the library re-reads it whenever it changes (write a new file and rename it over the old one), and
// an empty or missing file clears every fault.
//
// As Linux does since 4.13 (errseq_t), a failed fsync/fdatasync stands for a failed write-back of
// the file: it is reported once to every descriptor open on the file at that moment, at that
// descriptor's next fsync/fdatasync, even after the fault is cleared. So a program that flushes
// through two descriptors sees the failure on both, and one that retries on the same descriptor
// gets a success it must not trust.
//
// Each failure is logged as a line to IOFAULT_LOG, if set: `<call> <errno> <path>`, and
// `<call> EIO <path> (reported)` for a failure reported to another descriptor.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

enum {
    CALL_WRITE = 1 << 0,
    CALL_FDATASYNC = 1 << 1,
    CALL_FSYNC = 1 << 2,
    CALL_FTRUNCATE = 1 << 3,
    CALL_FALLOCATE = 1 << 4,
    CALL_OPEN = 1 << 5,
    CALL_ACCEPT = 1 << 6,
    CALL_WATCH = 1 << 7,
};

#define MAX_RULES 16
#define MAX_FDS 65536
#define MAX_FILES 4096

struct rule {
    int calls;
    long nth;
    int error;
    int sticky;
    char prefix[PATH_MAX];
    long from, below;
    long seen;
};

struct file {
    dev_t dev;
    ino_t ino;
    unsigned long failures;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[MAX_RULES];
static int rule_count;
static struct stat control_stat;
static int control_present;
static char *fd_paths[MAX_FDS];
static int fd_files[MAX_FDS];
static unsigned long fd_seen[MAX_FDS];
static struct file files[MAX_FILES];
static int file_count;
static int log_fd = -1;

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_creat)(const char *, mode_t);
static int (*real_close)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off64_t);
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off64_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_fallocate64)(int, int, off64_t, off64_t);
static int (*real_accept)(int, struct sockaddr *, socklen_t *);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
static int (*real_epoll_ctl)(int, int, int, struct epoll_event *);

static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

__attribute__((constructor)) static void setup(void) {
    real_open = next("open");
    real_open64 = next("open64");
    real_openat = next("openat");
    real_openat64 = next("openat64");
    real_creat = next("creat");
    real_close = next("close");
    real_write = next("write");
    real_pwrite = next("pwrite");
    real_pwrite64 = next("pwrite64");
    real_writev = next("writev");
    real_pwritev = next("pwritev");
    real_pwritev64 = next("pwritev64");
    real_fdatasync = next("fdatasync");
    real_fsync = next("fsync");
    real_ftruncate = next("ftruncate");
    real_ftruncate64 = next("ftruncate64");
    real_fallocate = next("fallocate");
    real_fallocate64 = next("fallocate64");
    real_accept = next("accept");
    real_accept4 = next("accept4");
    real_epoll_ctl = next("epoll_ctl");
    const char *log_path = getenv("IOFAULT_LOG");
    if (log_path && *log_path) log_fd = real_open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static int parse_errno(const char *text) {
    if (!strcmp(text, "EIO")) return EIO;
    if (!strcmp(text, "ENOSPC")) return ENOSPC;
    if (!strcmp(text, "EDQUOT")) return EDQUOT;
    if (!strcmp(text, "EROFS")) return EROFS;
    if (!strcmp(text, "ENOMEM")) return ENOMEM;
    return atoi(text);
}

static int parse_calls(char *text) {
    int calls = 0;
    for (char *save = NULL, *name = strtok_r(text, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        if (!strcmp(name, "write")) calls |= CALL_WRITE;
        else if (!strcmp(name, "fdatasync")) calls |= CALL_FDATASYNC;
        else if (!strcmp(name, "fsync")) calls |= CALL_FSYNC;
        else if (!strcmp(name, "sync")) calls |= CALL_FDATASYNC | CALL_FSYNC;
        else if (!strcmp(name, "ftruncate")) calls |= CALL_FTRUNCATE;
        else if (!strcmp(name, "fallocate")) calls |= CALL_FALLOCATE;
        else if (!strcmp(name, "open")) calls |= CALL_OPEN;
        else if (!strcmp(name, "accept")) calls |= CALL_ACCEPT;
        else if (!strcmp(name, "watch")) calls |= CALL_WATCH;
    }
    return calls;
}

// Re-reads the control file if it changed since the last look. Called with the lock held.
static void reload(void) {
    const char *path = getenv("IOFAULT_CONTROL");
    struct stat now;
    int present = path && stat(path, &now) == 0;
    if (present == control_present &&
        (!present || (now.st_ino == control_stat.st_ino && now.st_size == control_stat.st_size &&
                      now.st_mtim.tv_sec == control_stat.st_mtim.tv_sec &&
                      now.st_mtim.tv_nsec == control_stat.st_mtim.tv_nsec)))
        return;
    control_present = present;
    if (present) control_stat = now;
    rule_count = 0;
    if (!present) return;
    int fd = real_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char text[8192];
    ssize_t length = read(fd, text, sizeof(text) - 1);
    real_close(fd);
    if (length <= 0) return;
    text[length] = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && rule_count < MAX_RULES;
         line = strtok_r(NULL, "\n", &save)) {
        char calls[256], error[64], mode[64], prefix[PATH_MAX], options[2][64];
        long nth;
        if (line[0] == '#') continue;
        int fields = sscanf(line, "%255s %ld %63s %63s %4095s %63s %63s", calls, &nth, error, mode, prefix, options[0], options[1]);
        if (fields < 5) continue;
        struct rule *rule = &rules[rule_count++];
        rule->calls = parse_calls(calls);
        rule->nth = nth;
        rule->error = parse_errno(error);
        rule->sticky = !strcmp(mode, "sticky");
        strcpy(rule->prefix, prefix);
        rule->from = -1;
        rule->below = -1;
        for (int option = 0; option < fields - 5; option++) {
            long value;
            if (sscanf(options[option], "from=%ld", &value) == 1) rule->from = value;
            if (sscanf(options[option], "below=%ld", &value) == 1) rule->below = value;
        }
        rule->seen = 0;
    }
}

static void log_line(const char *call, int error, const char *path, const char *note) {
    if (log_fd < 0) return;
    char line[PATH_MAX + 128];
    int length = snprintf(line, sizeof(line), "%s %s %s%s\n", call,
                          error == EIO      ? "EIO"
                          : error == ENOSPC ? "ENOSPC"
                          : error == EDQUOT ? "EDQUOT"
                          : error == ENOMEM ? "ENOMEM"
                                            : "E?",
                          path, note);
    if (length > 0) real_write(log_fd, line, (size_t)length);
}

// The error the call must fail with, or 0; `offset` is a positioned write's, else -1. Called with
// the lock held.
static int injected(int call, const char *path, long offset) {
    if (!path) return 0;
    reload();
    for (int i = 0; i < rule_count; i++) {
        struct rule *rule = &rules[i];
        if (!(rule->calls & call) || strncmp(path, rule->prefix, strlen(rule->prefix)) != 0) continue;
        if (rule->below >= 0 && (offset < 0 || offset >= rule->below)) continue;
        if (rule->from >= 0 && (offset < 0 || offset < rule->from)) continue;
        rule->seen += 1;
        if (rule->seen == rule->nth || (rule->sticky && rule->seen > rule->nth)) return rule->error;
    }
    return 0;
}

static int fail(int error) {
    errno = error;
    return -1;
}

// Follows a descriptor opened on the absolute path `full`: a regular file or a directory (for
// paths relative to it). Called with the lock held.
static void track(int fd, const char *full) {
    if (fd < 0 || fd >= MAX_FDS) return;
    free(fd_paths[fd]);
    fd_paths[fd] = NULL;
    struct stat status;
    if (fstat(fd, &status) != 0 || !(S_ISREG(status.st_mode) || S_ISDIR(status.st_mode))) return;
    fd_paths[fd] = strdup(full);
    fd_files[fd] = -1;
    if (!S_ISREG(status.st_mode)) return;
    int index = 0, spare = -1;
    for (; index < file_count; index++) {
        if (files[index].dev == status.st_dev && files[index].ino == status.st_ino) break;
        if (spare < 0 && files[index].failures == 0) spare = index;
    }
    if (index == file_count) {
        if (file_count < MAX_FILES) file_count++;
        else index = spare < 0 ? 0 : spare;
        files[index] = (struct file){status.st_dev, status.st_ino, 0};
    }
    fd_files[fd] = index;
    fd_seen[fd] = files[index].failures;
}

// `path` made absolute, into `full`; 0 if that cannot be done.
static int full_path(int dirfd, const char *path, char *full) {
    char cwd[PATH_MAX];
    const char *base = NULL;
    if (path[0] == '/') base = "";
    else if (dirfd == AT_FDCWD) base = getcwd(cwd, sizeof(cwd));
    else if (dirfd >= 0 && dirfd < MAX_FDS) base = fd_paths[dirfd];
    if (!base) return 0;
    int length = snprintf(full, PATH_MAX, "%s%s%s", base, *base ? "/" : "", path);
    return length > 0 && length < PATH_MAX;
}

static int opened(int dirfd, const char *path, int flags, mode_t mode,
                  int (*real)(int, const char *, int, ...)) {
    char full[PATH_MAX];
    pthread_mutex_lock(&lock);
    int known = full_path(dirfd, path, full);
    int error = known ? injected(CALL_OPEN, full, -1) : 0;
    if (error) log_line("open", error, full, "");
    pthread_mutex_unlock(&lock);
    if (error) return fail(error);
    int fd = real(dirfd, path, flags, mode);
    if (fd >= 0 && known) {
        pthread_mutex_lock(&lock);
        track(fd, full);
        pthread_mutex_unlock(&lock);
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
    return real_open(path, flags, mode);
}

static int open64_at_cwd(int dirfd, const char *path, int flags, ...) {
    (void)dirfd;
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return real_open64(path, flags, mode);
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
    return opened(dirfd, path, flags, mode, real_openat);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    return opened(dirfd, path, flags, mode, real_openat64);
}

int creat(const char *path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

int close(int fd) {
    if (fd >= 0 && fd < MAX_FDS && fd_paths[fd]) {
        pthread_mutex_lock(&lock);
        free(fd_paths[fd]);
        fd_paths[fd] = NULL;
        pthread_mutex_unlock(&lock);
    }
    return real_close(fd);
}

// The error a call on `fd` must fail with, or 0; logs it.
static int check_at(int call, const char *name, int fd, long offset) {
    if (fd < 0 || fd >= MAX_FDS || !fd_paths[fd]) return 0;
    pthread_mutex_lock(&lock);
    int error = fd_paths[fd] ? injected(call, fd_paths[fd], offset) : 0;
    if (error && (call & (CALL_FDATASYNC | CALL_FSYNC)) && fd_files[fd] >= 0) {
        // A failed write-back: every descriptor of the file hears of it at its next flush.
        files[fd_files[fd]].failures += 1;
        fd_seen[fd] = files[fd_files[fd]].failures;
    }
    if (error) log_line(name, error, fd_paths[fd], "");
    pthread_mutex_unlock(&lock);
    return error;
}

static int check(int call, const char *name, int fd) { return check_at(call, name, fd, -1); }

// After a real flush that succeeded: EIO if a failure of this file is still unreported to `fd`.
static int unreported(const char *name, int fd) {
    if (fd < 0 || fd >= MAX_FDS || !fd_paths[fd]) return 0;
    pthread_mutex_lock(&lock);
    int error = 0;
    if (fd_paths[fd] && fd_files[fd] >= 0 && fd_seen[fd] != files[fd_files[fd]].failures) {
        fd_seen[fd] = files[fd_files[fd]].failures;
        error = EIO;
        log_line(name, EIO, fd_paths[fd], " (reported)");
    }
    pthread_mutex_unlock(&lock);
    return error;
}

// Where the next write() or writev() on `fd` lands.
static long position(int fd) {
    if (fd < 0 || fd >= MAX_FDS || !fd_paths[fd]) return -1;
    return (long)lseek(fd, 0, SEEK_CUR);
}

ssize_t write(int fd, const void *buffer, size_t count) {
    int error = check_at(CALL_WRITE, "write", fd, position(fd));
    return error ? fail(error) : real_write(fd, buffer, count);
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    int error = check_at(CALL_WRITE, "pwrite", fd, (long)offset);
    return error ? fail(error) : real_pwrite(fd, buffer, count, offset);
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off64_t offset) {
    int error = check_at(CALL_WRITE, "pwrite", fd, (long)offset);
    return error ? fail(error) : real_pwrite64(fd, buffer, count, offset);
}

ssize_t writev(int fd, const struct iovec *vector, int count) {
    int error = check_at(CALL_WRITE, "writev", fd, position(fd));
    return error ? fail(error) : real_writev(fd, vector, count);
}

ssize_t pwritev(int fd, const struct iovec *vector, int count, off_t offset) {
    int error = check_at(CALL_WRITE, "pwritev", fd, (long)offset);
    return error ? fail(error) : real_pwritev(fd, vector, count, offset);
}

ssize_t pwritev64(int fd, const struct iovec *vector, int count, off64_t offset) {
    int error = check_at(CALL_WRITE, "pwritev", fd, (long)offset);
    return error ? fail(error) : real_pwritev64(fd, vector, count, offset);
}

int fdatasync(int fd) {
    int error = check(CALL_FDATASYNC, "fdatasync", fd);
    if (error) return fail(error);
    if (real_fdatasync(fd) != 0) return -1;
    error = unreported("fdatasync", fd);
    return error ? fail(error) : 0;
}

int fsync(int fd) {
    int error = check(CALL_FSYNC, "fsync", fd);
    if (error) return fail(error);
    if (real_fsync(fd) != 0) return -1;
    error = unreported("fsync", fd);
    return error ? fail(error) : 0;
}

int ftruncate(int fd, off_t length) {
    int error = check(CALL_FTRUNCATE, "ftruncate", fd);
    return error ? fail(error) : real_ftruncate(fd, length);
}

int ftruncate64(int fd, off64_t length) {
    int error = check(CALL_FTRUNCATE, "ftruncate", fd);
    return error ? fail(error) : real_ftruncate64(fd, length);
}

int fallocate(int fd, int mode, off_t offset, off_t length) {
    int error = check(CALL_FALLOCATE, "fallocate", fd);
    return error ? fail(error) : real_fallocate(fd, mode, offset, length);
}

int fallocate64(int fd, int mode, off64_t offset, off64_t length) {
    int error = check(CALL_FALLOCATE, "fallocate", fd);
    return error ? fail(error) : real_fallocate64(fd, mode, offset, length);
}

// Whether a rule in force names `call`. Called with the lock held.
static int wanted(int call) {
    reload();
    for (int i = 0; i < rule_count; i++)
        if (rules[i].calls & call) return 1;
    return 0;
}

// The path the listening Unix socket `fd` is bound to, into `path` (PATH_MAX bytes); 0 if `fd` is
// no such socket.
static int listener_path(int fd, char *path) {
    int listening = 0;
    socklen_t size = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 || !listening) return 0;
    struct sockaddr_un address;
    socklen_t length = sizeof(address);
    if (getsockname(fd, (struct sockaddr *)&address, &length) != 0 || address.sun_family != AF_UNIX) return 0;
    size_t count = length > offsetof(struct sockaddr_un, sun_path) ? length - offsetof(struct sockaddr_un, sun_path) : 0;
    if (count > sizeof(address.sun_path)) count = sizeof(address.sun_path);
    if (count == 0 || address.sun_path[0] == 0) return 0; // unnamed, or in the abstract namespace
    memcpy(path, address.sun_path, count);
    path[count] = 0;
    return 1;
}

// The error a call on the listening socket `fd` must fail with, or 0; logs it.
static int check_listener(int call, const char *name, int fd) {
    pthread_mutex_lock(&lock);
    int wanted_now = wanted(call);
    pthread_mutex_unlock(&lock);
    char path[PATH_MAX];
    if (!wanted_now || !listener_path(fd, path)) return 0;
    pthread_mutex_lock(&lock);
    int error = injected(call, path, -1);
    if (error) log_line(name, error, path, "");
    pthread_mutex_unlock(&lock);
    return error;
}

int accept(int fd, struct sockaddr *address, socklen_t *length) {
    int error = check_listener(CALL_ACCEPT, "accept", fd);
    return error ? fail(error) : real_accept(fd, address, length);
}

int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
    int error = check_listener(CALL_ACCEPT, "accept4", fd);
    return error ? fail(error) : real_accept4(fd, address, length, flags);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event) {
    int error = op == EPOLL_CTL_ADD ? check_listener(CALL_WATCH, "epoll_ctl", fd) : 0;
    return error ? fail(error) : real_epoll_ctl(epfd, op, fd, event);
}
