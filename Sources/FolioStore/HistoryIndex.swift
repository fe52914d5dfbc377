import LMDB

/// Which events touched each object: `collection 0 id 0 sequence` → the version after the event,
/// in the objects database, right after the object's own record. Kept after an object is deleted,
/// so its history stays readable and a re-created object goes on from the last version.
struct HistoryIndex {
    let database: Database

    func record(_ collection: String, _ id: String, sequence: UInt64, version: UInt64, _ txn: Transaction) throws {
        var value: [UInt8] = []
        value.appendLittleEndian(version)
        try txn.put(database, Keys.history(collection, id, sequence), value)
    }

    /// Sequence and version of every event of the object, oldest first, up to `sequence` if given.
    func entries(_ collection: String, _ id: String, through last: UInt64 = .max, _ txn: Transaction) throws
        -> [(sequence: UInt64, version: UInt64)]
    {
        let prefix = Keys.historyPrefix(collection, id)
        var entries: [(UInt64, UInt64)] = []
        try txn.withCursor(database) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let (key, value) = entry, key.count == prefix.count + 8, key.starts(with: prefix) {
                let sequence = Keys.sequence(from: UnsafeRawBufferPointer(rebasing: key[prefix.count...]))
                if sequence > last { break }
                entries.append((sequence, value.loadLittleEndian(UInt64.self, at: 0)))
                entry = try cursor.next()
            }
        }
        return entries
    }

    /// The version after the object's latest event, 0 if it never existed.
    func lastVersion(_ collection: String, _ id: String, _ txn: Transaction) throws -> UInt64 {
        let prefix = Keys.historyPrefix(collection, id)
        return try txn.withCursor(database) { cursor in
            guard let (key, value) = try cursor.seek(atMost: prefix + [UInt8](repeating: 0xFF, count: 8)),
                key.count == prefix.count + 8, key.starts(with: prefix)
            else { return 0 }
            return value.loadLittleEndian(UInt64.self, at: 0)
        }
    }
}
