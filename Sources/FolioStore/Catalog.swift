import FolioJSON
import FolioModel
import Glibc
import LMDB
import Synchronization

/// Which trees exist: one per collection (its objects in creation order), one per view and one of
/// references; and each collection's schema.
///
/// Keys of the `catalog` database: `c` collection → tree id; `v` view → tree id + definition JSON;
/// `w` collection 0 view → nothing (the views of a collection); `r` → the reference tree's id;
/// `s` collection → schema JSON.
struct Catalog {
    let database: Database
    let meta: Database
    let definitions: DefinitionCache
    /// Each collection's views as committed, for the writes that follow (see `CommittedViews`).
    let committedViews = CommittedViews()

    /// A view as a write reads it: a class, so that passing the views of a collection to each of
    /// a write's objects costs a reference each, not a copy of every name and field of each.
    final class View: Sendable {
        let definition: ViewDefinition
        let tree: CountedTree
        /// What keeps its tree, made once with the view.
        let index: ViewIndex

        init(definition: ViewDefinition, tree: CountedTree) {
            self.definition = definition
            self.tree = tree
            index = ViewIndex(definition: definition, tree: tree)
        }
    }

    // MARK: Collections

    func collectionTree(_ collection: String, _ txn: StoreTransaction) throws -> CountedTree? {
        if let tree = txn.catalogMemo?.collectionTrees[collection] { return tree }
        if let memo = txn.readMemo {
            return try memo.collectionTree(collection) { try readCollectionTree(collection, txn) }
        }
        return try readCollectionTree(collection, txn)
    }

    private func readCollectionTree(_ collection: String, _ txn: StoreTransaction) throws -> CountedTree? {
        guard let record = try txn.lmdb.get(database, [UInt8(ascii: "c")] + Array(collection.utf8)) else { return nil }
        let tree = CountedTree(
            id: try record.leadingLittleEndian(UInt32.self, of: "the catalog's record of collection \(collection)"))
        txn.catalogMemo?.collectionTrees[collection] = tree
        return tree
    }

    func createCollectionTree(_ collection: String, _ txn: StoreTransaction) throws -> CountedTree {
        let tree = try CountedTree.create(id: try allocateTreeID(txn), txn)
        var value: [UInt8] = []
        value.appendLittleEndian(tree.id)
        try txn.lmdb.put(database, [UInt8(ascii: "c")] + Array(collection.utf8), value)
        return tree
    }

    /// Every collection that ever had an object, by name.
    func collections(_ txn: StoreTransaction) throws -> [(name: String, tree: CountedTree)] {
        var result: [(String, CountedTree)] = []
        try forEach(prefix: UInt8(ascii: "c"), txn) { name, value in
            let name = String(decoding: name, as: UTF8.self)
            result.append(
                (
                    name,
                    CountedTree(
                        id: try value.leadingLittleEndian(UInt32.self, of: "the catalog's record of collection \(name)")
                    )
                ))
        }
        return result
    }

    // MARK: References

    /// The tree of every reference held (`RefIndex`), created with the first one.
    func referenceTree(_ txn: StoreTransaction, creating: Bool) throws -> CountedTree? {
        if let tree = txn.catalogMemo?.referenceTree { return tree }
        if let memo = txn.readMemo {
            return try memo.referenceTree {
                try txn.lmdb.get(database, [UInt8(ascii: "r")]).map {
                    CountedTree(id: try $0.leadingLittleEndian(UInt32.self, of: "the catalog's record of references"))
                }
            }
        }
        if let record = try txn.lmdb.get(database, [UInt8(ascii: "r")]) {
            let tree = CountedTree(
                id: try record.leadingLittleEndian(UInt32.self, of: "the catalog's record of references"))
            txn.catalogMemo?.referenceTree = tree
            return tree
        }
        guard creating else { return nil }
        let tree = try CountedTree.create(id: try allocateTreeID(txn), txn)
        var value: [UInt8] = []
        value.appendLittleEndian(tree.id)
        try txn.lmdb.put(database, [UInt8(ascii: "r")], value)
        txn.catalogMemo?.referenceTree = tree
        return tree
    }

    // MARK: Schemas

    func schema(_ collection: String, _ txn: StoreTransaction) throws -> Schema? {
        if let memo = txn.catalogMemo?.schemas[collection] { return memo }
        let schema = try txn.lmdb.get(database, [UInt8(ascii: "s")] + Array(collection.utf8)).map(Self.decodeSchema)
        txn.catalogMemo?.schemas[collection] = .some(schema)
        return schema
    }

    func putSchema(_ schema: Schema, _ txn: StoreTransaction) throws {
        txn.catalogMemo?.forget()
        try txn.lmdb.put(database, [UInt8(ascii: "s")] + Array(schema.collection.utf8), schema.json.serialized())
    }

    func removeSchema(_ collection: String, _ txn: StoreTransaction) throws {
        txn.catalogMemo?.forget()
        try txn.lmdb.delete(database, [UInt8(ascii: "s")] + Array(collection.utf8))
    }

    func allSchemas(_ txn: StoreTransaction) throws -> [Schema] {
        var schemas: [Schema] = []
        try forEach(prefix: UInt8(ascii: "s"), txn) { _, value in schemas.append(try Self.decodeSchema(value)) }
        return schemas
    }

    private static func decodeSchema(_ bytes: UnsafeRawBufferPointer) throws -> Schema {
        do {
            return try Schema(parsing: try JSONParser.parse(bytes))
        } catch {
            throw StoreError.corrupted("stored schema does not parse: \(error)")
        }
    }

    // MARK: Views

    func view(_ name: String, _ txn: StoreTransaction) throws -> View? {
        if let memo = txn.readMemo { return try memo.view(name) { try readView(name, txn) } }
        return try readView(name, txn)
    }

    private func readView(_ name: String, _ txn: StoreTransaction) throws -> View? {
        guard let record = try txn.lmdb.get(database, [UInt8(ascii: "v")] + Array(name.utf8)) else { return nil }
        return try decodeView(record)
    }

    func views(on collection: String, _ txn: StoreTransaction) throws -> [View] {
        guard let memo = txn.catalogMemo else {
            if let readMemo = txn.readMemo {
                return try readMemo.views(on: collection) { try readViews(on: collection, txn) }
            }
            return try readViews(on: collection, txn)
        }
        if let views = memo.views[collection] { return views }
        // A write that has not changed the catalog sees the committed views.
        if !memo.changedViews, let views = committedViews.views(on: collection) {
            memo.views[collection] = views
            return views
        }
        let views = try readViews(on: collection, txn)
        memo.views[collection] = views
        if !memo.changedViews { committedViews.set(views, on: collection) }
        return views
    }

    private func readViews(on collection: String, _ txn: StoreTransaction) throws -> [View] {
        var names: [String] = []
        try forEach(prefix: UInt8(ascii: "w"), after: Array(collection.utf8) + [0], txn) { name, _ in
            names.append(String(decoding: name, as: UTF8.self))
        }
        return try names.map { name in
            guard let view = try view(name, txn) else {
                throw StoreError.corrupted("catalog lists view \(name) but lacks it")
            }
            return view
        }
    }

    func allViews(_ txn: StoreTransaction) throws -> [View] {
        var views: [View] = []
        try forEach(prefix: UInt8(ascii: "v"), txn) { _, value in views.append(try decodeView(value)) }
        return views
    }

    func addView(_ definition: ViewDefinition, _ txn: StoreTransaction) throws -> CountedTree {
        changingViews(txn)
        let tree = try CountedTree.create(id: try allocateTreeID(txn), buffered: true, txn)
        var value: [UInt8] = []
        value.appendLittleEndian(tree.id)
        value.append(contentsOf: definition.json.serialized())
        try txn.lmdb.put(database, [UInt8(ascii: "v")] + Array(definition.name.utf8), value)
        try txn.lmdb.put(database, viewListingKey(definition), [])
        return tree
    }

    func removeView(_ view: View, _ txn: StoreTransaction) throws {
        changingViews(txn)
        try view.tree.destroy(txn)
        try txn.lmdb.delete(database, [UInt8(ascii: "v")] + Array(view.definition.name.utf8))
        try txn.lmdb.delete(database, viewListingKey(view.definition))
    }

    /// Before a change to the views: what the write and the store knew of them goes.
    private func changingViews(_ txn: StoreTransaction) {
        txn.catalogMemo?.forget()
        txn.catalogMemo?.changedViews = true
        committedViews.removeAll()
    }

    private func viewListingKey(_ definition: ViewDefinition) -> [UInt8] {
        [UInt8(ascii: "w")] + Array(definition.collection.utf8) + [0] + Array(definition.name.utf8)
    }

    private func decodeView(_ record: UnsafeRawBufferPointer) throws -> View {
        let tree = CountedTree(id: try record.leadingLittleEndian(UInt32.self, of: "the catalog's record of a view"))
        return View(definition: try definitions.definition(UnsafeRawBufferPointer(rebasing: record[4...])), tree: tree)
    }

    /// Calls `body` with the rest of each key that starts with `tag` + `after`, and its value.
    private func forEach(
        prefix tag: UInt8, after: [UInt8] = [], _ txn: StoreTransaction,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let prefix = [tag] + after
        try txn.lmdb.withCursor(database) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let (key, value) = entry, key.starts(with: prefix) {
                try body(UnsafeRawBufferPointer(rebasing: key[prefix.count...]), value)
                entry = try cursor.next()
            }
        }
    }

    private func allocateTreeID(_ txn: StoreTransaction) throws -> UInt32 {
        let key = Array("nextTree".utf8)
        let next =
            try txn.lmdb.get(meta, key).map { try $0.leadingLittleEndian(UInt32.self, of: "the next tree id") } ?? 1
        var value: [UInt8] = []
        value.appendLittleEndian(next + 1)
        try txn.lmdb.put(meta, key, value)
        return next
    }
}

/// Parsed view definitions by their stored bytes: parsing a `where` on every write would cost more
/// than maintaining the view. Keyed by content, so an entry can never be stale.
final class DefinitionCache: Sendable {
    /// Definitions by the hash of their stored bytes (hashed as one block: an array of bytes hashes
    /// them one by one, a tenth of a view page's cost once), each beside the bytes it was parsed
    /// from, so that a lookup compares the stored bytes where LMDB holds them, without a copy.
    private let parsed = Mutex<[Int: [(bytes: [UInt8], definition: ViewDefinition)]]>([:])

    func definition(_ bytes: UnsafeRawBufferPointer) throws -> ViewDefinition {
        guard !bytes.isEmpty else { throw StoreError.corrupted("stored view definition is empty") }
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        let hash = hasher.finalize()
        func holds(_ stored: [UInt8]) -> Bool {
            stored.count == bytes.count
                && stored.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
        }
        if let known = parsed.withLock({ $0[hash]?.first { holds($0.bytes) }?.definition }) { return known }
        let copy = Array(bytes)
        do {
            let definition = try ViewDefinition(parsing: try JSONParser.parse(copy))
            parsed.withLock { cache in
                if cache[hash]?.contains(where: { holds($0.bytes) }) != true {
                    cache[hash, default: []].append((copy, definition))
                }
            }
            return definition
        } catch {
            throw StoreError.corrupted("stored view definition does not parse: \(error)")
        }
    }
}

/// What a write transaction read from the catalog: the views of each collection, the tree of each
/// collection. Forgotten whenever the catalog changes, so it never disagrees with it; a transaction
/// whose catalog change is rolled back (a nested one) has forgotten it too.
final class CatalogMemo {
    var views: [String: [Catalog.View]] = [:]
    /// Whether this write changed the views (defined or dropped one): what it reads of them since
    /// is not committed.
    var changedViews = false
    var collectionTrees: [String: CountedTree] = [:]
    var referenceTree: CountedTree?
    /// nil inside: read, and the collection has none.
    var schemas: [String: Schema?] = [:]

    func forget() {
        views.removeAll()
        collectionTrees.removeAll()
        referenceTree = nil
        schemas.removeAll()
    }
}

/// Each collection's views as the last committed state has them, for writes: a write otherwise
/// read and decoded them once a commit (a view's listing and record each: 24,000 instructions a
/// commit into five views). Only the writing thread changes the catalog, and it empties this
/// before it changes a view (`Catalog.changingViews`), so what this holds was read by a write
/// that had not changed the views, from committed state: whether that write then commits or
/// fails, it is still the committed state. Reads do not use it (their snapshots may be older).
final class CommittedViews: Sendable {
    private let table = Mutex<[String: [Catalog.View]]>([:])

    func views(on collection: String) -> [Catalog.View]? { table.withLock { $0[collection] } }

    func set(_ views: [Catalog.View], on collection: String) { table.withLock { $0[collection] = views } }

    func removeAll() { table.withLock { $0.removeAll() } }
}
