import FolioJSON
import FolioModel
import LMDB

/// What a cluster's log must know of a write to decide it (docs/CLUSTER.md): its events, without
/// their sequence and time, and the keys of the state its execution read and changed.
///
/// A node executes a write on its own copy of the log, at its last applied sequence S, exactly as a
/// single node does, then throws that transaction away. The log accepts the write only if no event
/// after S changed a key the execution read: then executing it at the end of the log gives the same
/// events, and the log appends them. Otherwise the node catches up and executes it again.
public struct ProposedWrite: Sendable {
    /// An event of the write, in the parts the log composes its canonical bytes from.
    public struct PendingEvent: Sendable {
        /// `created`, `updated`, ...: the `type` of the event.
        public let type: String
        /// The canonical bytes after `{"seq":N,"type":"T","at":"A"`, up to the number of `cause` if
        /// the event has one, to its end otherwise.
        public let tail: [UInt8]
        /// For an event a delete rule made: which event of this write caused it (0: the first).
        public let causeIndex: Int?
        /// The bytes after the cause's number.
        public let rest: [UInt8]
    }

    public let events: [PendingEvent]
    /// Keys of the state the execution read: each must be unchanged since the proposal's sequence.
    public let reads: [ConflictKey]
    /// Keys of the state the events change.
    public let writes: [ConflictKey]
    /// The execution depended on all of the state (a view or schema defined or dropped, a file
    /// deleted): accepted only if nothing was appended since the proposal's sequence.
    public let readsEverything: Bool
    /// The outcome on the node's copy: the shape of the answer (a batch's failed ops).
    let local: WriteOutcome

    /// The events as executed on the node's copy, numbered from the proposal's sequence and
    /// timed at its acceptance.
    public var appended: [StoreWriter.Applied] { local.appended }

    /// The outcome as the node executed it: the answer when the log appended the write's events
    /// exactly so (same sequences, bytes and chain hashes) and the node kept that transaction, as a
    /// single node answers the writes it executes. Otherwise `outcome(applied:)`.
    public var executed: WriteOutcome { local }

    /// The write's outcome from its events as the log numbered, timed and applied them.
    public func outcome(applied: [StoreWriter.Applied]) throws -> WriteOutcome {
        guard applied.count == events.count else {
            throw StoreError.corrupted("a write of \(events.count) events came back from the log as \(applied.count)")
        }
        let own = applied.filter { $0.event.cause == nil }
        func result(_ local: WriteResult, _ event: StoreWriter.Applied?) throws -> WriteResult {
            switch local {
            case .object, .deleted:
                guard let event else {
                    throw StoreError.corrupted("a write's result has no event of its own in the log")
                }
                return try StoreWriter.result(of: event)
            case .view(let definition, _):
                return .view(definition, count: event?.viewCount ?? 0)
            default:
                return local
            }
        }
        var answer: WriteResult
        if case .batch(let items) = local.result {
            var next = own.makeIterator()
            answer = .batch(
                try items.map { item in
                    guard case .success(let value) = item else { return item }
                    return .success(try result(value, next.next()))
                })
        } else {
            answer = try result(local.result, own.first)
        }
        return WriteOutcome(appended: applied, result: answer, replayed: false)
    }
}

/// Settled on the node's copy, or to be decided by the log.
public enum Proposal: Sendable {
    case propose(ProposedWrite)
    /// Refused (a failed check), or answered from a request key already used: no event to append.
    case settled(Result<WriteOutcome, StoreError>)
}

/// A piece of state a write may read or change, as bytes: a kind, then its parts, each prefixed
/// with its length, so that no two keys spell alike.
public struct ConflictKey: Hashable, Sendable, Comparable {
    public let bytes: [UInt8]

    /// The kind, then each part's length (4 bytes, big-endian) and bytes, written in place: every
    /// object write makes one of these, and a generic sequence of parts cost a thousand instructions.
    private init(_ kind: UInt8, _ parts: UnsafeRawBufferPointer...) {
        let count = parts.reduce(1) { $0 + 4 + $1.count }
        bytes = [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            out[0] = kind
            var at = 1
            for part in parts {
                let length = UInt32(part.count)
                out[at] = UInt8(truncatingIfNeeded: length >> 24)
                out[at + 1] = UInt8(truncatingIfNeeded: length >> 16)
                out[at + 2] = UInt8(truncatingIfNeeded: length >> 8)
                out[at + 3] = UInt8(truncatingIfNeeded: length)
                at += 4
                if let base = part.baseAddress, part.count > 0 {
                    UnsafeMutableRawPointer(out.baseAddress! + at).copyMemory(from: base, byteCount: part.count)
                }
                at += part.count
            }
            initialized = count
        }
    }

    private init(_ kind: UInt8, _ first: String, _ second: String) {
        var first = first
        var second = second
        self = first.withUTF8 { a in
            second.withUTF8 { b in ConflictKey(kind, UnsafeRawBufferPointer(a), UnsafeRawBufferPointer(b)) }
        }
    }

    private init(_ kind: UInt8, _ part: String) {
        var part = part
        self = part.withUTF8 { ConflictKey(kind, UnsafeRawBufferPointer($0)) }
    }

    /// An object: its existence, version and data.
    static func object(_ collection: String, _ id: String) -> ConflictKey {
        ConflictKey(UInt8(ascii: "o"), collection, id)
    }
    /// The objects that refer to an object (or a file): what delete rules and file deletes read.
    static func referrers(_ collection: String, _ id: String) -> ConflictKey {
        ConflictKey(UInt8(ascii: "l"), collection, id)
    }
    /// A claim on a unique view's key.
    static func unique(_ view: String, _ tuple: [UInt8]) -> ConflictKey {
        var view = view
        return view.withUTF8 { name in
            tuple.withUnsafeBytes { ConflictKey(UInt8(ascii: "u"), UnsafeRawBufferPointer(name), $0) }
        }
    }
    /// A file name's binding.
    static func file(_ name: String) -> ConflictKey { ConflictKey(UInt8(ascii: "f"), name) }
    /// A request key.
    static func request(_ key: String) -> ConflictKey { ConflictKey(UInt8(ascii: "q"), key) }
    /// The catalog: views and schemas, which every object write is checked against.
    static let catalog = ConflictKey(kind: UInt8(ascii: "k"))

    private init(kind: UInt8) { bytes = [kind] }

    /// The bytes hashed as one block: an array of bytes hashes them one at a time, which took a
    /// cluster node's writing thread 2–3% of its time.
    public func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }

    public static func == (lhs: ConflictKey, rhs: ConflictKey) -> Bool { compareBytes(lhs.bytes, rhs.bytes) == 0 }

    public static func < (lhs: ConflictKey, rhs: ConflictKey) -> Bool { compareBytes(lhs.bytes, rhs.bytes) < 0 }

    /// `keys` in order, each once, sorted and made unique in place (a write has a few keys).
    static func sortedUnique(_ keys: consuming [ConflictKey]) -> [ConflictKey] {
        var keys = keys
        guard keys.count > 1 else { return keys }
        keys.sort()
        var kept = 1
        for index in 1..<keys.count where keys[index] != keys[kept - 1] {
            if index != kept { keys.swapAt(index, kept) }
            kept += 1
        }
        keys.removeLast(keys.count - kept)
        return keys
    }
}

extension Store {
    /// Executes `writes` in order on this store's current state, as one group commit would: what
    /// each would append, for a cluster's log to decide, or its settled outcome. Returns the
    /// sequence they were executed at. Call from the writing thread.
    ///
    /// Stores nothing, unless `keep` says so: it is called inside the transaction, once the writes
    /// are executed, and if it returns true the transaction commits as it is (`kept`). A cluster
    /// node keeps it when the log appended exactly these events, with the same sequences, times
    /// and chain hashes: then this transaction holds what applying them would write, and the node
    /// does not execute them a second time. Once `keep` was called, an error is not retried: it
    /// has decided, and the caller applies from the log what it decided.
    public func propose(
        _ writes: [(request: WriteRequest, acceptance: Acceptance)], ids: inout ObjectIDGenerator,
        keep: ((_ proposals: [Proposal], _ sequence: UInt64) throws -> Bool)? = nil
    ) throws -> (proposals: [Proposal], sequence: UInt64, kept: Bool) {
        struct Rehearsed: Error {}
        var isolating = false
        var attempts = 0
        var decided = false
        while true {
            var proposals: [Proposal] = []
            var sequence: UInt64 = 0
            do {
                try write { writer in
                    writer.isolatesEveryCommand = isolating
                    sequence = writer.lastSequence
                    for (request, acceptance) in writes {
                        do {
                            let outcome = try writer.execute(request, acceptance, ids: &ids)
                            if outcome.replayed || outcome.appended.isEmpty {
                                proposals.append(.settled(.success(outcome)))
                            } else {
                                proposals.append(.propose(try writer.proposal(of: outcome)))
                            }
                        } catch let error as StoreError {
                            proposals.append(.settled(.failure(error)))
                        }
                    }
                    if let keep {
                        decided = true
                        if try keep(proposals, sequence) { return }
                    }
                    throw Rehearsed()
                }
                return (proposals, sequence, true)
            } catch is Rehearsed {
                return (proposals, sequence, false)
            } catch is StoreWriter.SpoiledTransaction where !isolating && !decided {
                isolating = true
            } catch let error as LMDBError where error.code == .mapFull && attempts < 16 && !decided {
                attempts += 1
                try growMap()
            }
        }
    }

    /// Appends events that a cluster's log decided, in one transaction, checking each against this
    /// store's chain: it must follow the last event, be canonical, and chain to the log's hash.
    /// Throws `ClusterDivergence` (nothing of the call is kept) when one does not.
    public func appendLogged(_ events: [LoggedEvent]) throws -> [StoreWriter.Applied] {
        try growingMap {
            try write { writer in
                var applied: [StoreWriter.Applied] = []
                applied.reserveCapacity(events.count)
                for logged in events {
                    guard logged.sequence == writer.lastSequence + 1 else {
                        throw ClusterDivergence(
                            sequence: logged.sequence,
                            "the log gave event \(logged.sequence) after event \(writer.lastSequence)")
                    }
                    let event: Event
                    do {
                        event = try logged.decoded ?? logged.decode()
                    } catch {
                        throw ClusterDivergence(sequence: logged.sequence, "the event does not decode: \(error)")
                    }
                    guard event.sequence == logged.sequence else {
                        throw ClusterDivergence(
                            sequence: logged.sequence, "the event says it is event \(event.sequence)")
                    }
                    let one: StoreWriter.Applied
                    do { one = try writer.append(event, isolated: false) } catch let error as StoreError {
                        throw ClusterDivergence(
                            sequence: logged.sequence, "the event does not apply to this store: \(error)")
                    }
                    guard sameBytes(one.canonicalEvent, logged.canonical) else {
                        throw ClusterDivergence(
                            sequence: logged.sequence, "the event's bytes are not its canonical form")
                    }
                    guard sameBytes(one.chainHash.bytes, logged.hash) else {
                        throw ClusterDivergence(
                            sequence: logged.sequence,
                            "the chain hash is \(hexString(logged.hash)) in the log and \(one.chainHash.hex) here: this store's history differs from the log's"
                        )
                    }
                    applied.append(one)
                }
                return applied
            }
        }
    }
}

/// An event as a cluster's log holds it.
public struct LoggedEvent: Sendable {
    public let sequence: UInt64
    public let canonical: [UInt8]
    public let hash: [UInt8]
    /// `canonical` decoded ahead (`decodeAhead`), by the thread that fetched it while another
    /// applied the chunk before; nil: `appendLogged` decodes it, and reports it if it does not decode.
    public private(set) var decoded: Event?

    public init(sequence: UInt64, canonical: [UInt8], hash: [UInt8]) {
        self.sequence = sequence
        self.canonical = canonical
        self.hash = hash
    }

    /// Decodes `canonical` (whose data a node's applier checks as it applies it).
    func decode() throws -> Event {
        try canonical.withUnsafeBytes { try Event(decoding: $0, checkingData: false) }
    }

    /// Sets `decoded`; leaves it nil if `canonical` does not decode (`appendLogged` says why).
    public mutating func decodeAhead() { decoded = try? decode() }
}

/// The log holds an event this store cannot take as it is: the node's history and the log's differ.
public struct ClusterDivergence: Error, CustomStringConvertible, Sendable {
    public let sequence: UInt64
    public let reason: String

    public init(sequence: UInt64, _ reason: String) {
        self.sequence = sequence
        self.reason = reason
    }

    public var description: String { "event \(sequence) of the log: \(reason)" }
}

extension StoreWriter {
    /// The proposal of a write just executed in this transaction.
    func proposal(of outcome: WriteOutcome) throws -> ProposedWrite {
        let first = outcome.appended[0].event.sequence
        // Arrays, sorted and made unique at the end: a write has a few keys, and a set of them cost
        // more in hashing and its storage than the proposal's other work.
        var reads: [ConflictKey] = []
        var writes: [ConflictKey] = []
        reads.reserveCapacity(4 * outcome.appended.count)
        writes.reserveCapacity(2 * outcome.appended.count)
        var everything = false
        var events: [ProposedWrite.PendingEvent] = []
        events.reserveCapacity(outcome.appended.count)
        for applied in outcome.appended {
            let event = applied.event
            let bytes = applied.canonicalEvent
            let (headEnd, causeRange) = applied.canonicalParts
            assert(
                event.encodedParts() == (bytes, headEnd, causeRange),
                "the parts kept of event \(event.sequence) are not its encoding's")
            if let causeRange, let cause = event.cause {
                guard cause >= first, cause < event.sequence else {
                    throw StoreError.invalid("event \(event.sequence) names cause \(cause), outside its own write")
                }
                events.append(
                    .init(
                        type: event.typeName, tail: Array(bytes[headEnd..<causeRange.lowerBound]),
                        causeIndex: Int(cause - first),
                        rest: Array(bytes[causeRange.upperBound...])))
            } else {
                events.append(.init(type: event.typeName, tail: Array(bytes[headEnd...]), causeIndex: nil, rest: []))
            }
            if let request = event.request {
                reads.append(.request(request.key))
                writes.append(.request(request.key))
            }
            switch event.change {
            case .created(let collection, let id, _), .updated(let collection, let id, _, _),
                .deleted(let collection, let id):
                try objectKeys(applied, collection: collection, id: id, reads: &reads, writes: &writes)
            case .viewDefined, .viewDropped, .schemaDefined, .schemaDropped:
                everything = true
                writes.append(.catalog)
            case .filePut(let binding):
                reads.append(.file(binding.name))
                writes.append(.file(binding.name))
            case .fileDeleted(let name):
                // Whether anything refers to the file was read from the whole reference index.
                everything = true
                writes.append(.file(name))
            }
        }
        return ProposedWrite(
            events: events, reads: ConflictKey.sortedUnique(consume reads),
            writes: ConflictKey.sortedUnique(consume writes),
            readsEverything: everything,
            local: outcome)
    }

    /// An object event read the object, the catalog (schema, views) and the unique keys it claims;
    /// a delete read who refers to the object, an update of owning fields who refers to what it
    /// releases. It changed the object, its unique claims and the referrers of what it refers to.
    private func objectKeys(
        _ applied: Applied, collection: String, id: String, reads: inout [ConflictKey], writes: inout [ConflictKey]
    ) throws {
        let object = ConflictKey.object(collection, id)
        reads.append(object)
        writes.append(object)
        reads.append(.catalog)
        for view in try store.applier.catalog.views(on: collection, txn) where view.definition.unique {
            let index = view.index
            if let after = applied.object, index.constrainsUniqueness(after), let key = try index.key(for: after) {
                let claim = ConflictKey.unique(index.name, index.uniqueTuple(of: key, id: after.id))
                reads.append(claim)
                writes.append(claim)
            }
            if let before = applied.before, index.constrainsUniqueness(before), let key = try index.key(for: before) {
                writes.append(.unique(index.name, index.uniqueTuple(of: key, id: before.id)))
            }
        }
        let referencedBefore = applied.before.map { Reference.all(in: $0.data) } ?? []
        let referencedAfter = applied.object.map { Reference.all(in: $0.data) } ?? []
        // Most records refer to nothing: no sets made for them.
        if !referencedBefore.isEmpty || !referencedAfter.isEmpty {
            for reference in Set(referencedBefore).symmetricDifference(Set(referencedAfter)) {
                writes.append(.referrers(reference.collection, reference.id))
            }
        }
        switch applied.event.change {
        case .deleted:
            reads.append(.referrers(collection, id))
        case .updated:
            if let schema = try store.applier.catalog.schema(collection, txn), schema.hasOwningFields {
                for reference in referencedBefore where schema.rules(at: reference.path)?.owns == true {
                    reads.append(.referrers(reference.collection, reference.id))
                }
            }
        default:
            break
        }
    }
}
