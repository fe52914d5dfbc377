import FolioJSON
import FolioModel

/// A query kept current as commits come (`watch {query}`): which objects of its collection belong,
/// the key that orders them, and the index that lists them. Resolved once from a snapshot, as `list`
/// plans the same query (`Snapshot.liveQuery(for:)`), so a live query and a `list` agree on order.
public struct LiveQuery: Sendable {
    /// What lists the query's objects in its order when a window must be filled.
    public enum Index: Sendable, Equatable {
        /// A view's tree, or the range of it that `prefix` selects.
        case view(String)
        /// The collection's creation-order tree.
        case creationOrder
        /// No index: every object of the collection is read, filtered and sorted.
        case scan
    }

    public let collection: String
    /// An object belongs when it matches `filter` and its key in `sort` starts with `prefix` (the
    /// sort fields that `where` fixes by equality, for a range of a view).
    let filter: Filter?
    let sort: SortOrder
    let prefix: [UInt8]
    /// The window is the first `limit` objects of the order, read backwards when descending.
    public let descending: Bool
    public let limit: Int
    public private(set) var index: Index
    /// How `list` would answer the same query (`explain`).
    public let plan: QueryPlan.Source
    /// The view the query names (its drop ends the live query) or reads (its drop changes nothing
    /// but the index).
    public let viewName: String?
    public let namesView: Bool
    /// Equal for two live queries whose windows are equal at every sequence: they can share one.
    public let identity: [UInt8]
    /// Equal for two live queries whose objects have the same `orderKey`s (one view, its ranges
    /// and both directions): a commit's keys are computed once for all of them.
    public let orderIdentity: [UInt8]

    /// The object's key in the query's order, nil if it does not belong (or is nil).
    public func key(for object: StoredObject?) -> [UInt8]? {
        orderKey(for: object).flatMap(inRange)
    }

    /// The object's key in the order of the view (or sort) the query reads, nil if it does not
    /// match its filter: the key before the range is considered.
    public func orderKey(for object: StoredObject?) -> [UInt8]? {
        guard let object, object.collection == collection, filter?.matches(object) ?? true else { return nil }
        return sort.key(for: object, id: object.id)
    }

    /// What every key of the query starts with: the encoded values of the sort fields that `where`
    /// fixes (empty but for a range of a view).
    public var rangePrefix: [UInt8] { prefix }

    /// `key` if it lies in the query's range (of a view), else nil.
    public func inRange(_ key: [UInt8]) -> [UInt8]? {
        key.starts(with: prefix) ? key : nil
    }

    /// The same query once the view it reads is dropped: keys as before (they order the same
    /// objects the same way), filled by reading the collection.
    public func withoutIndex() -> LiveQuery {
        var query = self
        query.index = .scan
        return query
    }

    /// Whether key `a` comes before key `b` in the query's order.
    public func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let order = compareBytes(a, b)
        return descending ? order > 0 : order < 0
    }
}

extension Snapshot {
    /// Resolves a `list`-shaped query (collection or view, where, sort, order, limit) into a live
    /// query, planned as `list` would plan it. Throws as `list` would (a missing view, a where on a
    /// view that is not a range of it).
    public func liveQuery(for query: Query) throws -> LiveQuery {
        let identity = query.fingerprint + withUnsafeBytes(of: UInt64(query.limit).bigEndian) { Array($0) }
        switch try plan(for: query) {
        case .tree(_, let source, let collection, let range, _):
            switch source {
            case .view(let name), .viewRange(let name, _):
                guard let view = try catalog.view(name, storeTxn) else { throw StoreError.viewNotFound(name) }
                var namesView = false
                if case .view = query.source { namesView = true }
                return LiveQuery(
                    collection: collection, filter: view.definition.filter, sort: view.definition.sort,
                    prefix: range?.prefix ?? [],
                    descending: query.descending, limit: query.limit, index: .view(name), plan: source, viewName: name,
                    namesView: namesView, identity: identity, orderIdentity: Array("v:\(name)".utf8))
            case .creationOrder:
                return LiveQuery(
                    collection: collection, filter: nil, sort: .creation, prefix: [], descending: query.descending,
                    limit: query.limit,
                    index: .creationOrder, plan: source, viewName: nil, namesView: false, identity: identity,
                    orderIdentity: Array("c:\(collection)".utf8))
            default:
                throw StoreError.invalid("a live query reads a collection or a view")
            }
        case .empty(let source):
            guard case .creationOrder(let collection) = source else {
                throw StoreError.invalid("a live query reads a collection or a view")
            }
            return LiveQuery(
                collection: collection, filter: nil, sort: .creation, prefix: [], descending: query.descending,
                limit: query.limit,
                index: .creationOrder, plan: source, viewName: nil, namesView: false, identity: identity,
                orderIdentity: Array("c:\(collection)".utf8))
        case .scan(.collection(let collection), let source):
            return LiveQuery(
                collection: collection, filter: query.filter, sort: query.sort ?? .creation, prefix: [],
                descending: query.descending,
                limit: query.limit, index: .scan, plan: source, viewName: nil, namesView: false, identity: identity,
                orderIdentity: Array("s:".utf8) + query.fingerprint)
        case .scan, .links:
            throw StoreError.invalid("a live query reads a collection or a view")
        }
    }
}
