import FolioModel
import LMDB

/// Which events touched each object: `collection 0 id 0 sequence` → the version after the event,
/// in the objects database, right after the object's own record. Kept after an object is deleted,
/// so its history stays readable and a re-created object goes on from the last version.
///
/// Every update that brings an object to a version divisible by `checkpointInterval` stores the
/// whole object record (version first, as in `ObjectTable`) instead of the version alone: the state
/// at any point is then one seek plus at most `checkpointInterval` events folded, whatever the
/// number of versions.
struct HistoryIndex {
    static let checkpointInterval: UInt64 = 16

    let database: Database

    static func isCheckpoint(version: UInt64, _ change: Event.Change) -> Bool {
        guard case .updated = change else { return false }
        return version % checkpointInterval == 0
    }

    /// `checkpoint`: the object record after the event, for a checkpoint version.
    func record(
        _ collection: String, _ id: String, sequence: UInt64, version: UInt64, checkpoint: [UInt8]? = nil,
        _ txn: Transaction
    )
        throws
    {
        try Keys.withHistoryKey(collection, id, sequence) { key in
            if let checkpoint {
                try checkpoint.withUnsafeBytes { try txn.put(database, key, $0) }
            } else {
                try withUnsafeBytes(of: version.littleEndian) { try txn.put(database, key, $0) }
            }
        }
    }

    /// Calls `body` with the sequence of each event of the object after `after`, oldest first, until
    /// it returns false. O(log n) to the first, then O(1) each.
    func forEachSequence(
        _ collection: String, _ id: String, after: UInt64, _ txn: Transaction, _ body: (UInt64) throws -> Bool
    ) throws {
        let prefix = Keys.historyPrefix(collection, id)
        try txn.withCursor(database) { cursor in
            guard after < UInt64.max else { return }
            var entry = try cursor.seek(atLeast: prefix + Keys.sequence(after + 1))
            while let (key, _) = entry, key.count == prefix.count + 8, key.starts(with: prefix) {
                guard try body(Keys.sequence(from: UnsafeRawBufferPointer(rebasing: key[prefix.count...]))) else {
                    return
                }
                entry = try cursor.next()
            }
        }
    }

    /// Whether any event ever touched the object.
    func exists(_ collection: String, _ id: String, _ txn: Transaction) throws -> Bool {
        var found = false
        try forEachSequence(collection, id, after: 0, txn) { _ in
            found = true
            return false
        }
        return found
    }

    /// The object as it was after its last event with sequence ≤ `last`, nil if it did not exist
    /// then: one seek, then back to the nearest checkpoint, create or delete (at most
    /// `checkpointInterval` entries), whose events are folded forward.
    func state(_ collection: String, _ id: String, through last: UInt64, log: EventLog, _ txn: Transaction) throws
        -> StoredObject?
    {
        let prefix = Keys.historyPrefix(collection, id)
        var updates: [Event] = []
        var base: StoredObject?
        try txn.withCursor(database) { cursor in
            var entry = try cursor.seek(atMost: prefix + Keys.sequence(last))
            while let (key, value) = entry, key.count == prefix.count + 8, key.starts(with: prefix) {
                if value.count > 8 {
                    base = try ObjectTable.decode(value, collection: collection, id: id)
                    return
                }
                let sequence = Keys.sequence(from: UnsafeRawBufferPointer(rebasing: key[prefix.count...]))
                guard let event = try log.event(sequence, txn) else {
                    throw StoreError.corrupted("history names event \(sequence), which the log lacks")
                }
                guard case .updated = event.change else {
                    base = try Self.fold(event, onto: nil)
                    return
                }
                guard updates.count < Self.checkpointInterval else {
                    throw StoreError.corrupted(
                        "history of \(collection)/\(id) has no checkpoint before event \(sequence)")
                }
                updates.append(event)
                entry = try cursor.previous()
            }
        }
        return try updates.reversed().reduce(base) { object, event in try Self.fold(event, onto: object) }
    }

    private static func fold(_ event: Event, onto object: StoredObject?) throws -> StoredObject? {
        do { return try event.applied(to: object) } catch {
            throw StoreError.corrupted(
                "event \(event.sequence) does not apply to the object's history: \(error.message)")
        }
    }

    /// For a create: whether `collection/id` has a record now and, when it has none, the last version
    /// it had (0: it never existed). The record and its history lie together in the objects
    /// database, the record first, so a new id (the common case) takes one seek: where a record and
    /// a history lookup took a get and a seek back.
    func createState(_ collection: String, _ id: String, _ txn: Transaction) throws -> (
        exists: Bool, lastVersion: UInt64
    ) {
        enum Found { case nothing, record, history }
        let found: Found = try Keys.withObjectKey(collection, id) { key in
            try txn.withCursor(database) { cursor in
                guard let (first, _) = try cursor.seek(atLeast: key) else { return .nothing }
                if sameBytes(first, key) { return .record }
                // `key 0 sequence`: a history entry of this object (an id holds no 0 byte, so no
                // other object's key starts so).
                if first.count == key.count + 9, sameBytes(UnsafeRawBufferPointer(rebasing: first[..<key.count]), key),
                    first[key.count] == 0
                {
                    return .history
                }
                return .nothing
            }
        }
        switch found {
        case .nothing: return (false, 0)
        case .record: return (true, 0)
        case .history: return (false, try lastVersion(collection, id, txn))
        }
    }

    /// The version after the object's latest event, 0 if it never existed.
    func lastVersion(_ collection: String, _ id: String, _ txn: Transaction) throws -> UInt64 {
        let prefix = Keys.historyPrefix(collection, id)
        return try txn.withCursor(database) { cursor in
            guard let (key, value) = try cursor.seek(atMost: prefix + [UInt8](repeating: 0xFF, count: 8)),
                key.count == prefix.count + 8, key.starts(with: prefix)
            else { return 0 }
            return try value.leadingLittleEndian(UInt64.self, of: "the history entry of \(collection)/\(id)")
        }
    }
}
