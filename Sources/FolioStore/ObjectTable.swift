import FolioJSON
import FolioModel
import LMDB

/// Current state: one record per live object, `collection 0 id` →
/// version u64, createdAt i64, updatedAt i64 (little-endian, ms), createdAt and updatedAt again as
/// RFC 3339 text (24 bytes each, so reads copy them instead of formatting them), then the data as
/// canonical JSON.
struct ObjectTable {
    static let headerSize = 72
    static let timestampTextSize = 24

    let database: Database

    func get(_ collection: String, _ id: String, _ txn: Transaction) throws -> StoredObject? {
        guard let record = try record(collection, id, txn) else { return nil }
        return try Self.decode(record, collection: collection, id: id)
    }

    /// The stored bytes, valid inside `txn` only.
    func record(_ collection: String, _ id: String, _ txn: Transaction) throws -> UnsafeRawBufferPointer? {
        try Keys.withObjectKey(collection, id) { key in try txn.get(database, key) }
    }

    /// The record under a key `Keys.object` made (a page reuses one buffer for its keys).
    func record(key: UnsafeRawBufferPointer, _ txn: Transaction) throws -> UnsafeRawBufferPointer? {
        try txn.get(database, key)
    }

    /// `record`: as `encode` makes it.
    func put(record: [UInt8], _ collection: String, _ id: String, _ txn: Transaction) throws {
        try Keys.withObjectKey(collection, id) { key in
            try record.withUnsafeBytes { record in try txn.put(database, key, record) }
        }
    }

    func delete(_ collection: String, _ id: String, _ txn: Transaction) throws {
        try Keys.withObjectKey(collection, id) { key in _ = try txn.delete(database, key) }
    }

    /// Calls `body` with every object of `collection` in id order until it returns false.
    func forEach(in collection: String, _ txn: Transaction, _ body: (StoredObject) throws -> Bool) throws {
        let prefix = Keys.collectionPrefix(collection)
        try txn.withCursor(database) { cursor in
            var entry = try Self.skippingHistory(cursor.seek(atLeast: prefix), cursor)
            while let (key, value) = entry, key.starts(with: prefix) {
                let id = String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self)
                guard try body(try Self.decode(value, collection: collection, id: id)) else { return }
                entry = try Self.skippingHistory(cursor.next(), cursor)
            }
        }
    }

    /// History entries a scan steps over one by one before it seeks past the rest of an object's.
    static let historyStepsBeforeSeeking = 4

    /// `entry` if it is an object, otherwise the next object entry of the objects database: a
    /// scan of current state costs a seek per object, not a step per version (an object updated a
    /// million times has a million history entries between it and the next).
    static func skippingHistory(_ entry: Cursor.Entry?, _ cursor: Cursor) throws -> Cursor.Entry? {
        var entry = entry
        var steps = 0
        while let (key, _) = entry, Keys.isHistory(key) {
            if steps < historyStepsBeforeSeeking {
                steps += 1
                entry = try cursor.next()
            } else {
                steps = 0
                entry = try cursor.seek(atLeast: Keys.pastHistory(of: key))
            }
        }
        return entry
    }

    /// `serializedData`: the data's canonical JSON, when known.
    static func encode(_ object: StoredObject, serializedData: ArraySlice<UInt8>? = nil) -> [UInt8] {
        var bytes: [UInt8] = []
        // Allocated once: exactly, when the data's bytes are known.
        bytes.reserveCapacity(headerSize + (serializedData?.count ?? 128))
        bytes.appendLittleEndian(object.version)
        bytes.appendLittleEndian(object.createdAt.milliseconds)
        bytes.appendLittleEndian(object.updatedAt.milliseconds)
        object.createdAt.instant.appendRFC3339Milliseconds(to: &bytes)
        object.updatedAt.instant.appendRFC3339Milliseconds(to: &bytes)
        precondition(bytes.count == headerSize, "timestamps outside years 0000-9999")
        if let serializedData {
            bytes.append(contentsOf: serializedData)
            return bytes
        }
        var writer = JSONWriter(capacity: 0)
        swap(&writer.bytes, &bytes)
        writer.write(object.data)
        return writer.bytes
    }

    struct Header {
        let version: UInt64
        let createdAt: Timestamp
        let updatedAt: Timestamp
    }

    static func header(of record: UnsafeRawBufferPointer) throws -> Header {
        guard record.count >= headerSize + 2 else {
            throw StoreError.corrupted("object record of \(record.count) bytes")
        }
        return Header(
            version: record.loadLittleEndian(UInt64.self, at: 0),
            createdAt: Timestamp(milliseconds: record.loadLittleEndian(Int64.self, at: 8)),
            updatedAt: Timestamp(milliseconds: record.loadLittleEndian(Int64.self, at: 16)))
    }

    static func data(of record: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: record[headerSize...])
    }

    static func decode(_ record: UnsafeRawBufferPointer, collection: String, id: String) throws -> StoredObject {
        let header = try header(of: record)
        guard case .object(let data) = try? JSONParser.parse(Self.data(of: record)) else {
            throw StoreError.corrupted("object \(collection)/\(id) holds data that is not a JSON object")
        }
        return StoredObject(
            collection: collection, id: id, version: header.version, createdAt: header.createdAt,
            updatedAt: header.updatedAt,
            data: data)
    }

    /// Writes the object's wire form straight from its record, without parsing the data or formatting
    /// its timestamps.
    static func writeWireForm(
        _ record: UnsafeRawBufferPointer, collection: String, id: String, to writer: inout JSONWriter
    ) throws {
        var collectionText = collection
        var idText = id
        let plain = try collectionText.withUTF8 { collection in
            try idText.withUTF8 { id in
                // Valid names need no escaping (Names.validateCollection, validateID): their bytes are their JSON.
                guard Names.areIDBytes(UnsafeRawBufferPointer(collection)), Names.areIDBytes(UnsafeRawBufferPointer(id))
                else { return false }
                try writeWireForm(
                    record, plainCollection: UnsafeRawBufferPointer(collection), plainID: UnsafeRawBufferPointer(id),
                    to: &writer)
                return true
            }
        }
        guard !plain else { return }
        let header = try header(of: record)
        writer.writeRaw("{\"collection\":")
        writer.write(collection)
        writer.writeRaw(",\"id\":")
        writer.write(id)
        writer.appendChunk(capacity: systemFieldsCapacity) { putSystemFields(record, header, into: &$0) }
        appendData(record, to: &writer)
    }

    /// The wire form of an object whose collection and id need no escaping: their bytes are their JSON.
    static func writeWireForm(
        _ record: UnsafeRawBufferPointer, plainCollection collection: UnsafeRawBufferPointer,
        plainID id: UnsafeRawBufferPointer,
        to writer: inout JSONWriter
    ) throws {
        let header = try header(of: record)
        let fields = inlineFields(of: record)
        writer.appendChunk(capacity: collection.count + id.count + 24 + systemFieldsCapacity + fields.count) { chunk in
            chunk.put("{\"collection\":\"")
            chunk.put(collection)
            chunk.put("\",\"id\":\"")
            chunk.put(id)
            chunk.put(UInt8(ascii: "\""))
            putSystemFields(record, header, into: &chunk)
            chunk.put(fields)
        }
        if fields.isEmpty { appendData(record, to: &writer) }
    }

    /// The wire form after `head`, the object's `{"collection":...,"id":` as JSON, and `plainID`, its id
    /// if it needs no escaping (a page writes many objects of one collection). Without `plainID` the
    /// caller wrote the id after `head` already, and `head` is empty.
    static func writeWireForm(
        _ record: UnsafeRawBufferPointer, head: UnsafeRawBufferPointer, plainID: UnsafeRawBufferPointer?,
        to writer: inout JSONWriter
    ) throws {
        let header = try header(of: record)
        let fields = inlineFields(of: record)
        writer.appendChunk(capacity: head.count + (plainID?.count ?? 0) + 2 + systemFieldsCapacity + fields.count) {
            chunk in
            chunk.put(head)
            if let plainID {
                chunk.put(UInt8(ascii: "\""))
                chunk.put(plainID)
                chunk.put(UInt8(ascii: "\""))
            }
            putSystemFields(record, header, into: &chunk)
            chunk.put(fields)
        }
        if fields.isEmpty { appendData(record, to: &writer) }
    }

    /// What `appendData` appends, when it is small enough to go into the chunk of the fields before
    /// it (one append of the whole wire form instead of two, which a get and each object of a page
    /// notice); empty when it is not, or when there is nothing to append.
    private static func inlineFields(of record: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        let data = data(of: record)
        guard data.count > 2, data.count <= 512 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(rebasing: data[1...])
    }

    /// `,"version":N,"createdAt":"…","updatedAt":"…"` and the `,` before the data's fields (or the
    /// closing `}` when it has none): at most this many bytes.
    private static let systemFieldsCapacity = 12 + 20 + 15 + 24 + 15 + 24 + 1 + 1

    private static func putSystemFields(_ record: UnsafeRawBufferPointer, _ header: Header, into chunk: inout ByteChunk)
    {
        chunk.put(",\"version\":")
        chunk.put(decimal: header.version)
        chunk.put(",\"createdAt\":\"")
        chunk.put(UnsafeRawBufferPointer(rebasing: record[24..<48]))
        chunk.put("\",\"updatedAt\":\"")
        chunk.put(UnsafeRawBufferPointer(rebasing: record[48..<72]))
        chunk.put(UInt8(ascii: "\""))
        // The data is `{...}`: its fields follow the system fields.
        chunk.put(data(of: record).count > 2 ? UInt8(ascii: ",") : UInt8(ascii: "}"))
    }

    private static func appendData(_ record: UnsafeRawBufferPointer, to writer: inout JSONWriter) {
        let data = data(of: record)
        if data.count > 2 { writer.bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: data[1...])) }
    }
}
