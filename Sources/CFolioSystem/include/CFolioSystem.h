#ifndef CFOLIOSYSTEM_H
#define CFOLIOSYSTEM_H

#include <stdint.h>
#include <sys/types.h>

// Readiness flags, mirrored from <sys/epoll.h>.
extern const uint32_t folio_epoll_in;
extern const uint32_t folio_epoll_out;
extern const uint32_t folio_epoll_err;
extern const uint32_t folio_epoll_hup;
extern const uint32_t folio_epoll_rdhup;
extern const uint32_t folio_epoll_et;

/// epoll_create1(EPOLL_CLOEXEC).
int folio_epoll_create(void);
/// epoll_ctl with the event's data set to `token`; op is 0 add, 1 modify, 2 delete.
int folio_epoll_control(int epfd, int op, int fd, uint32_t events, uint64_t token);
/// epoll_wait, unpacking the (packed on x86_64) epoll_event array into two plain arrays.
int folio_epoll_wait(int epfd, uint32_t *events, uint64_t *tokens, int capacity, int timeout_ms);

/// eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC).
int folio_eventfd(void);

/// getsockopt(SO_PEERCRED): the credentials of the process at the other end of a Unix socket.
int folio_peer_credentials(int fd, uint32_t *uid, uint32_t *gid, int32_t *pid);

/// accept4(SOCK_NONBLOCK | SOCK_CLOEXEC).
int folio_accept(int fd);

/// open(path, O_WRONLY | O_DIRECT | O_CLOEXEC); -1 with errno (EINVAL where O_DIRECT is refused).
int folio_open_direct_write(const char *path);


/// pthread_setname_np on the calling thread (names show in top -H and gdb).
void folio_set_thread_name(const char *name);

/// malloc_trim(0): returns the free pages of every malloc arena to the system; 1 if any was.
int folio_malloc_trim(void);
/// mallinfo2().fordblks: bytes malloc holds free in its arenas (trimmed or not).
size_t folio_malloc_free_bytes(void);

/// socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), non-blocking if asked.
int folio_unix_socket(int nonblocking);
/// bind to a filesystem path; fails with ENAMETOOLONG if the path does not fit sun_path.
int folio_unix_bind(int fd, const char *path);
/// connect to a filesystem path; fails with ENAMETOOLONG if the path does not fit sun_path.
int folio_unix_connect(int fd, const char *path);

/// pipe2(O_CLOEXEC).
int folio_pipe(int fds[2]);

/// sched_setaffinity: lets thread `tid` (0: the calling one) run only on the CPUs whose bits are set
/// in `cpus` (bit k: CPU k, for k < 64).
int folio_set_thread_cpus(pid_t tid, uint64_t cpus);
/// Sends one datagram to the Unix socket at `path` ("@name": abstract): the systemd notify protocol.
int folio_notify(const char *path, const char *message, size_t length);

/// Whether `fd` is a listening Unix-domain stream socket (an inherited, socket-activated one).
int folio_is_listening_unix_socket(int fd);

/// O_NONBLOCK and FD_CLOEXEC on an inherited descriptor.
int folio_set_nonblocking_cloexec(int fd);
/// recvmsg into `buffer`, taking the descriptors passed with the bytes (SCM_RIGHTS, MSG_CMSG_CLOEXEC):
/// up to `capacity` into `fds`, their count into `*received`; more are closed. Returns the bytes read,
/// 0 at end of stream, -1 with errno.
ssize_t folio_recv_with_fds(int fd, void *buffer, size_t length, int *fds, int capacity, int *received);
/// recvmsg with MSG_PEEK: copies up to `length` waiting bytes into `buffer` and leaves them in the
/// socket. Returns the bytes copied, 0 at end of stream, -1 with errno, or -2 when descriptors came
/// with them (the copies this made of them are closed: read those bytes with folio_recv_with_fds).
ssize_t folio_peek(int fd, void *buffer, size_t length);
/// sendmsg of `buffer` with the descriptor `passed` attached (SCM_RIGHTS), MSG_NOSIGNAL, plus `flags`.
ssize_t folio_send_with_fd(int fd, const void *buffer, size_t length, int passed, int flags);

/// sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE): starts writing those bytes to the
/// disk without waiting for them.
int folio_start_writeback(int fd, int64_t offset, int64_t length);

/// The file's device, inode number and birth time in nanoseconds (statx; 0 where the file system
/// does not keep it). -1 with errno.
int folio_file_identity(int fd, uint64_t *device, uint64_t *inode, uint64_t *birth);

/// cachestat(2) of the whole file (Linux 6.5): its pages in the page cache that are dirty and under
/// write-back. Neither reads nor clears a write-back error. -1 with errno (ENOSYS before 6.5).
int folio_dirty_pages(int fd, uint64_t *dirty, uint64_t *writeback);

/// copy_file_range(2): copies in the kernel from `in` at `*in_offset` to `out` at `*out_offset`.
ssize_t folio_copy_file_range(int in, int64_t *in_offset, int out, int64_t *out_offset, size_t length);

#endif
