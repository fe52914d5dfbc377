import FolioModel
import LMDB

extension Snapshot {
    /// SHA-256 over current state and every view, in key order: every object record, then each
    /// collection's creation order, then each view's definition and entries, then the reference
    /// index, each schema and the file index. Stores that hold the
    /// same objects and views have the same digest, however they were built (live, rebuilt,
    /// imported, restored from a backup).
    public func digest() throws -> ChainHash {
        let hasher = SHA256Hasher()
        func frame(_ bytes: some Collection<UInt8>) {
            var length = UInt32(bytes.count).bigEndian
            withUnsafeBytes(of: &length) { hasher.update($0) }
            hasher.update(Array(bytes))
        }
        frame(Array("objects".utf8))
        try txn.withCursor(store.databases.objects) { cursor in
            var entry = try ObjectTable.skippingHistory(cursor.first(), cursor)
            while let (key, value) = entry {
                frame(key)
                frame(value)
                entry = try ObjectTable.skippingHistory(cursor.next(), cursor)
            }
        }
        for (name, tree) in try catalog.collections(storeTxn).sorted(by: { $0.name < $1.name }) {
            frame(Array("collection \(name)".utf8))
            try tree.forEach(storeTxn) { frame($0) }
        }
        for view in try catalog.allViews(storeTxn).sorted(by: { $0.definition.name < $1.definition.name }) {
            frame(Array("view".utf8))
            frame(view.definition.json.serialized())
            try view.tree.forEach(storeTxn) { frame($0) }
        }
        // Present only in stores that use them, so older stores keep their digest.
        if let references = try catalog.referenceTree(storeTxn, creating: false), try references.count(storeTxn) > 0 {
            frame(Array("references".utf8))
            try references.forEach(storeTxn) { frame($0) }
        }
        for schema in try catalog.allSchemas(storeTxn) {
            frame(Array("schema".utf8))
            frame(schema.json.serialized())
        }
        // The file index, every entry in key order; present only in stores that ever had a file.
        try txn.withCursor(store.databases.files) { cursor in
            var entry = try cursor.first()
            if entry != nil { frame(Array("files".utf8)) }
            while let (key, value) = entry {
                frame(key)
                frame(value)
                entry = try cursor.next()
            }
        }
        return ChainHash(bytes: hasher.finalize())
    }
}
