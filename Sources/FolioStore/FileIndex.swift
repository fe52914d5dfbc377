import FolioModel
import LMDB

/// What a name is bound to, as `file.get` answers it.
public struct FileRecord: Sendable, Equatable {
    public let name: String
    /// 64 lowercase hex digits: the blob's name in the blob store.
    public let sha256: String
    public let size: UInt64
    public let contentType: String
    /// The time of the `file.put` event that bound the name.
    public let createdAt: Timestamp
    /// Who sent that `file.put`.
    public let uploader: UInt32
}

/// How much the file store holds: names, distinct contents, and the bytes of both.
public struct FileTotals: Sendable, Equatable {
    public var files: UInt64 = 0
    public var blobs: UInt64 = 0
    /// Bytes of the distinct contents the names refer to (each blob counted once).
    public var storedBytes: UInt64 = 0
    /// Bytes of every name's content (a blob counted once per name): less `storedBytes`, what
    /// deduplication saves.
    public var namedBytes: UInt64 = 0
    /// Names no record refers to by `{"$file"}`, whatever their age.
    public var orphans: UInt64 = 0

    public var savedBytes: UInt64 { namedBytes - storedBytes }
}

/// The file index, derived from the log: which name is bound to which content, and how many names
/// use each content. Applied in the same write transaction as the events. Which records refer to
/// a name is the reference index's (`RefIndex`); the count of orphans it keeps here, so that
/// `stats` reads it in O(1).
///
/// Keys of the `files` database: `n` name → sha256 (32 bytes), size (u64), createdAt (i64 ms),
/// uploader uid (u32), contentType; `b` sha256 → names using it (u64), size (u64); `t` → the totals
/// (files, blobs, stored bytes, named bytes, orphans: u64 each).
struct FileIndex {
    let database: Database

    private static let namePrefix = UInt8(ascii: "n")
    private static let totalsKey = [UInt8(ascii: "t")]

    static func nameKey(_ name: String) -> [UInt8] { [namePrefix] + Array(name.utf8) }

    private static func blobKey(_ sha256: [UInt8]) -> [UInt8] { [UInt8(ascii: "b")] + sha256 }

    func file(_ name: String, _ txn: Transaction) throws -> FileRecord? {
        guard let record = try txn.get(database, Self.nameKey(name)) else { return nil }
        return try Self.decode(name: name, record)
    }

    static func decode(name: String, _ record: UnsafeRawBufferPointer) throws -> FileRecord {
        guard record.count >= 52 else { throw StoreError.corrupted("file record of \(record.count) bytes") }
        return FileRecord(
            name: name, sha256: hexString(record[0..<32]), size: record.loadLittleEndian(UInt64.self, at: 32),
            contentType: String(decoding: record[52...], as: UTF8.self),
            createdAt: Timestamp(milliseconds: record.loadLittleEndian(Int64.self, at: 40)),
            uploader: record.loadLittleEndian(UInt32.self, at: 48))
    }

    /// Names using the content with this hash (0 for content no name refers to).
    func references(toBlob sha256: String, _ txn: Transaction) throws -> UInt64 {
        guard let digest = ChainHash(hex: sha256)?.bytes, let record = try txn.get(database, Self.blobKey(digest))
        else { return 0 }
        return try record.leadingLittleEndian(UInt64.self, of: "the reference count of content \(sha256)")
    }

    /// Every content some name refers to, in hash order, with its size: O(blobs).
    func forEachBlob(_ txn: Transaction, _ body: (_ sha256: String, _ size: UInt64) throws -> Void) throws {
        let prefix = [UInt8(ascii: "b")]
        try txn.withCursor(database) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let (key, value) = entry, key.first == prefix[0] {
                guard key.count == 33, value.count >= 16 else {
                    throw StoreError.corrupted("file index entry of \(key.count) and \(value.count) bytes")
                }
                try body(hexString(key.dropFirst()), value.loadLittleEndian(UInt64.self, at: 8))
                entry = try cursor.next()
            }
        }
    }

    /// Up to `limit` names bound to each of `blobs`, in name order: one pass over every name.
    func names(boundTo blobs: Set<String>, limit: Int, _ txn: Transaction) throws -> [String: [String]] {
        var names: [String: [String]] = [:]
        let prefix = [Self.namePrefix]
        try txn.withCursor(database) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let (key, value) = entry, key.first == Self.namePrefix {
                let sha256 = hexString(value.prefix(32))
                if blobs.contains(sha256), names[sha256, default: []].count < limit {
                    names[sha256, default: []].append(String(decoding: key.dropFirst(), as: UTF8.self))
                }
                entry = try cursor.next()
            }
        }
        return names
    }

    func totals(_ txn: Transaction) throws -> FileTotals {
        guard let record = try txn.get(database, Self.totalsKey) else { return FileTotals() }
        guard record.count == 40 else { throw StoreError.corrupted("file totals of \(record.count) bytes") }
        return FileTotals(
            files: record.loadLittleEndian(UInt64.self, at: 0), blobs: record.loadLittleEndian(UInt64.self, at: 8),
            storedBytes: record.loadLittleEndian(UInt64.self, at: 16),
            namedBytes: record.loadLittleEndian(UInt64.self, at: 24),
            orphans: record.loadLittleEndian(UInt64.self, at: 32))
    }

    private func save(_ totals: FileTotals, _ txn: Transaction) throws {
        var record: [UInt8] = []
        for value in [totals.files, totals.blobs, totals.storedBytes, totals.namedBytes, totals.orphans] {
            record.appendLittleEndian(value)
        }
        try txn.put(database, Self.totalsKey, record)
    }

    /// Up to `limit` files whose names start with `prefix`, sort after `after` (bytewise) and pass
    /// `filter`, looking at no more than `examining` names; and the name to continue after, nil
    /// when no name is left. With a filter a page may be short, even empty, while names are left.
    func page(
        prefix: String, after: String?, limit: Int, examining budget: Int = .max,
        where filter: ((FileRecord) throws -> Bool)? = nil,
        _ txn: Transaction
    ) throws -> (files: [FileRecord], next: String?) {
        let prefixKey = Self.nameKey(prefix)
        var start = prefixKey
        if let after, compareBytes(Self.nameKey(after), prefixKey) >= 0 { start = Self.nameKey(after) + [0] }
        var files: [FileRecord] = []
        var next: String?
        try txn.withCursor(database) { cursor in
            var entry = try cursor.seek(atLeast: start)
            var examined = 0
            var last: String?
            while let (key, value) = entry, key.starts(with: prefixKey) {
                if files.count == limit || examined == budget {
                    next = last
                    return
                }
                let file = try Self.decode(name: String(decoding: key.dropFirst(), as: UTF8.self), value)
                examined += 1
                if try filter?(file) ?? true { files.append(file) }
                last = file.name
                entry = try cursor.next()
            }
        }
        return (files, next)
    }

    /// Counts the names that `RefIndex.update` found gaining their first referrer or losing their
    /// last as orphans no more or again; names not bound do not count.
    func noteReferences(_ changes: [(name: String, referenced: Bool)], _ txn: Transaction) throws {
        guard !changes.isEmpty else { return }
        var totals = try self.totals(txn)
        for change in changes where try txn.get(database, Self.nameKey(change.name)) != nil {
            if change.referenced { totals.orphans -= 1 } else { totals.orphans += 1 }
        }
        try save(totals, txn)
    }

    /// Applies a file event; `referenced`: whether a record refers to the event's name. Throws
    /// `corrupted` when the event does not fit the index.
    func apply(_ event: Event, referenced: Bool, _ txn: Transaction) throws {
        var totals = try self.totals(txn)
        switch event.change {
        case .filePut(let binding):
            guard let digest = ChainHash(hex: binding.sha256)?.bytes else {
                throw StoreError.corrupted("event \(event.sequence) names content by \(binding.sha256)")
            }
            if let old = try file(binding.name, txn) {
                guard binding.replace else {
                    throw StoreError.corrupted(
                        "event \(event.sequence) binds file \(binding.name), which is bound, without replace")
                }
                try release(old, &totals, referenced: referenced, txn)
            }
            if !referenced { totals.orphans += 1 }
            var record: [UInt8] = digest
            record.appendLittleEndian(binding.size)
            record.appendLittleEndian(event.timestamp.milliseconds)
            record.appendLittleEndian(event.origin.uid)
            record.append(contentsOf: binding.contentType.utf8)
            try txn.put(database, Self.nameKey(binding.name), record)
            let users = try references(toBlob: binding.sha256, txn)
            if users == 0 {
                totals.blobs += 1
                totals.storedBytes += binding.size
            }
            var blob: [UInt8] = []
            blob.appendLittleEndian(users + 1)
            blob.appendLittleEndian(binding.size)
            try txn.put(database, Self.blobKey(digest), blob)
            totals.files += 1
            totals.namedBytes += binding.size
        case .fileDeleted(let name):
            guard let old = try file(name, txn) else {
                throw StoreError.corrupted("event \(event.sequence) deletes file \(name), which does not exist")
            }
            try txn.delete(database, Self.nameKey(name))
            try release(old, &totals, referenced: referenced, txn)
        default:
            return
        }
        try save(totals, txn)
    }

    /// Counts one name fewer for `old`'s content (forgetting the content when none is left), and
    /// one orphan fewer if no record refers to `old`'s name.
    private func release(_ old: FileRecord, _ totals: inout FileTotals, referenced: Bool, _ txn: Transaction) throws {
        guard let digest = ChainHash(hex: old.sha256)?.bytes else { return }
        let users = try references(toBlob: old.sha256, txn)
        guard users > 0 else { throw StoreError.corrupted("file \(old.name) names content no count holds") }
        if users == 1 {
            try txn.delete(database, Self.blobKey(digest))
            totals.blobs -= 1
            totals.storedBytes -= old.size
        } else {
            var blob: [UInt8] = []
            blob.appendLittleEndian(users - 1)
            blob.appendLittleEndian(old.size)
            try txn.put(database, Self.blobKey(digest), blob)
        }
        totals.files -= 1
        totals.namedBytes -= old.size
        if !referenced { totals.orphans -= 1 }
    }
}
