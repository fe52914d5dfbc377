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
///
/// `idlePollMicroseconds` makes the thread look for its next item before it sleeps, for a window
/// it learns (`IdlePoll`, as the event loops do): the writer's thread, whose one-client wake-up
/// for each write is the wake-up of a vCPU (docs/BENCHMARKS.md, "The writer looks for its next
/// write before it sleeps").
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

    /// The longest the thread looks for its next item before it sleeps, in microseconds; 0 never.
    let idlePollMicroseconds: UInt64
    /// Whether a poll takes a vCPU from no one (`IdlePoll.machineHasRoom`), and whether it ends
    /// when a yield let another thread run; tests that share the machine with others say.
    private let roomToPoll: (IdlePoll) -> Bool
    private let pollYieldsForGood: Bool
    /// Called each time a poll found an item (which it took without sleeping).
    private let foundWhilePolling: () -> Void
    /// Whether the items just handled are worth a look for the next (the writer: a lone write).
    private let pollsAfter: ([Item]) -> Bool

    /// By default a round takes everything waiting.
    init(
        name: String, spinMicroseconds: UInt64 = 0, idlePollMicroseconds: UInt64 = 0,
        roomToPoll: @escaping (IdlePoll) -> Bool = { $0.machineHasRoom() }, pollYieldsForGood: Bool = true,
        foundWhilePolling: @escaping () -> Void = {}, pollsAfter: @escaping ([Item]) -> Bool = { _ in true },
        take: @escaping (inout [Item]) -> [Item] = { waiting in
            defer { waiting.removeAll() }
            return waiting
        },
        handle: @escaping ([Item]) -> Void
    ) {
        self.take = take
        self.handle = handle
        self.spinMicroseconds = spinMicroseconds
        self.idlePollMicroseconds = idlePollMicroseconds
        self.roomToPoll = roomToPoll
        self.pollYieldsForGood = pollYieldsForGood
        self.foundWhilePolling = foundWhilePolling
        self.pollsAfter = pollsAfter
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
        var poll = IdlePoll(limit: idlePollMicroseconds)
        // Whether the last items handled are worth a look for the next.
        var looks = false
        while true {
            let learns = looks && lookBeforeSleeping(&poll)
            var slept: UInt64?
            let items: [Item]? = lock.withLock {
                if queue.isEmpty && !stopping && !anticipated.load(ordering: .acquiring) {
                    let start = monotonicMicroseconds()
                    while queue.isEmpty && !stopping && !anticipated.load(ordering: .acquiring) { lock.wait() }
                    slept = monotonicMicroseconds() - start
                }
                if queue.isEmpty { return stopping ? [] : nil }
                let items = take(&queue)
                queued.store(queue.count, ordering: .relaxed)
                return items
            }
            if learns, let slept { poll.record(sleptMicroseconds: slept) }
            guard let items else {
                spin()
                continue
            }
            if items.isEmpty { return }
            handle(items)
            looks = poll.limit > 0 && pollsAfter(items)
        }
    }

    /// With nothing queued, looks for an item for up to the window `poll` has learnt, yielding
    /// the vCPU at each look; returns whether the wait that follows teaches `poll` anything (not
    /// when the machine had no room: `IdlePoll.machineHasRoom`). It looks only while no thread
    /// waits for a CPU, and stops as soon as a yield let another thread run (the journal's thread
    /// or an event loop woken on this vCPU needs it more), without the event loops' hold-off:
    /// those threads come at every write, and the next poll may find the vCPU to itself again.
    private func lookBeforeSleeping(_ poll: inout IdlePoll) -> Bool {
        guard queued.load(ordering: .acquiring) == 0 else { return false }
        guard poll.window > 0 else { return true }
        guard roomToPoll(poll) else { return false }
        let switches = IdlePoll.switchesAway()
        let began = monotonicMicroseconds()
        repeat {
            sched_yield()
            if queued.load(ordering: .acquiring) > 0 {
                poll.found()
                foundWhilePolling()
                return true
            }
            if pollYieldsForGood && IdlePoll.switchesAway() != switches { return true }
        } while monotonicMicroseconds() - began < poll.window
        return true
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
