import FolioModel
import Foundation
import LMDB
import Synchronization

#if DEBUG
    import Failpoints
#endif

extension Store {
    public struct Progress: Sendable {
        public let done: UInt64
        public let total: UInt64
    }

    /// Events applied per write transaction when replaying: large enough to amortize commits, small
    /// enough to bound a transaction's dirty pages.
    static let replayChunk = 10_000

    /// Events applied per write transaction by `rebuild`, which runs offline (the process is the
    /// store's only user): four times `replayChunk`. A rebuild of 1,000,000 events took 14–16% less
    /// time than with 10,000 (fewer commits, each of which copies the upper pages of the trees it touches), for
    /// about 180 MB more at its peak. Debug builds take `FOLIO_REBUILD_CHUNK`, so that a test can
    /// interrupt a rebuild between chunks without writing 40,000 events first.
    static var rebuildChunk: Int {
        #if DEBUG
            if let text = ProcessInfo.processInfo.environment["FOLIO_REBUILD_CHUNK"], let value = Int(text), value > 0 {
                return value
            }
        #endif
        return 40_000
    }

    /// Throws away current state and every view and derives them again from the log, in chunks.
    /// Until it completes, the store is marked as rebuilding and `checkUsable()` refuses it.
    public func rebuild(progress: (Progress) -> Void = { _ in }) throws {
        let total = try read { try $0.head().sequence }
        try growingMap {
            try environment.write { txn in
                for database in databases.derived { try txn.empty(database) }
                try txn.delete(databases.viewOps.main, ViewBuffer.stateKey)
                try txn.delete(databases.meta, Array("nextTree".utf8))
                try txn.put(databases.meta, Self.rebuildingKey, [1])
            }
        }
        databases.deltas.removeAll()
        applier.catalog.committedViews.removeAll()
        // Reading and decoding the log overlaps with applying it.
        let log = EventLog(database: databases.events)
        let reader = try environment.makeReader()
        let chunk = Self.rebuildChunk
        let read = Mutex<UInt64>(0)
        try runPipelined(
            produce: { () throws -> [(event: Event, data: [UInt8]?)]? in
                let after = read.withLock { $0 }
                guard after < total else { return nil }
                var batch: [(event: Event, data: [UInt8]?)] = []
                try reader.read { txn in
                    try log.forEach(after: after, txn) { sequence, record in
                        batch.append(try EventLog.decodeWithData(record, sequence: sequence))
                        return batch.count < chunk && sequence < total
                    }
                }
                read.withLock { $0 = batch.last?.event.sequence ?? total }
                return batch.isEmpty ? nil : batch
            },
            consume: { batch in
                // A chunk the map cannot hold is aborted whole and applied again in a larger map.
                try growingMap {
                    try environment.write { lmdb in
                        let txn = StoreTransaction(
                            lmdb: lmdb, trees: databases.trees, cache: TreeNodeCache(parent: nil),
                            deltas: databases.deltas, viewOps: databases.viewOps)
                        // By index: taking each element apart into a tuple copied every event (its strings, its
                        // data tree), 6% of the applying thread.
                        for index in batch.indices {
                            try applier.apply(batch[index].event, txn, createdData: batch[index].data?[...])
                        }
                        try txn.flushTrees()
                    }
                }
                #if DEBUG
                    try Failpoint.rebuildAfterChunk.check()
                #endif
                progress(Progress(done: batch.last?.event.sequence ?? total, total: total))
            })
        try growingMap { try environment.write { txn in try txn.delete(databases.meta, Self.rebuildingKey) } }
        databases.deltas.removeAll()
        if environment.syncMode != .full { try flushData() }
    }

    static let rebuildingKey = Array("rebuilding".utf8)

    /// Throws if a rebuild was interrupted: the derived state is incomplete until one finishes.
    public func checkUsable() throws {
        let rebuilding = try environment.read { txn in try txn.get(databases.meta, Self.rebuildingKey) != nil }
        if rebuilding {
            throw StoreError.unusable(
                "\(directory): a rebuild was interrupted; run `foliod rebuild --data \(directory)` to finish it")
        }
    }

    /// Appends events decided elsewhere (a replay, an import) in chunked transactions.
    /// `events` is called for the next batch after the given sequence and returns an empty array at the end.
    public func append(_ events: (UInt64) throws -> [Event]) throws {
        while true {
            let appended = try growingMap {
                try write { writer in
                    let batch = try events(writer.lastSequence)
                    for event in batch { _ = try writer.append(event) }
                    return batch.count
                }
            }
            if appended == 0 { return }
        }
    }
}
