import FolioJSON
import FolioModel
import LMDB

/// The append-only log: sequence → chain hash + canonical event bytes.
struct EventLog {
    let database: Database

    struct Head: Equatable {
        var sequence: UInt64
        var hash: ChainHash

        static let empty = Head(sequence: 0, hash: .genesis)
    }

    /// The last event's sequence and chain hash.
    func head(_ txn: Transaction) throws -> Head {
        try txn.withCursor(database) { cursor in
            guard let (key, value) = try cursor.last() else { return .empty }
            return Head(sequence: Keys.sequence(from: key), hash: try Self.hash(of: value))
        }
    }

    /// Appends the event after `head`, returning the new head.
    func append(_ canonicalBytes: [UInt8], after head: Head, _ txn: Transaction) throws -> Head {
        let hash = head.hash.next(canonicalBytes)
        let sequence = head.sequence + 1
        // Hash and event written where LMDB keeps the record: not assembled in an array first.
        try withUnsafeBytes(of: sequence.bigEndian) { key in
            try txn.put(database, key, reserving: ChainHash.size + canonicalBytes.count, flags: .append) { record in
                hash.bytes.withUnsafeBytes { record.copyMemory(from: $0) }
                canonicalBytes.withUnsafeBytes {
                    UnsafeMutableRawBufferPointer(rebasing: record[ChainHash.size...]).copyMemory(from: $0)
                }
            }
        }
        return Head(sequence: sequence, hash: hash)
    }

    static func hash(of record: UnsafeRawBufferPointer) throws -> ChainHash {
        guard record.count > ChainHash.size else { throw StoreError.corrupted("event record of \(record.count) bytes") }
        return ChainHash(bytes: Array(record[..<ChainHash.size]))
    }

    static func canonicalBytes(of record: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: record[ChainHash.size...])
    }

    func record(_ sequence: UInt64, _ txn: Transaction) throws -> UnsafeRawBufferPointer? {
        try txn.get(database, Keys.sequence(sequence))
    }

    func event(_ sequence: UInt64, _ txn: Transaction) throws -> Event? {
        guard let record = try record(sequence, txn) else { return nil }
        return try Self.decode(record, sequence: sequence)
    }

    static func decode(_ record: UnsafeRawBufferPointer, sequence: UInt64) throws -> Event {
        try decodeWithData(record, sequence: sequence).event
    }

    /// The event, and a created object's data as the canonical JSON it is stored in.
    static func decodeWithData(_ record: UnsafeRawBufferPointer, sequence: UInt64) throws -> (
        event: Event, data: [UInt8]?
    ) {
        do {
            let bytes = canonicalBytes(of: record)
            var dataRange: Range<Int>?
            let event = try Event(decoding: bytes, dataRange: &dataRange, checkingData: false)
            guard event.sequence == sequence else {
                throw StoreError.corrupted("event \(sequence) says it is \(event.sequence)")
            }
            return (event, dataRange.map { Array(UnsafeRawBufferPointer(rebasing: bytes[$0])) })
        } catch let error as ValidationError {
            throw StoreError.corrupted("event \(sequence) does not decode: \(error.message)")
        }
    }

    /// When a stored event was accepted, read from the head of its canonical bytes
    /// (`{"seq":N,"type":"...","at":"<24 bytes>"`) without decoding the rest.
    static func timestamp(of record: UnsafeRawBufferPointer, sequence: UInt64) throws -> Timestamp {
        let bytes = canonicalBytes(of: record)
        let marker = Array(",\"at\":\"".utf8)
        let window = min(bytes.count, 96)
        var start = 0
        while start + marker.count <= window {
            if bytes[start] == marker[0] && bytes[start..<(start + marker.count)].elementsEqual(marker) { break }
            start += 1
        }
        let textStart = start + marker.count
        guard textStart + 24 <= bytes.count,
            let timestamp = Timestamp(
                rfc3339: String(
                    decoding: UnsafeRawBufferPointer(rebasing: bytes[textStart..<(textStart + 24)]), as: UTF8.self))
        else { throw StoreError.corrupted("event \(sequence) has no readable \"at\" near its start") }
        return timestamp
    }

    /// The collection a stored event belongs to, read from the head of its canonical bytes: an
    /// object event's, a view definition's, a schema event's; nil for a dropped view.
    static func collection(ofRecord record: UnsafeRawBufferPointer) -> String? {
        collection(ofCanonical: canonicalBytes(of: record))
    }

    /// `collection(ofRecord:)` of an event's canonical bytes.
    static func collection(ofCanonical bytes: UnsafeRawBufferPointer) -> String? {
        let marker = Array("\"collection\":\"".utf8)
        let window = min(bytes.count, 240)
        var start = 0
        while start + marker.count <= window {
            if bytes[start] == marker[0] && bytes[start..<(start + marker.count)].elementsEqual(marker) {
                var end = start + marker.count
                while end < bytes.count && bytes[end] != UInt8(ascii: "\"") { end += 1 }
                return String(
                    decoding: UnsafeRawBufferPointer(rebasing: bytes[(start + marker.count)..<end]), as: UTF8.self)
            }
            start += 1
        }
        return nil
    }

    /// Calls `body` with each record after `sequence`, in order, until it returns false.
    func forEach(after sequence: UInt64, _ txn: Transaction, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Bool)
        throws
    {
        try txn.withCursor(database) { cursor in
            var entry = try cursor.seek(atLeast: Keys.sequence(sequence &+ 1))
            if sequence == UInt64.max { entry = nil }
            while let (key, value) = entry {
                guard try body(Keys.sequence(from: key), value) else { return }
                entry = try cursor.next()
            }
        }
    }

    /// The wire form of a stored event: its canonical JSON with `"hash"` added at the end.
    static func writeWireForm(_ record: UnsafeRawBufferPointer, to writer: inout JSONWriter) throws {
        guard record.count > ChainHash.size + 2 else {
            throw StoreError.corrupted("event record of \(record.count) bytes")
        }
        // The stored hash's bytes, written as hex in place: no `ChainHash` or `String` per event (a
        // tenth of an export's time in foliod).
        writeWireForm(
            canonical: canonicalBytes(of: record), hash: UnsafeRawBufferPointer(rebasing: record[..<ChainHash.size]),
            to: &writer)
    }

    static func writeWireForm(canonical: UnsafeRawBufferPointer, hash: ChainHash, to writer: inout JSONWriter) {
        hash.bytes.withUnsafeBytes { writeWireForm(canonical: canonical, hash: $0, to: &writer) }
    }

    private static func writeWireForm(
        canonical: UnsafeRawBufferPointer, hash: UnsafeRawBufferPointer, to writer: inout JSONWriter
    ) {
        writer.bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: canonical[..<(canonical.count - 1)]))
        writer.writeRaw(",\"hash\":\"")
        appendHexDigits(of: hash, to: &writer.bytes)
        writer.writeRaw("\"}")
    }
}
