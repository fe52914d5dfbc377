import Glibc
import Synchronization

/// One thread working through a queue in order: `take` picks one round's items from those waiting
/// (it is called with at least one), `handle` does them. `stop` lets the thread finish everything
/// queued, then ends it.
///
/// `anticipate` says an item is about to come: the thread, woken now if it sleeps, waits for it
/// spinning, up to `spinMicroseconds`, instead of sleeping until `enqueue` wakes it. On this
/// machine's VMs waking a sleeping thread on the other vCPU costs tens of microseconds, on the path
/// of the request that waits for the item; the anticipation moves that wake-up off it, to when the
/// caller starts the work that will produce the item (docs/BENCHMARKS.md, "The journal's thread
/// woken ahead of its record").
final class WorkThread<Item>: @unchecked Sendable {
    private let lock = ConditionLock()
    private var queue: [Item] = []
    private var stopping = false
    /// `queue.count`, for the spin to look at without the lock.
    private let queued = Atomic<Int>(0)
    private let anticipated = Atomic<Bool>(false)
    /// The longest an anticipation spins, in microseconds.
    let spinMicroseconds: UInt64
    private var thread: pthread_t?
    private let take: (inout [Item]) -> [Item]
    private let handle: ([Item]) -> Void

    /// By default a round takes everything waiting.
    init(
        name: String, spinMicroseconds: UInt64 = 0, take: @escaping (inout [Item]) -> [Item] = { waiting in defer { waiting.removeAll() }; return waiting },
        handle: @escaping ([Item]) -> Void
    ) {
        self.take = take
        self.handle = handle
        self.spinMicroseconds = spinMicroseconds
        thread = startThread(name: name) { [self] in run() }
    }

    /// Signals after the lock is let go: a thread woken while the lock is still held wakes only
    /// to wait for it, and then has to be woken a second time when it is let go (twice the
    /// context switches; the thread rechecks the queue under the lock, so no wake-up is lost).
    func enqueue(_ items: [Item]) {
        guard !items.isEmpty else { return }
        lock.withLock {
            queue.append(contentsOf: items)
            queued.store(queue.count, ordering: .releasing)
        }
        lock.signal()
    }

    /// An item will come soon (see the type's comment); does nothing without `spinMicroseconds`.
    func anticipate() {
        guard spinMicroseconds > 0, !anticipated.exchange(true, ordering: .acquiringAndReleasing) else { return }
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
            let items: [Item]? = lock.withLock {
                while queue.isEmpty && !stopping && !anticipated.load(ordering: .acquiring) { lock.wait() }
                if queue.isEmpty { return stopping ? [] : nil }
                let items = take(&queue)
                queued.store(queue.count, ordering: .relaxed)
                return items
            }
            guard let items else {
                spin()
                continue
            }
            if items.isEmpty { return }
            handle(items)
        }
    }

    /// Waits for an anticipated item without sleeping, up to `spinMicroseconds`, yielding the vCPU
    /// at each look (a spin that kept it measured a longer tail for one client's creates: the
    /// writer, ready on the same vCPU, waited for it); the clock is read every 8 looks. Consumes
    /// the anticipation.
    private func spin() {
        anticipated.store(false, ordering: .releasing)
        let until = monotonicMicroseconds() + spinMicroseconds
        var looks = 0
        while queued.load(ordering: .acquiring) == 0 {
            // A thread ready to run on this vCPU (the writer, whose record this waits for) runs.
            sched_yield()
            looks += 1
            if looks & 7 == 0 && monotonicMicroseconds() >= until { return }
        }
    }
}
