import FolioJSON
import FolioModel
import LMDB

extension Snapshot {
    /// Answers a `list` (or, with `countOnly`, a `count`) from a view or index when one holds exactly
    /// the query's objects in its order, else by scanning the collection.
    public func run(_ query: Query, countOnly: Bool = false) throws -> QueryResult {
        switch try plan(for: query) {
        case .tree(let tree, let source, let sort):
            return try runOnTree(query, tree: tree, sort: sort, source: source, countOnly: countOnly)
        case .scan(let collection):
            return try scan(query, collection: collection, countOnly: countOnly)
        case .empty(let source):
            return QueryResult(plan: QueryPlan(source: source, examined: 0))
        }
    }

    /// Whether answering `query` means reading every object of a collection.
    public func needsScan(_ query: Query) throws -> Bool {
        if case .scan = try plan(for: query) { return true }
        return false
    }

    private enum Plan {
        case tree(CountedTree, QueryPlan.Source, SortOrder)
        case scan(String)
        /// The collection never had an object.
        case empty(QueryPlan.Source)
    }

    private func plan(for query: Query) throws -> Plan {
        switch query.source {
        case .view(let name):
            guard let view = try catalog.view(name, storeTxn) else { throw StoreError.viewNotFound(name) }
            return .tree(view.tree, .view(name), view.definition.sort)
        case .collection(let collection):
            let sort = query.sort ?? .creation
            if query.filter == nil && sort == .creation {
                guard let tree = try catalog.collectionTree(collection, storeTxn) else { return .empty(.creationOrder(collection)) }
                return .tree(tree, .creationOrder(collection), .creation)
            }
            for view in try catalog.views(on: collection, storeTxn)
            where view.definition.sort == sort && view.definition.filter == query.filter {
                return .tree(view.tree, .view(view.definition.name), sort)
            }
            return .scan(collection)
        }
    }

    private func collectionName(_ query: Query, _ source: QueryPlan.Source) throws -> String {
        switch query.source {
        case .collection(let name): return name
        case .view(let name):
            guard let view = try catalog.view(name, storeTxn) else { throw StoreError.viewNotFound(name) }
            return view.definition.collection
        }
    }

    private func checkCursor(_ cursor: PageCursor, _ query: Query) throws {
        guard cursor.fingerprint == query.fingerprint else {
            throw StoreError.invalid("after: the cursor belongs to another query (a different collection, view, where, sort or order)")
        }
    }

    private func runOnTree(_ query: Query, tree: CountedTree, sort: SortOrder, source: QueryPlan.Source, countOnly: Bool) throws -> QueryResult {
        var result = QueryResult(plan: QueryPlan(source: source, examined: 0))
        result.total = try tree.count(storeTxn)
        if countOnly { return result }
        let collection = try collectionName(query, source)
        let forward = !query.descending
        let position: CountedTree.Position
        switch query.start {
        case .offset(let offset):
            guard offset < result.total else { return result }
            position = try tree.position(atRank: forward ? offset : result.total - offset, storeTxn)
        case .after(let cursor):
            try checkCursor(cursor, query)
            position = try tree.position(of: cursor.key, strictly: forward, storeTxn)
        }
        var page = PageWriter(query: query, collection: collection, objects: objects, txn: txn)
        try tree.scan(from: position, forward: forward, storeTxn) { key in try page.take(key) }
        result.plan.examined = page.examined
        page.finish(into: &result)
        return result
    }

    /// Reads every object of the collection: correct for any query, O(n).
    private func scan(_ query: Query, collection: String, countOnly: Bool) throws -> QueryResult {
        var result = QueryResult(plan: QueryPlan(source: .scan(collection), examined: 0))
        let sort = query.sort ?? .creation
        var keys: [[UInt8]] = []
        try objects.forEach(in: collection, txn) { object in
            result.plan.examined += 1
            guard query.filter?.matches(object) ?? true else { return true }
            result.total += 1
            if !countOnly { keys.append(sort.key(for: object, id: object.id)) }
            return true
        }
        if countOnly { return result }
        keys.sort { compareBytes($0, $1) < 0 }
        if query.descending { keys.reverse() }
        let start: Int
        switch query.start {
        case .offset(let offset):
            start = min(offset, keys.count)
        case .after(let cursor):
            try checkCursor(cursor, query)
            start = keys.partitioningIndex { query.descending ? compareBytes($0, cursor.key) < 0 : compareBytes($0, cursor.key) > 0 }
        }
        var page = PageWriter(query: query, collection: collection, objects: objects, txn: txn)
        for key in keys[start...] {
            guard try page.take(key[...]) else { break }
        }
        page.finish(into: &result)
        return result
    }
}

/// Writes a page as its keys go by: the objects of the first `limit` keys, or fewer once they take
/// `Snapshot.pageByteBudget` bytes; one more key means there is a next page, whose cursor is the
/// last written key.
private struct PageWriter {
    let query: Query
    let collection: String
    let objects: ObjectTable
    let txn: Transaction
    private var writer: JSONWriter
    private var itemCount = 0
    private var lastKey: ArraySlice<UInt8>?
    private var hasMore = false
    private var objectKey: [UInt8]
    private let prefixLength: Int
    private(set) var examined = 0

    init(query: Query, collection: String, objects: ObjectTable, txn: Transaction) {
        self.query = query
        self.collection = collection
        self.objects = objects
        self.txn = txn
        writer = JSONWriter(capacity: 256 * min(query.limit, 100))
        objectKey = Keys.collectionPrefix(collection)
        prefixLength = objectKey.count
    }

    /// Writes the object of `key`; returns whether to go on.
    mutating func take(_ key: ArraySlice<UInt8>) throws -> Bool {
        examined += 1
        guard itemCount < query.limit && writer.bytes.count < Snapshot.pageByteBudget else {
            hasMore = true
            return false
        }
        let id = key.withUnsafeBytes { SortKey.id(in: $0) }
        objectKey.removeSubrange(prefixLength...)
        objectKey.append(contentsOf: id.utf8)
        guard let record = try txn.get(objects.database, objectKey) else {
            throw StoreError.corrupted("an index of \(collection) lists \(id), which does not exist")
        }
        if itemCount > 0 { writer.bytes.append(UInt8(ascii: ",")) }
        try ObjectTable.writeWireForm(record, collection: collection, id: id, to: &writer)
        itemCount += 1
        lastKey = key
        return true
    }

    func finish(into result: inout QueryResult) {
        result.items = writer.bytes
        result.itemCount = itemCount
        if hasMore, let lastKey { result.next = PageCursor(fingerprint: query.fingerprint, key: Array(lastKey)) }
    }
}

extension Array {
    /// The first index whose element satisfies `belongs`, for a predicate false then true along the array.
    func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
