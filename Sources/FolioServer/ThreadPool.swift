import FolioStore
import Glibc

/// Threads that work through one queue, each with a context of its own (a snapshot reader, say).
/// Every thread is started with the pool: a job never needs a new thread or descriptor, so running
/// out of either can delay work but never fail or crash it.
final class ThreadPool<Context>: @unchecked Sendable {
    typealias Job = @Sendable (Context) -> Void

    private let lock = ConditionLock()
    /// Jobs not yet taken start at `head`; a taken job's slot is emptied at once, so that what it
    /// captured (a long line's bytes, say) is freed when the job ends, not when the queue next empties.
    private var queue: [Job?] = []
    private var head = 0
    private var stopping = false
    private var threads: [pthread_t] = []

    /// One thread per context.
    init(name: String, contexts: [Context]) {
        for (index, context) in contexts.enumerated() {
            nonisolated(unsafe) let context = context
            threads.append(startThread(name: "\(name)-\(index)") { [self] in run(context) })
        }
    }

    /// Signals after the lock is let go, as `WorkThread.enqueue` does.
    func submit(_ job: @escaping Job) {
        lock.withLock { queue.append(job) }
        lock.signal()
    }

    /// Finishes every submitted job, then ends the threads.
    func stop() {
        lock.withLock {
            stopping = true
            lock.broadcast()
        }
        for thread in threads { pthread_join(thread, nil) }
        threads.removeAll()
    }

    private func run(_ context: Context) {
        while true {
            let job: Job? = lock.withLock {
                while head == queue.count && !stopping { lock.wait() }
                guard head < queue.count else { return nil }
                let job = queue[head]
                queue[head] = nil
                head += 1
                if head == queue.count {
                    queue.removeAll(keepingCapacity: queue.capacity <= 4096)
                    head = 0
                } else if head >= 1024 && head * 2 >= queue.count {
                    queue.removeFirst(head)
                    head = 0
                }
                return job
            }
            guard let job else { return }
            job(context)
        }
    }
}

/// Threads for reads whose cost grows with stored data (scans, verify, backup, stats), so that no
/// event loop ever runs one; each has its snapshot reader.
typealias WorkerPool = ThreadPool<Store.Reader>

extension ThreadPool where Context == Store.Reader {
    convenience init(store: Store, count: Int) throws {
        self.init(name: "folio-worker", contexts: try (0..<count).map { _ in try store.makeReader() })
    }
}
