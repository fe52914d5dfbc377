import FolioModel

extension Snapshot {
    /// The file bound to `name`, if any.
    public func file(_ name: String) throws -> FileRecord? { try store.applier.files.file(name, txn) }

    /// Up to `limit` files whose names start with `prefix`, after `after`, in bytewise name order,
    /// and whether more follow: O(log n + limit).
    public func files(prefix: String, after: String?, limit: Int) throws -> (files: [FileRecord], more: Bool) {
        try store.applier.files.page(prefix: prefix, after: after, limit: limit, txn)
    }

    /// Names using the content with this hash.
    public func fileReferences(toBlob sha256: String) throws -> UInt64 { try store.applier.files.references(toBlob: sha256, txn) }

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
