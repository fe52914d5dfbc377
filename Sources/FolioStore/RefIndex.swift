import FolioJSON
import FolioModel
import LMDB

/// Every reference held by an object, by its target: one entry per (target, source collection,
/// field path, source id), in one counted tree, so that the objects referring to a target from one
/// field are a key range: listed in O(log n + page) at any offset and counted in O(log n). Derived
/// from the objects, kept in the write transaction, rebuilt and verified like every view.
///
/// Key: target collection 0, target id 0, source collection 0, path (escaped) 0, source id 0 length.
/// In a path, 0 is written 1 1 and 1 as 1 2, so the path's end is its 0.
///
/// `{"$file": name}` values are references to the target `$files` / name (`FileName.collection`):
/// no collection can be named `$files` and a file name holds no 0, so their keys neither meet an
/// object's nor end early, and being one tree they are rebuilt, verified and in the digest with no
/// code of their own. A file's referrers are then a key range like an object's, and whether a file
/// is an orphan is one seek.
struct RefIndex {
    /// A reference's key may be at most this long (a tree key's limit).
    static let maxKeyBytes = CountedTree.maxKeyBytes

    let catalog: Catalog

    static func targetPrefix(collection: String, id: String) -> [UInt8] {
        var key = Array(collection.utf8)
        key.append(0)
        key.append(contentsOf: id.utf8)
        key.append(0)
        return key
    }

    static func groupPrefix(collection: String, id: String, sourceCollection: String, path: String) -> [UInt8] {
        var key = targetPrefix(collection: collection, id: id)
        appendGroup(sourceCollection: sourceCollection, path: path, to: &key)
        return key
    }

    private static func appendGroup(sourceCollection: String, path: String, to key: inout [UInt8]) {
        key.append(contentsOf: sourceCollection.utf8)
        key.append(0)
        for byte in path.utf8 {
            switch byte {
            case 0: key.append(contentsOf: [1, 1])
            case 1: key.append(contentsOf: [1, 2])
            default: key.append(byte)
            }
        }
        key.append(0)
    }

    static func key(_ reference: Reference, from source: StoredObject) -> [UInt8] {
        var key = groupPrefix(
            collection: reference.collection, id: reference.id, sourceCollection: source.collection,
            path: reference.path)
        SortKey.appendID(source.id, to: &key)
        return key
    }

    /// The smallest key after every key that starts with `prefix`.
    static func end(of prefix: [UInt8]) -> [UInt8] {
        var end = prefix
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return end
            }
            end.removeLast()
        }
        return [0xFF, 0xFF, 0xFF, 0xFF]
    }

    /// Throws if a reference of `object` would make a key too long (a very long field path).
    static func check(_ object: StoredObject, references: [Reference]) throws {
        for reference in references where key(reference, from: object).count > maxKeyBytes {
            throw StoreError.invalid(
                "object \(object.collection)/\(object.id): the reference at \(Names.quoted(reference.path)) to \(reference.target) "
                    + "takes more than \(maxKeyBytes) bytes as a key of the reference index; use a shorter field path")
        }
    }

    /// Moves the object's entries from the references `old` held to those `new` holds. `oldRefs` and
    /// `newRefs`, when the caller has them, save walking the data again. Returns the files whose
    /// first referrer this added (`referenced` true) or whose last it removed (false), in name
    /// order: two seeks per file reference that changed, none for other references.
    @discardableResult
    func update(
        from old: StoredObject?, to new: StoredObject?, oldRefs: [Reference]? = nil, newRefs: [Reference]? = nil,
        _ txn: StoreTransaction
    )
        throws -> [(name: String, referenced: Bool)]
    {
        // `if let`, not `Optional.map`: the map copied the object (through the runtime's generic
        // copy of an optional) for every event.
        var beforeList: [Reference] = oldRefs ?? []
        if oldRefs == nil, let old { beforeList = Reference.all(in: old.data) }
        var afterList: [Reference] = newRefs ?? []
        if newRefs == nil, let new { afterList = Reference.all(in: new.data) }
        // Most objects hold no reference: no sets to build and compare (a rebuild applies millions).
        guard !beforeList.isEmpty || !afterList.isEmpty else { return [] }
        let before = Set(beforeList)
        let after = Set(afterList)
        guard before != after else { return [] }
        guard let tree = try catalog.referenceTree(txn, creating: !after.isEmpty) else { return [] }
        let removed = before.subtracting(after)
        let added = after.subtracting(before)
        let files = Set(removed.union(added).compactMap(\.fileName)).sorted()
        let wereReferenced = try files.map { try isReferenced(FileName.collection, $0, txn) }
        if let old { for reference in removed { try tree.remove(Self.key(reference, from: old), txn) } }
        if let new { for reference in added { try tree.insert(Self.key(reference, from: new), txn) } }
        var changed: [(name: String, referenced: Bool)] = []
        for (name, was) in zip(files, wereReferenced) {
            let now = try isReferenced(FileName.collection, name, txn)
            if now != was { changed.append((name, now)) }
        }
        return changed
    }

    /// Whether anything refers to the target. O(log n).
    func isReferenced(_ collection: String, _ id: String, _ txn: StoreTransaction) throws -> Bool {
        guard let tree = try catalog.referenceTree(txn, creating: false) else { return false }
        return try tree.firstKey(withPrefix: Self.targetPrefix(collection: collection, id: id), txn) != nil
    }

    /// Up to `limit` of the objects that refer to the target, by source collection, path and id,
    /// and how many refer to it in all: O((limit + 1) log n), as every group visited adds one.
    func referrers(of collection: String, _ id: String, limit: Int, _ txn: StoreTransaction) throws -> (
        referrers: [Referrer], total: Int
    ) {
        guard let tree = try catalog.referenceTree(txn, creating: false) else { return ([], 0) }
        let prefix = Self.targetPrefix(collection: collection, id: id)
        let (first, end) = try tree.ranks(of: prefix, and: Self.end(of: prefix), txn)
        var referrers: [Referrer] = []
        guard end > first, limit > 0 else { return ([], end - first) }
        for (sourceCollection, path) in try groups(collection: collection, id: id, limit: limit, txn) {
            let page = try sources(
                of: collection, id, from: sourceCollection, path: path, limit: limit - referrers.count, txn)
            referrers += page.ids.map { Referrer(collection: sourceCollection, id: $0, path: path) }
            if referrers.count >= limit { break }
        }
        return (referrers, end - first)
    }

    /// The (source collection, path) groups of the references to a target, in key order, at most
    /// `limit` of them: one seek each.
    func groups(collection: String, id: String, limit: Int = .max, _ txn: StoreTransaction) throws -> [(
        sourceCollection: String, path: String
    )] {
        guard let tree = try catalog.referenceTree(txn, creating: false) else { return [] }
        let prefix = Self.targetPrefix(collection: collection, id: id)
        var groups: [(String, String)] = []
        var from = prefix
        while groups.count < limit, let key = try tree.firstKey(atLeast: from, txn), key.starts(with: prefix) {
            var rest = key[prefix.count...]
            guard let sourceEnd = rest.firstIndex(of: 0) else {
                throw StoreError.corrupted("a reference key without its source")
            }
            let sourceCollection = String(decoding: rest[..<sourceEnd], as: UTF8.self)
            rest = rest[(sourceEnd + 1)...]
            var path: [UInt8] = []
            var index = rest.startIndex
            while index < rest.endIndex && rest[index] != 0 {
                if rest[index] == 1, index + 1 < rest.endIndex {
                    path.append(rest[index + 1] == 1 ? 0 : 1)
                    index += 2
                } else {
                    path.append(rest[index])
                    index += 1
                }
            }
            let pathText = String(decoding: path, as: UTF8.self)
            groups.append((sourceCollection, pathText))
            from = Self.end(
                of: Self.groupPrefix(collection: collection, id: id, sourceCollection: sourceCollection, path: pathText)
            )
        }
        return groups
    }

    /// The ids of the objects of `sourceCollection` whose `path` refers to the target, in id order:
    /// from rank `offset` within the group, or after the source id `after`; at most `limit`; and how
    /// many there are in all. O(log n + page).
    func sources(
        of collection: String, _ id: String, from sourceCollection: String, path: String, offset: Int = 0,
        after: String? = nil,
        limit: Int, _ txn: StoreTransaction
    ) throws -> (ids: [String], total: Int) {
        guard let tree = try catalog.referenceTree(txn, creating: false) else { return ([], 0) }
        let prefix = Self.groupPrefix(collection: collection, id: id, sourceCollection: sourceCollection, path: path)
        let (first, end) = try tree.ranks(of: prefix, and: Self.end(of: prefix), txn)
        let total = end - first
        var start = offset
        if let after {
            var key = prefix
            SortKey.appendID(after, to: &key)
            start = try tree.rank(of: key, inclusive: true, txn) - first
        }
        guard start < total, limit > 0 else { return ([], total) }
        var ids: [String] = []
        let count = min(limit, total - start)
        try tree.scan(from: try tree.position(atRank: first + start, txn), forward: true, txn) { key in
            ids.append(SortKey.id(in: key))
            return ids.count < count
        }
        return (ids, total)
    }

    /// Whether any object of `sourceCollection` refers to the target from `path`.
    func hasSources(
        of collection: String, _ id: String, from sourceCollection: String, path: String, _ txn: StoreTransaction
    ) throws -> Bool {
        guard let tree = try catalog.referenceTree(txn, creating: false) else { return false }
        let prefix = Self.groupPrefix(collection: collection, id: id, sourceCollection: sourceCollection, path: path)
        return try tree.firstKey(withPrefix: prefix, txn) != nil
    }
}
