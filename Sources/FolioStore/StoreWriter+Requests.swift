import FolioJSON
import FolioModel
import LMDB

/// Request keys: a write sent again with the key of one already done (within the retention) is
/// answered with that one's result, rebuilt from its events, and writes nothing.
extension StoreWriter {
    /// SHA-256 of the command's canonical JSON: a retry must ask for the same thing.
    static func digest(of command: Command) -> [UInt8] {
        let hasher = SHA256Hasher()
        command.canonicalJSON.serialized().withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// Writes the request's key into its last event, which the log then holds in place of the one
    /// appended: the key, the digest, how many events the request made and, for a batch that is not
    /// atomic, which ops failed.
    func recordRequest(key: String, digest: [UInt8], in outcome: inout WriteOutcome, _ txn: StoreTransaction) throws {
        let last = outcome.appended[outcome.appended.count - 1]
        var failed: [Event.RequestRecord.Failure] = []
        if case .batch(let items) = outcome.result {
            for (index, item) in items.enumerated() {
                if case .failure(let error) = item {
                    failed.append(
                        .init(index: index, code: error.code, message: error.description, details: error.details))
                }
            }
        }
        var event = last.event
        event.request = Event.RequestRecord(
            key: key, digest: ChainHash(bytes: digest).hex, events: outcome.appended.count, failed: failed)
        let amended = try amendLastEvent(event, txn)
        outcome.appended[outcome.appended.count - 1] = Applied(
            event: event, chainHash: amended.hash, object: last.object, before: last.before, record: last.record,
            viewCount: last.viewCount,
            canonicalEvent: amended.canonical, canonicalParts: (amended.headEnd, amended.cause))
    }

    /// Replaces the log's last event (appended by this transaction) with `event`, which differs only
    /// in what it records of its request, and enters that in the request index.
    private func amendLastEvent(_ event: Event, _ txn: StoreTransaction) throws -> (
        canonical: [UInt8], hash: ChainHash, headEnd: Int, cause: Range<Int>?
    ) {
        let log = EventLog(database: store.databases.events)
        precondition(event.sequence == lastSequence, "only the last event can be amended")
        let previous =
            event.sequence == 1
            ? ChainHash.genesis : try log.record(event.sequence - 1, txn.lmdb).map(EventLog.hash) ?? .genesis
        let (canonical, _, headEnd, cause) = event.encodedWithData()
        let hash = previous.next(canonical)
        try txn.lmdb.put(store.databases.events, Keys.sequence(event.sequence), hash.bytes + canonical)
        setHead(EventLog.Head(sequence: event.sequence, hash: hash))
        try store.applier.requests.apply(event, txn.lmdb)
        return (canonical, hash, headEnd, cause)
    }

    /// The first request's outcome, from its events: the objects as its events left them, the
    /// deletes, the failures a batch recorded.
    func replay(_ entry: RequestIndex.Entry, of command: Command) throws -> WriteOutcome {
        let log = EventLog(database: store.databases.events)
        var events: [Event] = []
        for sequence in entry.firstSequence...entry.lastSequence {
            guard let event = try log.event(sequence, txn.lmdb) else {
                throw StoreError.corrupted("the request index names event \(sequence), which the log lacks")
            }
            events.append(event)
        }
        let own = events.filter { $0.cause == nil }
        let result: WriteResult
        if case .batch(let operations, _) = command {
            let failures = Dictionary(
                (events.last?.request?.failed ?? []).map { ($0.index, $0) }, uniquingKeysWith: { first, _ in first })
            var items: [WriteResult.BatchItem] = []
            var next = own.makeIterator()
            for index in operations.indices {
                if let failure = failures[index] {
                    items.append(
                        .failure(.recorded(code: failure.code, message: failure.message, details: failure.details)))
                } else {
                    guard let event = next.next() else {
                        throw StoreError.corrupted("request \(entry.lastSequence) has fewer events than ops")
                    }
                    items.append(.success(try replayedResult(of: event)))
                }
            }
            result = .batch(items)
        } else {
            guard let event = own.first else {
                throw StoreError.corrupted("request \(entry.lastSequence) has no event of its own")
            }
            result = try replayedResult(of: event)
        }
        return WriteOutcome(appended: [], result: result, replayed: true, replayedThrough: entry.lastSequence)
    }

    private func replayedResult(of event: Event) throws -> WriteResult {
        switch event.change {
        case .deleted(_, let id):
            return .deleted(id: id, version: event.version)
        case .created(let collection, let id, _), .updated(let collection, let id, _, _):
            let log = EventLog(database: store.databases.events)
            guard
                let object = try store.applier.history.state(
                    collection, id, through: event.sequence, log: log, txn.lmdb)
            else {
                throw StoreError.corrupted("event \(event.sequence) leaves no \(collection)/\(id)")
            }
            var writer = JSONWriter(capacity: 256)
            object.write(to: &writer)
            return .object(wire: writer.bytes)
        default:
            throw StoreError.corrupted("a request key names event \(event.sequence), a \(event.typeName) event")
        }
    }
}
