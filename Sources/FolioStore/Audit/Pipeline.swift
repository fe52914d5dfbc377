import Foundation

/// Two stages on two threads: `produce` (reading and decoding events) runs on a thread of its own,
/// `consume` (applying them) on the caller's, with at most `depth` batches waiting between them.
/// `produce` returns nil when done. The first error of either stage stops both and is rethrown.
func runPipelined<Batch>(
    depth: Int = 2, produce: @escaping @Sendable () throws -> Batch?, consume: (Batch) throws -> Void
) throws {
    let channel = PipelineChannel<Batch>(depth: depth)
    let producer = Thread {
        do {
            while let batch = try produce() {
                // Cancelled: the consumer stopped (it threw) and waits in `cancel` for `finish`.
                guard channel.put(batch) else { break }
                // The batches the consumer is done with are freed here, off the consuming thread.
                _ = channel.takeSpent()
            }
            channel.finish(nil)
        } catch {
            channel.finish(error)
        }
    }
    producer.stackSize = 16 << 20
    producer.start()
    defer { channel.cancel() }
    while let batch = try channel.take() {
        try consume(batch)
        // Handed over with no reference left here: one kept until the end of the iteration could
        // outlive the producer's `takeSpent`, and the batch be freed on this thread after all.
        channel.recycle(consume batch)
    }
    // The last few, which the producer had no turn to free.
    _ = channel.takeSpent()
}

/// The bounded queue between the stages of `runPipelined`.
private final class PipelineChannel<Batch>: @unchecked Sendable {
    private let condition = NSCondition()
    private let depth: Int
    private var batches: [Batch] = []
    private var finished = false
    private var failure: (any Error)?
    private var cancelled = false
    /// Batches consumed, to be freed by the producer that allocated them: a decoded event is a tree
    /// of allocations, and freeing them on the consuming thread (the slower stage) made it return
    /// each block to the producer's malloc arena, under that arena's lock, from another core's cache
    /// (docs/BENCHMARKS.md: rebuilds 1.14×, offline verifies 1.06× and imports 1.12× faster,
    /// medians of paired runs).
    private var spent: [Batch] = []

    init(depth: Int) { self.depth = depth }

    /// False when the consumer stopped: the producer should stop too.
    func put(_ batch: Batch) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while batches.count >= depth && !cancelled { condition.wait() }
        if cancelled { return false }
        batches.append(batch)
        condition.broadcast()
        return true
    }

    func finish(_ error: (any Error)?) {
        condition.lock()
        finished = true
        failure = error
        condition.broadcast()
        condition.unlock()
    }

    /// The next batch; nil at the end; throws the producer's error.
    func take() throws -> Batch? {
        condition.lock()
        defer { condition.unlock() }
        while batches.isEmpty && !finished { condition.wait() }
        if !batches.isEmpty {
            let batch = batches.removeFirst()
            condition.broadcast()
            return batch
        }
        if let failure { throw failure }
        return nil
    }

    /// Hands a consumed batch back, for the producer to free (`takeSpent`). It takes the caller's
    /// reference and moves it into `spent` under the lock: with a borrowed parameter the caller
    /// kept its own until the call returned, and a `takeSpent` right after the unlock left the
    /// batch's last release to the consuming thread (seen once in an ASan run of `PipelineTests`).
    func recycle(_ batch: consuming Batch) {
        condition.lock()
        spent.append(consume batch)
        condition.unlock()
    }

    /// The consumed batches, now the caller's to free.
    func takeSpent() -> [Batch] {
        condition.lock()
        defer { condition.unlock() }
        var taken: [Batch] = []
        swap(&taken, &spent)
        return taken
    }

    /// Stops the producer and waits until it has let go of everything it uses.
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        while !finished { condition.wait() }
        condition.unlock()
    }
}
