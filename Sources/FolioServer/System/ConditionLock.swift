import CFolioSystem
import Glibc

/// A mutex with one condition variable (pthread), for a thread that sleeps until work arrives.
final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits for a signal; call with the lock held (inside `withLock`).
    func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits for a signal or `seconds`, whichever comes first; call with the lock held.
    func wait(seconds: Double) {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + Int(seconds * 1e9)
        deadline.tv_sec += nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        pthread_cond_timedwait(condition, mutex, &deadline)
    }

    func signal() { pthread_cond_signal(condition) }
    func broadcast() { pthread_cond_broadcast(condition) }
}

/// Starts a named OS thread with a large stack (deeply nested JSON values recurse).
func startThread(name: String, _ body: @escaping @Sendable () -> Void) -> pthread_t {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        let name: String
        init(_ body: @escaping @Sendable () -> Void, _ name: String) {
            self.body = body
            self.name = name
        }
    }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setstacksize(&attributes, 16 << 20)
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Box(body, name)).toOpaque()
    let rc = pthread_create(
        &thread, &attributes,
        { pointer in
            let box = Unmanaged<Box>.fromOpaque(pointer!).takeRetainedValue()
            folio_set_thread_name(String(box.name.prefix(15)))
            box.body()
            return nil
        }, box)
    pthread_attr_destroy(&attributes)
    precondition(rc == 0, "pthread_create failed: \(rc)")
    return thread
}
