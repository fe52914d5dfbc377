import FolioJSON
import FolioModel
import LMDB

/// Turns commands into events inside one write transaction: checks them against current state,
/// decides the event's version (and id), appends it to the log and applies it. Each command runs in
/// its own nested transaction, so one that fails leaves no trace and the others stand.
public final class StoreWriter {
    let store: Store
    let txn: StoreTransaction
    private let log: EventLog
    private var head: EventLog.Head

    init(store: Store, txn: Transaction) throws {
        self.store = store
        self.txn = StoreTransaction(lmdb: txn, trees: store.databases.trees, cache: TreeNodeCache(parent: nil))
        log = EventLog(database: store.databases.events)
        head = try log.head(txn)
    }

    /// Writes the tree nodes changed in memory; called once, before the transaction commits.
    func finish() throws {
        try txn.cache?.flush(into: txn.lmdb, trees: store.databases.trees)
    }

    /// The result of one accepted command.
    public struct Applied: Sendable {
        public let event: Event
        public let chainHash: ChainHash
        /// The object after the event: for create and update.
        public let object: StoredObject?
        /// The number of objects in a view just defined.
        public let viewCount: Int?
        /// The event as clients see it: canonical JSON with its `hash`.
        public let wireEvent: [UInt8]
    }

    public var lastSequence: UInt64 { head.sequence }

    /// Executes `command` as one event. Throws `StoreError` (nothing of the command is kept) or
    /// `LMDBError` (the whole transaction must be abandoned).
    public func execute(_ command: Command, _ acceptance: Acceptance, ids: inout ObjectIDGenerator) throws -> Applied {
        try nested { child in
            let change: Event.Change
            var version: UInt64 = 0
            let objects = store.applier.objects
            switch command {
            case .create(let collection, let givenID, let data):
                let id = givenID ?? ids.next(at: acceptance.timestamp)
                if givenID != nil, try objects.record(collection, id, child.lmdb) != nil {
                    throw StoreError.conflict(Conflict(.exists, "\(collection)/\(id) already exists"))
                }
                version = try store.applier.history.lastVersion(collection, id, child.lmdb) + 1
                change = .created(collection: collection, id: id, data: data)
            case .update(let collection, let id, let patch, let ifVersion):
                version = try currentVersion(collection, id, ifVersion: ifVersion, child) + 1
                change = .updated(collection: collection, id: id, patch: patch)
            case .delete(let collection, let id, let ifVersion):
                version = try currentVersion(collection, id, ifVersion: ifVersion, child) + 1
                change = .deleted(collection: collection, id: id)
            case .defineView(let definition):
                if try store.applier.catalog.view(definition.name, child) != nil {
                    throw StoreError.conflict(Conflict(.viewExists, "view \(Names.quoted(definition.name)) already exists"))
                }
                change = .viewDefined(definition)
            case .dropView(let name):
                guard try store.applier.catalog.view(name, child) != nil else { throw StoreError.viewNotFound(name) }
                change = .viewDropped(name: name)
            }
            let event = Event(
                sequence: head.sequence + 1, timestamp: acceptance.timestamp, origin: acceptance.origin, version: version,
                change: change)
            return try append(event, child)
        }
    }

    /// Appends an event decided elsewhere (a replay, an import): its sequence must follow the log's
    /// last. `isolated` runs it in a nested transaction, so that a failure leaves the rest of this
    /// transaction usable; without it a failure spoils the whole transaction.
    public func append(_ event: Event, isolated: Bool = true) throws -> Applied {
        guard event.sequence == head.sequence + 1 else {
            throw StoreError.invalid("event \(event.sequence) does not follow event \(head.sequence)")
        }
        if !isolated { return try append(event, txn) }
        return try nested { child in try append(event, child) }
    }

    /// Runs `body` in a nested transaction whose tree changes join this one's only if it returns.
    private func nested<R>(_ body: (StoreTransaction) throws -> R) throws -> R {
        try txn.lmdb.nested { child in
            let nested = txn.nested(child)
            let result = try body(nested)
            nested.cache?.mergeIntoParent()
            return result
        }
    }

    private func append(_ event: Event, _ txn: StoreTransaction) throws -> Applied {
        let canonical = event.encoded()
        let newHead = try log.append(canonical, after: head, txn.lmdb)
        let object = try store.applier.apply(event, txn)
        var viewCount: Int?
        if case .viewDefined(let definition) = event.change {
            viewCount = try store.applier.catalog.view(definition.name, txn)?.tree.count(txn)
        }
        head = newHead
        var wire = JSONWriter(capacity: canonical.count + 80)
        canonical.withUnsafeBytes { EventLog.writeWireForm(canonical: $0, hash: newHead.hash, to: &wire) }
        return Applied(event: event, chainHash: newHead.hash, object: object, viewCount: viewCount, wireEvent: wire.bytes)
    }

    private func currentVersion(_ collection: String, _ id: String, ifVersion: UInt64?, _ txn: StoreTransaction) throws -> UInt64 {
        guard let record = try store.applier.objects.record(collection, id, txn.lmdb) else {
            throw StoreError.notFound(collection: collection, id: id)
        }
        let current = try ObjectTable.header(of: record).version
        if let ifVersion, ifVersion != current {
            throw StoreError.conflict(
                Conflict(
                    .version(expected: ifVersion, current: current),
                    "\(collection)/\(id) is at version \(current), not \(ifVersion)"))
        }
        return current
    }
}
