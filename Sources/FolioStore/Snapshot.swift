import FolioJSON
import FolioModel
import LMDB

/// A consistent read view of the store, valid inside the closure that received it. Results that go to
/// clients are written as their wire JSON straight from the stored bytes.
public struct Snapshot {
    let store: Store
    let txn: Transaction
    /// Its reader's memo (`ReadMemo`); nil for a one-off read. Not retained: the reader that owns
    /// it outlives the snapshot (valid only inside its closure), and a second counted reference
    /// made every copy of a snapshot cost a retain and a release more (a pipelined get 4,167 →
    /// 4,491 instructions).
    unowned(unsafe) let memo: ReadMemo?

    init(store: Store, txn: Transaction, memo: ReadMemo? = nil) {
        self.store = store
        self.txn = txn
        self.memo = memo
    }

    /// The snapshot as trees read it (no write cache). The memo is entered here, where trees and
    /// the catalog are first read, not for every snapshot: a plain get reads neither.
    var storeTxn: StoreTransaction {
        memo?.enter(txn)
        return StoreTransaction(
            lmdb: txn, trees: store.databases.trees, cache: nil, deltas: store.databases.deltas,
            viewOps: store.databases.viewOps, readMemo: memo)
    }

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

    /// `writeObject` for a collection and an id given as valid names' bytes (a plain `get`'s, read
    /// from its line), which are their JSON.
    public func writeObject(
        plainCollection collection: UnsafeRawBufferPointer, plainID id: UnsafeRawBufferPointer,
        to writer: inout JSONWriter
    ) throws
        -> Bool
    {
        let found = try Keys.withObjectKey(collection, id) { key in try objects.record(key: key, txn) }
        guard let record = found else { return false }
        try ObjectTable.writeWireForm(record, plainCollection: collection, plainID: id, to: &writer)
        return true
    }

    /// A page ends early once its items take this many bytes, so no answer grows with what is
    /// stored beyond its documented limits: at least one item is always written.
    public static let pageByteBudget = 8 << 20

    /// Writes `[event, ...]`: up to `limit` of the object's events with sequence > `after`, oldest
    /// first. `found` is false if the object never existed; `next` is the `after` of the next page, nil
    /// after the last. O(log n + page).
    public func writeHistory(_ collection: String, _ id: String, after: UInt64, limit: Int, to writer: inout JSONWriter)
        throws
        -> (next: UInt64?, found: Bool)
    {
        let history = store.applier.history
        var count = 0
        var last = after
        var more = false
        let start = writer.bytes.count
        writer.bytes.append(UInt8(ascii: "["))
        try history.forEachSequence(collection, id, after: after, txn) { sequence in
            guard count < limit && writer.bytes.count - start < Self.pageByteBudget else {
                more = true
                return false
            }
            guard let record = try log.record(sequence, txn) else {
                throw StoreError.corrupted("history names event \(sequence), which the log lacks")
            }
            if count > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            try EventLog.writeWireForm(record, to: &writer)
            count += 1
            last = sequence
            return true
        }
        writer.bytes.append(UInt8(ascii: "]"))
        if count == 0 && !more, try !history.exists(collection, id, txn) { return (nil, false) }
        return (more ? last : nil, true)
    }

    /// Writes up to `limit` events with sequence > `after` as a JSON array (fewer once they take
    /// `pageByteBudget` bytes), leaving out those of collections `readable` refuses; returns the
    /// last sequence read (or `after`): where the next page starts.
    @discardableResult
    public func writeEvents(
        after: UInt64, limit: Int, readable: ((String?) -> Bool)? = nil, to writer: inout JSONWriter
    ) throws -> UInt64 {
        writer.bytes.append(UInt8(ascii: "["))
        let start = writer.bytes.count
        var last = after
        var written = 0
        try forEachEvent(after: after, limit: limit) { sequence, record in
            guard writer.bytes.count - start < Self.pageByteBudget else { return false }
            last = sequence
            if let readable, !readable(EventLog.collection(ofRecord: record)) { return true }
            if written > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            try EventLog.writeWireForm(record, to: &writer)
            written += 1
            return true
        }
        writer.bytes.append(UInt8(ascii: "]"))
        return last
    }

    /// The collection of a stored event (nil for a dropped view), from the head of its bytes.
    public static func collection(ofEventHead record: UnsafeRawBufferPointer) -> String? {
        EventLog.collection(ofRecord: record)
    }

    /// `collection(ofEventHead:)` of an event's canonical bytes (`StoreWriter.Applied.canonicalEvent`).
    public static func collection(ofCanonicalEvent bytes: UnsafeRawBufferPointer) -> String? {
        EventLog.collection(ofCanonical: bytes)
    }

    /// Calls `body` with up to `limit` stored event records after `after`, in order, until it
    /// returns false.
    public func forEachEvent(after: UInt64, limit: Int, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Bool) throws
    {
        var remaining = limit
        guard remaining > 0 else { return }
        try log.forEach(after: after, txn) { sequence, record in
            guard try body(sequence, record) else { return false }
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
        try catalog.allViews(storeTxn).map {
            ViewSummary(definition: $0.definition, count: try $0.tree.count(storeTxn))
        }
    }

    // MARK: Schemas

    public func schema(_ collection: String) throws -> Schema? { try catalog.schema(collection, storeTxn) }

    public func schemas() throws -> [Schema] { try catalog.allSchemas(storeTxn) }

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
        /// Views' changes not yet merged into their trees (`ViewBuffer`), and the merges so far.
        public let viewOpsPending: Int
        public let viewMerges: UInt64
    }

    /// Live objects in all collections: O(collections).
    public func objectCount() throws -> Int {
        try catalog.collections(storeTxn).reduce(0) { $0 + (try $1.tree.count(storeTxn)) }
    }

    public func statistics() throws -> Statistics {
        let head = try log.head(txn)
        let info = store.environment.info
        let buffer = try ViewBuffer.state(storeTxn)
        return Statistics(
            lastSequence: head.sequence, chainHead: head.hash,
            objectsPerCollection: try catalog.collections(storeTxn).map { ($0.name, try $0.tree.count(storeTxn)) },
            views: try catalog.allViews(storeTxn).count, mapSize: info.mapSize, usedSize: info.usedSize,
            fileSize: store.environment.fileSize, pageSize: info.pageSize,
            readerSlotsUsed: info.readerSlotsUsed, maxReaders: info.maxReaders, viewOpsPending: buffer.pending,
            viewMerges: buffer.epoch)
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
