import FolioModel
import LMDB

extension Store {
    public struct Progress: Sendable {
        public let done: UInt64
        public let total: UInt64
    }

    /// Events applied per write transaction when replaying: large enough to amortize commits, small
    /// enough to bound a transaction's dirty pages.
    static let replayChunk = 10_000

    /// Throws away current state and every view and derives them again from the log, in chunks.
    /// Until it completes, the store is marked as rebuilding and `checkUsable()` refuses it.
    public func rebuild(progress: (Progress) -> Void = { _ in }) throws {
        let total = try read { try $0.head().sequence }
        try environment.write { txn in
            for database in databases.derived { try txn.empty(database) }
            try txn.delete(databases.meta, Array("nextTree".utf8))
            try txn.put(databases.meta, Self.rebuildingKey, [1])
        }
        var done: UInt64 = 0
        while done < total {
            done = try environment.write { lmdb in
                let log = EventLog(database: databases.events)
                let txn = StoreTransaction(lmdb: lmdb, trees: databases.trees, cache: TreeNodeCache(parent: nil))
                var last = done
                try log.forEach(after: done, lmdb) { sequence, record in
                    let event = try EventLog.decode(record, sequence: sequence)
                    try applier.apply(event, txn)
                    last = sequence
                    return sequence - done < UInt64(Self.replayChunk)
                }
                try txn.cache?.flush(into: lmdb, trees: databases.trees)
                return last
            }
            progress(Progress(done: done, total: total))
        }
        try environment.write { txn in try txn.delete(databases.meta, Self.rebuildingKey) }
        if environment.syncMode != .full { try environment.sync() }
    }

    static let rebuildingKey = Array("rebuilding".utf8)

    /// Throws if a rebuild was interrupted: the derived state is incomplete until one finishes.
    public func checkUsable() throws {
        let rebuilding = try environment.read { txn in try txn.get(databases.meta, Self.rebuildingKey) != nil }
        if rebuilding {
            throw StoreError.unusable("\(directory): a rebuild was interrupted; run `foliod rebuild --data \(directory)` to finish it")
        }
    }

    /// Appends events decided elsewhere (a replay, an import) in chunked transactions.
    /// `events` is called for the next batch after the given sequence and returns an empty array at the end.
    public func append(_ events: (UInt64) throws -> [Event]) throws {
        while true {
            let appended = try write { writer in
                let batch = try events(writer.lastSequence)
                for event in batch { _ = try writer.append(event) }
                return batch.count
            }
            if appended == 0 { return }
        }
    }
}
