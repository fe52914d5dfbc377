import FolioJSON
import FolioModel
import LMDB

#if DEBUG
import Failpoints
#endif

/// Turns commands into events inside one write transaction: checks them against current state,
/// decides the event's version (and id), appends it to the log and applies it. A command that fails
/// leaves no trace and the commands before it stand: an object command is checked completely
/// (versions, ids, every view's keys and unique rules) before it changes anything, so it either fails
/// unchanged or cannot fail; view commands, and every command when `isolatesEveryCommand` is set,
/// run in their own nested transaction instead.
public final class StoreWriter {
    /// Thrown when a command failed after it began to change the transaction, which must then be
    /// abandoned (the caller may retry the batch with `isolatesEveryCommand`).
    public struct SpoiledTransaction: Error, CustomStringConvertible {
        public let underlying: any Error
        public var description: String { "the transaction was left unusable: \(underlying)" }
    }

    /// Run every command in a nested transaction: slower, but a failure anywhere in a command leaves
    /// the transaction usable.
    public var isolatesEveryCommand = false

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
        /// Its record as stored, to answer with its wire form without serializing it again.
        let record: [UInt8]?
        /// The number of objects in a view just defined.
        public let viewCount: Int?
        /// The event's canonical bytes, as the log holds them.
        public let canonicalEvent: [UInt8]

        /// Writes the object after the event in its wire form, from its record; false if there is none.
        public func writeObject(to writer: inout JSONWriter) throws -> Bool {
            guard let record, let object else { return false }
            try record.withUnsafeBytes { try ObjectTable.writeWireForm($0, collection: object.collection, id: object.id, to: &writer) }
            return true
        }

        /// The event as clients see it: canonical JSON with its `hash`.
        public var wireEvent: [UInt8] {
            var wire = JSONWriter(capacity: canonicalEvent.count + 80)
            canonicalEvent.withUnsafeBytes { EventLog.writeWireForm(canonical: $0, hash: chainHash, to: &wire) }
            return wire.bytes
        }
    }

    public var lastSequence: UInt64 { head.sequence }

    /// Executes `command` as one event. Throws `StoreError` (nothing of the command is kept) or
    /// `LMDBError` (the whole transaction must be abandoned).
    public func execute(_ command: Command, _ acceptance: Acceptance, ids: inout ObjectIDGenerator) throws -> Applied {
        if !isolatesEveryCommand, command.isObjectCommand {
            return try executeChecked(command, acceptance, ids: &ids, txn, isolated: false)
        }
        return try nested { child in try executeChecked(command, acceptance, ids: &ids, child, isolated: true) }
    }

    /// Decides the event and checks everything that could refuse it, then applies it. Errors thrown
    /// before the first change are the command's. Unless `isolated` (in a nested transaction of its
    /// own), a store error thrown after is a `SpoiledTransaction`; LMDB errors spoil the transaction
    /// anyway and pass as they are.
    private func executeChecked(
        _ command: Command, _ acceptance: Acceptance, ids: inout ObjectIDGenerator, _ txn: StoreTransaction, isolated: Bool
    ) throws -> Applied {
        let change: Event.Change
        var version: UInt64 = 0
        var before: StoredObject?
        let applier = store.applier
        switch command {
        case .create(let collection, let givenID, let data):
            let id = givenID ?? ids.next(at: acceptance.timestamp)
            if givenID != nil, try applier.objects.record(collection, id, txn.lmdb) != nil {
                throw StoreError.conflict(Conflict(.exists, "\(collection)/\(id) already exists"))
            }
            version = try applier.history.lastVersion(collection, id, txn.lmdb) + 1
            change = .created(collection: collection, id: id, data: data)
        case .update(let collection, let id, let patch, let ifVersion):
            before = try current(collection, id, ifVersion: ifVersion, txn)
            version = before!.version + 1
            change = .updated(collection: collection, id: id, patch: patch)
        case .delete(let collection, let id, let ifVersion):
            before = try current(collection, id, ifVersion: ifVersion, txn)
            version = before!.version + 1
            change = .deleted(collection: collection, id: id)
        case .defineView(let definition):
            if try applier.catalog.view(definition.name, txn) != nil {
                throw StoreError.conflict(Conflict(.viewExists, "view \(Names.quoted(definition.name)) already exists"))
            }
            change = .viewDefined(definition)
        case .dropView(let name):
            guard try applier.catalog.view(name, txn) != nil else { throw StoreError.viewNotFound(name) }
            change = .viewDropped(name: name)
        }
        let event = Event(
            sequence: head.sequence + 1, timestamp: acceptance.timestamp, origin: acceptance.origin, version: version,
            change: change)
        guard event.object != nil else { return try append(event, txn) }
        // Every view's key and unique rule, checked before anything changes.
        try applier.checkTrees(from: before, to: event.applied(to: before), txn)
        do {
            return try append(event, txn, before: .known(before))
        } catch let error as StoreError where !isolated {
            throw SpoiledTransaction(underlying: error)
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
        do {
            return try txn.lmdb.nested { child in
                let nested = txn.nested(child)
                let result = try body(nested)
                nested.cache?.mergeIntoParent()
                return result
            }
        } catch {
            // What the nested transaction read from the catalog may be gone with it.
            txn.catalogMemo?.forget()
            throw error
        }
    }

    private func append(_ event: Event, _ txn: StoreTransaction, before: EventApplier.Before = .unknown) throws -> Applied {
        let (canonical, dataRange) = event.encodedWithData()
        let newHead = try log.append(canonical, after: head, txn.lmdb)
        #if DEBUG
        try Failpoint.storeAfterLogAppend.check()
        #endif
        let applied = try store.applier.apply(event, txn, before: before, createdData: dataRange.map { Array(canonical[$0]) })
        var viewCount: Int?
        if case .viewDefined(let definition) = event.change {
            viewCount = try store.applier.catalog.view(definition.name, txn)?.tree.count(txn)
        }
        head = newHead
        return Applied(
            event: event, chainHash: newHead.hash, object: applied?.object, record: applied?.record, viewCount: viewCount,
            canonicalEvent: canonical)
    }

    /// The object now, after checking it exists and is at `ifVersion`.
    private func current(_ collection: String, _ id: String, ifVersion: UInt64?, _ txn: StoreTransaction) throws -> StoredObject {
        guard let object = try store.applier.objects.get(collection, id, txn.lmdb) else {
            throw StoreError.notFound(collection: collection, id: id)
        }
        let current = object.version
        if let ifVersion, ifVersion != current {
            throw StoreError.conflict(
                Conflict(
                    .version(expected: ifVersion, current: current),
                    "\(collection)/\(id) is at version \(current), not \(ifVersion)"))
        }
        return object
    }
}

extension Command {
    /// create, update, delete: checked completely before they change anything.
    var isObjectCommand: Bool {
        switch self {
        case .create, .update, .delete: return true
        case .defineView, .dropView: return false
        }
    }
}
