#define _GNU_SOURCE
#include "CFolioSystem.h"

#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

const uint32_t folio_epoll_in = EPOLLIN;
const uint32_t folio_epoll_out = EPOLLOUT;
const uint32_t folio_epoll_err = EPOLLERR;
const uint32_t folio_epoll_hup = EPOLLHUP;
const uint32_t folio_epoll_rdhup = EPOLLRDHUP;
const uint32_t folio_epoll_et = EPOLLET;

int folio_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int folio_epoll_control(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    static const int ops[] = {EPOLL_CTL_ADD, EPOLL_CTL_MOD, EPOLL_CTL_DEL};
    struct epoll_event event = {.events = events, .data = {.u64 = token}};
    return epoll_ctl(epfd, ops[op], fd, &event);
}

int folio_epoll_wait(int epfd, uint32_t *events, uint64_t *tokens, int capacity, int timeout_ms) {
    struct epoll_event ready[256];
    if (capacity > 256) capacity = 256;
    int n = epoll_wait(epfd, ready, capacity, timeout_ms);
    for (int i = 0; i < n; i++) {
        events[i] = ready[i].events;
        tokens[i] = ready[i].data.u64;
    }
    return n;
}

int folio_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int folio_peer_credentials(int fd, uint32_t *uid, uint32_t *gid, int32_t *pid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *uid = cred.uid;
    *gid = cred.gid;
    *pid = cred.pid;
    return 0;
}

int folio_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

#include <pthread.h>

void folio_set_thread_name(const char *name) { pthread_setname_np(pthread_self(), name); }

#include <malloc.h>

int folio_malloc_trim(void) { return malloc_trim(0); }

size_t folio_malloc_free_bytes(void) { return mallinfo2().fordblks; }

#include <errno.h>
#include <string.h>
#include <sys/un.h>

int folio_unix_socket(int nonblocking) {
    return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
}

static int folio_unix_address(const char *path, struct sockaddr_un *address) {
    memset(address, 0, sizeof(*address));
    address->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(address->sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(address->sun_path, path);
    return 0;
}

int folio_unix_bind(int fd, const char *path) {
    struct sockaddr_un address;
    if (folio_unix_address(path, &address) != 0) return -1;
    return bind(fd, (struct sockaddr *)&address, sizeof(address));
}

int folio_unix_connect(int fd, const char *path) {
    struct sockaddr_un address;
    if (folio_unix_address(path, &address) != 0) return -1;
    return connect(fd, (struct sockaddr *)&address, sizeof(address));
}

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/syscall.h>

int folio_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

#include <sched.h>

int folio_set_thread_cpus(pid_t tid, uint64_t cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu = 0; cpu < 64; cpu++) {
        if (cpus & ((uint64_t)1 << cpu)) CPU_SET(cpu, &set);
    }
    return sched_setaffinity(tid, sizeof set, &set);
}

int folio_open_direct_write(const char *path) {
    return open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
}

#include <string.h>

int folio_notify(const char *path, const char *message, size_t length) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof(address));
    address.sun_family = AF_UNIX;
    size_t path_length = strlen(path);
    if (path_length == 0 || path_length >= sizeof(address.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(address.sun_path, path, path_length);
    // "@name" is an abstract socket: its name starts with a NUL byte and has no terminator.
    socklen_t address_length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_length + (path[0] == '@' ? 0 : 1));
    if (path[0] == '@') address.sun_path[0] = 0;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    ssize_t sent = sendto(fd, message, length, MSG_NOSIGNAL, (struct sockaddr *)&address, address_length);
    int saved = errno;
    close(fd);
    errno = saved;
    return sent == (ssize_t)length ? 0 : -1;
}

int folio_is_listening_unix_socket(int fd) {
    int type = 0, listening = 0;
    socklen_t size = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) != 0 || type != SOCK_STREAM) return 0;
    size = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 || !listening) return 0;
    struct sockaddr_un address;
    size = sizeof(address);
    if (getsockname(fd, (struct sockaddr *)&address, &size) != 0 || address.sun_family != AF_UNIX) return 0;
    return 1;
}

int folio_set_nonblocking_cloexec(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return -1;
    int fdflags = fcntl(fd, F_GETFD);
    if (fdflags < 0 || fcntl(fd, F_SETFD, fdflags | FD_CLOEXEC) != 0) return -1;
    return 0;
}

/// recvmsg with `flags`, taking up to `capacity` passed descriptors into `fds` (their count into
/// `*received`) and closing the rest; `*carried` is set when any came or the control data was cut.
static ssize_t recv_taking_fds(int fd, void *buffer, size_t length, int flags, int *fds, int capacity, int *received, int *carried) {
    union {
        char space[CMSG_SPACE(sizeof(int) * 8)];
        struct cmsghdr align;
    } control;
    struct iovec vector = {.iov_base = buffer, .iov_len = length};
    struct msghdr message = {0};
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof(control.space);
    *received = 0;
    *carried = 0;
    ssize_t count = recvmsg(fd, &message, flags | MSG_CMSG_CLOEXEC);
    if (count < 0) return count;
    if (message.msg_flags & MSG_CTRUNC) *carried = 1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        *carried = 1;
        size_t n = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *passed = (int *)CMSG_DATA(header);
        for (size_t k = 0; k < n; k++) {
            int descriptor;
            memcpy(&descriptor, passed + k, sizeof(int));
            if (*received < capacity) {
                fds[(*received)++] = descriptor;
            } else {
                close(descriptor);
            }
        }
    }
    return count;
}

ssize_t folio_recv_with_fds(int fd, void *buffer, size_t length, int *fds, int capacity, int *received) {
    int carried;
    return recv_taking_fds(fd, buffer, length, 0, fds, capacity, received, &carried);
}

ssize_t folio_peek(int fd, void *buffer, size_t length) {
    int received, carried;
    ssize_t count = recv_taking_fds(fd, buffer, length, MSG_PEEK, NULL, 0, &received, &carried);
    return count >= 0 && carried ? -2 : count;
}

ssize_t folio_send_with_fd(int fd, const void *buffer, size_t length, int passed, int flags) {
    union {
        char space[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct iovec vector = {.iov_base = (void *)buffer, .iov_len = length};
    struct msghdr message = {0};
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof(control.space);
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &passed, sizeof(int));
    return sendmsg(fd, &message, MSG_NOSIGNAL | flags);
}

int folio_start_writeback(int fd, int64_t offset, int64_t length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

int folio_file_identity(int fd, uint64_t *device, uint64_t *inode, uint64_t *birth) {
    struct statx status;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &status) != 0) return -1;
    *device = ((uint64_t)status.stx_dev_major << 32) | status.stx_dev_minor;
    *inode = status.stx_ino;
    *birth = (status.stx_mask & STATX_BTIME)
        ? (uint64_t)status.stx_btime.tv_sec * 1000000000u + status.stx_btime.tv_nsec : 0;
    return 0;
}

int folio_dirty_pages(int fd, uint64_t *dirty, uint64_t *writeback) {
#ifdef SYS_cachestat
    long number = SYS_cachestat;
#else
    long number = 451; /* the same on every architecture */
#endif
    struct { uint64_t offset, length; } range = { 0, 0 };
    struct { uint64_t cache, dirty, writeback, evicted, recently_evicted; } status;
    if (syscall(number, fd, &range, &status, 0) != 0) return -1;
    *dirty = status.dirty;
    *writeback = status.writeback;
    return 0;
}

ssize_t folio_copy_file_range(int in, int64_t *in_offset, int out, int64_t *out_offset, size_t length) {
    loff_t from = *in_offset, to = *out_offset;
    ssize_t count = copy_file_range(in, &from, out, &to, length, 0);
    *in_offset = from;
    *out_offset = to;
    return count;
}
