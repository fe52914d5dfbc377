import FolioJSON
import FolioModel
import LMDB

extension Snapshot {
    /// Answers a `list` (or, with `countOnly`, a `count`) from a view, a range of a view, an index
    /// or the reference index when one holds exactly the query's objects in its order, else by
    /// reading every candidate (the collection, the referrers, the linked objects).
    public func run(_ query: Query, countOnly: Bool = false) throws -> QueryResult {
        try run(query, plan: try plan(for: query), countOnly: countOnly)
    }

    /// `run` when an index answers the query, nil when it would read every candidate object (or
    /// include referenced ones), so that its cost grows with the data: for an event loop, which
    /// must not scan. Planned once for both.
    public func runIndexed(_ query: Query, countOnly: Bool = false) throws -> QueryResult? {
        if !query.include.isEmpty { return nil }
        let plan = try plan(for: query)
        return Self.scans(plan, query) ? nil : try run(query, plan: plan, countOnly: countOnly)
    }

    private func run(_ query: Query, plan: Plan, countOnly: Bool) throws -> QueryResult {
        var result: QueryResult
        switch plan {
        case .tree(let tree, let source, let collection, let range, let idOrder):
            result = try runOnTree(
                query, tree: tree, source: source, collection: collection, range: range, idOrder: idOrder,
                countOnly: countOnly)
        case .scan(let candidates, let source):
            result = try scan(query, candidates: candidates, source: source, countOnly: countOnly)
        case .links(let source, let references):
            result = try links(query, references: references, source: source, countOnly: countOnly)
        case .empty(let source):
            result = QueryResult(plan: QueryPlan(source: source, examined: 0))
        }
        if !query.include.isEmpty && !countOnly && result.itemCount > 0 {
            try include(query.include, in: &result, readable: query.readable)
        }
        return result
    }

    private static func scans(_ plan: Plan, _ query: Query) -> Bool {
        switch plan {
        case .scan: return true
        case .links(_, let references):
            return query.filter != nil || query.sort != nil || references.count > Query.maxLimit
        case .tree, .empty: return false
        }
    }

    /// Objects to read for a scan.
    enum Candidates {
        case collection(String)
        /// Given objects, in no particular order; missing ones are skipped.
        case objects([(collection: String, id: String)])
    }

    /// Keys of a tree from `lower` (inclusive) to `upper` (exclusive), the ranks of a range.
    struct KeyRange {
        let prefix: [UInt8]
    }

    enum Plan {
        /// `idOrder`: the tree (or its range) lists its objects in id order, or close to it (by
        /// creation time, whose ids grow with it), so a page's objects are neighbours in theirs.
        case tree(CountedTree, QueryPlan.Source, collection: String, range: KeyRange?, idOrder: Bool)
        case scan(Candidates, QueryPlan.Source)
        /// A field's references in their order, as `collection/id`.
        case links(QueryPlan.Source, [(collection: String, id: String)])
        /// The collection never had an object.
        case empty(QueryPlan.Source)
    }

    func plan(for query: Query) throws -> Plan {
        switch query.source {
        case .view(let name):
            guard let view = try catalog.view(name, storeTxn) else { throw StoreError.viewNotFound(name) }
            // Access was checked against the view's collection before this snapshot was taken; a
            // view dropped and defined again on another collection in between must not show it.
            if let readable = query.readable, !readable(view.definition.collection) {
                throw StoreError.unreadable(collection: view.definition.collection, view: name)
            }
            guard let filter = query.filter else {
                return .tree(
                    view.tree, .view(name), collection: view.definition.collection, range: nil,
                    idOrder: Self.listsByID(view.definition.sort, fixed: 0))
            }
            guard let (prefix, fixed) = Self.fixedPrefix(of: view.definition, matching: filter, viewFilter: nil) else {
                throw StoreError.invalid(
                    "the where of a list of view \(Names.quoted(name)) may only fix its leading sort fields by equality (\(view.definition.sort)): the view defines the rest"
                )
            }
            return .tree(
                view.tree, .viewRange(name, fixed: fixed), collection: view.definition.collection,
                range: KeyRange(prefix: prefix),
                idOrder: Self.listsByID(view.definition.sort, fixed: fixed.count))
        case .collection(let collection):
            let sort = query.sort ?? .creation
            if query.filter == nil && sort == .creation {
                guard let tree = try catalog.collectionTree(collection, storeTxn) else {
                    return .empty(.creationOrder(collection))
                }
                return .tree(tree, .creationOrder(collection), collection: collection, range: nil, idOrder: true)
            }
            let views = try catalog.views(on: collection, storeTxn)
            for view in views where view.definition.sort == sort && view.definition.filter == query.filter {
                return .tree(
                    view.tree, .view(view.definition.name), collection: collection, range: nil,
                    idOrder: Self.listsByID(sort, fixed: 0))
            }
            // A view whose leading sort fields the where fixes, in the order the query asks for.
            if let filter = query.filter {
                for view in views {
                    let fields = view.definition.sort.fields
                    guard
                        let (prefix, fixed) = Self.fixedPrefix(
                            of: view.definition, matching: filter, viewFilter: view.definition.filter)
                    else { continue }
                    guard
                        query.sort == view.definition.sort
                            || (fixed.count < fields.count && sort.fields == Array(fields[fixed.count...]))
                    else { continue }
                    return .tree(
                        view.tree, .viewRange(view.definition.name, fixed: fixed), collection: collection,
                        range: KeyRange(prefix: prefix),
                        idOrder: Self.listsByID(view.definition.sort, fixed: fixed.count))
                }
            }
            return .scan(.collection(collection), .scan(collection))
        case .backlinks(let collection, let id, let sourceCollection, let path):
            let from = sourceCollection + "." + path
            if query.filter == nil && query.sort == nil {
                guard let tree = try catalog.referenceTree(storeTxn, creating: false) else {
                    return .empty(.references(from))
                }
                let prefix = RefIndex.groupPrefix(
                    collection: collection, id: id, sourceCollection: sourceCollection, path: path)
                // Referrers come in their ids' order.
                return .tree(
                    tree, .references(from), collection: sourceCollection, range: KeyRange(prefix: prefix),
                    idOrder: true)
            }
            let ids = try store.applier.references.sources(
                of: collection, id, from: sourceCollection, path: path, limit: .max, storeTxn
            ).ids
            return .scan(.objects(ids.map { (sourceCollection, $0) }), .referenceScan(from))
        case .links(let collection, let id, let field):
            let name = field.joined(separator: ".")
            guard let object = try objects.get(collection, id, txn) else {
                throw StoreError.notFound(collection: collection, id: id)
            }
            var references: [(String, String)] = []
            func collect(_ value: JSON) {
                switch value {
                case .array(let elements): for element in elements { collect(element) }
                case .object(let object):
                    if case .reference(let target, let targetID)? = TypedValue.recognize(object) {
                        references.append((target, targetID))
                    }
                default: break
                }
            }
            if let value = object.data.value(atPath: field) {
                if case .array(let elements) = value { elements.forEach(collect) } else { collect(value) }
            }
            if query.sort != nil {
                let shown = query.readable.map { readable in references.filter { readable($0.0) } } ?? references
                return .scan(.objects(shown), .linkScan(name))
            }
            return .links(.links(name), references)
        }
    }

    /// Whether keys in `sort`, past its first `fixed` fields (equal in a range), come in id order or
    /// in creation order (ids grow with creation; ties are broken by id).
    static func listsByID(_ sort: SortOrder, fixed: Int) -> Bool {
        guard fixed < sort.fields.count else { return true }
        switch sort.fields[fixed].path {
        case .id, .createdAt: return true
        default: return false
        }
    }

    /// The key prefix of a view's range that `filter` selects, and the sort fields it fixes: `filter`
    /// must be equalities on the view's first n sort fields (n ≥ 1), and besides them exactly
    /// `viewFilter` (the view's own where, when the query names a collection; nothing when it names
    /// the view). Nil when it is not.
    static func fixedPrefix(of view: ViewDefinition, matching filter: Filter, viewFilter: Filter?) -> (
        [UInt8], [String]
    )? {
        var rest: [Filter]
        if case .all(let parts) = filter { rest = parts } else { rest = [filter] }
        var prefix: [UInt8] = []
        var fixed: [String] = []
        for field in view.sort.fields {
            guard
                let index = rest.firstIndex(where: {
                    if case .condition(field.path, .equal) = $0 { return true } else { return false }
                }), case .condition(_, .equal(let value)) = rest[index]
            else { break }
            rest.remove(at: index)
            SortKey.append(value, descending: field.descending, to: &prefix)
            fixed.append(field.path.description)
        }
        guard !fixed.isEmpty else { return nil }
        let remaining: Filter? = rest.isEmpty ? nil : (rest.count == 1 ? rest[0] : .all(rest))
        guard remaining == viewFilter else { return nil }
        return (prefix, fixed)
    }

    private func collectionName(_ query: Query) throws -> String {
        switch query.source {
        case .collection(let name): return name
        case .view(let name):
            guard let view = try catalog.view(name, storeTxn) else { throw StoreError.viewNotFound(name) }
            return view.definition.collection
        case .links(let collection, _, _): return collection
        case .backlinks(_, _, let sourceCollection, _): return sourceCollection
        }
    }

    /// Every page that starts after a cursor calls this before it reads (`Query.checkedFingerprint`
    /// relies on it).
    private func checkCursor(_ cursor: PageCursor, _ query: Query) throws {
        guard cursor.fingerprint == query.fingerprint else {
            throw StoreError.invalid(
                "after: the cursor belongs to another query (a different collection, view, where, sort or order)")
        }
    }

    private func runOnTree(
        _ query: Query, tree: CountedTree, source: QueryPlan.Source, collection: String, range: KeyRange?,
        idOrder: Bool, countOnly: Bool
    ) throws -> QueryResult {
        var result = QueryResult(plan: QueryPlan(source: source, examined: 0))
        // Made once: each `storeTxn` is a new value holding four references.
        let storeTxn = storeTxn
        let top = try tree.top(storeTxn)
        let (lower, upper) =
            try range.map { try tree.ranks(of: $0.prefix, and: RefIndex.end(of: $0.prefix), from: top, storeTxn) } ?? (
                0, top.count
            )
        result.total = upper - lower
        if countOnly { return result }
        let forward = !query.descending
        // The rank, within the range, of the first key of the page (counted from the range's end
        // when reading backwards).
        let start: Int
        // Where the page starts, when the cursor's descent found it on the way.
        var found: CountedTree.Position?
        switch query.start {
        case .offset(let offset):
            start = offset
        case .after(let cursor):
            try checkCursor(cursor, query)
            if let range, !cursor.key.starts(with: range.prefix) {
                throw StoreError.invalid("after: the cursor is not within the range the where selects")
            }
            let rank: Int
            if forward, let (keyRank, position) = try tree.rankAndPosition(after: cursor.key, from: top, storeTxn) {
                rank = keyRank
                if rank >= lower { found = position }
            } else {
                rank = try tree.rank(of: cursor.key, inclusive: true, from: top, storeTxn)
            }
            start = forward ? max(0, rank - lower) : max(0, upper - rank + 1)
        }
        guard start < result.total else { return result }
        let position = try found ?? tree.position(atRank: forward ? lower + start : upper - start, from: top, storeTxn)
        var page = PageWriter(
            query: query, collection: collection, objects: objects, txn: txn, remaining: result.total - start,
            heads: storeTxn.readMemo?.objectHeads)
        if idOrder {
            // A page in id order (or creation order: ids grow with creation) reads neighbours in the
            // objects' tree: through one cursor, most lookups stay in the leaf of the one before.
            // Scattered objects (a view in another order) are looked up from the root each.
            try txn.withCursor(objects.database) { cursor in
                page.cursor = cursor
                try tree.scan(from: position, forward: forward, storeTxn) { key in try page.take(key) }
            }
        } else {
            try tree.scan(from: position, forward: forward, storeTxn) { key in try page.take(key) }
        }
        result.plan.examined = page.examined
        page.finish(into: &result)
        return result
    }

    /// Reads every candidate: correct for any query, O(n log n).
    private func scan(_ query: Query, candidates: Candidates, source: QueryPlan.Source, countOnly: Bool) throws
        -> QueryResult
    {
        var result = QueryResult(plan: QueryPlan(source: source, examined: 0))
        // Without a sort, referrers keep the reference index's order (by id), a where or not.
        var sort = query.sort ?? .creation
        if query.sort == nil, case .backlinks = query.source { sort = SortOrder([SortOrder.Field(.id)]) }
        var keys: [(key: [UInt8], collection: String)] = []
        func consider(_ object: StoredObject) {
            result.plan.examined += 1
            guard query.filter?.matches(object) ?? true else { return }
            result.total += 1
            if !countOnly { keys.append((sort.key(for: object, id: object.id), object.collection)) }
        }
        switch candidates {
        case .collection(let collection):
            try objects.forEach(in: collection, txn) { object in
                consider(object)
                return true
            }
        case .objects(let list):
            var seen = Set<String>()
            for (collection, id) in list where seen.insert(collection + "/" + id).inserted {
                if let object = try objects.get(collection, id, txn) { consider(object) }
            }
        }
        if countOnly { return result }
        keys.sort { compareBytes($0.key, $1.key) < 0 }
        if query.descending { keys.reverse() }
        let start: Int
        switch query.start {
        case .offset(let offset):
            start = min(offset, keys.count)
        case .after(let cursor):
            try checkCursor(cursor, query)
            start = keys.partitioningIndex {
                query.descending ? compareBytes($0.key, cursor.key) < 0 : compareBytes($0.key, cursor.key) > 0
            }
        }
        var page = PageWriter(
            query: query, collection: nil, objects: objects, txn: txn, remaining: keys.count - start,
            heads: memo?.objectHeads)
        for entry in keys[start...] {
            guard try entry.key.withUnsafeBytes({ try page.take($0, collection: entry.collection) }) else { break }
        }
        page.finish(into: &result)
        return result
    }

    /// A field's references in their order (`links` without sort): a missing target is its
    /// reference with `"$missing": true`; a where keeps the targets that match it (a missing one
    /// matches nothing). The cursor holds the position in the field.
    private func links(
        _ query: Query, references: [(collection: String, id: String)], source: QueryPlan.Source, countOnly: Bool
    ) throws
        -> QueryResult
    {
        var result = QueryResult(plan: QueryPlan(source: source, examined: 0))
        var order = Array(references.indices)
        if let filter = query.filter {
            order = try order.filter { index in
                result.plan.examined += 1
                // A target the peer may not read matches nothing: a where must not tell its fields.
                if let readable = query.readable, !readable(references[index].collection) { return false }
                return try objects.get(references[index].collection, references[index].id, txn).map {
                    filter.matches($0)
                } ?? false
            }
        }
        result.total = order.count
        if countOnly { return result }
        if query.descending { order.reverse() }
        var start: Int
        switch query.start {
        case .offset(let offset): start = offset
        case .after(let cursor):
            try checkCursor(cursor, query)
            guard cursor.key.count == 8 else { throw StoreError.invalid("after: not a cursor of links") }
            let index = Int(cursor.key.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) })
            start = order.partitioningIndex { query.descending ? $0 < index : $0 > index }
        }
        start = max(0, start)
        var writer = JSONWriter(capacity: 1024)
        var last: Int?
        var position = start
        while position < order.count && result.itemCount < query.limit && writer.bytes.count < Snapshot.pageByteBudget {
            let index = order[position]
            let (collection, id) = references[index]
            if result.itemCount > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            if let readable = query.readable, !readable(collection) {
                writer.write(["$ref": .string(collection + "/" + id), "$forbidden": true] as JSON)
            } else if let record = try objects.record(collection, id, txn) {
                try ObjectTable.writeWireForm(record, collection: collection, id: id, to: &writer)
            } else {
                writer.write(["$ref": .string(collection + "/" + id), "$missing": true] as JSON)
            }
            result.itemCount += 1
            result.plan.examined += 1
            last = index
            position += 1
        }
        result.items = writer.bytes
        if position < order.count, let last {
            result.next = PageCursor(
                fingerprint: query.checkedFingerprint, key: withUnsafeBytes(of: UInt64(last).bigEndian) { Array($0) })
        }
        return result
    }
}

/// Writes a page as its keys go by: the objects of the first `limit` keys, or fewer once they take
/// `Snapshot.pageByteBudget` bytes; a key beyond them means there is a next page, whose cursor is
/// the last written key.
private struct PageWriter {
    let query: Query
    /// The collection of every key's object; nil when each key comes with its own.
    let collection: String?
    let objects: ObjectTable
    let txn: Transaction
    /// Keys left from the first one offered, to know whether a next page exists without reading it.
    private var remaining: Int
    private var writer: JSONWriter
    private var itemCount = 0
    /// The last item's sort key, for the next page's cursor, once the page is full with keys left.
    private var lastKey: [UInt8] = []
    private var hasMore = false
    private(set) var examined = 0
    /// The object keys' and items' heads for the collection of the last object read: the
    /// reader's own (`ReadMemo.objectHeads`), still set for the collection of its last page, or new.
    private let heads: ObjectHeads
    /// Whether `heads` are checked for `collection` (when keys come without their own).
    private var headsSet = false
    /// Where objects are looked up when set (see `Cursor.value(at:)`), else with `Transaction.get`.
    var cursor: Cursor?

    init(query: Query, collection: String?, objects: ObjectTable, txn: Transaction, remaining: Int, heads: ObjectHeads?)
    {
        self.heads = heads ?? ObjectHeads()
        self.query = query
        self.collection = collection
        self.objects = objects
        self.txn = txn
        self.remaining = remaining
        writer = JSONWriter(capacity: 256 * min(query.limit, 100))
    }

    /// Writes the object of `key` (a sort key, read only during the call); returns whether to go on.
    mutating func take(_ key: UnsafeRawBufferPointer, collection keyCollection: String? = nil) throws -> Bool {
        // A limit of 0: no item, and more to come (a full page stops the scan after its last item).
        guard itemCount < query.limit && writer.bytes.count < Snapshot.pageByteBudget else {
            hasMore = true
            return false
        }
        examined += 1
        if let keyCollection {
            if keyCollection != heads.collection { try heads.set(keyCollection) }
        } else if !headsSet {
            if collection != heads.collection { try heads.set(collection!) }
            headsSet = true
        }
        // The object's key, `collection 0 id`: the id copied after the prefix, which stays.
        let id = UnsafeRawBufferPointer(rebasing: key[SortKey.idRange(in: key)])
        let end = heads.keyPrefix + id.count
        UnsafeMutableRawBufferPointer(rebasing: heads.key[heads.keyPrefix..<end]).copyMemory(from: id)
        let objectKey = UnsafeRawBufferPointer(rebasing: heads.key[..<end])
        let record: UnsafeRawBufferPointer?
        if let cursor {
            record = try cursor.value(at: objectKey)
        } else {
            record = try objects.record(key: objectKey, txn)
        }
        guard let record else {
            throw StoreError.corrupted(
                "an index of \(keyCollection ?? collection!) lists \(SortKey.id(in: key)), which does not exist")
        }
        if itemCount > 0 { writer.bytes.append(UInt8(ascii: ",")) }
        let head = UnsafeRawBufferPointer(rebasing: heads.item[..<heads.itemCount])
        if Names.areIDBytes(id) {
            // A valid id needs no escaping (Names.validateID): its bytes are its JSON string.
            try ObjectTable.writeWireForm(
                record, head: head, plainID: UnsafeRawBufferPointer(rebasing: heads.key[heads.keyPrefix..<end]),
                to: &writer)
        } else {
            writer.bytes.append(contentsOf: head)
            writer.write(SortKey.id(in: key))
            try ObjectTable.writeWireForm(
                record, head: UnsafeRawBufferPointer(start: nil, count: 0), plainID: nil, to: &writer)
        }
        itemCount += 1
        remaining -= 1
        guard remaining > 0 else { return false }
        // Full (in items or bytes) with keys left: the page ends here, and its cursor is this key,
        // copied once a page while it is still valid.
        if itemCount == query.limit || writer.bytes.count >= Snapshot.pageByteBudget {
            hasMore = true
            lastKey = Array(key)
            return false
        }
        return true
    }

    func finish(into result: inout QueryResult) {
        result.items = writer.bytes
        result.itemCount = itemCount
        if hasMore && !lastKey.isEmpty { result.next = PageCursor(fingerprint: query.checkedFingerprint, key: lastKey) }
    }
}

/// A page's object key (`collection 0 id`) and item head (`{"collection":"<collection>","id":` as
/// JSON) for one collection, in buffers of their largest size: no array and its reference counting
/// per object. A reader keeps one for its pages (`ReadMemo.objectHeads`), one page at a time: the
/// buffers are not made again, nor the heads while the collection stays.
final class ObjectHeads {
    /// `collection 0`, then the id of the object being read.
    let key = UnsafeMutableRawBufferPointer.allocate(byteCount: Names.maxCollectionLength * 4 + 1 + 255, alignment: 1)
    private(set) var keyPrefix = 0
    /// Sized for a name whose every character needs a `\uXXXX` escape (names are plain; a
    /// collection from a stored key is not trusted to be).
    let item = UnsafeMutableRawBufferPointer.allocate(byteCount: Names.maxCollectionLength * 4 * 6 + 32, alignment: 1)
    private(set) var itemCount = 0
    private(set) var collection: String?

    func set(_ collection: String) throws {
        let prefix = Keys.collectionPrefix(collection)
        var head = JSONWriter(capacity: collection.utf8.count + 24)
        head.writeRaw("{\"collection\":")
        head.write(collection)
        head.writeRaw(",\"id\":")
        guard prefix.count <= key.count - 255 && head.bytes.count <= item.count else {
            throw StoreError.corrupted("an index lists an object of a collection whose name is not valid")
        }
        prefix.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: key[..<prefix.count]).copyMemory(from: $0) }
        head.bytes.withUnsafeBytes {
            UnsafeMutableRawBufferPointer(rebasing: item[..<head.bytes.count]).copyMemory(from: $0)
        }
        keyPrefix = prefix.count
        itemCount = head.bytes.count
        self.collection = collection
    }

    deinit {
        key.deallocate()
        item.deallocate()
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

extension Query {
    /// The fingerprint a page's `next` cursor carries. After a cursor it is the cursor's, which
    /// `checkCursor` found equal to the query's before the page was read: computing it again cost
    /// about 1,400 instructions a page (docs/BENCHMARKS.md, "A page's cursor decoded where its
    /// bytes lie").
    var checkedFingerprint: [UInt8] {
        if case .after(let cursor) = start { return cursor.fingerprint }
        return fingerprint
    }
}
