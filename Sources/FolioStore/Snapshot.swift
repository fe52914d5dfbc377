import FolioJSON
import FolioModel
import LMDB

/// A consistent read view of the store, valid inside the closure that received it. Results that go to
/// clients are written as their wire JSON straight from the stored bytes.
public struct Snapshot {
    let store: Store
    let txn: Transaction

    /// The snapshot as trees read it (no write cache).
    var storeTxn: StoreTransaction { StoreTransaction(lmdb: txn, trees: store.databases.trees, cache: nil) }

    var objects: ObjectTable { store.applier.objects }
    var catalog: Catalog { store.applier.catalog }
    var log: EventLog { EventLog(database: store.databases.events) }

    /// The last event's sequence and the head of the hash chain.
    public func head() throws -> (sequence: UInt64, hash: ChainHash) {
        let head = try log.head(txn)
        return (head.sequence, head.hash)
    }

    public func object(_ collection: String, _ id: String) throws -> StoredObject? {
        try objects.get(collection, id, txn)
    }

    /// Writes the object's wire form; false if it does not exist.
    public func writeObject(_ collection: String, _ id: String, to writer: inout JSONWriter) throws -> Bool {
        guard let record = try objects.record(collection, id, txn) else { return false }
        try ObjectTable.writeWireForm(record, collection: collection, id: id, to: &writer)
        return true
    }

    /// Writes `[event, ...]`, oldest first; false if the object never existed.
    public func writeHistory(_ collection: String, _ id: String, to writer: inout JSONWriter) throws -> Bool {
        let entries = try store.applier.history.entries(collection, id, txn)
        guard !entries.isEmpty else { return false }
        writer.bytes.append(UInt8(ascii: "["))
        for (index, entry) in entries.enumerated() {
            if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            guard let record = try log.record(entry.sequence, txn) else {
                throw StoreError.corrupted("history names event \(entry.sequence), which the log lacks")
            }
            try EventLog.writeWireForm(record, to: &writer)
        }
        writer.bytes.append(UInt8(ascii: "]"))
        return true
    }

    /// Writes up to `limit` events with sequence > `after` as a JSON array; returns the last sequence
    /// written (or `after`).
    @discardableResult
    public func writeEvents(after: UInt64, limit: Int, to writer: inout JSONWriter) throws -> UInt64 {
        writer.bytes.append(UInt8(ascii: "["))
        var last = after
        try forEachEvent(after: after, limit: limit) { sequence, record in
            if last != after { writer.bytes.append(UInt8(ascii: ",")) }
            try EventLog.writeWireForm(record, to: &writer)
            last = sequence
        }
        writer.bytes.append(UInt8(ascii: "]"))
        return last
    }

    /// Calls `body` with up to `limit` stored event records after `after`, in order.
    public func forEachEvent(after: UInt64, limit: Int, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Void) throws {
        var remaining = limit
        guard remaining > 0 else { return }
        try log.forEach(after: after, txn) { sequence, record in
            try body(sequence, record)
            remaining -= 1
            return remaining > 0
        }
    }

    /// Writes one stored event's wire form (canonical JSON plus `hash`).
    public static func writeEventRecord(_ record: UnsafeRawBufferPointer, to writer: inout JSONWriter) throws {
        try EventLog.writeWireForm(record, to: &writer)
    }

    public func event(_ sequence: UInt64) throws -> Event? { try log.event(sequence, txn) }

    /// The collection of the object a stored event changes; nil for view events.
    public static func collection(ofEventRecord record: UnsafeRawBufferPointer, sequence: UInt64) throws -> String? {
        try EventLog.decode(record, sequence: sequence).object?.collection
    }

    // MARK: Views

    public struct ViewSummary: Sendable {
        public let definition: ViewDefinition
        public let count: Int
    }

    public func views() throws -> [ViewSummary] {
        try catalog.allViews(storeTxn).map { ViewSummary(definition: $0.definition, count: try $0.tree.count(storeTxn)) }
    }

    // MARK: Statistics

    public struct Statistics: Sendable {
        public let lastSequence: UInt64
        public let chainHead: ChainHash
        /// Live objects per collection, for every collection that ever had one.
        public let objectsPerCollection: [(collection: String, count: Int)]
        public let views: Int
        public let mapSize: Int
        public let usedSize: Int
        /// Bytes of `data.mdb`: the pages in use and the zeros reserved past them.
        public let fileSize: Int
        public let pageSize: Int
        /// The most reader slots in use at once since the environment was opened.
        public let readerSlotsUsed: Int
        public let maxReaders: Int
    }

    public func statistics() throws -> Statistics {
        let head = try log.head(txn)
        let info = store.environment.info
        return Statistics(
            lastSequence: head.sequence, chainHead: head.hash,
            objectsPerCollection: try catalog.collections(storeTxn).map { ($0.name, try $0.tree.count(storeTxn)) },
            views: try catalog.allViews(storeTxn).count, mapSize: info.mapSize, usedSize: info.usedSize,
            fileSize: store.environment.fileSize, pageSize: info.pageSize,
            readerSlotsUsed: info.readerSlotsUsed, maxReaders: info.maxReaders)
    }
}

extension Snapshot {
    /// When the last event was accepted; nil for an empty log.
    public func lastTimestamp() throws -> Timestamp? {
        let head = try log.head(txn)
        guard head.sequence > 0 else { return nil }
        return try log.event(head.sequence, txn)?.timestamp
    }
}
