import FolioStore
import Synchronization

/// How many watches each event loop runs, so the writer prepares and posts committed events only
/// when someone watches, and only to loops that have watchers.
final class WatchRegistry: Sendable {
    private let counts: Mutex<[ObjectIdentifier: (loop: EventLoop, count: Int)]> = Mutex([:])
    private let total = Atomic<Int>(0)

    func add(_ count: Int, loop: EventLoop) {
        counts.withLock { $0[ObjectIdentifier(loop), default: (loop, 0)].count += count }
        total.add(count, ordering: .releasing)
    }

    func remove(_ count: Int, loop: EventLoop) {
        counts.withLock { $0[ObjectIdentifier(loop)]?.count -= count }
        total.subtract(count, ordering: .releasing)
    }

    /// Posts the events of a commit to every loop with a watch. Called on the writer's thread, in
    /// commit order, so each loop receives commits in order.
    func publish(_ applied: [StoreWriter.Applied]) {
        guard total.load(ordering: .acquiring) > 0 else { return }
        let committedAt = monotonicMicroseconds()
        let events = applied.map { applied in
            CommittedEvent(
                sequence: applied.event.sequence, collection: applied.event.object?.collection,
                readableAs: applied.event.object?.collection
                    ?? applied.canonicalEvent.withUnsafeBytes { Snapshot.collection(ofCanonicalEvent: $0) },
                wire: applied.wireEvent, committedAt: committedAt)
        }
        let loops = counts.withLock { $0.values.filter { $0.count > 0 }.map(\.loop) }
        for loop in loops { loop.post(.committed(events)) }
    }
}
