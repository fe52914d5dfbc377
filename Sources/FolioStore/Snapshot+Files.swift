import FolioModel

extension Snapshot {
    /// Names an orphan page examines at most: a page may be short, even empty, with a `next`.
    public static let orphanExamineLimit = 10_000

    /// The file bound to `name`, if any.
    public func file(_ name: String) throws -> FileRecord? { try store.applier.files.file(name, txn) }

    /// Up to `limit` files whose names start with `prefix`, after `after`, in bytewise name order,
    /// and the name to continue after (nil at the end): O(log n + limit).
    public func files(prefix: String, after: String?, limit: Int) throws -> (files: [FileRecord], next: String?) {
        try store.applier.files.page(prefix: prefix, after: after, limit: limit, txn)
    }

    /// Up to `limit` of the records that refer to the file by `{"$file"}`, by collection, field
    /// path and id, and how many refer to it in all: O((limit + 1) log n).
    public func fileReferrers(_ name: String, limit: Int) throws -> (referrers: [Referrer], total: Int) {
        try store.applier.references.referrers(of: FileName.collection, name, limit: limit, storeTxn)
    }

    /// Up to `limit` files that no record refers to, bound at `createdBy` or before, whose names
    /// start with `prefix`, after `after`; and the name to continue after (nil at the end).
    /// Examines at most `orphanExamineLimit` names, one seek of the reference index each:
    /// O(examined log n), whatever the number of records.
    public func fileOrphans(prefix: String, after: String?, createdBy cutoff: Timestamp, limit: Int) throws
        -> (files: [FileRecord], next: String?)
    {
        let references = store.applier.references
        return try store.applier.files.page(
            prefix: prefix, after: after, limit: limit, examining: Self.orphanExamineLimit,
            where: { file in
                guard file.createdAt <= cutoff else { return false }
                return try !references.isReferenced(FileName.collection, file.name, storeTxn)
            }, txn)
    }

    /// Names using the content with this hash.
    public func fileReferences(toBlob sha256: String) throws -> UInt64 {
        try store.applier.files.references(toBlob: sha256, txn)
    }

    public func fileTotals() throws -> FileTotals { try store.applier.files.totals(txn) }

    /// Every content a name refers to, in hash order, with its size.
    public func forEachBlob(_ body: (_ sha256: String, _ size: UInt64) throws -> Void) throws {
        try store.applier.files.forEachBlob(txn, body)
    }

    /// Up to `limit` names bound to each of `blobs`, in name order: O(files).
    public func fileNames(boundTo blobs: Set<String>, limit: Int) throws -> [String: [String]] {
        try store.applier.files.names(boundTo: blobs, limit: limit, txn)
    }
}
