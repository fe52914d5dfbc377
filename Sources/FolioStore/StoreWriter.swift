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

    /// Called with a write's event the moment it is in the log, before it is applied to the state
    /// and the views, when the write is known to make that one event and nothing else: an object
    /// command that runs in this transaction itself (not nested: checked completely before it
    /// changed anything, so nothing but a failure of LMDB, which abandons the whole transaction,
    /// can undo it) and that no delete rule can make more of (`mayTriggerRules`), with or without a
    /// request key (with one, the event is made with its request record instead of amended). The event's
    /// canonical bytes and chain hash are final then, and the `Writer` hands them to the journal at
    /// once, so that the journal's write and sync run while the event is applied. The `Applied`
    /// carries the event, its chain hash and canonical bytes only.
    public var onLoneEventLogged: ((Applied) -> Void)?

    /// Set while a command that makes exactly one event, in this transaction, runs.
    private var logsLoneEvent = false

    /// What the next event records of its request: a write with a request key that makes one event.
    private var requestOfNextEvent: Event.RequestRecord?

    let store: Store
    let txn: StoreTransaction
    private let log: EventLog
    private var head: EventLog.Head

    init(store: Store, txn: Transaction) throws {
        self.store = store
        self.txn = StoreTransaction(
            lmdb: txn, trees: store.databases.trees, cache: TreeNodeCache(parent: nil), deltas: store.databases.deltas,
            viewOps: store.databases.viewOps)
        log = EventLog(database: store.databases.events)
        head = try log.head(txn)
    }

    /// Writes the tree nodes changed in memory; called once, before the transaction commits.
    func finish() throws {
        try txn.flushTrees()
    }

    /// The result of one accepted command. A class: a write's goes from the store to its answer,
    /// its watchers, live queries and the journal, in arrays that are copied and joined on the way,
    /// and as a struct each copy retained and released each of its references.
    public final class Applied: Sendable {
        public let event: Event
        public let chainHash: ChainHash
        /// The object after the event: for create and update.
        public let object: StoredObject?
        /// The object before the event: for update and delete (what live queries compare with).
        public let before: StoredObject?
        /// Its record as stored, to answer with its wire form without serializing it again.
        let record: [UInt8]?
        /// The number of objects in a view just defined.
        public let viewCount: Int?
        /// The event's canonical bytes, as the log holds them.
        public let canonicalEvent: [UInt8]
        /// Where in them the head ends and the cause's number lies (`Event.encodedParts`): what a
        /// cluster node's proposal sends, without encoding the event again.
        let canonicalParts: (headEnd: Int, cause: Range<Int>?)

        init(
            event: Event, chainHash: ChainHash, object: StoredObject?, before: StoredObject?, record: [UInt8]?,
            viewCount: Int?,
            canonicalEvent: [UInt8], canonicalParts: (headEnd: Int, cause: Range<Int>?)
        ) {
            self.event = event
            self.chainHash = chainHash
            self.object = object
            self.before = before
            self.record = record
            self.viewCount = viewCount
            self.canonicalEvent = canonicalEvent
            self.canonicalParts = canonicalParts
        }

        /// Writes the object after the event in its wire form, from its record; false if there is none.
        public func writeObject(to writer: inout JSONWriter) throws -> Bool {
            guard let record, let object else { return false }
            try record.withUnsafeBytes {
                try ObjectTable.writeWireForm($0, collection: object.collection, id: object.id, to: &writer)
            }
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

    func setHead(_ newHead: EventLog.Head) { head = newHead }

    /// Executes a write: one command, or a batch, and what delete rules make of it, as one or more
    /// contiguous events. With a request key already used within its retention, nothing is written
    /// and the first request's result is given again. Throws `StoreError` (nothing of the write is
    /// kept) or `LMDBError` (the whole transaction must be abandoned).
    public func execute(_ request: WriteRequest, _ acceptance: Acceptance, ids: inout ObjectIDGenerator) throws
        -> WriteOutcome
    {
        guard let key = request.requestKey else { return try execute(request.command, acceptance, ids: &ids) }
        let digest = Self.digest(of: request.command)
        if let entry = try store.applier.requests.entry(key, now: acceptance.timestamp, txn.lmdb) {
            guard entry.digest == digest else {
                throw StoreError.conflict(
                    Conflict(
                        .requestKeyReused(key: key), "request key \(Names.quoted(key)) was used for a different request"
                    ))
            }
            return try replay(entry, of: request.command)
        }
        let command = request.command
        if try makesOneEvent(command) {
            // One event, and nothing failed: what it records of its request is known before it is
            // made, so it is made with it (the bytes `recordRequest` would amend it to), in this
            // transaction like an object write without a key.
            let record = Event.RequestRecord(key: key, digest: ChainHash(bytes: digest).hex, events: 1, failed: [])
            return try executeLone(command, request: record, acceptance, ids: &ids)
        }
        return try nested { child in
            var outcome = try execute(command, acceptance, ids: &ids, child)
            guard !outcome.appended.isEmpty else { return outcome }
            try recordRequest(key: key, digest: digest, in: &outcome, child)
            return outcome
        }
    }

    /// The write without a request key.
    func execute(_ command: Command, _ acceptance: Acceptance, ids: inout ObjectIDGenerator) throws -> WriteOutcome {
        if try makesOneEvent(command) { return try executeLone(command, request: nil, acceptance, ids: &ids) }
        return try nested { child in try execute(command, acceptance, ids: &ids, child) }
    }

    /// An object command that can run in this transaction itself, checked completely before it
    /// changes anything, and that makes exactly one event: no delete rule can make more of it.
    private func makesOneEvent(_ command: Command) throws -> Bool {
        guard !isolatesEveryCommand, command.isObjectCommand else { return false }
        return try !mayTriggerRules(command, txn)
    }

    /// Runs a command `makesOneEvent` accepted, in this transaction; its event is made with
    /// `request` (a request key's record) and shown to `onLoneEventLogged` once it is logged.
    private func executeLone(
        _ command: Command, request: Event.RequestRecord?, _ acceptance: Acceptance, ids: inout ObjectIDGenerator
    ) throws -> WriteOutcome {
        requestOfNextEvent = request
        logsLoneEvent = true
        defer {
            requestOfNextEvent = nil
            logsLoneEvent = false
        }
        return try execute(command, acceptance, ids: &ids, txn, isolated: false)
    }

    /// Runs `command` in `txn`. Unless `isolated` is false, `txn` is a nested transaction of the
    /// command's own (or its batch's), which its failure abandons.
    private func execute(
        _ command: Command, _ acceptance: Acceptance, ids: inout ObjectIDGenerator, _ txn: StoreTransaction,
        isolated: Bool = true
    ) throws -> WriteOutcome {
        switch command {
        case .create, .update, .delete:
            let appended = try executeObjectCommand(command, acceptance, ids: &ids, txn, isolated: isolated)
            return WriteOutcome(appended: appended, result: try Self.result(of: appended[0]), replayed: false)
        case .defineView(let definition):
            if try store.applier.catalog.view(definition.name, txn) != nil {
                throw StoreError.conflict(Conflict(.viewExists, "view \(Names.quoted(definition.name)) already exists"))
            }
            let applied = try append(event(.viewDefined(definition), acceptance), txn)
            return WriteOutcome(
                appended: [applied], result: .view(definition, count: applied.viewCount ?? 0), replayed: false)
        case .dropView(let name):
            guard try store.applier.catalog.view(name, txn) != nil else { throw StoreError.viewNotFound(name) }
            let applied = try append(event(.viewDropped(name: name), acceptance), txn)
            return WriteOutcome(appended: [applied], result: .viewDropped(name: name), replayed: false)
        case .defineSchema(let schema):
            try checkSchema(schema, txn)
            let applied = try append(event(.schemaDefined(schema), acceptance), txn)
            return WriteOutcome(appended: [applied], result: .schema(schema), replayed: false)
        case .dropSchema(let collection):
            guard try store.applier.catalog.schema(collection, txn) != nil else {
                throw StoreError.schemaNotFound(collection)
            }
            let applied = try append(event(.schemaDropped(collection: collection), acceptance), txn)
            return WriteOutcome(appended: [applied], result: .schemaDropped(collection: collection), replayed: false)
        case .putFile(let name, let sha256, let size, let contentType, let replace):
            let name = name ?? ids.next(at: acceptance.timestamp)
            if !replace, try store.applier.files.file(name, txn.lmdb) != nil {
                throw StoreError.conflict(
                    Conflict(
                        .fileExists,
                        "file \(Names.quoted(name)) already exists; put it with \"replace\": true to bind it anew"))
            }
            let binding = FileBinding(
                name: name, sha256: sha256, size: size, contentType: contentType, replace: replace)
            let applied = try append(event(.filePut(binding), acceptance), txn)
            guard let record = try store.applier.files.file(name, txn.lmdb) else {
                throw StoreError.corrupted("file \(name) was not bound")
            }
            return WriteOutcome(appended: [applied], result: .file(record), replayed: false)
        case .deleteFile(let name, let force):
            guard try store.applier.files.file(name, txn.lmdb) != nil else { throw StoreError.fileNotFound(name) }
            if !force { try checkUnreferenced(file: name, txn) }
            let applied = try append(event(.fileDeleted(name: name), acceptance), txn)
            return WriteOutcome(appended: [applied], result: .fileDeleted(name: name), replayed: false)
        case .batch(let operations, let atomic):
            return try executeBatch(operations, atomic: atomic, acceptance, ids: &ids, txn)
        }
    }

    /// An event of this write, to be the next in the log.
    func event(_ change: Event.Change, _ acceptance: Acceptance, version: UInt64 = 0, cause: UInt64? = nil) -> Event {
        defer { requestOfNextEvent = nil }
        return Event(
            sequence: head.sequence + 1, timestamp: acceptance.timestamp, origin: acceptance.origin, version: version,
            change: change,
            cause: cause, request: requestOfNextEvent)
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

    /// Runs `body` in a transaction nested in `parent` (by default the writer's own), whose changes
    /// (tree nodes, log head) join the parent's only if it returns.
    func nested<R>(in parent: StoreTransaction? = nil, _ body: (StoreTransaction) throws -> R) throws -> R {
        let parent = parent ?? txn
        let headBefore = head
        do {
            return try parent.nestedWrite(body)
        } catch {
            // What the nested transaction read from the catalog may be gone with it, and the events
            // it appended are.
            parent.catalogMemo?.forget()
            head = headBefore
            throw error
        }
    }

    func append(_ event: Event, _ txn: StoreTransaction, before: EventApplier.Before = .unknown) throws -> Applied {
        let (canonical, dataRange, headEnd, cause) = event.encodedWithData()
        let newHead = try log.append(canonical, after: head, txn.lmdb)
        if logsLoneEvent, let onLoneEventLogged {
            logsLoneEvent = false
            onLoneEventLogged(
                Applied(
                    event: event, chainHash: newHead.hash, object: nil, before: nil, record: nil, viewCount: nil,
                    canonicalEvent: canonical,
                    canonicalParts: (headEnd, cause)))
        }
        #if DEBUG
            try Failpoint.storeAfterLogAppend.check()
        #endif
        let applied = try store.applier.apply(event, txn, before: before, createdData: dataRange.map { canonical[$0] })
        var viewCount: Int?
        if case .viewDefined(let definition) = event.change {
            viewCount = try store.applier.catalog.view(definition.name, txn)?.tree.count(txn)
        }
        head = newHead
        return Applied(
            event: event, chainHash: newHead.hash, object: applied?.object, before: applied?.before,
            record: applied?.record,
            viewCount: viewCount, canonicalEvent: canonical, canonicalParts: (headEnd, cause))
    }

    /// The object now, after checking it exists and is at `ifVersion`.
    func current(_ collection: String, _ id: String, ifVersion: UInt64?, _ txn: StoreTransaction) throws -> StoredObject
    {
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
    /// create, update, delete: checked completely before they change anything, unless delete rules
    /// make more events of them.
    var isObjectCommand: Bool {
        switch self {
        case .create, .update, .delete: return true
        case .defineView, .dropView, .defineSchema, .dropSchema, .putFile, .deleteFile, .batch: return false
        }
    }
}
