import LMDB

/// A transaction as the store's parts use it: the LMDB transaction, and in a write, the tree nodes
/// changed so far. Trees read and write their nodes through it; everything else goes to LMDB directly.
struct StoreTransaction {
    let lmdb: Transaction
    let trees: Database
    /// Nil in read snapshots: nodes come straight from LMDB.
    let cache: TreeNodeCache?
    /// The catalog as this write transaction last read it; nil in read snapshots.
    let catalogMemo: CatalogMemo?

    init(lmdb: Transaction, trees: Database, cache: TreeNodeCache?) {
        self.lmdb = lmdb
        self.trees = trees
        self.cache = cache
        catalogMemo = cache == nil ? nil : CatalogMemo()
    }

    private init(lmdb: Transaction, trees: Database, cache: TreeNodeCache?, catalogMemo: CatalogMemo?) {
        self.lmdb = lmdb
        self.trees = trees
        self.cache = cache
        self.catalogMemo = catalogMemo
    }

    func treeRecord(_ key: TreeNodeCache.NodeKey) throws -> [UInt8]? {
        if let cached = cache?.lookup(key) { return cached }
        return try key.withBytes { try lmdb.get(trees, $0).map { Array($0) } }
    }

    /// A record about to be changed and stored again: taken out of a top-level cache, so that it is
    /// uniquely held and changes in place instead of being copied.
    func takeTreeRecord(_ key: TreeNodeCache.NodeKey) throws -> [UInt8]? {
        if let taken = cache?.take(key) { return taken }
        return try treeRecord(key)
    }

    func setTreeRecord(_ key: TreeNodeCache.NodeKey, _ bytes: [UInt8]) throws {
        if let cache { cache.set(key, bytes) } else { try lmdb.put(trees, key.bytes, bytes) }
    }

    func removeTreeRecord(_ key: TreeNodeCache.NodeKey) throws {
        if let cache { cache.set(key, nil) } else { try lmdb.delete(trees, key.bytes) }
    }

    /// Every node id the tree has, stored or cached.
    func treeNodes(_ tree: UInt32) throws -> Set<UInt64> {
        var nodes = Set<UInt64>()
        let prefix = TreeNodeCache.NodeKey(tree: tree, node: 0).bytes.prefix(4)
        try lmdb.withCursor(trees) { cursor in
            var entry = try cursor.seek(atLeast: Array(prefix))
            while let (key, _) = entry, key.starts(with: prefix) {
                nodes.insert(UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 4, as: UInt64.self)))
                entry = try cursor.next()
            }
        }
        cache?.adjust(&nodes, tree: tree)
        return nodes
    }

    /// A child for a nested LMDB transaction, with a cache layered over this one's.
    func nested(_ child: Transaction) -> StoreTransaction {
        StoreTransaction(lmdb: child, trees: trees, cache: TreeNodeCache(parent: cache), catalogMemo: catalogMemo)
    }
}

/// Tree records changed in a write transaction, held in memory and written to LMDB once, just before
/// the transaction commits: a run of inserts at the same place (a batch of creates in creation order)
/// rewrites each node once per commit instead of once per insert. A cache for a nested transaction
/// sits over its parent's and is merged into it when the nested transaction commits, dropped when
/// it aborts, so the cache always agrees with LMDB's view of the transaction.
final class TreeNodeCache {
    struct NodeKey: Hashable {
        let tree: UInt32
        let node: UInt64

        var bytes: [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(12)
            withUnsafeBytes(of: tree.bigEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: node.bigEndian) { bytes.append(contentsOf: $0) }
            return bytes
        }

        /// `bytes` without an array: the 12 bytes on the stack, for a lookup.
        func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            var raw = (tree.bigEndian, UInt32(truncatingIfNeeded: node >> 32).bigEndian, UInt32(truncatingIfNeeded: node).bigEndian)
            return try withUnsafeBytes(of: &raw) { try body($0) }
        }
    }

    private let parent: TreeNodeCache?
    /// nil: removed in this transaction.
    private var records: [NodeKey: [UInt8]?] = [:]

    init(parent: TreeNodeCache?) { self.parent = parent }

    var count: Int { records.count }

    /// `.some(nil)` when removed, nil when this cache (and its parents) do not know the record.
    func lookup(_ key: NodeKey) -> [UInt8]?? {
        if let entry = records[key] { return .some(entry) }
        return parent?.lookup(key)
    }

    func set(_ key: NodeKey, _ bytes: [UInt8]?) { records[key] = .some(bytes) }

    /// Removes and returns a record held by this cache (top level only; a nested cache's parent keeps
    /// its copy). The caller must store it again.
    func take(_ key: NodeKey) -> [UInt8]? {
        guard parent == nil, let index = records.index(forKey: key), let bytes = records[index].value else { return nil }
        records.remove(at: index)
        return bytes
    }

    /// Adds the tree's nodes created in memory and takes out those removed.
    func adjust(_ nodes: inout Set<UInt64>, tree: UInt32) {
        parent?.adjust(&nodes, tree: tree)
        for (key, bytes) in records where key.tree == tree {
            if bytes == nil { nodes.remove(key.node) } else { nodes.insert(key.node) }
        }
    }

    /// The nested transaction committed: its changes become the parent's.
    func mergeIntoParent() {
        guard let parent else { return }
        for (key, bytes) in records { parent.records[key] = .some(bytes) }
    }

    /// Writes every change to LMDB and forgets it. Top level only.
    func flush(into txn: Transaction, trees: Database) throws {
        precondition(parent == nil)
        for (key, bytes) in records {
            if let bytes { try txn.put(trees, key.bytes, bytes) } else { try txn.delete(trees, key.bytes) }
        }
        records.removeAll(keepingCapacity: true)
    }
}
