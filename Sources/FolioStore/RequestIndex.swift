import FolioModel
import LMDB

/// The request keys of recent writes, so that a retried write gets its first result again instead
/// of being applied twice. Derived from the log: the last event of a write sent with a
/// `requestKey` records the key, and the applier enters it here and forgets keys whose write was
/// accepted more than `retention` before the event it applies. So the index depends only on the log
/// and the retention.
///
/// Keys of the `requests` database: `k` key → last sequence (u64), events (u32), accepted (i64 ms),
/// digest (32 bytes); `t` accepted (u64 big-endian, offset by 2^63) key → nothing, in expiry order.
struct RequestIndex {
    struct Entry: Equatable {
        /// The request's events are `lastSequence - events + 1 ... lastSequence`.
        let lastSequence: UInt64
        let events: Int
        let accepted: Timestamp
        let digest: [UInt8]

        var firstSequence: UInt64 { lastSequence - UInt64(events) + 1 }
    }

    let database: Database
    /// How long a key is remembered, in milliseconds of event time.
    let retention: Int64

    private static func entryKey(_ key: String) -> [UInt8] { [UInt8(ascii: "k")] + Array(key.utf8) }

    private static func expiryKey(_ accepted: Timestamp, _ key: String) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "t")]
        withUnsafeBytes(of: (UInt64(bitPattern: accepted.milliseconds) ^ (1 << 63)).bigEndian) {
            bytes.append(contentsOf: $0)
        }
        bytes.append(contentsOf: key.utf8)
        return bytes
    }

    /// The entry of `key`, unless it is unknown or expired as of `now`.
    func entry(_ key: String, now: Timestamp, _ txn: Transaction) throws -> Entry? {
        guard let record = try txn.get(database, Self.entryKey(key)) else { return nil }
        guard record.count == 52 else { throw StoreError.corrupted("request key record of \(record.count) bytes") }
        let entry = Entry(
            lastSequence: record.loadLittleEndian(UInt64.self, at: 0),
            events: Int(record.loadLittleEndian(UInt32.self, at: 8)),
            accepted: Timestamp(milliseconds: record.loadLittleEndian(Int64.self, at: 12)),
            digest: Array(record[20..<52]))
        return now.milliseconds - entry.accepted.milliseconds > retention ? nil : entry
    }

    /// Applies an event: forgets the keys that expired by its time, then enters its own.
    func apply(_ event: Event, _ txn: Transaction) throws {
        try forgetExpired(before: event.timestamp, txn)
        guard let request = event.request else { return }
        guard let digest = ChainHash(hex: request.digest)?.bytes else {
            throw StoreError.corrupted("event \(event.sequence) records a request digest that is not 64 hex digits")
        }
        if let old = try txn.get(database, Self.entryKey(request.key)), old.count == 52 {
            let accepted = Timestamp(milliseconds: old.loadLittleEndian(Int64.self, at: 12))
            try txn.delete(database, Self.expiryKey(accepted, request.key))
        }
        var record: [UInt8] = []
        record.appendLittleEndian(event.sequence)
        record.appendLittleEndian(UInt32(request.events))
        record.appendLittleEndian(event.timestamp.milliseconds)
        record.append(contentsOf: digest)
        try txn.put(database, Self.entryKey(request.key), record)
        try txn.put(database, Self.expiryKey(event.timestamp, request.key), [])
    }

    private func forgetExpired(before now: Timestamp, _ txn: Transaction) throws {
        // Every event looks, most find nothing: the limit (`expiryKey(now - retention, "")`) is
        // made on the stack, so that looking costs a seek and no allocation.
        let expired: [[UInt8]] = try withUnsafeTemporaryAllocation(byteCount: 9, alignment: 1) { buffer in
            buffer[0] = UInt8(ascii: "t")
            buffer.storeBytes(
                of: (UInt64(bitPattern: now.milliseconds - retention) ^ (1 << 63)).bigEndian, toByteOffset: 1,
                as: UInt64.self)
            let limit = UnsafeRawBufferPointer(buffer)
            var expired: [[UInt8]] = []
            try txn.withCursor(database) { cursor in
                var entry = try cursor.seek(atLeast: UnsafeRawBufferPointer(rebasing: limit[..<1]))
                while let (key, _) = entry, key.first == UInt8(ascii: "t"),
                    compareBytes(UnsafeRawBufferPointer(rebasing: key[..<min(9, key.count)]), limit) < 0
                {
                    expired.append(Array(key))
                    entry = try cursor.next()
                }
            }
            return expired
        }
        for key in expired {
            try txn.delete(database, key)
            try txn.delete(database, [UInt8(ascii: "k")] + Array(key[9...]))
        }
    }
}
