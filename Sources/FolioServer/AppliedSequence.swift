import Synchronization

/// The last event this node has applied and made visible to reads, and the event loops holding
/// reads that wait for a later one (`minSeq`). The writer advances it after each commit (a single
/// node) or each batch applied from the cluster's log, and wakes the loops that wait.
final class AppliedSequence: Sendable {
    private let value = Atomic<UInt64>(0)
    /// Loops with reads waiting, and how many each has.
    private let waiting = Mutex<[ObjectIdentifier: (loop: EventLoop, reads: Int)]>([:])
    private let anyWaiting = Atomic<Int>(0)

    var current: UInt64 { value.load(ordering: .acquiring) }

    func advance(to sequence: UInt64) {
        var current = value.load(ordering: .relaxed)
        while current < sequence {
            let (exchanged, original) = value.compareExchange(
                expected: current, desired: sequence, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
        guard anyWaiting.load(ordering: .acquiring) > 0 else { return }
        let loops = waiting.withLock { $0.values.map(\.loop) }
        for loop in loops { loop.post(.sequenceApplied) }
    }

    /// A read of `loop` starts waiting.
    func hold(on loop: EventLoop) {
        waiting.withLock { $0[ObjectIdentifier(loop), default: (loop, 0)].reads += 1 }
        anyWaiting.add(1, ordering: .releasing)
    }

    /// A read of `loop` stops waiting (answered, timed out, or its connection closed).
    func release(on loop: EventLoop) {
        waiting.withLock { entries in
            let id = ObjectIdentifier(loop)
            guard let entry = entries[id] else { return }
            if entry.reads <= 1 { entries[id] = nil } else { entries[id] = (loop, entry.reads - 1) }
        }
        anyWaiting.subtract(1, ordering: .releasing)
    }
}
