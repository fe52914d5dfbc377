import Glibc

/// One thread working through a queue in order: `take` picks one round's items from those waiting
/// (it is called with at least one), `handle` does them. `stop` lets the thread finish everything
/// queued, then ends it.
final class WorkThread<Item>: @unchecked Sendable {
    private let lock = ConditionLock()
    private var queue: [Item] = []
    private var stopping = false
    private var thread: pthread_t?
    private let take: (inout [Item]) -> [Item]
    private let handle: ([Item]) -> Void

    /// By default a round takes everything waiting.
    init(
        name: String, take: @escaping (inout [Item]) -> [Item] = { waiting in defer { waiting.removeAll() }; return waiting },
        handle: @escaping ([Item]) -> Void
    ) {
        self.take = take
        self.handle = handle
        thread = startThread(name: name) { [self] in run() }
    }

    /// Signals after the lock is let go: a thread woken while the lock is still held wakes only
    /// to wait for it, and then has to be woken a second time when it is let go (twice the
    /// context switches; the thread rechecks the queue under the lock, so no wake-up is lost).
    func enqueue(_ items: [Item]) {
        guard !items.isEmpty else { return }
        lock.withLock { queue.append(contentsOf: items) }
        lock.signal()
    }

    func stop() {
        lock.withLock { stopping = true }
        lock.signal()
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    private func run() {
        while true {
            let items: [Item] = lock.withLock {
                while queue.isEmpty && !stopping { lock.wait() }
                return queue.isEmpty ? [] : take(&queue)
            }
            if items.isEmpty { return }
            handle(items)
        }
    }
}
