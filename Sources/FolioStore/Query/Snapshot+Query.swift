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
        var keys: [[UInt8]] = []
        try tree.scan(from: position, forward: forward, storeTxn) { key in
            keys.append(Array(key))
            return keys.count <= query.limit
        }
        result.plan.examined = keys.count
        try writePage(keys, collection: collection, query: query, into: &result)
        return result
    }

    /// Writes the objects of the first `limit` keys; a further key means there is a next page.
    private func writePage(_ keys: [[UInt8]], collection: String, query: Query, into result: inout QueryResult) throws {
        var writer = JSONWriter(capacity: 256 * min(keys.count, query.limit))
        for key in keys.prefix(query.limit) {
            let id = key.withUnsafeBytes { SortKey.id(in: $0) }
            guard let record = try objects.record(collection, id, txn) else {
                throw StoreError.corrupted("an index of \(collection) lists \(id), which does not exist")
            }
            if result.itemCount > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            try ObjectTable.writeWireForm(record, collection: collection, id: id, to: &writer)
            result.itemCount += 1
        }
        result.items = writer.bytes
        if keys.count > query.limit, let last = keys.prefix(query.limit).last {
            result.next = PageCursor(fingerprint: query.fingerprint, key: last)
        }
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
        try writePage(Array(keys[start..<min(keys.count, start + query.limit + 1)]), collection: collection, query: query, into: &result)
        return result
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
